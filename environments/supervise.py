#!/usr/bin/env python3
"""The sandbox supervisor: PID 1 of every task container, and the wrapper of every command run in it.

Copied verbatim into the base image as /usr/local/lib/taskmine/supervise (root-owned, read-only), so it is a
standalone script: python3 standard library only, no taskmine imports.

    supervise init --deadline SECONDS           PID 1: reap orphans; at the deadline kill everything, exit
    supervise run --timeout SECONDS [--kill-others] [--limit BYTES] -- COMMAND
                                                one command (`sh -c COMMAND`) with its own deadline
    supervise read --limit BYTES PATH           a file's bytes (regular files only), bounded
    supervise write --mode OCTAL PATH           stdin into PATH (created or replaced), bounded

Why it exists (each is a hole a hostile agent found when the host did these things itself):
- The deadline lives in the container: if the orchestrator on the host dies (kill -9), `init` still kills
  the agent at the session's deadline and the container exits (and, created with --rm, disappears); the
  next sandbox start sweeps whatever is left. `run` enforces each command's own timeout the same way.
- The host reads the command's status and bounded output from one result frame, never from a file the
  agent controls; what the agent does is recorded by the tool server on the host, never in the container.
- The agent cannot forge the result: its stdout and stderr are pipes to this process, never the exec's
  stdout; this process is not dumpable (so the agent, the same uid, cannot reach its file descriptors
  through /proc). PID 1 of a PID namespace ignores every signal it has no handler for, SIGKILL included,
  so the agent cannot kill `init` either. If the agent kills its `run` wrapper the host gets no frame and
  scores the run as the agent's failure.
- Leftovers die: with --kill-others (the container's commands are serialized), every other process
  except PID 1 is killed when the command exits or its deadline passes; orphans are reaped by PID 1.

Output of run/read/write: exactly one line on stdout, `TASKMINE-RESULT ` + base64(JSON). run's JSON has
exit_code, signal, timed_out, oom_killed, duration_s, stdout and stderr (tails). The host trusts it no
further than its schema and sizes.
"""

from __future__ import annotations

import base64
import ctypes
import errno
import json
import os
import select
import signal
import stat
import sys
import time

MARKER = "TASKMINE-RESULT "
TAIL = 64 * 1024
READ_LIMIT = 16 << 20
POLL_S = 0.05


def not_dumpable() -> None:
    """PR_SET_DUMPABLE = 0: /proc/<this pid>/fd and ptrace are closed to other processes of the same uid."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass


class Tail:
    """The last `limit` bytes of a stream, and how many were dropped before them."""

    def __init__(self, limit: int = TAIL) -> None:
        self.buf = bytearray()
        self.dropped = 0
        self.limit = limit

    def add(self, chunk: bytes) -> None:
        self.buf += chunk
        if len(self.buf) > self.limit:
            cut = len(self.buf) - self.limit
            self.dropped += cut
            del self.buf[:cut]

    def text(self) -> str:
        head = f"[... {self.dropped} bytes dropped ...]\n" if self.dropped else ""
        return head + bytes(self.buf).decode("utf-8", "replace")


def read_regular(path: str, limit: int, follow: bool = False) -> tuple[bytes, str]:
    """(at most limit+1 bytes, why not) of a regular file; never blocks on a FIFO, never follows a link
    unless `follow`. A missing file is (b"", "missing")."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return b"", "missing"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return b"", "is a symlink"
        return b"", f"cannot be opened ({exc.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b"", "is not a regular file"
        data = bytearray()
        while len(data) <= limit:
            chunk = os.read(fd, limit + 1 - len(data))
            if not chunk:
                break
            data += chunk
        return bytes(data), ""
    except OSError as exc:
        return b"", f"cannot be read ({exc.strerror})"
    finally:
        os.close(fd)


def oom_kills() -> int:
    """OOM kills in this container's memory cgroup (v2 memory.events, v1 memory.oom_control), 0 if unknown."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def kill_others() -> None:
    """SIGKILL every process this uid may signal except PID 1 and this one (kill(2) with pid -1)."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass


def emit(result: dict) -> None:
    sys.stdout.write(MARKER + base64.b64encode(json.dumps(result).encode()).decode() + "\n")
    sys.stdout.flush()


# --- init: PID 1 ---------------------------------------------------------------------------------------


def init(deadline_s: float) -> int:
    """Reap every orphan until the deadline, then kill everything and exit (the container stops)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pid = 0
        if not pid:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    kill_others()
    return 0


# --- run: one command -----------------------------------------------------------------------------------


def run(command: str, timeout: float, kill_all: bool, limit: int) -> dict:
    started = time.monotonic()
    deadline = started + timeout
    ooms_before = oom_kills()
    outs = {"stdout": Tail(limit), "stderr": Tail(limit)}
    pipes: dict[int, str] = {}
    ends: dict[str, int] = {}
    for name in outs:
        r, w = os.pipe()
        pipes[r], ends[name] = name, w
    pid = os.fork()
    if pid == 0:  # the command: its own session, stdin empty, stdout/stderr to our pipes
        try:
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(ends["stdout"], 1)
            os.dup2(ends["stderr"], 2)
            os.closerange(3, 1 << 16)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            os.execv("/bin/sh", ["sh", "-c", command])
        finally:
            os._exit(127)
    for w in ends.values():
        os.close(w)
    status, timed_out = None, False
    open_fds = set(pipes)
    while status is None:
        try:
            done, st = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, st = pid, 0
        if done == pid:
            status = st
            break
        if time.monotonic() >= deadline:
            timed_out = True
            break
        if not open_fds:
            time.sleep(POLL_S)
            continue
        ready, _, _ = select.select(list(open_fds), [], [], POLL_S)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                outs[pipes[fd]].add(chunk)
            else:
                open_fds.discard(fd)
    duration = time.monotonic() - started
    # the command's whole session (and, in a container, every other leftover) dies now
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if kill_all:
        kill_others()
    if status is None:
        end = time.monotonic() + 2
        while time.monotonic() < end:
            try:
                done, st = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done == pid:
                break
            time.sleep(0.01)
    for fd in list(open_fds):  # what is still buffered in the pipes (writers are dead: no blocking)
        while True:
            ready, _, _ = select.select([fd], [], [], 0)
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                break
            outs[pipes[fd]].add(chunk)
        os.close(fd)
    exit_code = sig = None
    if status is not None and not timed_out:
        if os.WIFEXITED(status):
            exit_code = os.WEXITSTATUS(status)
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            exit_code = 128 + sig
    return {"exit_code": exit_code, "signal": sig, "timed_out": timed_out,
            "oom_killed": oom_kills() > ooms_before,
            "duration_s": round(duration, 3), "stdout": outs["stdout"].text(), "stderr": outs["stderr"].text()}


def write(path: str, mode: int, limit: int) -> dict:
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        return {"ok": False, "error": f"more than {limit} bytes"}
    try:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        if os.path.islink(path):
            os.unlink(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
    except OSError as exc:
        return {"ok": False, "error": f"{exc.strerror}"}
    return {"ok": True, "error": ""}


def _arg(argv: list[str], name: str, default: str | None = None) -> str:
    if name in argv:
        return argv[argv.index(name) + 1]
    if default is None:
        raise ValueError(name)
    return default


def main(argv: list[str]) -> int:
    not_dumpable()
    try:
        mode = argv[0]
        if mode == "init":
            return init(float(_arg(argv, "--deadline")))
        if mode == "run":
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            i = argv.index("--")
            (command,) = argv[i + 1:]
            opts = argv[:i]
            emit(run(command, float(_arg(opts, "--timeout")), "--kill-others" in opts,
                     int(_arg(opts, "--limit", str(TAIL)))))
            return 0
        if mode == "read":
            limit = int(_arg(argv, "--limit", str(READ_LIMIT)))
            data, why = read_regular(argv[-1], limit, follow=True)
            emit({"data": base64.b64encode(data[:limit]).decode(), "error": why,
                  "truncated": len(data) > limit})
            return 0
        if mode == "write":
            emit(write(argv[-1], int(_arg(argv, "--mode", "644"), 8), int(_arg(argv, "--limit", str(READ_LIMIT)))))
            return 0
    except (ValueError, IndexError):
        pass
    sys.stderr.write("usage: supervise init --deadline S | run --timeout S [--kill-others] -- COMMAND | "
                     "read [--limit N] PATH | write [--mode OCTAL] PATH\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
