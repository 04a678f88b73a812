"""Thin wrapper around the `docker` command line, shared by the image builder and the sandbox.

Invariants:
- We talk to the daemon only through the `docker` CLI (no SDK dependency, no socket handling of our own),
  always with a timeout, and never with a TTY.
- The legacy builder is forced (`DOCKER_BUILDKIT=0`): the daemon we target may have no buildx plugin, and
  the legacy builder accepts a tar context on stdin, which keeps builds free of host paths.
- Failures become `SandboxError` with one line that says what failed and what to do; they are infra
  errors (counted apart from task failures), never a task score.
- Which daemon: `host=` (a DOCKER_HOST URL, passed as `docker -H`), else the one `using(host)` set for this
  thread, else the environment's (DOCKER_HOST or the default socket). A sandbox pool (environments.pool) runs
  sessions on several daemons at once from many threads, so the daemon is never chosen by mutating os.environ.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import IO

_HOST: contextvars.ContextVar[str | None] = contextvars.ContextVar("taskmine_docker_host", default=None)


class SandboxError(RuntimeError):
    """An infrastructure failure (daemon, image, build): retry or fix the machine, do not score the task."""


def _env() -> dict[str, str]:
    return {**os.environ, "DOCKER_BUILDKIT": "0", "DOCKER_CLI_HINTS": "false"}


@contextlib.contextmanager
def using(host: str | None) -> Iterator[None]:
    """Within the block (this thread only), `docker(...)` calls without `host=` go to `host` (None: the
    environment's daemon). The image builders and pruners run on a pool host this way."""
    token = _HOST.set(host)
    try:
        yield
    finally:
        _HOST.reset(token)


def current_host() -> str | None:
    """The daemon `docker(...)` talks to here without `host=`: `using`'s, else None (the environment's)."""
    return _HOST.get()


def docker_argv(host: str | None = None) -> list[str]:
    """`docker` (its full path) with `-H host` when a daemon is named (`host`, else `using`'s)."""
    exe = shutil.which("docker")
    if exe is None:
        raise SandboxError(
            "the `docker` command is not installed; install docker.io or use sandbox kind 'local'"
        )
    host = host or _HOST.get()
    return [exe, "-H", host] if host else [exe]


def docker(
    *args: str, timeout: float = 60, stdin: IO[bytes] | None = None, check: bool = True, host: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `docker ARGS...` capturing text; a failure raises a one-line `SandboxError` when `check`."""
    argv = docker_argv(host)
    try:
        proc = subprocess.run(
            [*argv, *args],
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


def daemon_answers(timeout: float = 2.0, host: str | None = None) -> bool:
    """True when a Docker daemon answers `docker version` within `timeout` seconds."""
    try:
        return (
            docker("version", "--format", "{{.Server.Version}}", timeout=timeout, check=False,
                   host=host).returncode == 0
        )
    except SandboxError:
        return False


def daemon_info(host: str | None = None, timeout: float = 10) -> dict[str, str]:
    """{"id", "name", "root"} of a daemon (`docker info`): its ID, the name of the machine it runs on, its data
    root; SandboxError when it does not answer."""
    proc = docker("info", "--format", "{{.ID}}\t{{.Name}}\t{{.DockerRootDir}}", timeout=timeout, host=host)
    ident, name, root = (proc.stdout.strip().split("\t") + ["", ""])[:3]
    return {"id": ident, "name": name, "root": root}


def image_id(ref: str, host: str | None = None) -> str | None:
    """The local image ID (`sha256:...`) of `ref`, or None when the daemon has no such image."""
    proc = docker("image", "inspect", "--format", "{{.Id}}", ref, check=False, host=host)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def copy_image(ref: str, source: str | None, target: str | None, timeout: float = 1800) -> None:
    """Copy the image `ref` from the daemon `source` to the daemon `target` (`docker save | docker load`, streamed:
    nothing is written to this machine's disk). The image keeps its ID, so what is derived from it (the tags of
    task and environment images built on top) is the same on both daemons."""
    save = subprocess.Popen([*docker_argv(source), "save", ref], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=_env())
    try:
        load = subprocess.run([*docker_argv(target), "load", "-q"], stdin=save.stdout, capture_output=True,
                              text=True, errors="replace", timeout=timeout, env=_env(), check=False)
    except subprocess.TimeoutExpired as exc:
        save.kill()
        raise SandboxError(f"copying image {ref} to {target or 'the default daemon'} took over {timeout:.0f}s; "
                           "are both daemons healthy?") from exc
    finally:
        save.stdout.close()  # type: ignore[union-attr]
    err = save.stderr.read().decode("utf-8", "replace") if save.stderr else ""  # type: ignore[union-attr]
    if save.wait() != 0:
        raise SandboxError(f"`docker save {ref}` on {source or 'the default daemon'} failed: {last_line(err)}")
    if load.returncode != 0:
        raise SandboxError(f"`docker load` of {ref} on {target or 'the default daemon'} failed: "
                           f"{last_line(load.stderr)}")
