"""Checks of code-change tasks: they read the verifier phase's results (graders.verifier), which the replay
puts in `Context.extra["verifier"]`, never anything the agent wrote.

- `tests_resolved`: 1 when every FAIL_TO_PASS and every PASS_TO_PASS test passed, else 0 (SWE-bench's
  "resolved").
- `tests_fraction`: the share of FAIL_TO_PASS tests that passed, times the share of PASS_TO_PASS tests that
  still pass: partial credit for fixing part of the behaviour, none for breaking what worked, 0 for doing
  nothing (every FAIL_TO_PASS test fails then).

No verifier result is a grader error (the check raises), never a 0. A run that left no test report
(`no_report`) is decided by graders.replay before grading: 0 when the oracle's run of the same verifier leaves one
(the policy did it), an infrastructure failure otherwise. The agent leaving the session unusable for the verifier
(a full disk, the repository gone) scores 0.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from graders.rubric import CheckResult, Context, GraderError, register_check


class TestsArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    fail_to_pass: list[str] = Field(min_length=1)
    pass_to_pass: list[str] = []


def _results(ctx: Context) -> dict | None:
    v = (ctx.extra or {}).get("verifier")
    if v is None:
        raise GraderError("no verifier result: the task was graded without its verifier phase")
    if v.get("error"):
        raise GraderError(f"the verifier could not read the tests' results: {v['error']}")
    if v.get("no_report"):      # graders.replay decides (0, or infrastructure when the oracle has none either)
        raise GraderError(f"the run left no test report: {v['no_report']}")
    if not v.get("ran"):
        return None
    return v.get("outcomes") or {}


def _passed(outcomes: dict, ids: list[str]) -> int:
    return sum(1 for t in ids if outcomes.get(t) == "passed")


@register_check("tests_resolved", args=TestsArgs)
def tests_resolved(actions: list, a: TestsArgs, ctx: Context) -> CheckResult:
    """1 when every FAIL_TO_PASS and PASS_TO_PASS test passed in the verifier phase, else 0."""
    outcomes = _results(ctx)
    if outcomes is None:
        return CheckResult(0.0, f"the verifier could not run: {ctx.extra['verifier'].get('failed_setup', '')[:200]}")
    f, p = _passed(outcomes, a.fail_to_pass), _passed(outcomes, a.pass_to_pass)
    ok = f == len(a.fail_to_pass) and p == len(a.pass_to_pass)
    return CheckResult(1.0 if ok else 0.0, f"FAIL_TO_PASS {f}/{len(a.fail_to_pass)} passed, "
                                           f"PASS_TO_PASS {p}/{len(a.pass_to_pass)} passed")


@register_check("tests_fraction", args=TestsArgs)
def tests_fraction(actions: list, a: TestsArgs, ctx: Context) -> CheckResult:
    """Share of FAIL_TO_PASS tests passed times the share of PASS_TO_PASS tests still passing."""
    outcomes = _results(ctx)
    if outcomes is None:
        return CheckResult(0.0, f"the verifier could not run: {ctx.extra['verifier'].get('failed_setup', '')[:200]}")
    f, p = _passed(outcomes, a.fail_to_pass), _passed(outcomes, a.pass_to_pass)
    share = (f / len(a.fail_to_pass)) * (p / len(a.pass_to_pass) if a.pass_to_pass else 1.0)
    return CheckResult(round(share, 6), f"{f}/{len(a.fail_to_pass)} FAIL_TO_PASS x "
                                        f"{p}/{len(a.pass_to_pass)} PASS_TO_PASS")
