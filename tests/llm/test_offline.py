"""The LLM layer stays off the network and light at import, checked in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = r'''
import ipaddress, json, socket, sys
attempts = []
real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo
def local(host):
    try:
        return host == "localhost" or ipaddress.ip_address(str(host)).is_loopback
    except ValueError:
        return False
def connect(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not local(address[0]):
        attempts.append(f"connect {address}")
        raise OSError("no network")
    return real_connect(sock, address)
def getaddrinfo(host, *a, **k):
    if not local(host):
        attempts.append(f"getaddrinfo {host}")
        raise socket.gaierror("no network")
    return real_getaddrinfo(host, *a, **k)
socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo

import llm, llm.client, llm.judge, llm.instruction, llm.requester
light = {m: m in sys.modules for m in ("litellm", "dagster", "openai", "httpx")}
from llm import LLM, LLMConfig, fill
client = LLM(LLMConfig(model="openai/standin", api_base=sys.argv[1], cache_dir=sys.argv[2]))
text = client.complete([("user", fill("hello"))]).text
import os
print(json.dumps({"light": light, "text": text, "attempts": attempts,
                  "cost_map_env": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")}))
'''


def test_a_fresh_interpreter_imports_light_and_calls_without_network(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM, called from a fresh interpreter in which every socket leaving
    127.0.0.1 is refused and recorded: importing llm loads neither litellm nor dagster, and importing
    litellm plus a first call (cost map, tokenizers, beta headers) tries no outside address, without the
    caller setting LITELLM_LOCAL_MODEL_COST_MAP."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    out = subprocess.run([sys.executable, "-c", PROBE, llm_standin.url, str(tmp_path / "cache")], env=env,
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["light"] == {"litellm": False, "dagster": False, "openai": False, "httpx": False}
    assert result["text"] == "ok" and llm_standin.count == 1
    assert result["cost_map_env"] == "True"
    assert result["attempts"] == []
