"""Built-in deterministic checks. Each reads the episode's action log (typed `Logged` entries of
`environments.actions`) and the arguments the task builder stored in the rubric, validated by the check's
argument model when the rubric was built.

Later writes override earlier ones, as a second `jira update` would in Jira; an answer is the last one given.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from environments import actions as A
from graders.rubric import CheckResult, Context, register_check

_HEX = re.compile(r"^[0-9a-f]{7,64}$")


class Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _norm(value) -> str:
    return " ".join(str(value).casefold().split()) if value is not None else ""


def of(actions: list, cls: type) -> list:
    """The logged actions of one type, in order (entries that are not `Logged` are ignored)."""
    return [e.action for e in actions if isinstance(e, A.Logged) and isinstance(e.action, cls)]


def jira_fields(actions: list, key: str | None = None) -> dict:
    """The fields set on issue `key` (any issue when None) by every `jira_update`, last write wins per field."""
    fields: dict = {}
    for a in of(actions, A.JiraUpdate):
        if key is None or a.key.upper() == key.upper():
            fields.update(a.fields())
    return fields


def last_answer(actions: list, attr: str):
    for a in reversed(of(actions, A.Answer)):
        if getattr(a, attr) is not None:
            return getattr(a, attr)
    return None


class FieldEqualsArgs(Args):
    key: str
    field: str = Field(pattern=r"^(type|priority|assignee|resolution|status|duplicate_of)$")
    expected: str
    aliases: list[str] = []


@register_check("field_equals", args=FieldEqualsArgs)
def field_equals(actions: list, a: FieldEqualsArgs, ctx: Context) -> CheckResult:
    """1 when the issue's field was set to the expected value (or one of its aliases), case-folded."""
    got = jira_fields(actions, a.key).get(a.field)
    if got is None:
        return CheckResult(0.0, f"{a.field}: no value submitted")
    ok = _norm(got) in {_norm(a.expected), *(_norm(x) for x in a.aliases)}
    return CheckResult(1.0 if ok else 0.0, f"{a.field}: got {str(got)[:80]!r}, expected {a.expected!r}")


class SetOverlapArgs(Args):
    key: str
    field: str = Field(pattern=r"^components$")
    expected: list[str] = Field(min_length=1)


@register_check("set_overlap", args=SetOverlapArgs)
def set_overlap(actions: list, a: SetOverlapArgs, ctx: Context) -> CheckResult:
    """F1 between the submitted set and the expected set (case-folded). Nothing submitted scores 0."""
    got = jira_fields(actions, a.key).get(a.field)
    if not got:
        return CheckResult(0.0, f"{a.field}: nothing submitted")
    g, e = {_norm(x) for x in got}, {_norm(x) for x in a.expected}
    hit = len(g & e)
    if not hit:
        return CheckResult(0.0, f"{a.field}: none of {sorted(g)[:5]} expected")
    p, r = hit / len(g), hit / len(e)
    return CheckResult(round(2 * p * r / (p + r), 6), f"{a.field}: {hit} of {len(e)} expected, {len(g)} submitted")


class ShaEqualsArgs(Args):
    expected: list[str] = Field(min_length=1)
    min_prefix: int = Field(7, ge=4, le=40)


@register_check("sha_equals", args=ShaEqualsArgs)
def sha_equals(actions: list, a: ShaEqualsArgs, ctx: Context) -> CheckResult:
    """1 when the answered SHA is one of the expected commits (a prefix of at least min_prefix digits)."""
    got = last_answer(actions, "sha")
    if not got:
        return CheckResult(0.0, "no SHA answered")
    if not _HEX.match(got) or len(got) < a.min_prefix:
        return CheckResult(0.0, f"{got[:50]!r} is not a commit SHA of at least {a.min_prefix} hex digits")
    if any(e.lower().startswith(got) for e in a.expected):
        return CheckResult(1.0, f"{got[:12]} is the fixing commit")
    return CheckResult(0.0, f"{got[:12]} is not the fixing commit")
