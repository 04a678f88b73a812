"""The LLM client against a stand-in for a hosted LLM (tests/llm/standin.py): real HTTP through litellm to a
local OpenAI-compatible server that each test scripts."""

from __future__ import annotations

import json
import threading
import time

import pytest
from pydantic import BaseModel
from standin import anon, error, hang_up, json_reply, reply

from llm import (
    LLM,
    Anonymized,
    BudgetExceeded,
    LLMCallError,
    LLMConfig,
    LLMOutputError,
    LLMUnavailable,
    fill,
)


class Answer(BaseModel):
    answer: str
    confidence: int


def ask(client: LLM, text: str = "What is the status of the export job?", **kw):
    return client.complete([("system", fill("You are terse.")), ("user", anon(text))], **kw)


def test_a_normal_answer_comes_with_a_receipt(llm_standin, tmp_path, monkeypatch):
    """Uses a stand-in for a hosted LLM: the request litellm sends and the receipt of the answer."""
    monkeypatch.setenv("TASKMINE_STANDIN_KEY", "sk-test-123")
    llm_standin.script(reply("It finished at noon.", prompt_tokens=11, completion_tokens=5))
    client = LLM(llm_standin.config(tmp_path, temperature=0.0, max_output_tokens=64))
    r = ask(client)
    assert r.text == "It finished at noon." and r.value is None
    assert (r.receipt.prompt_tokens, r.receipt.completion_tokens, r.receipt.tokens) == (11, 5, 16)
    assert r.receipt.cached is False and r.receipt.retries == 0 and r.receipt.cost_usd == 0.0
    assert r.receipt.model == "standin" and len(r.receipt.key) == 64
    seen = llm_standin.requests[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test-123"       # the key from the named variable
    assert seen.body["model"] == "standin" and seen.body["temperature"] == 0.0 and seen.body["max_tokens"] == 64
    assert seen.body["messages"] == [{"role": "system", "content": "You are terse."},
                                     {"role": "user", "content": "What is the status of the export job?"}]
    assert "response_format" not in seen.body
    u = client.usage
    assert (u.calls, u.cached, u.prompt_tokens, u.completion_tokens, u.failed, u.retries) == (1, 0, 11, 5, 0, 0)


def test_a_keyless_local_server_gets_a_placeholder_key(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: a local OpenAI-compatible server needs no key, so none is configured."""
    r = ask(LLM(llm_standin.config(tmp_path)))
    assert r.text == "ok"
    assert llm_standin.requests[0].headers["authorization"] == "Bearer no-key"


def test_a_second_identical_call_is_answered_from_the_cache(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that counts requests: a repeat, and a re-run with a new client, make
    no HTTP request and cost nothing; another attempt number or other text is a new request."""
    llm_standin.script(reply("first", prompt_tokens=7, completion_tokens=2), reply("second"), reply("third"))
    cfg = llm_standin.config(tmp_path)
    client = LLM(cfg)
    a = ask(client)
    b = ask(client)
    assert llm_standin.count == 1
    assert b.text == "first" and b.receipt.cached is True and b.receipt.key == a.receipt.key
    assert (b.receipt.prompt_tokens, b.receipt.completion_tokens) == (7, 2)
    rerun = LLM(cfg)                                   # a new run: new budget, same cache
    c = ask(rerun)
    assert c.text == "first" and c.receipt.cached and llm_standin.count == 1
    assert (rerun.usage.calls, rerun.usage.cached, rerun.usage.tokens) == (0, 1, 0)
    entry = json.loads((tmp_path / "llm-cache" / a.receipt.key[:2] / f"{a.receipt.key}.json").read_text())
    assert entry["key"] == a.receipt.key and entry["text"] == "first"
    assert not list((tmp_path / "llm-cache").rglob(".tmp-*"))         # written by rename, nothing left over
    assert ask(client, attempt=1).text == "second" and llm_standin.count == 2
    assert ask(client, "Another question").text == "third" and llm_standin.count == 3


def test_an_unreadable_cache_entry_is_asked_again(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: a damaged cache file is a miss, not a crash and not an answer."""
    llm_standin.script(reply("one"), reply("two"))
    client = LLM(llm_standin.config(tmp_path))
    key = ask(client).receipt.key
    (tmp_path / "llm-cache" / key[:2] / f"{key}.json").write_text('{"key": "trunc')
    assert ask(client).text == "two" and llm_standin.count == 2


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_429_and_5xx_are_retried_then_succeed(llm_standin, tmp_path, status):
    """Uses a stand-in for a hosted LLM that fails once with `status`, then answers."""
    llm_standin.script(error(status), reply("recovered"))
    client = LLM(llm_standin.config(tmp_path, max_retries=2))
    r = ask(client)
    assert r.text == "recovered" and r.receipt.retries == 1
    assert llm_standin.count == 2
    assert client.usage.retries == 1 and client.usage.failed == 0


def test_a_dropped_connection_is_retried(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that closes the connection without an answer, then answers."""
    llm_standin.script(hang_up(), reply("back"))
    r = ask(LLM(llm_standin.config(tmp_path)))
    assert r.text == "back" and r.receipt.retries == 1 and llm_standin.count == 2


def test_retries_are_bounded_then_the_call_fails(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that keeps failing: max_retries + 1 attempts, then LLMCallError."""
    llm_standin.script(*[error(500)] * 5)
    client = LLM(llm_standin.config(tmp_path, max_retries=2))
    with pytest.raises(LLMCallError) as e:
        ask(client)
    assert e.value.status == 500 and e.value.retries == 2 and "after 2 retries" in str(e.value)
    assert llm_standin.count == 3
    assert client.usage.failed == 1 and client.usage.calls == 0
    assert not list((tmp_path / "llm-cache").rglob("*.json"))          # failures are not cached


@pytest.mark.parametrize("status", [400, 401, 404])
def test_other_4xx_fail_at_once(llm_standin, tmp_path, status):
    """Uses a stand-in for a hosted LLM that rejects the request: no retry on a 4xx other than 429."""
    llm_standin.script(error(status), reply("never"))
    with pytest.raises(LLMCallError) as e:
        ask(LLM(llm_standin.config(tmp_path, max_retries=3)))
    assert e.value.status == status and e.value.retries == 0 and "not retryable" in str(e.value)
    assert llm_standin.count == 1


def test_a_timeout_fails_after_the_timeout_not_after_the_server(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that takes 3 s: with a 1 s timeout and no retry the call gives up."""
    llm_standin.script(reply("too late", delay=3))
    client = LLM(llm_standin.config(tmp_path, timeout_s=1, max_retries=0))
    start = time.monotonic()
    with pytest.raises(LLMCallError) as e:
        ask(client)
    assert time.monotonic() - start < 2.5
    assert "Timeout" in str(e.value) and e.value.retries == 0


def test_a_timeout_is_retried(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that takes 3 s once (past the 1 s timeout), then answers at once."""
    llm_standin.script(reply("too late", delay=3), reply("in time"))
    r = ask(LLM(llm_standin.config(tmp_path, timeout_s=1, max_retries=1)))
    assert r.text == "in time" and r.receipt.retries == 1 and llm_standin.count == 2


def test_structured_output_is_requested_and_validated(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: the request carries the JSON schema (response_format and the
    instructions); the reply is parsed into the pydantic model."""
    llm_standin.script(json_reply({"answer": "noon", "confidence": 4}))
    r = ask(LLM(llm_standin.config(tmp_path)), schema=Answer)
    assert r.value == Answer(answer="noon", confidence=4)
    body = llm_standin.requests[0].body
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Answer"
    assert set(fmt["json_schema"]["schema"]["properties"]) == {"answer", "confidence"}
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are terse.")
    assert "JSON" in system["content"] and '"confidence"' in system["content"]


def test_prompt_mode_sends_no_response_format(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: for servers that reject response_format, instructions only; a reply
    in a code fence is still read."""
    llm_standin.script(reply('```json\n{"answer": "noon", "confidence": 2}\n```'))
    r = ask(LLM(llm_standin.config(tmp_path, structured_output="prompt")), schema=Answer)
    assert r.value.confidence == 2
    assert "response_format" not in llm_standin.requests[0].body


def test_malformed_json_is_an_output_error(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that answers prose instead of JSON: LLMOutputError (a grader error),
    with the receipt of the call it cost."""
    llm_standin.script(reply("Sure! The answer is noon.", prompt_tokens=9, completion_tokens=6))
    client = LLM(llm_standin.config(tmp_path))
    with pytest.raises(LLMOutputError) as e:
        ask(client, schema=Answer)
    assert "not JSON" in str(e.value) and e.value.raw == "Sure! The answer is noon."
    assert e.value.receipt is not None and e.value.receipt.tokens == 15
    assert client.usage.calls == 1 and client.usage.tokens == 15


def test_an_invalid_structured_reply_is_an_output_error(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that answers JSON of the wrong shape; cached, so a re-run gives the
    same error without a request."""
    llm_standin.script(json_reply({"answer": "noon", "confidence": "very"}))
    client = LLM(llm_standin.config(tmp_path))
    for _ in range(2):
        with pytest.raises(LLMOutputError) as e:
            ask(client, schema=Answer)
        assert "does not fit Answer: confidence" in str(e.value)
    assert llm_standin.count == 1


def test_the_token_budget_stops_calls_before_they_are_sent(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: once the run's tokens reach the cap, the next call is refused
    before any request; cache hits still answer."""
    llm_standin.script(reply("a", prompt_tokens=60, completion_tokens=20),
                       reply("b", prompt_tokens=25, completion_tokens=5), reply("never"))
    client = LLM(llm_standin.config(tmp_path, budget_tokens=100, budget_usd=None))
    assert ask(client, "one").text == "a"
    assert ask(client, "two").text == "b"                     # 80 < 100: allowed, ends at 110
    with pytest.raises(BudgetExceeded) as e:
        ask(client, "three")
    assert "110 of 100 tokens" in str(e.value)
    assert llm_standin.count == 2
    assert ask(client, "one").receipt.cached                  # what is cached is free
    u = client.usage
    assert (u.calls, u.refused, u.cached, u.tokens) == (2, 1, 1, 110)


def test_the_cost_budget_uses_litellm_cost_map(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that answers as gpt-4o-mini, a model in litellm's local cost map: the
    receipt has litellm's cost, and the USD cap refuses the next call."""
    from llm.client import import_litellm

    price = import_litellm().model_cost["gpt-4o-mini"]
    llm_standin.script(reply("a", prompt_tokens=100_000, completion_tokens=10_000, model="gpt-4o-mini"))
    client = LLM(llm_standin.config(tmp_path, model="openai/gpt-4o-mini", budget_usd=0.01, budget_tokens=None))
    r = ask(client)
    expected = 100_000 * price["input_cost_per_token"] + 10_000 * price["output_cost_per_token"]
    assert expected > 0.01 and r.receipt.cost_usd == pytest.approx(expected)
    assert client.usage.cost_usd == pytest.approx(expected)
    with pytest.raises(BudgetExceeded, match=r"\$0\.0210 of \$0\.0100"):
        ask(client, "next")
    assert llm_standin.count == 1


def test_a_model_missing_from_the_cost_map_costs_nothing_but_counts_tokens(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM under a name litellm does not know (a local model)."""
    llm_standin.script(reply("a", prompt_tokens=40, completion_tokens=10))
    client = LLM(llm_standin.config(tmp_path, budget_usd=0.0001))
    r = ask(client)
    assert r.receipt.cost_usd == 0.0 and client.usage.tokens == 50 and client.usage.cost_usd == 0.0
    assert ask(client, "again").text == "ok"                  # cost 0 never reaches the USD cap


def test_the_concurrency_cap_holds_across_threads(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that records how many requests it serves at once: 8 threads, cap 2."""
    llm_standin.responder = lambda body: reply("slow", delay=0.3)
    client = LLM(llm_standin.config(tmp_path, concurrency=2))
    errors = []

    def work(i):
        try:
            ask(client, f"question {i}")
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert llm_standin.count == 8 and client.usage.calls == 8
    assert llm_standin.max_concurrent == 2


def test_raw_text_is_refused(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: a plain str (raw text) never leaves the process, in any form."""
    client = LLM(llm_standin.config(tmp_path))
    with pytest.raises(TypeError, match="LLM input must be llm.Anonymized.*got str"):
        client.complete([("user", "Jane Realname <jane@realcorp.com> asked for a refund")])
    with pytest.raises(TypeError, match="got str"):
        client.complete([{"role": "user", "content": "raw"}])
    with pytest.raises(TypeError, match="got str"):
        client.complete([("system", fill("fixed")), ("user", anon("ok") + " and raw")])   # str ops drop the mark
    with pytest.raises(TypeError, match="got str"):
        fill("Request: $request", request="raw")
    with pytest.raises(TypeError, match="cannot be constructed directly"):
        Anonymized("raw")
    with pytest.raises(TypeError, match="got str"):
        LLM().complete([("user", "raw")])                    # refused before "no model" too
    assert llm_standin.count == 0


def test_no_model_configured_is_said_and_nothing_is_sent(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM only to show no request is made: the default config has no model."""
    client = LLM(LLMConfig(cache_dir=str(tmp_path)))
    assert client.enabled is False and client.describe() == "no model configured"
    with pytest.raises(LLMUnavailable, match="no LLM model configured"):
        ask(client)
    assert LLM.from_env().enabled is False
    assert llm_standin.count == 0 and not list(tmp_path.iterdir())


def test_the_model_comes_from_the_environment(llm_standin, tmp_path, monkeypatch):
    """Uses a stand-in for a hosted LLM named by TASKMINE_LLM_MODEL and TASKMINE_LLM_API_BASE."""
    monkeypatch.setenv("TASKMINE_LLM_MODEL", "openai/standin")
    monkeypatch.setenv("TASKMINE_LLM_API_BASE", llm_standin.url)
    client = LLM.from_env(cache_dir=str(tmp_path / "c"), backoff_base_s=0.01)
    assert client.enabled and client.describe() == f"openai/standin at {llm_standin.url}"
    assert ask(client).text == "ok" and llm_standin.count == 1
    assert "sk-" not in client.config.model_dump_json()           # the config never holds a key


def test_litellms_own_key_variable_applies_when_ours_is_unset(llm_standin, tmp_path, monkeypatch):
    """Uses a stand-in for a hosted LLM reached as openai/<name>: OPENAI_API_KEY is used, not the placeholder."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-env")
    ask(LLM(llm_standin.config(tmp_path)))
    assert llm_standin.requests[0].headers["authorization"] == "Bearer sk-openai-env"
