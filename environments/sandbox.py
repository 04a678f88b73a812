"""Sandboxes: run an agent's (or a replayed reference's) commands against one task's world.

A `Sandbox` opens a `Session` on a world: a container (docker) or a temp root (local) that lives until it is
closed or its deadline passes. A session runs commands (`exec`), and reads and writes files (`read_file`,
`write_file`) for the phases that follow the agent's (a verifier writes its hidden files only after the
agent's processes are dead). `Sandbox.run` is one session with one command.

Invariants:
- The world's files are at $TASKMINE_WORLD (/world in Docker), read-only for the agent. What the agent does
  in the company is recorded by the tool server on the host (environments.tools), never in a file the agent
  could shape: nothing the sandbox reads back is trusted beyond its schema and size.
- `docker`: every command runs under `environments/supervise.py` (see its docstring): PID 1 of the container
  enforces the session's deadline even when this process is killed, each command has its own deadline
  inside the container, and nothing the agent writes reaches the host disk (/tmp and the home are
  size-limited tmpfs, the root is read-only, host folders are mounted read-only, the daemon keeps no log).
  No network,
  all capabilities dropped, no-new-privileges, uid 1000, pids/memory/cpu limits, never the Docker socket.
  Containers are created with --rm, named `taskmine-<uuid>` and labelled with their owner (host, pid and
  its start time) and deadline; `sweep()` removes those whose owner is gone, at every sandbox start.
- `local` (fallback when no daemon answers): a temp copy of the world, a clean environment, the same
  supervisor as a subprocess (its process group killed at the timeout), a cap on the size of any file it
  writes (RLIMIT_FSIZE), no network when `unshare` allows it (`network_isolated` says whether it did).
  It is not a security boundary; every result says sandbox="local". Its temp roots carry their owner and
  are swept like containers.
- stdout/stderr are bounded (the last 64 KB each), so a chatty or hostile command cannot exhaust memory.
- Infra failures raise `SandboxError`; a command that fails, times out or kills its supervisor is a normal
  `ExecResult` (its `error` says what happened).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import resource
import shutil
import signal
import socket
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
from urllib.parse import urlparse

from environments import relay, supervise
from environments.codeenv import prune_env_images
from environments.docker_cli import SandboxError, daemon_answers, daemon_info, docker, docker_argv, image_id, using
from environments.images import (
    AGENT_UID,
    HELPER_UID,
    SUPERVISE_PATH,
    build_task_image,
    ensure_base_image,
    prune_task_images,
    world_hash,
)

__all__ = [
    "DockerSandbox",
    "ExecResult",
    "InPlaceSession",
    "LocalSandbox",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "Session",
    "sweep",
]

OUTPUT_LIMIT = supervise.TAIL
FRAME_LIMIT = 8 << 20        # the most we read of one supervisor frame (outputs, base64)
HOST_GRACE_S = 20            # the host waits this much past a deadline the container enforces itself
LOCAL_FILE_LIMIT = 256 << 20  # RLIMIT_FSIZE of local runs: no single file larger than this
LABEL = "taskmine.sandbox"


@dataclass(frozen=True)
class ExecResult:
    """One command in a session. `exit_code` is None when it timed out or its supervisor vanished."""

    exit_code: int | None
    timed_out: bool
    duration_s: float
    stdout: str
    stderr: str
    signal: int | None = None
    oom_killed: bool = False
    error: str = ""  # what went wrong that is the command's own doing (e.g. it killed its supervisor)

    def status_line(self) -> str:
        return status_line(self.exit_code, self.signal, self.timed_out, self.oom_killed, self.error)


def status_line(exit_code: int | None, sig: int | None, timed_out: bool, oom_killed: bool, error: str) -> str:
    """How a command ended, in a few words: `exit 0`, `exit 137 (SIGKILL), OOM-killed`, `timed out`."""
    if timed_out:
        parts = ["timed out"]
    elif exit_code is None:
        parts = [error or "no exit status"]
    else:
        parts = [f"exit {exit_code}"]
        if sig:
            with contextlib.suppress(ValueError):
                parts[0] += f" ({signal.Signals(sig).name})"
    if oom_killed:
        parts.append("OOM-killed")
    return ", ".join(parts)


@dataclass(frozen=True)
class Mount:
    """A host folder the session sees, read-only, at `target` (Docker: a read-only bind mount; local: the
    host path itself, through `Session.path_of`; a host that cannot see this machine's files: a copy the
    agent cannot write, environments.relay). `relay`: the folder holds Unix sockets the session must reach
    (the tool server's); where it cannot be bind-mounted, each socket is relayed over the exec stream."""

    source: Path
    target: str
    relay: bool = False


@dataclass(frozen=True)
class RunResult:
    sandbox: str  # "docker" | "local"
    exit_code: int | None  # None when killed by the timeout
    timed_out: bool
    duration_s: float
    stdout: str  # the last OUTPUT_LIMIT bytes, decoded
    stderr: str
    image: str | None
    image_digest: str | None
    network_isolated: bool = True
    oom_killed: bool = False
    limits: dict = field(default_factory=dict)
    signal: int | None = None
    error: str = ""

    def status(self) -> str:
        """How the command ended, in a few words: `exit 0`, `exit 137 (SIGKILL), OOM-killed`, `timed out`."""
        return status_line(self.exit_code, self.signal, self.timed_out, self.oom_killed, self.error)


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


def _communicate(argv: list[str], timeout_s: float, *, stdin: bytes | None = None, on_timeout=None,
                 **popen) -> tuple[int | None, str, str]:
    """Run argv with bounded output (FRAME_LIMIT of stdout, OUTPUT_LIMIT of stderr); (exit, out, err).
    At the timeout `on_timeout(proc)` runs (default: kill its process group) and exit is None."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **popen)
    out, err = _Tail(proc.stdout, FRAME_LIMIT), _Tail(proc.stderr)  # type: ignore[arg-type]
    if stdin is not None:
        try:
            proc.stdin.write(stdin)  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            pass
    code: int | None
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        code = None
        (on_timeout or _kill_group)(proc)
    finally:
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
    return code, out.text(), err.text()


def _frame(stdout: str) -> dict | None:
    """The supervisor's one result frame in `stdout`, or None when there is none (it was killed)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(supervise.MARKER):
            try:
                value = json.loads(base64.b64decode(line[len(supervise.MARKER):], validate=True))
            except (ValueError, binascii.Error):
                return None
            return value if isinstance(value, dict) else None
    return None


def _exec_result(frame: dict | None, duration: float, stderr: str, missing: str) -> ExecResult:
    """An ExecResult from a supervisor frame, trusting nothing but its types; `missing` explains no frame."""
    if frame is None:
        return ExecResult(exit_code=None, timed_out=False, duration_s=round(duration, 3), stdout="",
                          stderr=stderr[-OUTPUT_LIMIT:], error=missing)

    def text(key: str) -> str:
        v = frame.get(key)
        return v[-(OUTPUT_LIMIT + 100):] if isinstance(v, str) else ""

    def opt_int(key: str) -> int | None:
        v = frame.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    secs = frame.get("duration_s")
    return ExecResult(exit_code=opt_int("exit_code"), timed_out=frame.get("timed_out") is True,
                      duration_s=float(secs) if isinstance(secs, (int, float)) else round(duration, 3),
                      stdout=text("stdout"), stderr=text("stderr"), signal=opt_int("signal"),
                      oom_killed=frame.get("oom_killed") is True)


def _check_env(env: dict | None) -> dict[str, str]:
    env = dict(env or {})
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key or not isinstance(value, str) \
                or "\0" in value:
            raise ValueError(
                f"bad environment entry {key!r}: names are non-empty strings without '=', values str without NUL"
            )
    return env


# --- owners: who a container or temp root belongs to, and whether that process is still alive ------------


def _start_time(pid: int) -> str:
    """The start time of `pid` in clock ticks since boot (field 22 of /proc/PID/stat), '' if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2:].split()[19]


def owner_tag() -> str:
    """This process, as `host:pid:start`; a recycled pid has another start time."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"


def owner_alive(tag: str) -> bool | None:
    """Whether the process named by `tag` still runs; None when it is another host's (we cannot tell)."""
    host, _, rest = tag.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    return _start_time(int(pid)) == start and start != ""


def sweep(now: float | None = None, host: str | None = None) -> dict[str, int]:
    """Remove what dead runs left: labelled containers whose owner is gone (or whose deadline passed long
    ago, whoever owns them) on the daemon `host` (None: the environment's), and local temp roots whose owner
    is gone. Returns counts."""
    now = time.time() if now is None else now
    removed = {"containers": 0, "temp_dirs": 0}
    roots = dict.fromkeys([Path(tempfile.gettempdir()), Path("/tmp"), Path("/dev/shm")])
    for d in [p for root in roots for pattern in ("taskmine-local-*", "taskmine-tools-*") for p in root.glob(pattern)]:
        try:
            tag = (d / "owner").read_text().strip()
        except OSError:
            continue
        if owner_alive(tag) is False:
            _set_writable(d, True)
            shutil.rmtree(d, ignore_errors=True)
            removed["temp_dirs"] += 1
    if shutil.which("docker") is None:
        return removed
    try:
        proc = docker("ps", "-a", "--filter", f"label={LABEL}=1", "--format",
                      '{{.Names}}\t{{.Label "taskmine.owner"}}\t{{.Label "taskmine.deadline"}}',
                      timeout=30, check=False, host=host)
    except SandboxError:
        return removed
    dead = []
    for line in proc.stdout.splitlines() if proc.returncode == 0 else ():
        name, owner, deadline = (line.split("\t") + ["", ""])[:3]
        alive = owner_alive(owner)
        expired = deadline.replace(".", "", 1).isdigit() and float(deadline) + HOST_GRACE_S < now
        if alive is False or expired:
            dead.append(name)
    if dead:
        docker("rm", "--force", *dead, timeout=120, check=False, host=host)
        removed["containers"] = len(dead)
    return removed


# --- sessions -----------------------------------------------------------------------------------------


class Session(ABC):
    """One episode in one world. Commands run one at a time, as the agent (uid 1000 in Docker)."""

    kind: str
    image: str | None = None
    image_digest: str | None = None
    network_isolated: bool = True

    @abstractmethod
    def exec(self, command: str, *, timeout_s: float = 120, env: dict | None = None,
             kill_others: bool = True) -> ExecResult:
        """Run `sh -c command` in the agent's home with $TASKMINE_WORLD set; every
        process it leaves behind is killed when it returns (with `kill_others`, every other process of the
        session too: what a serialized agent command needs, not a tool call made beside a running agent)."""

    def path_of(self, target: str) -> str:
        """Where a mount's `target` (or /world, /home/agent, /tmp) is, as the session's commands see it."""
        return target

    @abstractmethod
    def read_file(self, path: str, limit: int = supervise.READ_LIMIT) -> bytes:
        """The bytes of a regular file in the session (at most `limit`); SandboxError if it is not one."""

    @abstractmethod
    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Create or replace a file in the session (its folder is created)."""

    @abstractmethod
    def close(self) -> None:
        """End the session: every process dies and nothing of it stays behind."""

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class HostLost(SandboxError):
    """The daemon a session ran on stopped answering: infrastructure (a pool retries the task elsewhere)."""


class DockerSession(Session):
    kind = "docker"

    def __init__(self, sandbox: DockerSandbox, image: str, digest: str | None, deadline_s: float,
                 mounts: tuple[Mount, ...] = (), env: dict[str, str] | None = None):
        self.sandbox, self.image, self.image_digest = sandbox, image, digest
        self.host = sandbox.host
        self.name = f"taskmine-{uuid.uuid4().hex}"
        self.deadline = time.time() + deadline_s
        self.on_close: list = []          # callables run once when the session ends (a pool frees its slot)
        self.relays: list[relay.SocketRelay] = []
        self._closed = False
        copied = not sandbox.shares_files()
        try:
            docker(*sandbox.container_args(self.name, image, deadline_s, mounts, env, copied=copied), timeout=120,
                   host=self.host)
        except SandboxError:
            self._closed = True
            self._check_host()      # HostLost when the daemon is gone (a pool runs the task elsewhere)
            raise
        try:
            docker("start", self.name, timeout=120, host=self.host)
            if copied:   # the daemon cannot see our folders: fill them (and relay the tool socket) through exec
                for m in sorted(mounts, key=lambda m: m.target.count("/")):
                    if m.relay:
                        self.relays += relay.relay_sockets(self._helper, Path(m.source), m.target)
                    else:
                        relay.copy_in(self._helper, Path(m.source), m.target)
        except SandboxError:
            self.close()
            self._check_host()
            raise

    def _helper(self, argv: list[str]) -> relay.ProcessStream:
        """The supervisor run as the helper uid (not the agent's) with stdin and stdout as a stream."""
        return relay.ProcessStream([*docker_argv(self.host), "exec", "-i", "--user", f"{HELPER_UID}:{HELPER_UID}",
                                    self.name, "python3", "-I", SUPERVISE_PATH, *argv])

    def _exec_argv(self, *argv: str, env: dict[str, str] | None = None, stdin: bool = False) -> list[str]:
        envs = [part for k, v in (env or {}).items() for part in ("--env", f"{k}={v}")]
        return [*docker_argv(self.host), "exec", *(["-i"] if stdin else []), "--workdir", "/home/agent", *envs,
                self.name, "python3", "-I", SUPERVISE_PATH, *argv]

    def _check_host(self) -> None:
        """Raise HostLost (and tell the sandbox) when the daemon no longer answers: what just failed was the
        host's doing, not the command's."""
        if not daemon_answers(timeout=10, host=self.host):
            self.sandbox.host_lost(self)
            raise HostLost(f"the Docker daemon {self.host or 'of this machine'} stopped answering during "
                           f"session {self.name}; the run is infrastructure, not a score")

    def _call(self, argv: list[str], timeout_s: float, stdin: bytes | None = None) -> tuple[dict | None, str]:
        left = self.deadline - time.time()
        code, out, err = _communicate(argv, min(timeout_s, max(left, 1)) + HOST_GRACE_S, stdin=stdin)
        if code is None:  # the supervisor in the container did not end it: the container is unhealthy
            self.close()
            self._check_host()
            raise SandboxError(f"`docker exec` in {self.name} did not return within {timeout_s + HOST_GRACE_S:.0f}s;"
                               " the container was removed")
        return _frame(out), err

    def exec(self, command: str, *, timeout_s: float = 120, env: dict | None = None,
             kill_others: bool = True) -> ExecResult:
        extra = _check_env(env)
        if self._closed:
            raise SandboxError(f"session {self.name} is closed")
        left = self.deadline - time.time()
        timeout_s = max(0.1, min(timeout_s, left))
        started = time.monotonic()
        frame, err = self._call(self._exec_argv("run", "--timeout", f"{timeout_s:.3f}",
                                                *(["--kill-others"] if kill_others else []), "--", command,
                                                env=extra),
                                timeout_s)
        if frame is None:
            state = _container_state(self.name, self.host)
            if not state:
                self._check_host()
            if not state.get("Running"):
                why = "the container ended during the command" + (" (OOM-killed)" if state.get("OOMKilled") else "")
                if left <= timeout_s:
                    why = "the session's deadline passed"
            else:
                why = "the command killed its supervisor (no result)"
            return _exec_result(None, time.monotonic() - started, err, why)
        return _exec_result(frame, time.monotonic() - started, err, "")

    def read_file(self, path: str, limit: int = supervise.READ_LIMIT) -> bytes:
        frame, err = self._call(self._exec_argv("read", "--limit", str(limit), path), 60)
        if frame is None and _container_state(self.name, self.host).get("Running"):
            # a `docker exec` that printed nothing while the container runs (seen on a loaded host: a verifier's
            # result was there, its read came back empty): a read changes nothing, so it is tried once more
            frame, err = self._call(self._exec_argv("read", "--limit", str(limit), path), 60)
        if frame is None or not isinstance(frame.get("data"), str):
            self._check_host()
            raise SandboxError(f"could not read {path} in {self.name}: {err.strip()[-200:] or 'no result'}")
        if frame.get("error"):
            raise SandboxError(f"{path} {frame['error']}")
        return base64.b64decode(frame["data"])

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        frame, err = self._call(self._exec_argv("write", "--mode", f"{mode:o}", "--limit", str(len(data)), path,
                                                stdin=True), 60, stdin=data)
        if frame is None or frame.get("ok") is not True:
            if frame is None:
                self._check_host()
            why = (frame or {}).get("error") or err.strip()[-200:] or "no result"
            raise SandboxError(f"could not write {path} in {self.name}: {why}")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for r in self.relays:
                r.close()
            try:
                docker("rm", "--force", self.name, timeout=60, check=False, host=self.host)
            except SandboxError:
                pass   # the daemon is gone or slow: the next sweep of this host removes the container
            finally:
                for callback in self.on_close:
                    callback(self)


class LocalSession(Session):
    kind = "local"

    def __init__(self, world_dir: Path | None, deadline_s: float, isolation: list[str],
                 mounts: tuple[Mount, ...] = (), env: dict[str, str] | None = None):
        if world_dir is not None and not Path(world_dir).is_dir():
            raise SandboxError(f"world directory {world_dir} does not exist")
        self.mounts = {m.target: Path(m.source) for m in mounts}
        self.deadline = time.time() + deadline_s
        self.isolation = isolation
        self.network_isolated = bool(isolation)
        self.root = Path(tempfile.mkdtemp(prefix="taskmine-local-"))
        (self.root / "owner").write_text(owner_tag() + "\n")
        self.world, self.home, self.tmp, bindir = (self.root / n for n in ("world", "home", "tmp", "bin"))
        try:
            if world_dir is not None:
                shutil.copytree(world_dir, self.world, symlinks=True)
            else:
                self.world.mkdir()
            for d in (self.home, self.tmp, bindir):
                d.mkdir()
            tool = bindir / "company"
            tool.write_text(f'#!/bin/sh\nexec {sys.executable} {Path(__file__).with_name("company_tool.py")} "$@"\n')
            tool.chmod(0o755)
            _set_writable(self.world, False)
        except BaseException:
            self.close()
            raise
        self.env = {"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(self.home),
                    "TMPDIR": str(self.tmp), "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                    **_check_env(env)}

    def path_of(self, target: str) -> str:
        return str(self._path(target))

    def _path(self, path: str) -> Path:
        """A container path (a mount's target, /world/..., /home/agent/..., /tmp/...) on the host."""
        prefixes = [*sorted(self.mounts.items(), key=lambda kv: -len(kv[0])),
                    ("/world", self.world), ("/home/agent", self.home), ("/tmp", self.tmp)]
        for prefix, real in prefixes:
            if path == prefix or path.startswith(prefix + "/"):
                return real / path[len(prefix):].lstrip("/")
        return self.home / path if not path.startswith("/") else Path(path)

    def exec(self, command: str, *, timeout_s: float = 120, env: dict | None = None,
             kill_others: bool = True) -> ExecResult:
        extra = _check_env(env)
        left = self.deadline - time.time()
        timeout_s = max(0.1, min(timeout_s, left))
        run_env = {**self.env, **extra, "TASKMINE_WORLD": str(self.world)}
        argv = [*self.isolation, sys.executable, "-I", supervise.__file__, "run", "--timeout", f"{timeout_s:.3f}",
                "--", command]
        started = time.monotonic()
        code, out, err = _communicate(argv, timeout_s + HOST_GRACE_S, cwd=self.home, env=run_env,
                                      preexec_fn=_limit_file_size)
        frame = _frame(out)
        return _exec_result(frame, time.monotonic() - started, err,
                            "the command killed its supervisor (no result)" if code is not None
                            else "the supervisor did not return")

    def read_file(self, path: str, limit: int = supervise.READ_LIMIT) -> bytes:
        data, why = supervise.read_regular(str(self._path(path)), limit, follow=True)
        if why:
            raise SandboxError(f"{path} {why}")
        return data[:limit]

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        target.write_bytes(data)
        target.chmod(mode)

    def close(self) -> None:
        if self.root.exists():
            _set_writable(self.root, True)
            shutil.rmtree(self.root, ignore_errors=True)


class InPlaceSession(Session):
    """The machine this process runs on as the session: commands, reads and writes as the agent's uid through
    the supervisor, on the real /home/agent and /tmp. For a grader that runs inside the agent's own container
    after it (a Harbor task's tests/test.sh, as root): kill_others kills every process of the agent's uid.
    Needs root to become the agent (setpriv); as the agent itself it runs commands directly."""

    kind = "inplace"

    def __init__(self, uid: int = AGENT_UID, home: str = "/home/agent", supervisor: str = SUPERVISE_PATH):
        self.uid, self.home, self.supervisor = uid, home, supervisor
        self.env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": home,
                    "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "TASKMINE_WORLD": "/world"}

    def _argv(self, *argv: str) -> list[str]:
        become = [] if os.getuid() == self.uid else ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}",
                                                     "--clear-groups"]
        return [*become, "python3", "-I", self.supervisor, *argv]

    def exec(self, command: str, *, timeout_s: float = 120, env: dict | None = None,
             kill_others: bool = True) -> ExecResult:
        extra = _check_env(env)
        started = time.monotonic()
        code, out, err = _communicate(self._argv("run", "--timeout", f"{timeout_s:.3f}",
                                                 *(["--kill-others"] if kill_others else []), "--", command),
                                      timeout_s + HOST_GRACE_S, cwd=self.home, env={**self.env, **extra})
        return _exec_result(_frame(out), time.monotonic() - started, err,
                            "the command killed its supervisor (no result)" if code is not None
                            else "the supervisor did not return")

    def read_file(self, path: str, limit: int = supervise.READ_LIMIT) -> bytes:
        code, out, err = _communicate(self._argv("read", "--limit", str(limit), path), 60, cwd=self.home,
                                      env=self.env)
        frame = _frame(out)
        if frame is None or not isinstance(frame.get("data"), str):
            raise SandboxError(f"could not read {path}: {err.strip()[-200:] or 'no result'}")
        if frame.get("error"):
            raise SandboxError(f"{path} {frame['error']}")
        return base64.b64decode(frame["data"])

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        code, out, err = _communicate(self._argv("write", "--mode", f"{mode:o}", "--limit", str(len(data)), path),
                                      60, stdin=data, cwd=self.home, env=self.env)
        frame = _frame(out)
        if frame is None or frame.get("ok") is not True:
            raise SandboxError(f"could not write {path}: {(frame or {}).get('error') or err.strip()[-200:]}")

    def close(self) -> None:
        pass


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LOCAL_FILE_LIMIT, LOCAL_FILE_LIMIT))


# --- sandboxes ----------------------------------------------------------------------------------------


class Sandbox(ABC):
    """Opens sessions on world slices and runs one command in one (`run`); one backend per kind."""

    kind: str
    _swept = False
    capacity = 1   # sessions it is configured to run at once (a pool: the sum over its hosts)

    def call(self, fn):
        """`fn(self)`: the work of one task on this sandbox. A pool (environments.pool) runs it on one host's
        lease and again elsewhere when that host is lost; so callers dispatch the same way to both."""
        return fn(self)

    def sweep_once(self) -> None:
        """Sweep what dead runs left (once per process and backend): see `sweep`."""
        if not type(self)._swept:
            type(self)._swept = True
            sweep()

    def prepare(self, world_dir: Path, world_id: str | None = None) -> str | None:
        """Make the world ready to run (e.g. build its image); returns the image reference if any."""
        return None

    def prune(self, keep_world_ids: set[str]) -> list[str]:
        """Remove what this sandbox built for worlds no current task uses (e.g. task images); their names."""
        return []

    @abstractmethod
    def session(self, world_dir: Path | None = None, *, deadline_s: float = 600, image: str | None = None,
                mounts: tuple[Mount, ...] = (), env: dict[str, str] | None = None) -> Session:
        """A new session that ends by itself `deadline_s` seconds from now: `world_dir` (files) at /world,
        `mounts` read-only, `env` in every command, in `image` (Docker; default the base image)."""

    def run(self, world_dir: Path | None, command: str, *, timeout_s: float = 120, env: dict | None = None,
            mounts: tuple[Mount, ...] = ()) -> RunResult:
        """Run `sh -c command` once in a fresh session."""
        extra = _check_env(env)
        with self.session(world_dir, deadline_s=timeout_s + HOST_GRACE_S, mounts=mounts) as s:
            r = s.exec(command, timeout_s=timeout_s, env=extra)
        return RunResult(
            sandbox=self.kind, exit_code=r.exit_code, timed_out=r.timed_out, duration_s=r.duration_s,
            stdout=r.stdout, stderr=r.stderr, image=s.image,
            image_digest=s.image_digest, network_isolated=s.network_isolated, oom_killed=r.oom_killed,
            limits=dict(getattr(self, "limits", {})), signal=r.signal, error=r.error,
        )  # fmt: skip


FILES = ("auto", "bind", "copy")


class DockerSandbox(Sandbox):
    """The real sandbox: a hardened container per session on the base image (or a task's environment image), the
    world mounted read-only (see the module docstring).

    `host` is the daemon (a DOCKER_HOST URL; None: the environment's). `files` says how sessions see this
    machine's folders: "bind" (read-only bind mounts: the daemon runs on this machine), "copy" (copied in and the
    tool socket relayed through exec, environments.relay: a daemon elsewhere), "auto" (bind when the daemon
    shares this machine's files: `shares_files`)."""

    kind = "docker"

    def __init__(
        self,
        base_image: str | None = None,
        *,
        host: str | None = None,
        files: str = "auto",
        memory: str = "1g",
        cpus: float = 1.0,
        pids_limit: int = 256,
        tmpfs_size: str = "256m",
        image_labels: dict[str, str] | None = None,
    ):
        if files not in FILES:
            raise ValueError(f"files={files!r}: use one of {', '.join(FILES)}")
        self._base = base_image
        self._ours = False       # the base was chosen here (ensure_base_image), not given
        self.host, self.files = host, files
        self.limits = {"memory": memory, "cpus": cpus, "pids_limit": pids_limit, "tmpfs_size": tmpfs_size}
        self.image_labels = dict(image_labels or {})
        self._images: dict[str, tuple[str, str]] = {}
        self._shares: bool | None = {"bind": True, "copy": False}.get(files)
        self.on_lost = None   # called with the session that found the daemon gone (a pool sets it)

    @property
    def base_image(self) -> str:
        """The base image, built when missing, and checked again at every use when this sandbox chose it: a base
        that vanished during a run (`docker image prune -a`, another taskmine on the same daemon) is built again
        (from the cached root filesystem: under a minute) instead of failing every later task as infra."""
        with using(self.host):
            if self._base is None or (self._ours and image_id(self._base, host=self.host) is None):
                self._base, self._ours = ensure_base_image(), True
        return self._base

    def shares_files(self) -> bool:
        """Whether the daemon sees this machine's folders (so a bind mount works): its URL is a Unix socket
        (or a loopback address) of this machine and it reports this machine's host name. Asked once."""
        if self._shares is None:
            self._shares = daemon_is_local(self.host)
        return self._shares

    def host_lost(self, session: DockerSession) -> None:
        """A session found the daemon gone (a pool takes the host out of rotation)."""
        if self.on_lost is not None:
            self.on_lost(self, session)

    def sweep_once(self) -> None:
        """Sweep what dead runs left on this sandbox's daemon (once per process and daemon): see `sweep`."""
        key = ("docker", self.host)
        if key not in _SWEPT:
            _SWEPT.add(key)
            sweep(host=self.host)

    def prepare(self, world_dir: Path, world_id: str | None = None) -> str:
        return self._image(world_dir, world_id)[0]

    def _image(self, world_dir: Path, world_id: str | None) -> tuple[str, str]:
        """(tag, image ID), remembered per world content so repeated runs skip the image look-ups."""
        key = world_hash(Path(world_dir))
        if key not in self._images:
            labels = {**self.image_labels, **({"taskmine.world_id": world_id} if world_id else {})}
            with using(self.host):
                self._images[key] = build_task_image(self.base_image, Path(world_dir), world_digest=key,
                                                     labels=labels)
        return self._images[key]

    def container_args(self, name: str, image: str, deadline_s: float, mounts: tuple[Mount, ...] = (),
                       env: dict[str, str] | None = None, *, copied: bool = False) -> list[str]:
        """The `docker create` arguments; every hardening flag lives here (and tests read it). `copied`: the
        mounts are folders the helper uid fills through exec (a tmpfs it owns, read-only to the agent), not
        bind mounts."""
        lim = self.limits
        tmpfs = f"rw,nosuid,nodev,size={lim['tmpfs_size']}"
        if copied:
            views = [("--tmpfs", f"{m.target}:rw,nosuid,nodev,size={_copy_size(m)},mode=0755,uid={HELPER_UID},"
                                 f"gid={HELPER_UID}") for m in mounts]
        else:   # read-only views of host folders (the world's files, git packs, the tool server's socket folder)
            views = [("--mount", f"type=bind,source={Path(m.source).resolve()},target={m.target},readonly")
                     for m in mounts]
        options = [
            ("--name", name),
            ("--label", f"{LABEL}=1"),
            ("--label", f"taskmine.owner={owner_tag()}"),
            ("--label", f"taskmine.deadline={time.time() + deadline_s:.0f}"),
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
            ("--log-driver", "none"),  # the daemon keeps no log to fill its disk
            ("--hostname", "sandbox"),
            ("--workdir", "/home/agent"),
            ("--env", "TASKMINE_WORLD=/world"),
            *(("--env", f"{k}={v}") for k, v in _check_env(env).items()),
            *views,
        ]
        args = ["create", "--rm", "--read-only", *(part for option in options for part in option)]
        return [*args, "--entrypoint", "python3", image, "-I", SUPERVISE_PATH, "init", "--deadline",
                f"{deadline_s:.0f}"]

    def prune(self, keep_world_ids: set[str]) -> list[str]:
        """Task images whose world, and environment images (environments.codeenv) whose key, is not kept."""
        home = self.image_labels.get("taskmine.home")
        if not home:
            return []
        with using(self.host):
            return prune_task_images(home, keep_world_ids) + prune_env_images(home, keep_world_ids)

    def session(self, world_dir: Path | None = None, *, deadline_s: float = 600, image: str | None = None,
                mounts: tuple[Mount, ...] = (), env: dict[str, str] | None = None) -> DockerSession:
        self.sweep_once()
        if world_dir is not None:
            if not Path(world_dir).is_dir():
                raise SandboxError(f"world directory {world_dir} does not exist")
            mounts = (Mount(Path(world_dir), "/world"), *mounts)
        image = image or self.base_image
        return DockerSession(self, image, image_id(image, host=self.host), deadline_s, mounts, env)


_SWEPT: set[tuple[str, str | None]] = set()   # (backend, daemon) swept by this process


def _copy_size(m: Mount) -> str:
    """The size of the tmpfs a copied mount gets: its files and a margin (a socket folder: a little)."""
    if m.relay:
        return "1m"
    return f"{(relay.tree_bytes(Path(m.source)) * 5 // 4 >> 20) + 16}m"


def daemon_is_local(host: str | None) -> bool:
    """Whether the daemon at `host` (None: the environment's) runs on this machine and sees its files: reached
    over a Unix socket that exists here (or a loopback TCP address), and reporting this machine's host name (a
    daemon in another machine, VM or container reports its own)."""
    url = host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    parsed = urlparse(url)
    if parsed.scheme == "unix":
        near = Path(parsed.path).exists()
    elif parsed.scheme in ("tcp", "http", "https"):
        near = (parsed.hostname or "") in ("localhost", "127.0.0.1", "::1")
    else:
        near = False
    if not near:
        return False
    try:
        return daemon_info(host).get("name") == socket.gethostname()
    except SandboxError:
        return False


def _container_state(name: str, host: str | None = None) -> dict:
    try:
        proc = docker("inspect", "--format", "{{json .State}}", name, check=False, host=host)
    except SandboxError:
        return {}
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

    def session(self, world_dir: Path | None = None, *, deadline_s: float = 600, image: str | None = None,
                mounts: tuple[Mount, ...] = (), env: dict[str, str] | None = None) -> LocalSession:
        self.sweep_once()
        return LocalSession(Path(world_dir) if world_dir is not None else None, deadline_s, self._isolation(),
                            mounts, env)


def _succeeds(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, check=False, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _set_writable(root: Path, writable: bool) -> None:
    """Make a tree read-only for the run (a non-root agent cannot change it), or writable to clean up."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    mode = os.stat(path).st_mode
                    os.chmod(path, (mode | 0o200) if writable else (mode & ~0o222))
        with contextlib.suppress(OSError):
            os.chmod(dirpath, 0o755 if writable else 0o555)


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def home_label(home: Path) -> str:
    """The `taskmine.home` label of the images built for one TASKMINE_HOME (what `prune` may remove)."""
    return hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:16]
