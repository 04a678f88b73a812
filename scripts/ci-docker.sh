#!/usr/bin/env bash
# Make Docker sandboxes work on this machine, then build (or reuse) the sandbox base image.
# Idempotent: installs only what is missing, starts dockerd only if no daemon answers, and the base image
# is reused when its recipe hash is unchanged. Needs root for the install/start steps.
#   env: TASKMINE_DOCKERD_WAIT (seconds to wait for dockerd, default 60), TASKMINE_DEBIAN_MIRROR, TASKMINE_CACHE
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "ci-docker: $*" >&2; }
die() { say "error: $*"; exit 1; }
as_root() { if [ "$(id -u)" = "0" ]; then "$@"; else die "need root to run: $*"; fi; }

# What to install. The `docker` command alone is only a client: a fresh machine often has it without any
# engine. docker.io is needed unless a daemon already answers (local, rootless or DOCKER_HOST) or both the
# client and the engine (`dockerd`) are installed and only need starting.
daemon_answers() { command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; }
plan_packages() {
  local need=()
  if ! daemon_answers && { ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; }; then
    need+=(docker.io)
  fi
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  echo "${need[*]}"
}

read -r -a missing <<<"$(plan_packages)"
if [ "${TASKMINE_SETUP_PLAN:-}" = "1" ]; then  # print the decision only (tests drive this)
  echo "install: ${missing[*]:-nothing}"
  exit 0
fi
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v dockerd >/dev/null 2>&1 || daemon_answers || die "docker.io is installed but there is no dockerd on PATH"

wait_for_daemon() {  # $1 = pid of the dockerd we started
  local deadline=$((SECONDS + ${TASKMINE_DOCKERD_WAIT:-60}))
  while [ "$SECONDS" -lt "$deadline" ]; do
    docker info >/dev/null 2>&1 && return 0
    kill -0 "$1" 2>/dev/null || return 1
    sleep 1
  done
  return 1
}

start_dockerd() {  # $@ = extra dockerd flags; succeeds when the daemon answers
  local log=/var/log/taskmine-dockerd.log
  [ "$(id -u)" = "0" ] || die "no Docker daemon answers and only root can start one (run as root)"
  say "starting dockerd${*:+ $*} (log: $log)"
  setsid dockerd "$@" </dev/null >"$log" 2>&1 &
  local pid=$!
  if wait_for_daemon "$pid"; then return 0; fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  say "dockerd${*:+ $*} did not answer: $(tail -n 1 "$log" 2>/dev/null)"
  return 1
}

if ! docker info >/dev/null 2>&1; then
  # Sandboxes run with --network none, so a daemon without iptables/bridge (common in nested containers)
  # is good enough when the default one cannot start.
  start_dockerd || start_dockerd --iptables=false --ip-masq=false --bridge=none \
    || die "no Docker daemon could be started within ${TASKMINE_DOCKERD_WAIT:-60}s; see /var/log/taskmine-dockerd.log"
fi
say "docker $(docker version --format '{{.Server.Version}}') answers"

uv run python -m environments.images
