"""A read in a Docker session is tried once more when `docker exec` printed nothing while the container runs
(a loaded host once lost a verifier's result that way: an infrastructure error, and the dataset's gate failed)."""

from __future__ import annotations

import base64

import pytest

from environments import sandbox as sb
from environments.docker_cli import SandboxError


def _session(monkeypatch, replies: list, running: bool = True):
    s = object.__new__(sb.DockerSession)
    s.name, s.host = "taskmine-test", None
    calls: list = []

    def call(argv, timeout_s, stdin=None):
        calls.append(argv)
        return replies.pop(0)

    monkeypatch.setattr(s, "_call", call, raising=False)
    monkeypatch.setattr(s, "_exec_argv", lambda *a, **k: list(a), raising=False)
    monkeypatch.setattr(s, "_check_host", lambda: None, raising=False)
    monkeypatch.setattr(sb, "_container_state", lambda name, host: {"Running": running})
    return s, calls


def test_an_empty_reply_while_the_container_runs_is_read_again(monkeypatch):
    data = base64.b64encode(b"result").decode()
    s, calls = _session(monkeypatch, [(None, ""), ({"data": data}, "")])
    assert s.read_file("/tmp/x/result.json") == b"result"
    assert len(calls) == 2


def test_a_stopped_container_is_not_read_again(monkeypatch):
    s, calls = _session(monkeypatch, [(None, "")], running=False)
    with pytest.raises(SandboxError, match="could not read /tmp/x/result.json"):
        s.read_file("/tmp/x/result.json")
    assert len(calls) == 1
