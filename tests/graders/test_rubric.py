import pytest
from pydantic import BaseModel, ValidationError

from environments import actions as A
from graders.replay import judge, oracle_command
from graders.rubric import CheckResult, CheckSpec, Context, Rubric, grade, register_check
from warehouse.schemas import Task, Validation

SHA = "0123456789abcdef0123456789abcdef01234567"


def log(*calls):
    return [A.Logged(seq=i, action=c) for i, c in enumerate(calls, 1)]


def triage_rubric():
    return Rubric(checks=[
        CheckSpec(id="type", check="field_equals", weight=1, args={"key": "P-1", "field": "type", "expected": "Bug"}),
        CheckSpec(id="components", check="set_overlap", weight=1,
                  args={"key": "P-1", "field": "components", "expected": ["api", "ui"]}),
        CheckSpec(id="assignee", check="field_equals", weight=2,
                  args={"key": "P-1", "field": "assignee", "expected": "Avery Ingram", "aliases": ["aingram"]}),
    ])


def test_triage_scores_weighted_and_last_update_wins():
    r = triage_rubric()
    assert grade(r, []).score == 0.0
    full = log(A.JiraUpdate(key="P-1", type="bug", components=["UI", "api"], assignee="aingram"))
    g = grade(r, full)
    assert g.score == 1.0 and g.summary() == "4/4"
    partial = log(A.JiraUpdate(key="P-1", type="Task", components=["api"]), A.JiraUpdate(key="P-1", type="Bug"))
    g = grade(r, partial)
    assert g.score == pytest.approx((1 + 2 / 3) / 4, abs=1e-6) and g.points == pytest.approx(1 + 2 / 3, abs=1e-6)
    assert [c["id"] for c in g.checks] == ["type", "components", "assignee"]
    other_issue = log(A.JiraUpdate(key="P-2", type="Bug", components=["api", "ui"], assignee="aingram"))
    assert grade(r, other_issue).score == 0.0  # right values on the wrong issue


def test_untyped_entries_score_zero_not_crash():
    junk = [None, 3, "x", {"action": "jira.update", "fields": {"type": "Bug"}}]
    assert grade(triage_rubric(), junk).score == 0.0


def test_sha_check_accepts_prefix_and_rejects_junk():
    r = Rubric(checks=[CheckSpec(id="sha", check="sha_equals", weight=1, args={"expected": [SHA]})])
    assert grade(r, log(A.Answer(sha=SHA[:7]))).score == 1.0
    assert grade(r, log(A.Answer(sha=SHA.upper()))).score == 1.0
    assert grade(r, log(A.Answer(sha=SHA[:6]))).score == 0.0
    assert grade(r, log(A.Answer(sha="1234567"))).score == 0.0
    assert grade(r, log(A.Answer(sha=SHA), A.Answer(sha="f" * 40))).score == 0.0  # the last answer counts


def test_check_arguments_are_validated_when_the_rubric_is_built():
    with pytest.raises(ValidationError, match="field_equals"):
        CheckSpec(id="t", check="field_equals", weight=1, args={"field": "type"})  # no key, no expected
    with pytest.raises(ValidationError, match="argument field"):
        CheckSpec(id="t", check="field_equals", weight=1, args={"key": "P-1", "field": "colour", "expected": "x"})
    with pytest.raises(ValidationError, match="no check named"):
        CheckSpec(id="x", check="no_such_check", weight=1)
    with pytest.raises(ValidationError, match="repeat"):
        Rubric(checks=[CheckSpec(id="a", check="sha_equals", weight=1, args={"expected": [SHA]})] * 2)


def test_a_crashing_check_is_a_grader_error_not_zero():
    class NoArgs(BaseModel):
        pass

    @register_check("test_crashes", args=NoArgs)
    def crashes(actions, args, ctx):
        raise RuntimeError("boom")

    g = grade(Rubric(checks=[CheckSpec(id="x", check="test_crashes", weight=1)]), [])
    assert g.score is None and g.error_class == "grader_error" and "boom" in g.message


def test_judge_checks_without_a_model_are_not_run_and_not_scored():
    class Crit(BaseModel):
        criterion: str

    @register_check("test_judge", args=Crit, kind="judge")
    def judged(actions, args, ctx):
        passed, why = ctx.judge(args.criterion)
        return CheckResult(1.0 if passed else 0.0, why)

    r = Rubric(checks=[CheckSpec(id="sha", check="sha_equals", weight=3, args={"expected": [SHA]}),
                       CheckSpec(id="answers", check="test_judge", kind="judge", weight=1,
                                 args={"criterion": "answers what was asked"})])
    g = grade(r, log(A.Answer(sha=SHA)))
    assert g.score == 1.0 and g.not_run == 1 and g.summary() == "3/3, 1 judge checks not run"
    assert g.checks[1]["ran"] is False and g.checks[1]["score"] is None
    g = grade(r, log(A.Answer(sha=SHA)), Context(judge=lambda c: (False, "it does not")))
    assert g.score == 0.75 and g.not_run == 0 and g.mode == "judge"
    with pytest.raises(ValidationError, match="judge check"):
        CheckSpec(id="j", check="test_judge", weight=1, args={"criterion": "x"})  # declared kind must match


def test_oracle_command_quotes_values():
    task = Task(task_id="t", dataset="d", family="f", item_id="i", prompt="p", cutoff="2021-01-01T00:00:00+00:00",
                world={}, world_hash="w", rubric={}, lineage=[], split="train",
                reference={"actions": [{"tool": "jira_update", "key": "P-1", "type": "Bug", "assignee": "O'Brien X",
                                        "components": ["a b"]}, {"tool": "answer", "text": "done"}]})
    assert oracle_command(task) == ("company jira update P-1 --type Bug --component 'a b' --assignee 'O'\"'\"'Brien X' "
                                    "&& company answer --text done")


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


def test_a_critical_check_that_fails_gates_the_grade_and_says_so_in_points():
    # a resolution note that says the right things about the wrong resolution earns nothing (issue 18)
    r = Rubric(checks=[
        CheckSpec(id="resolution", check="field_equals", weight=1, critical=True,
                  args={"key": "P-1", "field": "resolution", "expected": "Fixed"}),
        CheckSpec(id="type", check="field_equals", weight=3, args={"key": "P-1", "field": "type", "expected": "Bug"}),
    ])
    right = grade(r, log(A.JiraUpdate(key="P-1", resolution="fixed", type="Bug")))
    assert right.score == 1.0 and right.summary() == "4/4" and not right.gated
    wrong = grade(r, log(A.JiraUpdate(key="P-1", resolution="Won't Fix", type="Bug")))
    assert wrong.score == 0.0 and wrong.points == 0 and wrong.gated == ["resolution"]
    assert wrong.ungated_points == 3 and wrong.summary() == "0/4, gated by resolution (3/4 without the gate)"
    assert wrong.checks[0]["critical"] is True and wrong.checks[0]["explanation"].startswith("critical, gates")
    assert grade(r, []).score == 0.0
