"""The LLM layer's tests run offline: litellm's cost map is the installed one, no Hugging Face hub, and a
guard records any socket that would leave 127.0.0.1 (and refuses it); a test that tried fails."""

from __future__ import annotations

import ipaddress
import socket

import pytest


def _loopback(host) -> bool:
    if host in ("localhost", None, ""):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for var in ("TASKMINE_LLM_MODEL", "TASKMINE_LLM_API_BASE", "TASKMINE_LLM_API_KEY", "TASKMINE_STANDIN_KEY",
                "OPENAI_API_KEY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    attempts: list[str] = []
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            attempts.append(f"connect {address}")
            raise OSError(f"test guard: no network ({address})")
        return real_connect(sock, address)

    def getaddrinfo(host, *args, **kwargs):
        if not _loopback(host):
            attempts.append(f"getaddrinfo {host}")
            raise socket.gaierror(f"test guard: no network ({host})")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield attempts
    assert not attempts, f"the LLM layer tried to reach the network: {attempts}"
