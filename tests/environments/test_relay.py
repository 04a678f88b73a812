"""The relay that gives a session on a host that cannot see this machine's files its folders and its tool socket
(environments.relay; `supervise relay`, `supervise untar`, `supervise write --size`).

Here the supervisor runs as a local process (the same file the image carries), so every case runs without Docker;
the same code through `docker exec` on a second daemon is in test_pool.py, through a pod's exec websocket in
test_kube.py.
"""

from __future__ import annotations

import io
import os
import socket
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from environments import relay, supervise
from environments.docker_cli import SandboxError

SUPERVISOR = [sys.executable, "-I", supervise.__file__]


def helper(argv: list[str]) -> relay.ProcessStream:
    return relay.ProcessStream([*SUPERVISOR, *argv])


class Server:
    """A Unix socket server standing for the tool server: reads a request to its end, answers `got:` + it."""

    def __init__(self, path: Path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        self.open = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        self.open += 1
        data = bytearray()
        while chunk := conn.recv(65536):
            data += chunk
        conn.sendall(b"got:" + bytes(data))
        conn.close()
        self.open -= 1

    def close(self) -> None:
        self.sock.close()


def ask(path: Path, payload: bytes) -> bytes:
    """One request as `company` sends it: the request, a half close, the answer to its end."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(30)
    c.connect(str(path))
    c.sendall(payload)
    c.shutdown(socket.SHUT_WR)
    out = bytearray()
    while chunk := c.recv(65536):
        out += chunk
    c.close()
    return bytes(out)


@pytest.fixture
def relayed(tmp_path):
    (tmp_path / "host").mkdir()
    (tmp_path / "box").mkdir()
    server = Server(tmp_path / "host" / "s")
    r = relay.SocketRelay(helper(["relay", "--listen", str(tmp_path / "box" / "s")]), server.path).start()
    yield r, server, tmp_path / "box" / "s"
    r.close()
    server.close()


def test_a_relayed_connection_carries_both_ways_with_half_closes(relayed):
    r, server, listen = relayed
    assert ask(listen, b"jira show PROJ-1") == b"got:jira show PROJ-1"
    big = os.urandom(3 << 20)       # over FRAME_MAX: split into frames both ways
    assert ask(listen, big) == b"got:" + big
    answers: dict[int, bytes] = {}
    threads = [threading.Thread(target=lambda i=i: answers.__setitem__(i, ask(listen, f"call {i}".encode())))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert answers == {i: f"got:call {i}".encode() for i in range(8)}
    assert r.connections == 10
    assert r._conns == {}           # every connection closed both ways is gone on the host too


def test_a_connection_the_server_refuses_is_reset_and_the_relay_goes_on(relayed):
    r, server, listen = relayed
    server.close()
    os.unlink(server.path)
    try:                                            # reset: closed without an answer, before or after the
        answer = ask(listen, b"anyone?")            # request was written (a broken pipe when the relay's reset
    except (BrokenPipeError, ConnectionResetError):  # comes first: seen once with the suite over two workers)
        answer = b""
    assert answer == b""
    server2 = Server(server.path)
    assert ask(listen, b"again") == b"got:again"    # the same relay, a server back
    server2.close()


def test_closing_the_relay_ends_the_process_in_the_box(relayed):
    r, _server, listen = relayed
    r.close()
    assert r.stream.proc.wait(timeout=10) == 0


def test_a_relay_that_never_started_is_an_infra_error(tmp_path):
    with pytest.raises(SandboxError, match="did not start"):
        relay.SocketRelay(helper(["relay", "--listen", str(tmp_path / "no" / "such" / "dir" / "s")]),
                          tmp_path / "s").start()


def test_copy_in_copies_files_exec_bits_links_and_empty_folders(tmp_path):
    src = tmp_path / "src"
    (src / "a" / "deep").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "a" / "deep" / "b.txt").write_text("bee\n")
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (src / "run.sh").chmod(0o755)
    (src / "link").symlink_to("a/deep/b.txt")
    dest = tmp_path / "dest"
    dest.mkdir()
    n = relay.copy_in(helper, src, str(dest))
    assert n == 6
    assert (dest / "a" / "deep" / "b.txt").read_text() == "bee\n" and (dest / "empty").is_dir()
    assert os.access(dest / "run.sh", os.X_OK) and not os.access(dest / "a" / "deep" / "b.txt", os.X_OK)
    assert os.readlink(dest / "link") == "a/deep/b.txt"


def _untar(tar: bytes, dest: Path) -> dict:
    stream = helper(["untar", "--size", str(len(tar)), str(dest)])
    stream.write(tar)
    frame = relay.result_frame(relay.read_to_end(stream))
    stream.close()
    return frame


def _tar(*members: tuple[str, str, bytes | str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, str(data)
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))   # type: ignore[arg-type]
    return buf.getvalue()


@pytest.mark.parametrize("members", [
    [("../outside.txt", "file", b"x")],
    [("/abs.txt", "file", b"x")],
    [("l", "link", "/OUT"), ("l/planted.txt", "file", b"x")],           # through a link out of the folder
], ids=["dotdot", "absolute", "through-a-link"])
def test_untar_refuses_to_write_outside_its_folder(tmp_path, members):
    dest = tmp_path / "dest"
    dest.mkdir()
    out = tmp_path / "OUT"
    out.mkdir()
    members = [(n.replace("/OUT", str(out)), k, str(d).replace("/OUT", str(out)) if k == "link" else d)
               for n, k, d in members]
    frame = _untar(_tar(*members), dest)
    assert frame["ok"] is False and "outside" in frame["error"] or "out of the folder" in frame["error"]
    assert not (tmp_path / "outside.txt").exists() and list(out.iterdir()) == []


def test_write_with_a_size_needs_no_end_of_input(tmp_path):
    """What a Kubernetes v4 exec needs: the stream stays open after the bytes, and the file is written."""
    target = tmp_path / "f.bin"
    data = os.urandom(100_000)
    stream = helper(["write", "--size", str(len(data)), "--mode", "600", "--limit", str(len(data)), str(target)])
    stream.write(data)                        # stdin is never closed
    frame = relay.result_frame(relay.read_to_end(stream))
    stream.close()
    assert frame == {"ok": True, "error": ""}
    assert target.read_bytes() == data and (target.stat().st_mode & 0o777) == 0o600
