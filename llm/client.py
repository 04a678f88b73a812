"""`LLM`: the one client every use of a model goes through (litellm underneath).

What a call does, in order:

1. Every message content must be `Anonymized` (llm/anonymized.py), else `TypeError`, model or not.
2. No model configured: `LLMUnavailable`. Nothing is faked.
3. The response cache: the key is the sha256 of the full request (model, api_base, messages, temperature,
   max_tokens, response format and schema, attempt number). A hit is answered from
   `<cache_dir>/<key[:2]>/<key>.json` with no HTTP request and no cost; a miss writes that file atomically
   (temp file + rename) after the answer. Replies that fail validation are cached too, so a re-run gives
   the same grader error; pass another `attempt` for a fresh answer.
4. The budget (per `LLM` instance, i.e. per run): a miss is refused with `BudgetExceeded` before anything
   is sent when the run's tokens or USD are already at the cap. Calls in flight at once can each finish,
   so a run can pass the cap by at most `concurrency` calls. Cost is litellm's (its local cost map,
   `LITELLM_LOCAL_MODEL_COST_MAP=True`); a model missing from the map costs 0 and its tokens still count.
5. The concurrency cap: a semaphore shared by every thread using this instance, held for the call and its
   retries.
6. Retries are ours, not litellm's (`num_retries=0`, `max_retries=0` for the provider SDK), so the count
   and the waits are the same everywhere: up to `max_retries` more attempts on 429, 5xx, timeouts and
   connection errors, waiting `backoff_base_s * 2**i` (+ up to 25% jitter; a longer Retry-After is
   honoured), capped at `backoff_max_s`. Any other 4xx (bad request, auth, not found) fails at once.
   A call that still fails raises `LLMCallError`.
7. Structured output: with a pydantic `schema`, the request asks for JSON (`response_format` json_schema,
   unless `structured_output="prompt"`, plus instructions with the schema in the system message), and the
   reply is parsed and validated; anything else raises `LLMOutputError` (a grader error, never a pass or
   a fail).
8. Every call returns a `Receipt`: tokens in and out, cost, seconds, cached or not, retries.
9. Tool calling: with `tools` (OpenAI function schemas, e.g. a task's MCP tools) the reply may carry
   `tool_calls` (id, name, arguments parsed from JSON; unparsable arguments are kept as text for the caller
   to refuse). The conversation may then hold assistant messages with their `tool_calls` and `tool` messages
   with the results; every content is still `Anonymized` (a tool result of the company world is anonymized
   text; an assistant message is the model's own reply to anonymized input).

litellm is imported on the first call (importing it takes seconds); before that, the variables that keep
it off the network are set: its cost map and Anthropic beta-header config come from the installed package,
and it does not load a `.env` file from the working directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from llm.anonymized import Anonymized, refuse
from llm.config import LLMConfig
from llm.errors import BudgetExceeded, LLMCallError, LLMOutputError, LLMUnavailable

log = logging.getLogger(__name__)

Role = Literal["system", "user", "assistant", "tool"]
Message = tuple[Role, Anonymized]
CACHE_VERSION = 1
NO_KEY = "no-key"          # the key sent to an openai/<name> server at api_base when no key is configured

_OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",           # never fetch the cost map from GitHub
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",   # nor Anthropic's beta-header config
    "LITELLM_LOCAL_BLOG_POSTS": "True",
}
_import_lock = threading.Lock()
_litellm = None


def import_litellm():
    """litellm, imported once with the network fetches it would do at import or first call turned off."""
    global _litellm
    with _import_lock:
        if _litellm is None:
            for var, value in _OFFLINE_ENV.items():
                os.environ[var] = value
            os.environ.setdefault("LITELLM_MODE", "PRODUCTION")   # DEV would load ./.env into the environment
            # litellm is slow to import: only when a model is called (no work at import time)
            import litellm

            litellm.suppress_debug_info = True   # no "Give Feedback / Get Help" banners on stdout
            litellm.telemetry = False
            _litellm = litellm
        return _litellm


class Receipt(BaseModel):
    """What one call cost. A cached receipt repeats the tokens and cost of the call that made the answer;
    that cost was paid once (`Usage` counts cached calls apart and adds nothing for them)."""

    model_config = ConfigDict(frozen=True)

    model: str
    key: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    seconds: float
    cached: bool
    retries: int

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Usage(BaseModel):
    """What this run has used so far."""

    model_config = ConfigDict(frozen=True)

    calls: int = 0              # HTTP calls that got an answer
    cached: int = 0             # answered from the cache
    failed: int = 0             # LLMCallError
    refused: int = 0            # BudgetExceeded
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ToolCall(BaseModel):
    """One tool call the model asked for: `arguments` parsed from its JSON, or the raw text if not JSON."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict | str


class Reply(BaseModel):
    """A model's answer: `text` as sent, `value` the validated object when a schema was asked for, the
    tool calls it made when tools were offered."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    text: str
    value: Any = None
    receipt: Receipt
    tool_calls: list[ToolCall] = []


class LLM:
    """The client. One instance per run: it holds the run's budget and usage. Thread-safe."""

    def __init__(self, config: LLMConfig | None = None):
        self.config = config or LLMConfig()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.config.concurrency)
        self._usage = Usage()

    @classmethod
    def from_env(cls, **overrides) -> LLM:
        return cls(LLMConfig.from_env(**overrides))

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    @property
    def usage(self) -> Usage:
        with self._lock:
            return self._usage

    def describe(self) -> str:
        return self.config.describe()

    # --- the call -----------------------------------------------------------------------------------------

    def complete(self, messages: Sequence[Message | dict], *, schema: type[BaseModel] | None = None,
                 tools: list[dict] | None = None, attempt: int = 0) -> Reply:
        """Send `messages` ((role, Anonymized) pairs or {"role", "content"} dicts) and return the reply.

        `schema`: a pydantic model the reply must be (JSON); `Reply.value` is the validated instance.
        `tools`: OpenAI function schemas the model may call; `Reply.tool_calls` are its calls.
        `attempt`: part of the cache key only (not sent), so repeats of one request get fresh answers.
        """
        msgs = _checked(messages)
        if not self.enabled:
            raise LLMUnavailable("no LLM model configured (set TASKMINE_LLM_MODEL or the llm resource's `model`); "
                                 "callers use their no-model path")
        request = self._request(msgs, schema, attempt)
        if tools:
            request["tools"] = tools
        key = _key(request)
        start = time.monotonic()
        hit = self._cache_get(key)
        if hit is not None:
            receipt = Receipt(model=hit.get("response_model") or self.config.model, key=key,
                              prompt_tokens=int(hit.get("prompt_tokens") or 0),
                              completion_tokens=int(hit.get("completion_tokens") or 0),
                              cost_usd=float(hit.get("cost_usd") or 0.0), seconds=round(time.monotonic() - start, 4),
                              cached=True, retries=0)
            with self._lock:
                self._usage = self._usage.model_copy(update={"cached": self._usage.cached + 1})
            return _finish(hit["text"], schema, receipt, hit.get("tool_calls") or [])
        with self._slots:
            self._check_budget()   # after waiting for a slot: the calls before may have spent the budget
            response, retries = self._call(request)
        text, prompt_tokens, completion_tokens, cost, response_model = _read(response)
        calls = _tool_calls(response)
        receipt = Receipt(model=response_model or self.config.model, key=key, prompt_tokens=prompt_tokens,
                          completion_tokens=completion_tokens, cost_usd=cost,
                          seconds=round(time.monotonic() - start, 4), cached=False, retries=retries)
        with self._lock:
            u = self._usage
            self._usage = u.model_copy(update={
                "calls": u.calls + 1, "prompt_tokens": u.prompt_tokens + prompt_tokens,
                "completion_tokens": u.completion_tokens + completion_tokens, "cost_usd": u.cost_usd + cost})
        self._cache_put(key, request, text, receipt, calls)
        return _finish(text, schema, receipt, calls)

    # --- internals -------------------------------------------------------------------------------------

    def _request(self, msgs: list[dict], schema: type[BaseModel] | None, attempt: int) -> dict:
        cfg = self.config
        request: dict[str, Any] = {"model": cfg.model, "api_base": cfg.api_base or None, "messages": msgs,
                                   "temperature": cfg.temperature, "max_tokens": cfg.max_output_tokens,
                                   "attempt": attempt, "response_format": None}
        if schema is not None:
            json_schema = schema.model_json_schema()
            request["messages"] = _with_instructions(msgs, json_schema)
            if cfg.structured_output == "json_schema":
                name = re.sub(r"[^a-zA-Z0-9_-]", "_", schema.__name__)[:64] or "reply"
                request["response_format"] = {"type": "json_schema",
                                              "json_schema": {"name": name, "schema": json_schema, "strict": False}}
        return request

    def _check_budget(self) -> None:
        cfg = self.config
        with self._lock:
            u = self._usage
            over = []
            if cfg.budget_tokens is not None and u.tokens >= cfg.budget_tokens:
                over.append(f"{u.tokens:,} of {cfg.budget_tokens:,} tokens")
            if cfg.budget_usd is not None and u.cost_usd >= cfg.budget_usd:
                over.append(f"${u.cost_usd:.4f} of ${cfg.budget_usd:.4f}")
            if over:
                self._usage = u.model_copy(update={"refused": u.refused + 1})
        if over:
            raise BudgetExceeded(f"LLM budget of this run spent ({', '.join(over)}); no further calls are made")

    def _call(self, request: dict) -> tuple[Any, int]:
        litellm = import_litellm()
        cfg = self.config
        kwargs: dict[str, Any] = {
            "model": request["model"], "messages": request["messages"], "timeout": cfg.timeout_s,
            "temperature": request["temperature"], "num_retries": 0, "max_retries": 0, "drop_params": True,
        }
        if request["max_tokens"] is not None:
            kwargs["max_tokens"] = request["max_tokens"]
        if request["response_format"] is not None:
            kwargs["response_format"] = request["response_format"]
        if request.get("tools"):
            kwargs["tools"] = request["tools"]
        if cfg.api_base:
            kwargs["api_base"] = cfg.api_base
        key = cfg.api_key()
        if key is None and cfg.api_base and cfg.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            key = NO_KEY   # the OpenAI SDK refuses to send without a key; a local server ignores it
        if key is not None:
            kwargs["api_key"] = key
        retries = 0
        while True:
            try:
                return litellm.completion(**kwargs), retries
            except Exception as e:   # litellm maps every provider error to its exception classes
                status = _status(e)
                if not _retryable(litellm, e) or retries >= cfg.max_retries:
                    with self._lock:
                        u = self._usage
                        self._usage = u.model_copy(update={"failed": u.failed + 1})
                    why = "not retryable" if not _retryable(litellm, e) else f"after {retries} retries"
                    raise LLMCallError(f"{cfg.model}: {type(e).__name__} ({why}): {_one_line(e)}",
                                       status=status, retries=retries) from e
                wait = min(cfg.backoff_max_s, cfg.backoff_base_s * 2 ** retries * (1 + random.random() / 4))
                wait = min(cfg.backoff_max_s, max(wait, _retry_after(e)))
                log.info("LLM %s: %s, retry %d in %.2fs", cfg.model, type(e).__name__, retries + 1, wait)
                retries += 1
                with self._lock:
                    self._usage = self._usage.model_copy(update={"retries": self._usage.retries + 1})
                time.sleep(wait)

    def _cache_file(self, key: str) -> Path:
        return self.config.cache_path() / key[:2] / f"{key}.json"

    def _cache_get(self, key: str) -> dict | None:
        path = self._cache_file(key)
        try:
            entry = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            log.warning("LLM cache entry %s unreadable (%s); asking the model again", path, e)
            return None
        if entry.get("key") != key or not isinstance(entry.get("text"), str):
            return None
        return entry

    def _cache_put(self, key: str, request: dict, text: str, receipt: Receipt, calls: list[dict] = ()) -> None:
        path = self._cache_file(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"version": CACHE_VERSION, "key": key, "request": request, "text": text, "tool_calls": list(calls),
                 "response_model": receipt.model, "prompt_tokens": receipt.prompt_tokens,
                 "completion_tokens": receipt.completion_tokens, "cost_usd": receipt.cost_usd}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(entry, f, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


# --- helpers ------------------------------------------------------------------------------------------------

def _checked(messages: Sequence[Message | dict]) -> list[dict]:
    if isinstance(messages, str | bytes) or not messages:
        raise TypeError("messages: a non-empty list of (role, Anonymized) pairs")
    out = []
    for m in messages:
        role, content = (m.get("role"), m.get("content")) if isinstance(m, dict) else m
        if role not in ("system", "user", "assistant", "tool"):
            raise ValueError(f"message role {role!r}: one of system, user, assistant, tool")
        calls = m.get("tool_calls") if isinstance(m, dict) else None
        if role == "assistant" and calls and content is None:
            out.append({"role": role, "content": None, "tool_calls": _wire_calls(calls)})
            continue
        if not isinstance(content, Anonymized):
            raise refuse(content)
        msg: dict[str, Any] = {"role": role, "content": str(content)}
        if calls:
            msg["tool_calls"] = _wire_calls(calls)
        if role == "tool":
            msg["tool_call_id"] = str(m.get("tool_call_id") or "")
        out.append(msg)
    return out


def _wire_calls(calls) -> list[dict]:
    """Tool calls as the OpenAI wire format (arguments a JSON string)."""
    out = []
    for c in calls:
        c = c.model_dump() if isinstance(c, BaseModel) else dict(c)
        args = c.get("arguments")
        out.append({"id": str(c.get("id")), "type": "function",
                    "function": {"name": str(c.get("name")),
                                 "arguments": args if isinstance(args, str) else json.dumps(args, sort_keys=True)}})
    return out


def _tool_calls(response) -> list[dict]:
    try:
        calls = response.choices[0].message.tool_calls or []
    except (AttributeError, IndexError, TypeError):
        return []
    out = []
    for c in calls:
        fn = getattr(c, "function", None)
        raw = getattr(fn, "arguments", "") or ""
        try:
            args: dict | str = json.loads(raw) if raw.strip() else {}
            if not isinstance(args, dict):
                args = raw
        except ValueError:
            args = raw
        out.append({"id": str(getattr(c, "id", "") or ""), "name": str(getattr(fn, "name", "") or ""),
                    "arguments": args})
    return out


def _key(request: dict) -> str:
    canonical = json.dumps({"v": CACHE_VERSION, **request}, sort_keys=True, ensure_ascii=False,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


JSON_INSTRUCTIONS = ("Reply with one JSON object and nothing else: no prose, no code fence. It must validate "
                     "against this JSON schema:\n")


def _with_instructions(msgs: list[dict], json_schema: dict) -> list[dict]:
    note = JSON_INSTRUCTIONS + json.dumps(json_schema, sort_keys=True)
    out = [dict(m) for m in msgs]
    if out[0]["role"] == "system":
        out[0]["content"] = out[0]["content"].rstrip() + "\n\n" + note
    else:
        out.insert(0, {"role": "system", "content": note})
    return out


def _read(response) -> tuple[str, int, int, float, str]:
    try:
        text = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        text = None
    usage = getattr(response, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    return text or "", prompt_tokens, completion_tokens, _cost(response), getattr(response, "model", "") or ""


def _cost(response) -> float:
    """litellm's cost of the response from its local cost map; 0 for a model the map does not know."""
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost")
    if cost is None:
        litellm = import_litellm()
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:   # "This model isn't mapped yet": a local or new model
            cost = 0.0
    return float(cost or 0.0)


_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.S)


def _finish(text: str, schema: type[BaseModel] | None, receipt: Receipt, calls: Sequence[dict] = ()) -> Reply:
    if schema is None:
        return Reply(text=text, receipt=receipt, tool_calls=[ToolCall(**c) for c in calls])
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    if not body:
        raise LLMOutputError("the model's reply is empty, expected JSON", raw=text, receipt=receipt)
    try:
        data = json.loads(body)
    except ValueError as e:
        raise LLMOutputError(f"the model's reply is not JSON ({e.msg} at {e.pos})", raw=text, receipt=receipt) from e
    try:
        value = schema.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise LLMOutputError(f"the model's reply does not fit {schema.__name__}: {where}: {first['msg']} "
                             f"({e.error_count()} error(s))", raw=text, receipt=receipt) from e
    return Reply(text=text, value=value, receipt=receipt)


_NOT_RETRYABLE = ("AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError",
                  "UnprocessableEntityError", "ContextWindowExceededError", "ContentPolicyViolationError",
                  "UnsupportedParamsError", "BudgetExceededError")
_RETRYABLE = ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError", "ServiceUnavailableError",
              "BadGatewayError")


def _retryable(litellm, e: BaseException) -> bool:
    """429, 5xx, timeouts and connection errors; never another 4xx. By litellm's exception classes first
    (a missing key is an AuthenticationError with status 500), then by status."""
    if any(isinstance(e, c) for c in _classes(litellm, _NOT_RETRYABLE)):
        return False
    if any(isinstance(e, c) for c in _classes(litellm, _RETRYABLE)):
        return True
    status = _status(e)
    return status is not None and (status == 429 or status >= 500)


def _classes(litellm, names: tuple[str, ...]) -> list[type]:
    return [c for c in (getattr(litellm.exceptions, n, None) for n in names) if isinstance(c, type)]


def _status(e: BaseException) -> int | None:
    status = getattr(e, "status_code", None)
    return status if isinstance(status, int) else None


def _retry_after(e: BaseException) -> float:
    try:
        value = e.response.headers.get("retry-after")   # type: ignore[attr-defined]
        return max(0.0, float(value)) if value is not None else 0.0
    except Exception:
        return 0.0


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text[:300] + ("..." if len(text) > 300 else "")
