import pytest

from graders.replay import entry_command, judge
from graders.rubric import CheckSpec, Rubric, grade
from warehouse.schemas import Validation

SHA = "0123456789abcdef0123456789abcdef01234567"


def triage_rubric():
    return Rubric(checks=[
        CheckSpec(id="type", check="field_equals", weight=1, args={"field": "type", "expected": "Bug"}),
        CheckSpec(id="components", check="set_overlap", weight=1,
                  args={"field": "components", "expected": ["api", "ui"]}),
        CheckSpec(id="assignee", check="field_equals", weight=2,
                  args={"field": "assignee", "expected": "Avery Ingram", "aliases": ["aingram"]}),
    ])


def test_triage_scores_weighted_and_last_update_wins():
    r = triage_rubric()
    assert grade(r, []).score == 0.0
    full = [{"action": "jira.update", "fields": {"type": "bug", "components": ["UI", "api"], "assignee": "aingram"}}]
    assert grade(r, full).score == 1.0
    partial = [{"action": "jira.update", "fields": {"type": "Task", "components": ["api"]}},
               {"action": "jira.update", "fields": {"type": "Bug"}}]
    g = grade(r, partial)
    assert g.score == pytest.approx((1 + 2 / 3) / 4, abs=1e-6)
    assert [c["id"] for c in g.checks] == ["type", "components", "assignee"]


def test_untrusted_outbox_shapes_score_zero_not_crash():
    r = triage_rubric()
    junk = [None, 3, "x", {"action": "jira.update", "fields": "nope"},
            {"action": "jira.update", "fields": {"type": {"nested": 1}, "components": [[1], {"a": 2}]}}]
    assert grade(r, junk).score == 0.0


def test_sha_check_accepts_prefix_and_rejects_junk():
    r = Rubric(checks=[CheckSpec(id="sha", check="sha_equals", weight=1, args={"expected": [SHA]})])
    assert grade(r, [{"action": "answer", "sha": SHA[:7]}]).score == 1.0
    assert grade(r, [{"action": "answer", "sha": SHA.upper()}]).score == 1.0
    assert grade(r, [{"action": "answer", "sha": SHA[:6]}]).score == 0.0
    assert grade(r, [{"action": "answer", "sha": "1234567"}]).score == 0.0
    assert grade(r, [{"action": "answer", "sha": SHA}, {"action": "answer", "sha": "f" * 40}]).score == 0.0


def test_unknown_check_is_a_grader_error_not_zero():
    r = Rubric(checks=[CheckSpec(id="x", check="no_such_check", weight=1)])
    g = grade(r, [])
    assert g.score is None and g.error_class == "grader_error"


def test_oracle_command_quotes_values():
    cmd = entry_command({"action": "jira.update", "fields": {"type": "Bug", "assignee": "O'Brien X",
                                                             "components": ["a b"]}})
    assert cmd == "company jira update --type Bug --assignee 'O'\"'\"'Brien X' --component 'a b'"


def _v(kind, score, attempt=0, err=None):
    return Validation(validation_id=f"{kind}{attempt}", task_id="t", dataset="d", run_kind=kind, attempt=attempt,
                      score=score, duration_s=0.1, sandbox="local", error_class=err)


def test_judge_requires_oracle_pass_null_fail_and_no_variance():
    ok = [_v("oracle", 1.0, i) for i in range(3)] + [_v("null", 0.0, i) for i in range(3)]
    assert judge(ok) == (True, "oracle and null as expected on every repeat")
    flaky = ok[:2] + [_v("oracle", 0.5, 2)] + ok[3:]
    assert judge(flaky)[1].startswith("flaky")
    cheap = ok[:3] + [_v("null", 0.5, i) for i in range(3)]
    assert judge(cheap)[1].startswith("null scored")
    infra = ok[:5] + [_v("null", None, 2, "timeout")]
    assert judge(infra)[1].startswith("infra")
