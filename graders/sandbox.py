"""Sandboxes: run an agent's (or a replayed reference's) shell command against one task's world.

Invariants:
- The world is at $TASKMINE_WORLD (/world in Docker), read-only for the agent; actions are recorded only
  through the `company` tool into $TASKMINE_OUTBOX, which the host parses *after* the run, strictly:
  a regular file (symlinks and FIFOs are refused, never followed), at most 1 MB and 1000 entries, each a
  JSON object with a string "action"; everything else becomes an `outbox_errors` line. Nothing the agent
  wrote is trusted.
- `docker`: no network, read-only root with size-limited tmpfs for /tmp and /home/agent, all capabilities
  dropped, no-new-privileges, uid 1000, pids/memory/cpu limits, a wall-clock timeout enforced from outside
  (the container is killed and removed), never the Docker socket. Containers are named `taskmine-<uuid>`
  and labelled `taskmine.sandbox=1`, and are always removed.
- `local` (fallback when no daemon answers): a temp copy of the world, a clean environment, a process group
  killed at the timeout, and no network when `unshare` allows it (`network_isolated` says whether it did).
  It is not a security boundary; every result says sandbox="local".
- stdout/stderr are bounded (the last 64 KB each), so a chatty or hostile command cannot exhaust memory.
- Infra failures raise `SandboxError`; a command that fails or times out is a normal `RunResult`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from graders.docker_cli import SandboxError, daemon_answers, docker
from graders.images import AGENT_UID, build_task_image, ensure_base_image, world_hash

__all__ = [
    "DockerSandbox",
    "LocalSandbox",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "get_sandbox",
    "read_outbox",
]

OUTPUT_LIMIT = 64 * 1024
OUTBOX_MAX_BYTES = 1 << 20
OUTBOX_MAX_ENTRIES = 1000
OUTBOX_MAX_ERRORS = 50
OUTBOX_NAME = "outbox.jsonl"


@dataclass(frozen=True)
class RunResult:
    sandbox: str  # "docker" | "local"
    exit_code: int | None  # None when killed by the timeout
    timed_out: bool
    duration_s: float
    stdout: str  # the last OUTPUT_LIMIT bytes, decoded
    stderr: str
    outbox: list[dict]  # parsed entries, bounded in count and size
    outbox_errors: list[str]  # what was not a valid entry (never trust the agent's output)
    image: str | None
    image_digest: str | None
    network_isolated: bool = True
    oom_killed: bool = False
    limits: dict = field(default_factory=dict)


# --- outbox -------------------------------------------------------------------------------------------


def read_outbox(path: Path) -> tuple[list[dict], list[str]]:
    """Parse an outbox the agent controlled: (entries, errors). Never follows a symlink, never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        reason = "is a symlink" if exc.errno == errno.ELOOP else f"cannot be opened ({exc.strerror})"
        return [], [f"outbox {reason}; ignored"]
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return [], ["outbox is not a regular file; ignored"]
        data = f.read(OUTBOX_MAX_BYTES + 1)
    errors: list[str] = []
    if len(data) > OUTBOX_MAX_BYTES:
        errors.append(f"outbox is larger than {OUTBOX_MAX_BYTES} bytes; the rest is ignored")
        data = data[:OUTBOX_MAX_BYTES]
    entries: list[dict] = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        if len(entries) >= OUTBOX_MAX_ENTRIES:
            errors.append(f"more than {OUTBOX_MAX_ENTRIES} entries; the rest is ignored")
            break
        try:
            entry = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except (UnicodeDecodeError, ValueError, RecursionError):
            entry = None
        if isinstance(entry, dict) and isinstance(entry.get("action"), str):
            entries.append(entry)
        elif len(errors) < OUTBOX_MAX_ERRORS:
            errors.append(f"line {lineno}: not a JSON object with an action: {raw[:80]!r}")
    return entries, errors


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


# --- bounded process I/O ------------------------------------------------------------------------------


class _Tail:
    """Keep the last `limit` bytes of a stream, read on a daemon thread."""

    def __init__(self, stream: IO[bytes], limit: int = OUTPUT_LIMIT):
        self.buf = bytearray()
        self.dropped = 0
        self.limit = limit
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        with stream:
            while chunk := stream.read1(65536):  # type: ignore[attr-defined]
                self.buf += chunk
                if len(self.buf) > self.limit:
                    cut = len(self.buf) - self.limit
                    self.dropped += cut
                    del self.buf[:cut]

    def text(self) -> str:
        self.thread.join(timeout=5)
        head = f"[... {self.dropped} bytes dropped ...]\n" if self.dropped else ""
        return head + bytes(self.buf).decode("utf-8", "replace")


def _supervise(
    argv: list[str], timeout_s: float, kill, *, kill_after_exit: bool = False, **popen
) -> tuple[int | None, bool, str, str, float]:
    """Run argv with bounded output; call `kill(proc)` at the timeout (and after exit when asked, to stop
    leftover background processes that would hold the pipes open). -> (exit, timed_out, out, err, secs)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen
    )
    out, err = _Tail(proc.stdout), _Tail(proc.stderr)  # type: ignore[arg-type]
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill(proc)
        proc.wait(timeout=60)
    else:
        if kill_after_exit:
            kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    duration = time.monotonic() - started
    return (None if timed_out else proc.returncode), timed_out, out.text(), err.text(), duration


def _check_env(env: dict | None) -> dict[str, str]:
    env = dict(env or {})
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key or not isinstance(value, str):
            raise ValueError(
                f"bad environment entry {key!r}: names are non-empty strings without '=', values str"
            )
    return env


# --- sandboxes ----------------------------------------------------------------------------------------


class Sandbox(ABC):
    """Runs `sh -c command` against a world slice and returns what happened; one backend per kind."""

    kind: str

    def prepare(self, world_dir: Path) -> str | None:
        """Make the world ready to run (e.g. build its image); returns the image reference if any."""
        return None

    @abstractmethod
    def run(
        self, world_dir: Path, command: str, *, timeout_s: float = 120, env: dict | None = None
    ) -> RunResult:
        """Run `sh -c command` with cwd = the agent's home, $TASKMINE_WORLD and $TASKMINE_OUTBOX set."""


class DockerSandbox(Sandbox):
    """The real sandbox: a hardened container per run, from a per-task image (see module docstring)."""

    kind = "docker"

    def __init__(
        self,
        base_image: str | None = None,
        *,
        memory: str = "1g",
        cpus: float = 1.0,
        pids_limit: int = 256,
        tmpfs_size: str = "256m",
    ):
        self._base = base_image
        self.limits = {"memory": memory, "cpus": cpus, "pids_limit": pids_limit, "tmpfs_size": tmpfs_size}
        self._images: dict[str, tuple[str, str]] = {}

    @property
    def base_image(self) -> str:
        if self._base is None:
            self._base = ensure_base_image()
        return self._base

    def prepare(self, world_dir: Path) -> str:
        return self._image(world_dir)[0]

    def _image(self, world_dir: Path) -> tuple[str, str]:
        """(tag, image ID), remembered per world content so repeated runs skip the image look-ups."""
        key = world_hash(Path(world_dir))
        if key not in self._images:
            self._images[key] = build_task_image(self.base_image, Path(world_dir), world_digest=key)
        return self._images[key]

    def container_args(
        self, name: str, image: str, outbox_dir: Path, command: str, env: dict[str, str]
    ) -> list[str]:
        """The `docker create` arguments; every hardening flag lives here (and tests read it)."""
        lim = self.limits
        tmpfs = f"rw,nosuid,nodev,size={lim['tmpfs_size']}"
        options = [
            ("--name", name),
            ("--label", "taskmine.sandbox=1"),
            ("--network", "none"),
            ("--tmpfs", f"/tmp:{tmpfs},mode=1777"),
            ("--tmpfs", f"/home/agent:{tmpfs},mode=0755,uid={AGENT_UID},gid={AGENT_UID}"),
            ("--cap-drop", "ALL"),
            ("--security-opt", "no-new-privileges"),
            ("--user", f"{AGENT_UID}:{AGENT_UID}"),
            ("--pids-limit", str(lim["pids_limit"])),
            ("--memory", lim["memory"]),
            ("--memory-swap", lim["memory"]),  # no swap beyond the memory limit
            ("--cpus", str(lim["cpus"])),
            ("--ulimit", "nofile=1024:1024"),
            ("--log-driver", "none"),  # output is streamed to us; the daemon keeps no log to fill its disk
            ("--hostname", "sandbox"),
            ("--mount", f"type=bind,source={outbox_dir},target=/outbox"),
            ("--workdir", "/home/agent"),
            ("--env", "TASKMINE_WORLD=/world"),
            ("--env", f"TASKMINE_OUTBOX=/outbox/{OUTBOX_NAME}"),
            *(("--env", f"{key}={value}") for key, value in env.items()),
        ]
        args = ["create", "--read-only", *(part for option in options for part in option)]
        return [*args, "--entrypoint", "sh", image, "-c", command]

    def run(
        self, world_dir: Path, command: str, *, timeout_s: float = 120, env: dict | None = None
    ) -> RunResult:
        extra = _check_env(env)
        image, digest = self._image(world_dir)
        name = f"taskmine-{uuid.uuid4().hex}"
        # The outbox dir is agent-owned, inside a parent only we can enter (host uid 1000 cannot reach it).
        with tempfile.TemporaryDirectory(prefix="taskmine-run-", ignore_cleanup_errors=True) as tmp:
            outbox_dir = Path(tmp) / "outbox"
            outbox_dir.mkdir(mode=0o700)
            try:
                os.chown(outbox_dir, AGENT_UID, AGENT_UID)
            except PermissionError:
                outbox_dir.chmod(0o777)  # not root: let uid 1000 in the container write anyway
            try:
                docker(*self.container_args(name, image, outbox_dir, command, extra), timeout=120)
                code, timed_out, out, err, secs = _supervise(
                    ["docker", "start", "--attach", name],
                    timeout_s,
                    kill=lambda _proc: docker("rm", "--force", name, timeout=60, check=False),
                )
                state = {} if timed_out else _container_state(name)
                if not timed_out and state.get("Error"):
                    raise SandboxError(f"container {name} failed to run: {state['Error']}")
                if not timed_out and "ExitCode" in state:
                    code = int(state["ExitCode"])
            finally:
                docker("rm", "--force", name, timeout=60, check=False)
            outbox, errors = read_outbox(outbox_dir / OUTBOX_NAME)
        return RunResult(
            sandbox="docker", exit_code=code, timed_out=timed_out, duration_s=secs, stdout=out, stderr=err,
            outbox=outbox, outbox_errors=errors, image=image, image_digest=digest, network_isolated=True,
            oom_killed=bool(state.get("OOMKilled")), limits=dict(self.limits),
        )  # fmt: skip


def _container_state(name: str) -> dict:
    proc = docker("inspect", "--format", "{{json .State}}", name, check=False)
    try:
        return json.loads(proc.stdout) if proc.returncode == 0 else {}
    except ValueError:
        return {}


class LocalSandbox(Sandbox):
    """Fallback without Docker: a temp copy of the world and a subprocess (see module docstring)."""

    kind = "local"
    _UNSHARE_CANDIDATES = (
        ["--net", "--map-root-user", "--pid", "--fork", "--kill-child"],
        ["--net", "--map-root-user"],
    )

    def __init__(self) -> None:
        self._unshare: list[str] | None = None
        self._probed = False

    def _isolation(self) -> list[str]:
        """`unshare` flags that work on this kernel (probed once), or [] when none do."""
        if not self._probed:
            self._probed = True
            exe = shutil.which("unshare")
            for flags in self._UNSHARE_CANDIDATES if exe else ():
                if _succeeds([exe, *flags, "true"]):  # type: ignore[list-item]
                    self._unshare = [exe, *flags]  # type: ignore[list-item]
                    break
        return list(self._unshare or [])

    def run(
        self, world_dir: Path, command: str, *, timeout_s: float = 120, env: dict | None = None
    ) -> RunResult:
        extra = _check_env(env)
        if not Path(world_dir).is_dir():
            raise SandboxError(f"world directory {world_dir} does not exist")
        isolation = self._isolation()
        with tempfile.TemporaryDirectory(prefix="taskmine-local-", ignore_cleanup_errors=True) as tmp:
            root = Path(tmp)
            world, home, tmpdir, bindir, outbox_dir = (
                root / n for n in ("world", "home", "tmp", "bin", "outbox")
            )
            shutil.copytree(world_dir, world, symlinks=True)
            for d in (home, tmpdir, bindir, outbox_dir):
                d.mkdir()
            tool = bindir / "company"
            tool.write_text(
                f'#!/bin/sh\nexec {sys.executable} {Path(__file__).with_name("company_tool.py")} "$@"\n'
            )
            tool.chmod(0o755)
            run_env = {
                "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
                "HOME": str(home),
                "TMPDIR": str(tmpdir),
                "LANG": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1",
                **extra,
                "TASKMINE_WORLD": str(world),
                "TASKMINE_OUTBOX": str(outbox_dir / OUTBOX_NAME),
            }
            _set_writable(world, False)
            try:
                code, timed_out, out, err, secs = _supervise(
                    [*isolation, "sh", "-c", command],
                    timeout_s,
                    kill=_kill_group,
                    kill_after_exit=True,
                    cwd=home,
                    env=run_env,
                    start_new_session=True,
                )
                outbox, errors = read_outbox(outbox_dir / OUTBOX_NAME)
            finally:
                _set_writable(world, True)
        return RunResult(
            sandbox="local", exit_code=code, timed_out=timed_out, duration_s=secs, stdout=out, stderr=err,
            outbox=outbox, outbox_errors=errors, image=None, image_digest=None,
            network_isolated=bool(isolation),
        )  # fmt: skip


def _succeeds(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, check=False, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _set_writable(world: Path, writable: bool) -> None:
    """Make the world copy read-only for the run (a non-root agent cannot change it), writable to clean up."""
    for dirpath, _, filenames in os.walk(world):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                mode = os.stat(path).st_mode
                os.chmod(path, (mode | 0o200) if writable else (mode & ~0o222))
        os.chmod(dirpath, 0o755 if writable else 0o555)


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def get_sandbox(kind: str = "auto") -> Sandbox:
    """The sandbox for `kind`: "docker", "local", or "auto" (docker if a daemon answers within ~2 s)."""
    if kind == "local":
        return LocalSandbox()
    if kind in ("docker", "auto"):
        if daemon_answers(timeout=2.0):
            return DockerSandbox()
        if kind == "docker":
            raise SandboxError(
                "sandbox 'docker' requested but no Docker daemon answers; start dockerd "
                "(scripts/ci-docker.sh) or use sandbox 'local'"
            )
        return LocalSandbox()
    raise ValueError(f"unknown sandbox kind {kind!r}; use 'docker', 'local' or 'auto'")
