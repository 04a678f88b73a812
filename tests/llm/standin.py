"""A stand-in for a hosted LLM: a real OpenAI-compatible HTTP server on 127.0.0.1 that tests script.

Tests talk to it through litellm exactly as the pipeline talks to a hosted model (`openai/<name>` with
`api_base`), so HTTP, retries, timeouts, the cache and the budget are exercised for real; only the model is
scripted. It serves `POST /v1/chat/completions` and `POST /chat/completions` in the OpenAI response format
with `usage`.

Get one with the `llm_standin` fixture (any test directory; tests/conftest.py) and an `LLM` pointed at it
with `standin.config(tmp_path)`:

    def test_something(llm_standin, tmp_path):
        llm_standin.script(error(429), reply("hello"))       # the next two requests, in order
        client = LLM(llm_standin.config(tmp_path))
        ...
        assert llm_standin.count == 2                        # HTTP requests the server received

Scripting. Every request takes the next step of the script; when the script is empty the `responder`
answers (default: `reply("ok")`). A responder is a function of the request body (the parsed JSON the
client sent) returning a step, so a test can answer by what was asked:

    llm_standin.responder = lambda body: json_reply({"passed": "refund" in last_user(body), "rationale": "..."})

Steps: `tool_call((name, args), ...)` a reply that calls tools (OpenAI `tool_calls`),
`reply(text, ...)` a normal answer (`delay=` seconds first: longer than the client's timeout makes a
timeout), `json_reply(obj)` a reply whose content is `json.dumps(obj)`, `error(status)` an HTTP error in
OpenAI's error format (429 carries `Retry-After: 0`), `hang_up()` closes the connection without an answer.

`anon(text)` declares a test's own fixed text anonymized, for the LLM API.

What the server saw: `requests` (one `Seen` per request: path, headers, body), `count`, `max_concurrent`
(the most requests it was serving at once), `last_user(body)` (the last user message of a request).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "standin"          # what the server says it is; clients call it as "openai/standin"


@dataclass(frozen=True)
class Step:
    """What the server does with one request."""

    kind: str                                   # "reply" | "error" | "hang_up"
    content: str = ""
    status: int = 200
    delay: float = 0.0
    prompt_tokens: int | None = None            # None: about a token per 4 characters of the messages
    completion_tokens: int | None = None        # None: about a token per 4 characters of the content
    model: str | None = None                    # the "model" field of the answer (default: the request's)
    headers: dict[str, str] = field(default_factory=dict)
    tool_calls: tuple[tuple[str, dict], ...] = ()  # (tool name, arguments) the model calls


def tool_call(*calls: tuple[str, dict], content: str = "") -> Step:
    """A reply that calls tools: `tool_call(("jira_show", {"key": "P-1"}))`, in the OpenAI format."""
    return Step("reply", content=content, tool_calls=tuple(calls))


def reply(content: str, *, delay: float = 0.0, prompt_tokens: int | None = None,
          completion_tokens: int | None = None, model: str | None = None) -> Step:
    return Step("reply", content=content, delay=delay, prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens, model=model)


def json_reply(obj: Any, **kw) -> Step:
    return reply(json.dumps(obj), **kw)


def error(status: int, message: str = "", *, delay: float = 0.0) -> Step:
    headers = {"Retry-After": "0"} if status == 429 else {}
    return Step("error", content=message or f"stand-in error {status}", status=status, delay=delay,
                headers=headers)


def hang_up() -> Step:
    return Step("hang_up")


@dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]
    body: dict


def anon(text: str):
    """Test text declared anonymized (fixed text of the test; it names nobody real)."""
    from llm.anonymized import declare_anonymized

    return declare_anonymized(text, source="tests: fixed text")


def last_user(body: dict) -> str:
    users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users and isinstance(users[-1], str) else ""


class StandIn:
    """The server. Started by the constructor, stopped by `close()` (the fixture does both)."""

    def __init__(self) -> None:
        self.responder: Callable[[dict], Step] = lambda body: reply("ok")
        self.requests: list[Seen] = []
        self.max_concurrent = 0
        self._script: deque[Step] = deque()
        self._active = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="llm-standin",
                                        daemon=True)
        self._thread.start()

    # --- scripting and inspection ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The api_base: http://127.0.0.1:<port>/v1."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def script(self, *steps: Step) -> None:
        with self._lock:
            self._script.extend(steps)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def config(self, tmp_path: Path, **overrides):
        """An LLMConfig for this server: model openai/standin, cache under tmp_path, short timeouts and
        backoff so failure tests stay fast. `overrides` are LLMConfig fields."""
        from llm.config import LLMConfig

        base = dict(model=f"openai/{MODEL}", api_base=self.url, api_key_env="TASKMINE_STANDIN_KEY",
                    timeout_s=5.0, max_retries=2, backoff_base_s=0.01, cache_dir=str(tmp_path / "llm-cache"))
        return LLMConfig(**{**base, **overrides})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- the HTTP side ----------------------------------------------------------------------------------------

    def _next(self, body: dict) -> Step:
        with self._lock:
            if self._script:
                return self._script.popleft()
        return self.responder(body)

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:   # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsable": raw.decode("utf-8", "replace")}
                with standin._lock:
                    standin.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    standin._active += 1
                    standin.max_concurrent = max(standin.max_concurrent, standin._active)
                try:
                    if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                        self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                        return
                    step = standin._next(body)
                    if step.delay:
                        time.sleep(step.delay)
                    if step.kind == "hang_up":
                        self.close_connection = True
                        self.connection.close()
                        return
                    if step.kind == "error":
                        self._send(step.status, {"error": {"message": step.content, "type": "standin_error",
                                                           "code": step.status}}, step.headers)
                        return
                    self._send(200, _completion(body, step))
                finally:
                    with standin._lock:
                        standin._active -= 1

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):   # the client gave up (its timeout)
                    pass

        return Handler


def _completion(body: dict, step: Step) -> dict:
    text = json.dumps(body.get("messages", []))
    prompt = step.prompt_tokens if step.prompt_tokens is not None else max(1, len(text) // 4)
    completion = step.completion_tokens if step.completion_tokens is not None else max(1, len(step.content) // 4)
    with _ids_lock:
        _ids[0] += 1
        n = _ids[0]
    return {
        "id": f"chatcmpl-standin-{n}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": step.model or body.get("model") or MODEL,
        "choices": [{"index": 0, "message": _message(step, n),
                     "finish_reason": "tool_calls" if step.tool_calls else "stop", "logprobs": None}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


_ids = [0]
_ids_lock = threading.Lock()


def _message(step: Step, n: int) -> dict:
    message: dict = {"role": "assistant", "content": step.content or (None if step.tool_calls else "")}
    if step.tool_calls:
        message["tool_calls"] = [{"id": f"call_{n}_{i}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}
                                 for i, (name, args) in enumerate(step.tool_calls)]
    return message
