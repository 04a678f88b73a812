"""graders.replay.judge on stored runs: oracle spread is flakiness, probes decide by their thresholds, valid
alternatives (alt:*) are measurements that never decide; and the alternative runs a task plans."""

from __future__ import annotations

import datetime as dt

from graders import replay
from warehouse.schemas import Task, Validation


def run(kind, score, attempt=0, error=None):
    return Validation(validation_id=f"{kind}{attempt}", task_id="t", dataset="d", run_kind=kind, attempt=attempt,
                      score=score, duration_s=0.1, sandbox="local", error_class=error)


def ok_runs():
    return [run("oracle", 1.0, i) for i in range(3)] + [run("null", 0.0, i) for i in range(3)]


def test_any_spread_in_the_oracle_marks_the_task_flaky():
    assert replay.judge(ok_runs()) == (True, "oracle and null as expected on every repeat")
    runs = ok_runs()
    runs[1] = run("oracle", 0.99, 1)           # still above the bar, but not the same score
    valid, reason = replay.judge(runs)
    assert not valid and reason.startswith("flaky: oracle scores [1.0, 0.99, 1.0]")
    runs = ok_runs()
    runs[4] = run("null", 0.02, 1)
    assert replay.judge(runs)[1].startswith("flaky")


def test_probes_decide_by_their_threshold_alternatives_never():
    runs = ok_runs() + [run("probe:sibling", 0.7)]
    assert replay.judge(runs, {"probe:sibling": 0.75})[0]
    assert replay.judge(runs, {"probe:sibling": 0.5}) == (False, "probe passes: sibling scored 0.7 (>= 0.5)")
    # a valid alternative that fails (a grader false negative), or whose run broke, is recorded only
    runs = ok_runs() + [run("alt:reordered", 0.2), run("alt:paraphrase", None, error="infra")]
    assert replay.judge(runs)[0]


def test_alternatives_are_planned_once_each_as_alt_runs():
    task = Task(task_id="t", dataset="d", family="commit_link", item_id="i", prompt="p",
                cutoff=dt.datetime(2021, 1, 1, tzinfo=dt.UTC), world={}, world_hash="w",
                reference={"actions": [{"tool": "answer", "sha": "abcdef12"}],
                           "alternatives": [{"name": "short_sha", "calls": [{"tool": "answer", "sha": "abcdef1"}],
                                             "min": 0.99}]},
                rubric={"version": 2, "checks": [{"id": "a", "check": "sha_equals", "weight": 1,
                                                  "args": {"expected": ["abcdef12"]}}]}, lineage=[])
    assert replay.alternative_commands(task) == [("alt:short_sha", "company answer --sha abcdef1", 0.99)]
    assert replay.agent_command(task, "alt:short_sha") == ("alt:short_sha", "company answer --sha abcdef1")
