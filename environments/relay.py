"""Episodes on hosts that cannot see this machine's files: folders copied in, the tool socket relayed.

A Docker daemon on this machine bind-mounts the episode's folders (the tool server's socket folder, the git
view) read-only into the container. A remote daemon, or a Kubernetes pod, sees none of them. There the session
does the same through its exec stream, run as the *helper* uid (images.HELPER_UID: not the agent's, so the agent
can neither write what it fills nor signal what it runs):

- a file folder (`Mount`) is sent as a tar to `supervise untar` into a folder only the helper may write (a tmpfs
  owned by it in Docker; an emptyDir the agent's container mounts read-only in Kubernetes);
- a socket folder (`Mount(relay=True)`, the tool server's) gets `supervise relay` listening at the same path
  in the container, and `SocketRelay` carries each connection to the socket on this machine.

So the tool server, and with it the action log the grader reads, stays on this machine, out of the agent's reach,
exactly as with a bind mount; the agent sees the same paths and the same bytes either way.

Invariants:
- Nothing here trusts the container: frames are bounded (FRAME_MAX), a connection is only ever connected to the
  socket it was relayed for, and a relay that breaks ends that episode's tool calls, never this process.
- Neither direction needs the end of stdin (Kubernetes' v4 exec protocol cannot send it): sizes are in frames.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Protocol

from environments import supervise
from environments.docker_cli import SandboxError

FRAME = supervise.FRAME
READY, OPEN, DATA, EOF, RESET, BYE = (supervise.READY, supervise.OPEN, supervise.DATA, supervise.EOF,
                                      supervise.RESET, supervise.BYE)
COPY_CHUNK = 1 << 20


class Stream(Protocol):
    """A process in the container, as a byte stream: its stdin (write) and its stdout (read)."""

    def write(self, data: bytes) -> None: ...

    def read(self, n: int) -> bytes:
        """Up to n bytes of stdout; b"" once it has ended."""

    def close(self) -> None: ...


OpenHelper = Callable[[list[str]], Stream]   # supervise arguments -> the helper's process in the container


def read_exactly(stream: Stream, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def read_to_end(stream: Stream, limit: int = 1 << 20) -> bytes:
    data = bytearray()
    while len(data) <= limit:
        chunk = stream.read(65536)
        if not chunk:
            break
        data += chunk
    return bytes(data)


def result_frame(out: bytes) -> dict | None:
    """The supervisor's result frame in `out` (see supervise.emit), None when there is none."""
    for line in reversed(out.decode("utf-8", "replace").splitlines()):
        if line.startswith(supervise.MARKER):
            try:
                value = json.loads(base64.b64decode(line[len(supervise.MARKER):], validate=True))
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


# --- folders ------------------------------------------------------------------------------------------------


def _normalized(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    if info.isfile():
        info.mode = 0o755 if info.mode & 0o111 else 0o644
    elif info.isdir():
        info.mode = 0o755
    return info


def tree_bytes(folder: Path) -> int:
    """Bytes of the regular files under `folder` (what a copy of it holds)."""
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def tar_of(folder: Path) -> IO[bytes]:
    """A temp file holding `folder` as a tar (owners root, modes 644/755, no mtimes; sockets and devices left
    out), positioned at its start."""
    f = tempfile.TemporaryFile()  # noqa: SIM115 -- returned open: the caller reads and closes it
    with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                path = Path(dirpath) / name
                st = path.lstat()
                if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                    tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False, filter=_normalized)
    f.seek(0)
    return f


def copy_in(open_helper: OpenHelper, source: Path, target: str) -> int:
    """Copy the host folder `source` into the container folder `target` (which exists and the helper owns);
    returns the entries written. SandboxError when the copy did not complete."""
    with tar_of(Path(source)) as tar:
        size = tar.seek(0, os.SEEK_END)
        tar.seek(0)
        stream = open_helper(["untar", "--size", str(size), target])
        try:
            while chunk := tar.read(COPY_CHUNK):
                stream.write(chunk)
            frame = result_frame(read_to_end(stream))
        finally:
            stream.close()
    if frame is None or frame.get("ok") is not True:
        why = (frame or {}).get("error") or "no result from the container"
        raise SandboxError(f"could not copy {Path(source).name} into {target}: {why}")
    return int(frame.get("entries") or 0)


def sockets_in(folder: Path) -> list[str]:
    """The names of the Unix sockets in `folder` (the tool server's)."""
    return sorted(p.name for p in Path(folder).iterdir() if stat.S_ISSOCK(p.lstat().st_mode))


# --- sockets -----------------------------------------------------------------------------------------------


class SocketRelay:
    """The host end of `supervise relay`: every connection the container's socket accepts is connected to
    `target` (a Unix socket on this machine) and the bytes are carried both ways, half closes included."""

    def __init__(self, stream: Stream, target: Path):
        self.stream, self.target = stream, Path(target)
        self._lock = threading.Lock()
        self._conns: dict[int, socket.socket] = {}
        self._open_ways: dict[int, set[str]] = {}   # per connection: "in" (the client may send), "out" (the server)
        self._closed = threading.Event()
        self._reader: threading.Thread | None = None
        self.connections = 0

    def start(self) -> SocketRelay:
        head = read_exactly(self.stream, FRAME.size)
        if len(head) != FRAME.size or FRAME.unpack(head)[0] != READY:
            self.stream.close()
            raise SandboxError("the tool relay in the container did not start (no READY frame)")
        self._reader = threading.Thread(target=self._read, name="taskmine-relay", daemon=True)
        self._reader.start()
        return self

    def _send(self, kind: int, ident: int, payload: bytes = b"") -> None:
        with self._lock:
            if not self._closed.is_set():
                with contextlib.suppress(OSError, SandboxError, ValueError):
                    self.stream.write(FRAME.pack(kind, ident, len(payload)) + payload)

    def _read(self) -> None:
        try:
            while not self._closed.is_set():
                head = read_exactly(self.stream, FRAME.size)
                if len(head) != FRAME.size:
                    return
                kind, ident, size = FRAME.unpack(head)
                if size > supervise.FRAME_MAX:
                    return
                payload = read_exactly(self.stream, size) if size else b""
                if kind == OPEN:
                    self._open(ident)
                    continue
                conn = self._conns.get(ident)
                if conn is None:
                    continue
                if kind == DATA:
                    try:
                        conn.sendall(payload)
                    except OSError:
                        self._send(RESET, ident)
                        self._forget(ident)
                elif kind == EOF:
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_WR)
                    self._half_closed(ident, "in")
                elif kind == RESET:
                    self._forget(ident)
        except (OSError, ValueError, SandboxError):
            return
        finally:
            for ident in list(self._conns):
                self._forget(ident)

    def _open(self, ident: int) -> None:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(self.target))
        except OSError:
            conn.close()
            self._send(RESET, ident)
            return
        self._conns[ident] = conn
        self._open_ways[ident] = {"in", "out"}
        self.connections += 1
        threading.Thread(target=self._pump, args=(ident, conn), name="taskmine-relay-conn", daemon=True).start()

    def _pump(self, ident: int, conn: socket.socket) -> None:
        """The tool server's answers on `conn`, to the container."""
        while True:
            try:
                chunk = conn.recv(65536)
            except OSError:
                self._send(RESET, ident)
                self._forget(ident)
                return
            if not chunk:
                self._send(EOF, ident)
                self._half_closed(ident, "out")
                return
            self._send(DATA, ident, chunk)

    def _half_closed(self, ident: int, way: str) -> None:
        """One direction of a connection ended; with both, the connection is closed (the relay in the container
        forgets it likewise), so an episode's hundred tool calls leave no socket open."""
        with self._lock:
            ways = self._open_ways.get(ident)
            if ways is None:
                return
            ways.discard(way)
            done = not ways
        if done:
            self._forget(ident)

    def _forget(self, ident: int) -> None:
        self._open_ways.pop(ident, None)
        conn = self._conns.pop(ident, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()

    def close(self) -> None:
        self._send(BYE, 0)
        self._closed.set()
        with contextlib.suppress(OSError, SandboxError):
            self.stream.close()
        for ident in list(self._conns):
            self._forget(ident)
        if self._reader is not None:
            self._reader.join(timeout=5)


def relay_sockets(open_helper: OpenHelper, source: Path, target: str) -> list[SocketRelay]:
    """A relay for every Unix socket in the host folder `source`, listening at `target`/<name> in the
    container (`target` exists and the helper owns it)."""
    relays: list[SocketRelay] = []
    try:
        for name in sockets_in(source):
            relays.append(SocketRelay(open_helper(["relay", "--listen", f"{target.rstrip('/')}/{name}"]),
                                      Path(source) / name).start())
    except BaseException:
        for r in relays:
            r.close()
        raise
    return relays


class ProcessStream:
    """A local process (e.g. `docker exec -i ...`) as a `Stream`; closing it ends the process."""

    def __init__(self, argv: list[str]):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True)

    def write(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, ValueError) as exc:
            raise SandboxError("the process in the container ended early") from exc

    def read(self, n: int) -> bytes:
        return os.read(self.proc.stdout.fileno(), n)  # type: ignore[union-attr]

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdout.close()  # type: ignore[union-attr]
