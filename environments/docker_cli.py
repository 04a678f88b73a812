"""Thin wrapper around the `docker` command line, shared by the image builder and the sandbox.

Invariants:
- We talk to the daemon only through the `docker` CLI (no SDK dependency, no socket handling of our own),
  always with a timeout, and never with a TTY.
- The legacy builder is forced (`DOCKER_BUILDKIT=0`): the daemon we target may have no buildx plugin, and
  the legacy builder accepts a tar context on stdin, which keeps builds free of host paths.
- Failures become `SandboxError` with one line that says what failed and what to do; they are infra
  errors (counted apart from task failures), never a task score.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import IO


class SandboxError(RuntimeError):
    """An infrastructure failure (daemon, image, build): retry or fix the machine, do not score the task."""


def _env() -> dict[str, str]:
    return {**os.environ, "DOCKER_BUILDKIT": "0", "DOCKER_CLI_HINTS": "false"}


def docker(
    *args: str, timeout: float = 60, stdin: IO[bytes] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `docker ARGS...` capturing text; a failure raises a one-line `SandboxError` when `check`."""
    exe = shutil.which("docker")
    if exe is None:
        raise SandboxError(
            "the `docker` command is not installed; install docker.io or use sandbox kind 'local'"
        )
    try:
        proc = subprocess.run(
            [exe, *args],
            check=False,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=_env(),
        )
    except subprocess.TimeoutExpired as exc:
        raise SandboxError(
            f"`docker {args[0]}` did not finish within {timeout:.0f}s; is the daemon healthy?"
        ) from exc
    if check and proc.returncode != 0:
        raise SandboxError(
            f"`docker {' '.join(args[:2])}` failed (exit {proc.returncode}): {last_line(proc.stderr)}"
        )
    return proc


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def daemon_answers(timeout: float = 2.0) -> bool:
    """True when a Docker daemon answers `docker version` within `timeout` seconds."""
    try:
        return (
            docker("version", "--format", "{{.Server.Version}}", timeout=timeout, check=False).returncode == 0
        )
    except SandboxError:
        return False


def image_id(ref: str) -> str | None:
    """The local image ID (`sha256:...`) of `ref`, or None when the daemon has no such image."""
    proc = docker("image", "inspect", "--format", "{{.Id}}", ref, check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None
