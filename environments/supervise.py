#!/usr/bin/env python3
"""The sandbox supervisor: PID 1 of every task container, and the wrapper of every command run in it.

Copied verbatim into the base image as /usr/local/lib/taskmine/supervise (root-owned, read-only), so it is a
standalone script: python3 standard library only, no taskmine imports.

    supervise init --deadline SECONDS           PID 1: reap orphans; at the deadline kill everything, exit
    supervise run --timeout SECONDS [--kill-others] [--limit BYTES] -- COMMAND
                                                one command (`sh -c COMMAND`) with its own deadline
    supervise read --limit BYTES PATH           a file's bytes (regular files only), bounded
    supervise write --mode OCTAL PATH           stdin into PATH (created or replaced), bounded
    supervise write --size N --mode OCTAL PATH  exactly N bytes of stdin into PATH (no end of input needed)
    supervise untar --size N DEST               a tar of exactly N bytes on stdin, unpacked into DEST
    supervise relay --listen PATH               a Unix socket at PATH whose connections are carried over
                                                stdin/stdout to the host (see `relay`)

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

Hosts that cannot bind-mount this machine's folders (a remote Docker daemon, a Kubernetes pod) get the same
episode through the session's exec stream: `untar` fills a folder the agent may only read (it runs as another
uid than the agent), and `relay` serves the tool socket there and carries each connection to the tool server on
the host. Neither needs the end of stdin (Kubernetes' v4 exec protocol cannot signal it): sizes are given.

Output of run/read/write/untar: exactly one line on stdout, `TASKMINE-RESULT ` + base64(JSON). run's JSON has
exit_code, signal, timed_out, oom_killed, duration_s, stdout and stderr (tails). The host trusts it no
further than its schema and sizes.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import errno
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import tarfile
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


def read_exactly(stream, size: int) -> bytes:
    """`size` bytes of `stream` (fewer only when it ends first)."""
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(min(1 << 20, size - len(data)))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def write(path: str, mode: int, limit: int, size: int | None = None) -> dict:
    if size is not None:
        if size > limit:
            return {"ok": False, "error": f"more than {limit} bytes"}
        data = read_exactly(sys.stdin.buffer, size)
        if len(data) != size:
            return {"ok": False, "error": f"input ended after {len(data)} of {size} bytes"}
    else:
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


class _Exactly:
    """A file over the first `size` bytes of a stream (tarfile's stream mode reads it)."""

    def __init__(self, stream, size: int) -> None:
        self.stream, self.left = stream, size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = self.stream.read(n) if n else b""
        self.left -= len(data)
        return data


def untar(dest: str, size: int) -> dict:
    """Unpack a tar of `size` bytes from stdin into the folder `dest`: folders, regular files (mode 644, or 755
    when executable) and symlinks only, every name inside `dest`; the input is always read to its end."""
    source = _Exactly(sys.stdin.buffer, size)
    root = os.path.realpath(dest)
    count, error = 0, ""
    try:
        with tarfile.open(fileobj=source, mode="r|") as tar:
            for member in tar:
                name = os.path.normpath(member.name)
                if name in (".", "") and member.isdir():
                    continue
                if name.startswith(("/", "..")) or "/../" in f"/{name}/":
                    raise ValueError(f"{member.name!r} is outside the folder")
                path = os.path.join(dest, name)
                parent = os.path.realpath(os.path.dirname(path))
                if parent != root and not parent.startswith(root + os.sep):
                    raise ValueError(f"{member.name!r} would be written through a symlink out of the folder")
                if member.isdir():
                    os.makedirs(path, mode=0o755, exist_ok=True)
                elif member.isfile():
                    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                                 0o755 if member.mode & 0o111 else 0o644)
                    with os.fdopen(fd, "wb") as out, tar.extractfile(member) as data:  # type: ignore[union-attr]
                        while chunk := data.read(1 << 20):
                            out.write(chunk)
                elif member.issym():
                    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                    os.symlink(member.linkname, path)
                else:
                    raise ValueError(f"{member.name!r} is not a file, folder or symlink")
                count += 1
    except (OSError, ValueError, tarfile.TarError) as exc:
        error = str(exc)[:300]
    while source.read(1 << 20):   # the rest of the input, so the stream stays in step
        pass
    return {"ok": not error, "error": error, "entries": count}


# --- relay: the tool socket of a session on a host that cannot mount this machine's folders ----------------
#
# Frames on stdin/stdout, both ways: struct "!BII" (kind, connection id, payload length) + payload.
#   READY  relay -> host   the socket listens (id 0)
#   OPEN   relay -> host   a client connected: the host connects it to the tool server
#   DATA   both ways       bytes of one connection
#   EOF    both ways       that side will send no more (a half close: `company mcp` shuts its writing side)
#   RESET  both ways       the connection is gone
# The relay ends when stdin ends or the host sends BYE. Connections are capped; a client that stops reading
# for RELAY_SEND_S loses its connection, never the relay.

FRAME = struct.Struct("!BII")
READY, OPEN, DATA, EOF, RESET, BYE = 1, 2, 3, 4, 5, 6
FRAME_MAX = 1 << 20
RELAY_CONNECTIONS = 64
RELAY_SEND_S = 30


def _frames_out(kind: int, ident: int, payload: bytes = b"") -> None:
    data = FRAME.pack(kind, ident, len(payload)) + payload
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def relay(listen: str) -> int:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(listen)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(listen)
    os.chmod(listen, 0o666)   # the agent connects; the folder is this uid's and read-only to the agent
    server.listen(16)
    conns: dict[int, socket.socket] = {}
    reading: set[int] = set()   # connections whose client may still send
    writing: set[int] = set()   # connections the host may still send to
    next_id = 1
    pending = bytearray()
    _frames_out(READY, 0)

    def forget(ident: int) -> None:
        sock = conns.pop(ident, None)
        reading.discard(ident)
        writing.discard(ident)
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def settle(ident: int) -> None:
        if ident not in reading and ident not in writing:
            forget(ident)

    while True:
        watch = [0, server, *(conns[i] for i in reading)]
        ready, _, _ = select.select(watch, [], [])
        if server in ready:
            client, _ = server.accept()
            if len(conns) >= RELAY_CONNECTIONS:
                client.close()
            else:
                client.settimeout(RELAY_SEND_S)
                ident, next_id = next_id, next_id + 1
                conns[ident] = client
                reading.add(ident)
                writing.add(ident)
                _frames_out(OPEN, ident)
        for ident in [i for i in list(reading) if conns.get(i) in ready]:
            try:
                chunk = conns[ident].recv(65536)
            except OSError:
                chunk = None
            if chunk:
                _frames_out(DATA, ident, chunk)
            elif chunk is None:
                _frames_out(RESET, ident)
                forget(ident)
            else:
                _frames_out(EOF, ident)
                reading.discard(ident)
                settle(ident)
        if 0 in ready:
            data = os.read(0, 1 << 16)
            if not data:
                return 0
            pending += data
            while len(pending) >= FRAME.size:
                kind, ident, size = FRAME.unpack_from(pending)
                if size > FRAME_MAX:
                    return 2
                if len(pending) < FRAME.size + size:
                    break
                payload = bytes(pending[FRAME.size:FRAME.size + size])
                del pending[:FRAME.size + size]
                if kind == BYE:
                    return 0
                sock = conns.get(ident)
                if sock is None:
                    continue
                if kind == DATA and ident in writing:
                    try:
                        sock.sendall(payload)
                    except OSError:
                        _frames_out(RESET, ident)
                        forget(ident)
                elif kind == EOF:
                    try:
                        sock.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    writing.discard(ident)
                    settle(ident)
                elif kind == RESET:
                    forget(ident)


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
            size = int(argv[argv.index("--size") + 1]) if "--size" in argv else None
            emit(write(argv[-1], int(_arg(argv, "--mode", "644"), 8), int(_arg(argv, "--limit", str(READ_LIMIT))),
                       size))
            return 0
        if mode == "untar":
            emit(untar(argv[-1], int(_arg(argv, "--size"))))
            return 0
        if mode == "relay":
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            return relay(_arg(argv, "--listen"))
    except (ValueError, IndexError):
        pass
    sys.stderr.write("usage: supervise init --deadline S | run --timeout S [--kill-others] -- COMMAND | "
                     "read [--limit N] PATH | write [--size N] [--mode OCTAL] PATH | untar --size N DEST | "
                     "relay --listen PATH\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
