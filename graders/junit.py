"""Test results from the test runner's own report (JUnit XML), never from what it printed.

A report maps each test id to one outcome: `passed`, `failed`, `error` or `skipped`. Ids are pytest node ids
(`tests/test_more.py::ChunkedTests::test_even`), built from the `file` attribute pytest writes with
`junit_family=xunit1` and the class part of `classname`; a report without `file` (another runner, jest-junit)
uses `classname::name`.

Invariants:
- A report that is not well-formed JUnit XML (truncated, not XML, no <testsuite>, a DOCTYPE or entity
  declaration, larger than MAX_BYTES) raises `JUnitError`: the grader could not read a result, which is a
  grader error, never a score of 0 or 1.
- A test listed twice keeps its worst outcome (error > failed > skipped > passed), so a rerun plug-in or a
  forged duplicate entry never turns a failure into a pass.
- Collection errors (pytest reports a module that cannot be imported as one <testcase> named after the
  module, with an <error>) are kept under their own id; the tests of that module are then simply missing,
  and a caller counts a missing test as not passed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

MAX_BYTES = 32 << 20
RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
MESSAGE_LIMIT = 2000


class JUnitError(ValueError):
    """The report cannot be read (see the module docstring)."""


@dataclass
class Report:
    outcomes: dict[str, str] = field(default_factory=dict)   # test id -> passed | failed | error | skipped
    messages: dict[str, str] = field(default_factory=dict)   # test id -> failure/error message (bounded)
    details: dict[str, str] = field(default_factory=dict)    # test id -> failure text (bounded)

    def passed(self, test_id: str) -> bool:
        return self.outcomes.get(test_id) == "passed"


def _test_id(case: ET.Element) -> str:
    name = case.get("name") or ""
    classname = case.get("classname") or ""
    file = case.get("file")
    if not classname:       # a module-level entry (pytest's collection error): the module, not a test
        return file or name
    if file:
        module = file[:-3].replace("/", ".") if file.endswith(".py") else file.replace("/", ".")
        cls = classname[len(module):].lstrip(".") if classname.startswith(module) else ""
        return "::".join(p for p in (file, cls, name) if p)
    return f"{classname}::{name}" if classname else name


def parse(data: bytes | str) -> Report:
    """The outcomes of a JUnit XML report (see the module docstring); JUnitError when it cannot be read."""
    raw = data.encode() if isinstance(data, str) else data
    if not raw.strip():
        raise JUnitError("the test report is empty (the runner did not write it)")
    if len(raw) > MAX_BYTES:
        raise JUnitError(f"the test report is larger than {MAX_BYTES >> 20} MB")
    head = raw[:4096].upper()
    if b"<!DOCTYPE" in head or b"<!ENTITY" in raw.upper():
        raise JUnitError("the test report declares a DOCTYPE or entities; a test runner never writes those")
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as exc:
        raise JUnitError(f"the test report is not well-formed XML ({exc})") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise JUnitError(f"the test report's root is <{root.tag[:40]}>, not <testsuites> or <testsuite>")
    report = Report()
    for case in root.iter("testcase"):
        tid = _test_id(case)
        if not tid:
            raise JUnitError("a <testcase> of the report has no name")
        outcome, message, detail = "passed", "", ""
        for child in case:
            kind = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(child.tag)
            if kind and RANK[kind] > RANK[outcome]:
                outcome = kind
                message = (child.get("message") or "")[:MESSAGE_LIMIT]
                detail = (child.text or "")[:MESSAGE_LIMIT * 4]
        old = report.outcomes.get(tid)
        if old is None or RANK[outcome] > RANK[old]:
            report.outcomes[tid] = outcome
            if message or detail:
                report.messages[tid] = message
                report.details[tid] = detail
    return report
