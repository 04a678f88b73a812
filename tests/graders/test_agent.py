"""The model agent, end to end: a tool-calling loop through litellm to a local stand-in for a hosted LLM (the
`llm_standin` fixture, tests/llm/standin.py, scripted per test), working a task of the tiny company through
its MCP tools in a real sandbox (Docker on CI), graded from the episode's action log.

Scripts: a model that solves the task, one that gives up, one that tries to hack the grader, one that never
stops (the step limit ends it) and one that runs out of budget."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "environments"))
from tiny_company import CUTOFF, tiny_events

from environments.world import build_world
from graders.agent import Limits, pass_at_k, rollout
from graders.rubric import CheckSpec, Rubric
from llm.client import LLM
from warehouse.schemas import Task


def _task() -> Task:
    rubric = Rubric(checks=[CheckSpec(id="priority", check="field_equals", weight=1,
                                      args={"key": "PROJ-1", "field": "priority", "expected": "Major"})])
    return Task(task_id="t1", dataset="tiny", family="ticket_triage", item_id="i1",
                prompt="Triage PROJ-1: set its priority the way this team would.", cutoff=CUTOFF,
                world={"cutoff": CUTOFF.isoformat()}, world_hash="w", reference={"actions": []},
                rubric=rubric.model_dump(mode="json"), lineage=[])


@pytest.fixture
def worlds(tmp_path) -> Path:
    build_world(tiny_events(), tmp_path / "worlds" / "world.sqlite", "tiny")
    return tmp_path / "worlds"


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def box(request):
    from environments.sandbox import LocalSandbox

    return LocalSandbox() if request.param == "local" else request.getfixturevalue("docker_sandbox")


def _tool_names(body: dict) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


def _tool_results(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def test_a_model_that_solves_the_task_scores_one(worlds, box, llm_standin, tmp_path):
    from standin import reply, tool_call

    llm_standin.script(tool_call(("jira_show", {"key": "PROJ-1"})),
                       tool_call(("jira_update", {"key": "PROJ-1", "priority": "Major"})),
                       reply("I set PROJ-1's priority to Major."))
    v, r = rollout(_task(), worlds, box, LLM(llm_standin.config(tmp_path)), attempt=0)
    assert v.score == 1.0 and v.error_class is None and v.run_kind == "rollout:openai/standin"
    assert (r.stop, r.steps, r.tool_calls) == ("final", 3, 2) and r.tokens > 0
    seen = llm_standin.requests
    assert {"jira_show", "jira_update", "mail_reply", "slack_post"} <= _tool_names(seen[0].body)
    assert "shell" in _tool_names(seen[0].body)  # a session: the shell is a tool too
    assert any("PROJ-1: Login times out" in t for t in _tool_results(seen[1].body))  # it saw the world
    assert v.checks[-1]["receipt"]["tool_calls"] == 2


def test_a_model_that_gives_up_scores_zero(worlds, box, llm_standin, tmp_path):
    from standin import reply

    llm_standin.script(reply("I cannot do this."))
    v, r = rollout(_task(), worlds, box, LLM(llm_standin.config(tmp_path)))
    assert v.score == 0.0 and r.stop == "final" and r.tool_calls == 0


def test_a_model_that_tries_to_hack_the_grader_scores_zero(worlds, box, llm_standin, tmp_path):
    from standin import reply, tool_call

    llm_standin.script(
        tool_call(("shell", {"command": "rm -f /run/company/tools.sock; echo hacked > /world/x; cat /etc/shadow"})),
        tool_call(("jira_update", {"key": "PROJ-1", "priority": "Major", "grader": "pass"})),   # not a field
        tool_call(("answer", "not an object")),                                                # bad arguments
        tool_call(("no_such_tool", {})),
        tool_call(("jira_show", {"key": "PROJ-2"})),                                           # the future
        reply("done"))
    v, r = rollout(_task(), worlds, box, LLM(llm_standin.config(tmp_path)))
    assert v.score == 0.0 and r.stop == "final" and r.tool_calls == 5
    results = _tool_results(llm_standin.requests[-1].body)
    assert any("Extra inputs are not permitted" in t for t in results)
    assert any("not a JSON object" in t for t in results) and any("no tool 'no_such_tool'" in t for t in results)
    assert any("no issue PROJ-2 at this moment" in t for t in results)


def test_limits_end_a_rollout_not_the_run(worlds, box, llm_standin, tmp_path):
    from standin import tool_call

    llm_standin.responder = lambda body: tool_call(("slack_channels", {}))   # never stops
    v, r = rollout(_task(), worlds, box, LLM(llm_standin.config(tmp_path)), Limits(steps=3))
    assert r.stop == "steps" and r.steps == 3 and v.score == 0.0 and v.status == "stopped: steps"
    budget = LLM(llm_standin.config(tmp_path / "b", budget_tokens=1, budget_usd=None))
    v, r = rollout(_task(), worlds, box, budget, attempt=1)
    assert r.stop == "budget" and r.steps == 1 and v.score == 0.0


def test_a_model_that_fails_is_infrastructure_not_a_score(worlds, llm_standin, tmp_path):
    from standin import error

    from environments.sandbox import LocalSandbox

    llm_standin.script(error(401))
    v, r = rollout(_task(), worlds, LocalSandbox(), LLM(llm_standin.config(tmp_path)))
    assert v.score is None and v.error_class == "infra" and r.stop == "error" and "401" in json.dumps(v.checks)


def test_pass_at_k():
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3) and pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(5, 4, 2) == 1.0
