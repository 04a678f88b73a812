"""A model agent: a small tool-calling loop through the LLM layer that works a task in its own episode, through
the task's MCP tools exactly as any agent would (an MCP client of `company mcp` in the sandbox), under step,
token, time and cost limits. N rollouts per task give pass@1 and pass@k; every rollout keeps a receipt (tokens,
cost, seconds, tool calls) and a bounded transcript.

Invariants:
- The model sees only anonymized text: the task's prompt (built from anonymized events) and what the tools
  answer (the anonymized world), each declared at that boundary; our own instructions are fixed text.
- A rollout is graded like any agent: the action log of its episode against the task's rubric. Limits end a
  rollout (recorded as its stop reason), never the run; an LLM failure is recorded as an error of that
  rollout (infrastructure), not a score.
- No model configured: no rollout runs (`LLMUnavailable` is the caller's signal), nothing is faked.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from environments.episode import Episode
from environments.sandbox import SandboxError
from graders.rubric import Context, grade
from llm.anonymized import declare_anonymized, fill
from llm.errors import BudgetExceeded, LLMError
from warehouse.ids import content_hash
from warehouse.schemas import Task, Validation

SYSTEM = ("You work inside a company, as it was at one moment. You act only through the tools you are given: "
          "they show the company's tracker, mail, chat and code as they were then, and record what you do. "
          "Do the task you are given, then stop and say in one sentence what you did.")
PASS = 0.99  # the score from which a rollout counts as solved


class Limits(BaseModel):
    """What one rollout may spend."""

    steps: int = Field(30, ge=1, le=500)           # model calls
    tokens: int = Field(200_000, ge=1)             # prompt + completion tokens over the rollout
    seconds: float = Field(600, gt=0)
    cost_usd: float = Field(1.0, ge=0)
    tool_output_chars: int = Field(8000, ge=100)   # what one tool answer may put in the conversation


@dataclass
class Rollout:
    attempt: int
    stop: str = ""                 # final | steps | tokens | seconds | cost | budget | error
    steps: int = 0
    tool_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    error: str = ""
    transcript: list[dict[str, Any]] = field(default_factory=list)

    def receipt(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "stop": self.stop, "steps": self.steps, "tool_calls": self.tool_calls,
                "tokens": self.tokens, "cost_usd": round(self.cost_usd, 6), "seconds": round(self.seconds, 2),
                "error": self.error}


def openai_tools(tools) -> list[dict]:
    """MCP tools as OpenAI function schemas."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description or t.name,
                                              "parameters": t.inputSchema}} for t in tools]


def mcp_command(ep: Episode) -> tuple[list[str], dict]:
    """How to start the task's MCP server over stdio from the host: `company mcp` in the session."""
    import os

    session = ep.session
    if session.kind == "docker":
        return ["docker", "exec", "-i", session.name, "company", "mcp"], dict(os.environ)
    tool = Path(__file__).resolve().parents[1] / "environments" / "company_tool.py"
    return [sys.executable, str(tool), "mcp"], {**os.environ, **session.env}


def run_rollout(ep: Episode, prompt: str, llm, limits: Limits, attempt: int) -> Rollout:
    """Let the model work the task in the open episode `ep` until it stops or a limit ends it."""
    import anyio

    return anyio.run(_loop, ep, prompt, llm, limits, attempt)


async def _loop(ep: Episode, prompt: str, llm, limits: Limits, attempt: int) -> Rollout:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    r = Rollout(attempt)
    started = time.monotonic()
    command, env = mcp_command(ep)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    try:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = openai_tools((await session.list_tools()).tools)
            messages: list[dict] = [{"role": "system", "content": fill(SYSTEM)},
                                    {"role": "user", "content": declare_anonymized(prompt, source="task prompt")}]
            while True:
                for name, over in (("steps", r.steps >= limits.steps), ("tokens", r.tokens >= limits.tokens),
                                   ("seconds", time.monotonic() - started >= limits.seconds),
                                   ("cost", r.cost_usd >= limits.cost_usd and limits.cost_usd > 0)):
                    if over:
                        r.stop = name
                        return r
                try:
                    reply = await anyio.to_thread.run_sync(
                        lambda: llm.complete(messages, tools=tools, attempt=attempt * 10_000 + r.steps))
                except BudgetExceeded as exc:
                    r.stop, r.error = "budget", str(exc)[:300]
                    return r
                except LLMError as exc:   # the model did not answer: infrastructure, not a score
                    r.stop, r.error = "error", f"{type(exc).__name__}: {exc}"[:300]
                    return r
                r.steps += 1
                r.tokens += reply.receipt.tokens
                r.cost_usd += 0.0 if reply.receipt.cached else reply.receipt.cost_usd
                r.transcript.append({"step": r.steps, "text": reply.text[:500],
                                     "calls": [{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls]})
                if not reply.tool_calls:
                    r.stop = "final"
                    return r
                messages.append({"role": "assistant", "content": declare_anonymized(reply.text, source="model reply")
                                 if reply.text else None, "tool_calls": reply.tool_calls})
                for call in reply.tool_calls:
                    r.tool_calls += 1
                    if not isinstance(call.arguments, dict):
                        text = f"the arguments of {call.name} are not a JSON object; nothing was done"
                    else:
                        result = await session.call_tool(call.name, call.arguments)
                        text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
                    text = text[:limits.tool_output_chars]
                    r.transcript[-1].setdefault("results", []).append(text[:300])
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": declare_anonymized(text or "(no output)", source="company tools")})
    finally:
        r.seconds = time.monotonic() - started


def rollout(task: Task, worlds_dir: Path, sandbox, llm, limits: Limits | None = None, attempt: int = 0,
            image: str | None = None) -> tuple[Validation, Rollout]:
    """One rollout of the model on `task` in a fresh episode, graded: (its validation row, its receipt)."""
    limits = limits or Limits()
    kind = f"rollout:{llm.config.model}"
    vid = content_hash("validation", task.task_id, kind, attempt, limits.model_dump())[:32]
    base = dict(validation_id=vid, task_id=task.task_id, dataset=task.dataset, run_kind=kind, attempt=attempt,
                sandbox=sandbox.kind)
    from graders import verifier

    spec = verifier.spec_of(task)   # a task with a verifier phase (code_change) runs it after the model, as replay does
    extra: dict = {}
    try:
        if spec is not None and image is None:
            image = verifier.environment(spec, sandbox, worlds_dir)
        deadline = limits.seconds + 300 + (spec.timeout_s + 300 if spec else 0)
        with Episode(worlds_dir, task.world, sandbox, deadline_s=deadline, image=image) as ep:
            r = run_rollout(ep, task.prompt, llm, limits, attempt)
            if spec is not None and r.stop != "error":
                extra["verifier"] = verifier.verify(ep.session, spec, worlds_dir)
            actions = ep.actions
            view = ep.tools.view if ep.tools else None
    except SandboxError as exc:
        return Validation(**base, score=None, duration_s=0.0, error_class="infra", message=str(exc)[:500]), \
            Rollout(attempt, stop="error", error=str(exc)[:300])
    receipt = r.receipt()
    missing = (extra.get("verifier") or {}).get("no_report")
    if missing:       # no test report: the model's failure when the oracle's run has one (graders.replay)
        from graders.replay import NO_REPORT, agent_failed, oracle_reports

        if not oracle_reports(task, worlds_dir, sandbox):
            return Validation(**base, score=None, duration_s=round(r.seconds, 3), error_class="infra",
                              message=f"{NO_REPORT}: {missing}"[:500]), r
        extra["verifier"] = agent_failed(extra["verifier"])
    if r.stop == "error":
        return Validation(**base, score=None, duration_s=round(r.seconds, 3), error_class="infra",
                          message=f"model: {r.error}", checks=[{"receipt": receipt}]), r
    g = grade(task.rubric, actions, Context(view=view, extra=extra))
    return Validation(**base, score=g.score, checks=[*g.checks, {"receipt": receipt}], duration_s=round(r.seconds, 3),
                      error_class=g.error_class, status=f"stopped: {r.stop}",
                      message=f"{g.summary()}; {r.steps} steps, {r.tool_calls} tool calls, {r.tokens} tokens"), r


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of n rollouts of which c solved the task (Chen et al., 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)
