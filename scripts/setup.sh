#!/usr/bin/env bash
# Install everything taskmine needs on a fresh machine; safe to run again (it only adds what is missing).
#   - uv (from PyPI) and the locked Python dependencies (uv.lock, hashes checked)
#   - as root: docker.io + debootstrap, a running dockerd, and the project's base image
#     (not root: the Docker part is skipped and tasks replay in the local sandbox unless a daemon answers)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v uv >/dev/null 2>&1; then
  echo "setup: installing uv" >&2
  python3 -m pip install --quiet --disable-pip-version-check uv
fi
# torch is the CPU build that lies on every machine of this kind (the registry's build pulls GB of CUDA)
TORCH_WHEEL=$(sed -n 's/^torch = { path = "\(.*\)" }$/\1/p' pyproject.toml)
if [ -n "$TORCH_WHEEL" ] && [ ! -f "$TORCH_WHEEL" ]; then
  echo "setup: $TORCH_WHEEL is missing; put the PyTorch 2.13.0 CPU wheel there (or edit [tool.uv.sources] torch)" >&2
  exit 2
fi
uv sync --locked --quiet

if [ "$(id -u)" = "0" ]; then
  bash scripts/ci-docker.sh
elif ! docker info >/dev/null 2>&1; then
  echo "setup: no Docker daemon and not root: tasks will replay in the local sandbox (sandbox=local)" >&2
fi
