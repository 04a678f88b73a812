"""Built-in deterministic checks. Each reads the outbox (a list of untrusted dicts) and the
arguments the task builder stored in the rubric.

The outbox protocol is the `company` tool's: `{"action": "jira.update", "fields": {...}}` and
`{"action": "answer", "sha": ...}` / `{"action": "answer", "text": ...}`. Later entries override
earlier ones, as a second `jira update` would in Jira.
"""

from __future__ import annotations

import re
from typing import Any

from graders.rubric import CheckResult, register_check

_HEX = re.compile(r"^[0-9a-f]{7,40}$")


def _norm(value: Any) -> str:
    return " ".join(str(value).casefold().split()) if value is not None else ""


def jira_fields(outbox: list[dict]) -> dict[str, Any]:
    """The issue's fields after every `jira.update` in the outbox, last write wins per field."""
    fields: dict[str, Any] = {}
    for entry in outbox:
        if isinstance(entry, dict) and entry.get("action") == "jira.update" and isinstance(entry.get("fields"), dict):
            fields.update(entry["fields"])
    return fields


def last_answer(outbox: list[dict], key: str) -> Any:
    for entry in reversed(outbox):
        if isinstance(entry, dict) and entry.get("action") == "answer" and key in entry:
            return entry[key]
    return None


@register_check("field_equals")
def field_equals(outbox: list[dict], field: str, expected: str, aliases: list[str] = ()) -> CheckResult:
    """1 when the submitted `field` equals the expected value (or one of its aliases), case-folded."""
    got = jira_fields(outbox).get(field)
    if got is None or isinstance(got, (dict, list)):
        return CheckResult(0.0, f"{field}: no value submitted")
    ok = _norm(got) in {_norm(expected), *(_norm(a) for a in aliases)}
    return CheckResult(1.0 if ok else 0.0, f"{field}: got {str(got)[:80]!r}, expected {expected!r}")


@register_check("set_overlap")
def set_overlap(outbox: list[dict], field: str, expected: list[str]) -> CheckResult:
    """F1 between the submitted set and the expected set (case-folded). Nothing submitted scores 0."""
    got = jira_fields(outbox).get(field)
    if isinstance(got, str):
        got = [got]
    if not isinstance(got, list) or not got:
        return CheckResult(0.0, f"{field}: nothing submitted")
    g = {_norm(x) for x in got if isinstance(x, (str, int))}
    e = {_norm(x) for x in expected}
    hit = len(g & e)
    if not hit:
        return CheckResult(0.0, f"{field}: none of {sorted(g)[:5]} expected")
    p, r = hit / len(g), hit / len(e)
    return CheckResult(round(2 * p * r / (p + r), 6), f"{field}: {hit} of {len(e)} expected, {len(g)} submitted")


@register_check("sha_equals")
def sha_equals(outbox: list[dict], expected: list[str], min_prefix: int = 7) -> CheckResult:
    """1 when the answered SHA is one of the expected commits (a unique prefix of >= min_prefix)."""
    got = last_answer(outbox, "sha")
    if not isinstance(got, str) or not got.strip():
        return CheckResult(0.0, "no SHA answered")
    got = got.strip().lower()
    if not _HEX.match(got) or len(got) < min_prefix:
        return CheckResult(0.0, f"{got[:50]!r} is not a commit SHA of at least {min_prefix} hex digits")
    matches = [e for e in expected if e.lower().startswith(got)]
    if matches:
        return CheckResult(1.0, f"{got[:12]} is the fixing commit")
    return CheckResult(0.0, f"{got[:12]} is not the fixing commit")
