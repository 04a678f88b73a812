#!/usr/bin/env bash
# Install everything taskmine needs on a fresh machine; safe to run again (it only adds what is missing).
#   - uv (from PyPI) and the locked Python dependencies (uv.lock, hashes checked)
#   - torch, hash-pinned, from requirements/: the CPU wheel when this machine has it (in TASKMINE_WHEELS,
#     or in pip's find-links, PIP_FIND_LINKS or pip config), else PyPI's build (large on Linux x86_64)
#   - as root: docker.io + debootstrap, a running dockerd, and the project's base image
#     (not root: the Docker part is skipped and tasks replay in the local sandbox unless a daemon answers)
set -euo pipefail
cd "$(dirname "$0")/.."

# TASKMINE_SETUP_PLAN=1: print what would be installed and change nothing (tests drive this).
plan=${TASKMINE_SETUP_PLAN:-}
if [ -z "$plan" ] && ! command -v uv >/dev/null 2>&1; then
  echo "setup: installing uv" >&2
  python3 -m pip install --quiet --disable-pip-version-check uv
fi
# --inexact: torch is installed below, outside uv.lock (see [tool.uv] in pyproject.toml); keep it.
[ -n "$plan" ] || uv sync --locked --inexact --quiet

# The folders where this machine keeps wheels (one per line).
wheel_dirs() {
  local d
  for d in ${TASKMINE_WHEELS:-} ${PIP_FIND_LINKS:-} \
           $(python3 -m pip config get global.find-links 2>/dev/null || true); do
    d=${d#file://}
    [ -d "$d" ] && echo "$d"
  done
  return 0
}
# The folder holding the CPU wheel that requirements/torch-cpu.txt pins (same name and sha256), if any.
cpu_wheel_dir() {
  local name sum d
  name=$(sed -n 's/^torch==\([^ ]*\) .*/torch-\1-/p' requirements/torch-cpu.txt)
  sum=$(grep -A1 '^torch==' requirements/torch-cpu.txt | sed -n 's/.*--hash=sha256:\([0-9a-f]*\).*/\1/p')
  while read -r d; do
    for f in "$d/$name"*"$(uname -m).whl"; do
      [ -f "$f" ] || continue
      if [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$sum" ]; then echo "$d"; return 0; fi
      echo "setup: $f is not the wheel requirements/torch-cpu.txt pins (sha256 differs); not using it" >&2
    done
  done < <(wheel_dirs)
  return 0
}
if [ "$(uname -s)" = "Linux" ] && dir=$(cpu_wheel_dir) && [ -n "$dir" ]; then
  echo "setup: torch: the CPU build from $dir" >&2
  if [ -n "$plan" ]; then echo "torch: cpu $dir"; exit 0; fi
  uv pip install --quiet --no-config --python .venv/bin/python --require-hashes --find-links "$dir" \
    -r requirements/torch-cpu.txt
  # What only PyPI's build needs (CUDA libraries, triton), left by an earlier install without the wheel.
  cuda_only=$(comm -23 <(sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p' requirements/torch-pypi.txt | sort -u) \
                       <(sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p' requirements/torch-cpu.txt | sort -u))
  installed=$(uv pip freeze --no-config --python .venv/bin/python 2>/dev/null | sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p')
  stale=$(comm -12 <(echo "$cuda_only") <(echo "$installed" | sort -u) | tr '\n' ' ')
  if [ -n "${stale// /}" ]; then
    # shellcheck disable=SC2086
    uv pip uninstall --quiet --no-config --python .venv/bin/python $stale
  fi
else
  echo "setup: torch: PyPI's build (no CPU wheel on this machine; on Linux x86_64 this is several GB once)" >&2
  if [ -n "$plan" ]; then echo "torch: pypi"; exit 0; fi
  uv pip install --quiet --no-config --python .venv/bin/python --require-hashes -r requirements/torch-pypi.txt
fi
# (--no-config: inside the project, uv pip would apply pyproject's override that keeps torch out of uv.lock)
want=$(sed -n 's/^torch==\([0-9.]*\).*/\1/p' requirements/torch-pypi.txt)
got=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
if [ "${got%%+*}" != "$want" ]; then
  echo "setup: error: torch $want is not installed after setup (found: ${got:-none}); see the lines above" >&2
  exit 1
fi

if [ "$(id -u)" = "0" ]; then
  bash scripts/ci-docker.sh
elif ! docker info >/dev/null 2>&1; then
  echo "setup: no Docker daemon and not root: tasks will replay in the local sandbox (sandbox=local)" >&2
fi
