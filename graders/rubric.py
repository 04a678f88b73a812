"""Rubrics: many small weighted checks, each naming a registered check with validated arguments.

Invariants:
- A rubric is data (JSON): `{"version": 2, "checks": [{"id", "check", "kind", "weight", "criterion", "args"}]}`;
  a check is found by its registered name (taskmine.registry, kind "check"), never pickled code. Its
  arguments are validated against the check's declared model when the rubric is built, so a bad rubric
  never exists.
- A check reads the episode's typed action log (`environments.actions.Logged`) and returns a score in [0, 1]
  with an explanation. A check that cannot run (unknown name, a crash) is a `grader_error`, never a 0.
- `kind` is `deterministic` or `judge`. Judge checks need a model: without one they are recorded as not run
  and left out of the score (the grade says how many), never passed. A check that raises `CheckNotRun` (the
  run's LLM budget is spent) is recorded the same way; one that raises `CheckInfraError` (the model did not
  answer) makes the grade an infrastructure error, never a score.
- The score is reported as weighted points (e.g. 17/23) and normalized over the checks that ran.
- A check may be `critical`: an item that must pass for any credit (the resolution a ticket got, a decision).
  When a critical check that ran scores under 1 the grade is gated: 0 points, with the points the other checks
  would have given reported beside it (`0/23, gated by resolution (12/23 without the gate)`), so a reply that
  says the right things about the wrong decision earns nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from taskmine.registry import registry

CheckFn = Callable[..., "CheckResult"]


def register_check(name: str, *, args: type[BaseModel] | None = None, kind: str = "deterministic"):
    """Decorator: a check function `fn(actions, args_model_instance, context) -> CheckResult` under `name`."""

    def wrap(fn: CheckFn) -> CheckFn:
        fn.check_kind = kind  # type: ignore[attr-defined]
        registry("check").add(name, fn, f"builtin:{fn.__module__}", args)
        return fn

    return wrap


def checks() -> dict[str, Any]:
    return {name: r.obj for name, r in registry("check").all().items()}


class CheckSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(min_length=1, max_length=80)
    check: str
    weight: float = Field(gt=0)
    kind: Literal["deterministic", "judge"] = "deterministic"
    criterion: str = Field("", max_length=400)
    args: dict[str, Any] = {}
    critical: bool = False        # must pass for any credit (see the module docstring)

    @model_validator(mode="after")
    def _args(self) -> CheckSpec:
        try:
            reg = registry("check").get(self.check)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        object.__setattr__(self, "args", registry("check").validate_args(self.check, self.args))
        declared = getattr(reg.obj, "check_kind", "deterministic")
        if declared != self.kind:
            raise ValueError(f"check {self.check!r} is a {declared} check, not {self.kind}")
        return self


class Rubric(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    version: int = 2
    checks: list[CheckSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Rubric:
        ids = [c.id for c in self.checks]
        if len(ids) != len(set(ids)):
            raise ValueError(f"check ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
        return self


@dataclass(frozen=True)
class CheckResult:
    score: float
    explanation: str


@dataclass
class Grade:
    score: float | None                    # normalized over the checks that ran
    checks: list[dict[str, Any]] = field(default_factory=list)
    error_class: str | None = None
    message: str = ""
    points: float = 0.0
    max_points: float = 0.0
    not_run: int = 0                       # judge checks without a model
    mode: str = "deterministic"            # what graded it: deterministic, or judge:<model>
    gated: list[str] = field(default_factory=list)   # critical checks that failed: the score is 0
    ungated_points: float | None = None    # the points the checks gave before the gate (gated grades only)

    def summary(self) -> str:
        skipped = f", {self.not_run} judge checks not run" if self.not_run else ""
        gate = (f", gated by {', '.join(self.gated)} ({self.ungated_points:g}/{self.max_points:g} without the gate)"
                if self.gated else "")
        return f"{self.points:g}/{self.max_points:g}{gate}{skipped}"


class GraderError(Exception):
    pass


class CheckNotRun(Exception):
    """Raised by a check that cannot run for a reason that is no verdict (no model, the run's LLM budget is
    spent): the check is recorded as not run, left out of the score and counted, like a judge without a model."""


class CheckInfraError(Exception):
    """Raised by a check whose infrastructure failed (the model did not answer): the grade is an
    infrastructure error, never a score."""


@dataclass
class Context:
    """What checks may consult besides the actions: the task's world view (read-only), and the judge."""

    view: Any = None
    judge: Callable[..., Any] | None = None  # (criterion, candidate text, guidance) -> (passed, rationale)
    extra: dict[str, Any] = field(default_factory=dict)


def grade(rubric: Rubric | dict, actions: list, context: Context | None = None) -> Grade:
    """Score the action log against `rubric` (see the module docstring)."""
    rubric = rubric if isinstance(rubric, Rubric) else Rubric.model_validate(rubric)
    context = context or Context()
    results: list[dict[str, Any]] = []
    points = max_points = 0.0
    not_run = 0
    for spec in rubric.checks:
        entry = {"id": spec.id, "check": spec.check, "kind": spec.kind, "weight": spec.weight,
                 "criterion": spec.criterion, **({"critical": True} if spec.critical else {})}
        if spec.kind == "judge" and context.judge is None:
            results.append({**entry, "score": None, "ran": False, "explanation": "not run: no model configured"})
            not_run += 1
            continue
        try:
            reg = registry("check").get(spec.check)
            model = reg.args
            args = model.model_validate(spec.args) if model is not None else spec.args
            r = reg.obj(actions, args, context)
            if not isinstance(r, CheckResult) or not 0.0 <= r.score <= 1.0:
                raise GraderError(f"check {spec.check!r} returned {r!r}")
        except CheckNotRun as exc:
            results.append({**entry, "score": None, "ran": False, "explanation": f"not run: {exc}"[:500]})
            not_run += 1
            continue
        except CheckInfraError as exc:
            return Grade(None, results, "infra", f"{spec.id}: {exc}"[:500])
        except Exception as exc:
            return Grade(None, results, "grader_error", f"{spec.id}: {type(exc).__name__}: {exc}"[:500])
        results.append({**entry, "score": r.score, "ran": True, "explanation": r.explanation})
        points += spec.weight * r.score
        max_points += spec.weight
    if max_points == 0:
        return Grade(None, results, None, f"no check ran ({not_run} judge checks not run)", 0, 0, not_run)
    judged = any(c["kind"] == "judge" and c["ran"] for c in results)
    model = context.extra.get("judge_model")
    mode = ("judge:" + model if model else "judge") if judged else "deterministic"
    critical = {c.id for c in rubric.checks if c.critical}
    gated = [c["id"] for c in results if c["id"] in critical and c["ran"] and c["score"] < 1.0]
    if gated:
        for c in results:
            if c["id"] in gated:
                c["explanation"] = f"critical, gates the grade: {c['explanation']}"[:500]
        return Grade(0.0, results, None, "", 0.0, max_points, not_run, mode, gated, round(points, 6))
    return Grade(round(points / max_points, 6), results, None, "", round(points, 6), max_points, not_run, mode)
