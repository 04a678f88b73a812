#!/usr/bin/env bash
# Headless-browser proof that "Materialize all" in the Dagster UI (`taskmine ui`) works and publishes
# exactly what `taskmine run` publishes. Drives check.mjs (playwright-core + the system Chromium).
#
#   bash scripts/ui_check/run.sh                  # sensor mode: the sensor adds `acme` and runs it, then
#                                                 #   "Materialize all" re-runs every asset from the UI
#   UI_CHECK_MODE=button bash scripts/ui_check/run.sh
#                                                 # button mode: the UI starts on an empty exports folder,
#                                                 #   `acme` is added and run from the Materialize-all dialog
#                                                 #   (the full run, Docker replays included, is the button's)
#
# Everything is written under a fresh temp dir (printed); screenshots go to scripts/ui_check/out/.
# Other settings: CHROMIUM (default /usr/bin/chromium); UI_CHECK_SNAPSHOT=1 (default) runs a copy of the
# working tree taken at the start (so the UI run and the CLI runs use the same code while others edit the
# repo), =head a copy of the last commit, =0 the live tree; UI_CHECK_KEEP=1 keeps the temp dir.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/taskmine-ui-check.XXXXXX")
export UI_CHECK_REPO=$REPO UI_CHECK_TMP=$TMP UI_CHECK_OUT=$HERE/out

command -v node >/dev/null || { echo "ui_check: node is not installed; install Node 20+" >&2; exit 2; }
command -v uv >/dev/null || { echo "ui_check: uv is not installed; run scripts/setup.sh first" >&2; exit 2; }
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || { echo "ui_check: no Chromium at ${CHROMIUM:-/usr/bin/chromium}; apt-get install chromium or set CHROMIUM" >&2; exit 2; }
if [ ! -d "$HERE/node_modules/playwright-core" ]; then
  (cd "$HERE" && npm ci --no-audit --no-fund >/dev/null)
fi

# Make sure the project's venv exists and is in sync once; every later call uses --no-sync.
(cd "$REPO" && uv run --quiet python -c "pass")

if [ "${UI_CHECK_SNAPSHOT:-1}" = head ]; then
  SRC=$TMP/src
  mkdir -p "$SRC"
  (cd "$REPO" && git archive HEAD) | tar -xf - -C "$SRC"   # the last commit, without uncommitted work
elif [ "${UI_CHECK_SNAPSHOT:-1}" = 1 ]; then
  SRC=$TMP/src
  mkdir -p "$SRC"
  # tracked + untracked (not ignored) files that exist now: the code as it is at the start of the check
  (cd "$REPO" && git ls-files -z -co --exclude-standard \
     | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
     | tar --null -T - -cf -) | tar -xf - -C "$SRC"
else
  SRC=$REPO
fi
export UI_CHECK_SRC=$SRC

echo "ui_check: temp dir $TMP (code from $SRC)"
rc=0
node "$HERE/check.mjs" || rc=$?
if [ "${UI_CHECK_KEEP:-0}" != 1 ] && [ "$rc" = 0 ]; then
  rm -rf "$TMP"
else
  echo "ui_check: kept $TMP (logs: $TMP/*.log)"
fi
exit "$rc"
