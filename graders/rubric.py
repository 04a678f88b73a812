"""Rubrics: weighted checks naming registered deterministic check functions.

Invariants:
- A rubric is data (JSON): `{"version": 1, "checks": [{"id", "check", "weight", "args"}]}`; a check
  is found by its registered name, never pickled code.
- A check returns a score in [0, 1] with an explanation. A check that cannot run (unknown name,
  bad arguments, a crash) is a `grader_error`, never a silent 0.
- The grader reads only the outbox entries the `company` tool wrote, parsed outside the container;
  it never trusts their shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CheckFn = Callable[..., "CheckResult"]
_CHECKS: dict[str, CheckFn] = {}


def register_check(name: str):
    def wrap(fn: CheckFn) -> CheckFn:
        if name in _CHECKS and _CHECKS[name] is not fn:
            raise ValueError(f"check {name!r} is registered twice")
        _CHECKS[name] = fn
        return fn

    return wrap


def checks() -> dict[str, CheckFn]:
    from graders import checks as _builtin  # noqa: F401  (registers the built-in checks)

    return dict(_CHECKS)


class CheckSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    check: str
    weight: float = Field(gt=0)
    args: dict[str, Any] = {}


class Rubric(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    version: int = 1
    checks: list[CheckSpec]


@dataclass(frozen=True)
class CheckResult:
    score: float
    explanation: str


@dataclass
class Grade:
    score: float | None
    checks: list[dict[str, Any]] = field(default_factory=list)
    error_class: str | None = None
    message: str = ""


class GraderError(Exception):
    pass


def grade(rubric: Rubric | dict, outbox: list[dict]) -> Grade:
    """Score `outbox` against `rubric`: the weighted mean of the checks' scores."""
    rubric = rubric if isinstance(rubric, Rubric) else Rubric.model_validate(rubric)
    registry = checks()
    results, total, weights = [], 0.0, 0.0
    for spec in rubric.checks:
        fn = registry.get(spec.check)
        try:
            if fn is None:
                raise GraderError(f"unknown check {spec.check!r}")
            r = fn(outbox, **spec.args)
            if not isinstance(r, CheckResult) or not 0.0 <= r.score <= 1.0:
                raise GraderError(f"check {spec.check!r} returned {r!r}")
        except Exception as exc:
            return Grade(None, results, "grader_error", f"{spec.id}: {type(exc).__name__}: {exc}")
        results.append({"id": spec.id, "check": spec.check, "weight": spec.weight, "score": r.score,
                        "explanation": r.explanation})
        total += spec.weight * r.score
        weights += spec.weight
    if weights == 0:
        return Grade(None, results, "grader_error", "rubric has no checks")
    return Grade(round(total / weights, 6), results)
