"""JUnit XML: results come from the runner's report, a report that cannot be read is a grader error."""

import subprocess
import sys

import pytest

from graders import code_checks  # noqa: F401  (registers the checks)
from graders.junit import JUnitError, parse
from graders.rubric import CheckSpec, Context, Rubric, grade

TESTS = '''
import unittest

import pytest


class TestA(unittest.TestCase):
    def test_ok(self):
        assert True

    def test_bad(self):
        self.assertEqual(1, 2)

    @unittest.skip("no")
    def test_skip(self):
        pass


def test_plain():
    pass


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x == 1


def test_err(fixture_missing):
    pass
'''


def test_ids_and_outcomes_of_a_real_pytest_report(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(TESTS)
    report = tmp_path / "r.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
                    f"--junitxml={report}", "-q", "--rootdir", str(tmp_path), "tests/test_a.py"],
                   cwd=tmp_path, capture_output=True)
    rep = parse(report.read_bytes())
    assert rep.outcomes == {
        "tests/test_a.py::TestA::test_ok": "passed",
        "tests/test_a.py::TestA::test_bad": "failed",
        "tests/test_a.py::TestA::test_skip": "skipped",
        "tests/test_a.py::test_plain": "passed",
        "tests/test_a.py::test_param[1]": "passed",
        "tests/test_a.py::test_param[2]": "failed",
        "tests/test_a.py::test_err": "error",
    }
    assert rep.messages["tests/test_a.py::TestA::test_bad"] == "AssertionError: 1 != 2"


def test_a_module_that_cannot_be_imported_is_not_a_test(tmp_path):
    (tmp_path / "test_b.py").write_text("import no_such_module_here\n\ndef test_x():\n    pass\n")
    report = tmp_path / "r.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
                    f"--junitxml={report}", "-q", "--rootdir", str(tmp_path), "test_b.py"],
                   cwd=tmp_path, capture_output=True)
    rep = parse(report.read_bytes())
    assert all("::" not in t for t in rep.outcomes)      # the module's entry, no test id
    assert set(rep.outcomes.values()) == {"error"}


def test_a_test_listed_twice_keeps_its_worst_outcome():
    xml = ('<testsuite><testcase classname="m.C" name="t" file="m.py"><failure message="no"/></testcase>'
           '<testcase classname="m.C" name="t" file="m.py"/></testsuite>')
    assert parse(xml).outcomes == {"m.py::C::t": "failed"}


def test_runner_without_file_attribute():
    assert parse('<testsuites><testsuite><testcase classname="suite a" name="adds"/></testsuite></testsuites>'
                 ).outcomes == {"suite a::adds": "passed"}


@pytest.mark.parametrize("data", [
    b"", b"   ", b"<testsuite><testcase name='x'>", b"not xml at all", b"<html><body/></html>",
    b'<?xml version="1.0"?><!DOCTYPE lol [<!ENTITY a "aaaa">]><testsuite>&a;</testsuite>',
    b'<testsuite><testcase classname="" name=""/></testsuite>',
], ids=["empty", "blank", "truncated", "text", "html", "entities", "nameless"])
def test_a_broken_report_is_an_error(data):
    with pytest.raises(JUnitError):
        parse(data)


RUBRIC = Rubric(checks=[
    CheckSpec(id="resolved", check="tests_resolved", weight=1, args={"fail_to_pass": ["a::t1", "a::t2"],
                                                                     "pass_to_pass": ["a::t3"]}),
    CheckSpec(id="fraction", check="tests_fraction", weight=1, args={"fail_to_pass": ["a::t1", "a::t2"],
                                                                     "pass_to_pass": ["a::t3"]})])


def verifier(**outcomes):
    return Context(extra={"verifier": {"ran": True, "error": "", "outcomes": outcomes}})


def test_grades_all_or_nothing_and_the_fraction():
    assert grade(RUBRIC, [], verifier(**{"a::t1": "passed", "a::t2": "passed", "a::t3": "passed"})).score == 1.0
    half = grade(RUBRIC, [], verifier(**{"a::t1": "passed", "a::t2": "failed", "a::t3": "passed"}))
    assert [c["score"] for c in half.checks] == [0.0, 0.5] and half.score == 0.25
    broke = grade(RUBRIC, [], verifier(**{"a::t1": "passed", "a::t2": "passed", "a::t3": "failed"}))
    assert [c["score"] for c in broke.checks] == [0.0, 0.0]
    assert grade(RUBRIC, [], verifier(**{"a::t3": "passed"})).score == 0.0        # missing = not passed


def test_an_unreadable_report_or_no_verifier_is_a_grader_error_never_a_score():
    bad = Context(extra={"verifier": {"ran": True, "error": "the test report is not well-formed XML", "outcomes": {}}})
    for ctx in (bad, Context()):
        g = grade(RUBRIC, [], ctx)
        assert g.score is None and g.error_class == "grader_error"


def test_an_agent_that_wrecked_the_session_scores_zero():
    ctx = Context(extra={"verifier": {"ran": False, "error": "", "failed_setup": "disk full", "outcomes": {}}})
    g = grade(RUBRIC, [], ctx)
    assert g.score == 0.0 and g.error_class is None
