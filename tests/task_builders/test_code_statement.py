"""The problem statement of a code change without a ticket: written from its failing tests (a model when one is
configured, a template otherwise), never from the patch, and rejected when it repeats a line of the patch."""

import json
import types

from llm.client import LLM
from task_builders.families.code_change import Candidate, CodeChange, _evidence, _template, patch_leaks
from warehouse.schemas import WorkItem

PATCH = """diff --git a/calc/ops.py b/calc/ops.py
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -5,4 +5,6 @@ def add(a, b):
 def mean(values):
+    if not values:
+        return 0.0
     return sum(values) / len(values)
"""
F2P = ["tests/test_ops.py::TestOps::test_mean_of_nothing_is_zero"]
MESSAGES = {F2P[0]: "ZeroDivisionError: division by zero"}
SOURCES = {F2P[0]: "def test_mean_of_nothing_is_zero(self):\n    self.assertEqual(mean([]), 0.0)\n"}


def candidate():
    item = WorkItem(item_id="i", dataset="d", kind="fix_commit", thread_key="commit:abc", request_event_id="e",
                    ts="2021-03-03T10:00:00+00:00")
    return Candidate("repo", "p" * 40, "f" * 40, item)


def statement(llm):
    ctx = types.SimpleNamespace(llm=llm)
    return CodeChange()._statement(ctx, candidate(), F2P, MESSAGES, SOURCES, PATCH)


def test_patch_leaks_finds_the_lines_a_statement_repeats():
    assert patch_leaks("Calling mean([]) raises ZeroDivisionError; expected 0.0.", PATCH) == []
    assert patch_leaks("Maybe add `if not values:` at the top?", PATCH) == ["if not values:"]
    assert patch_leaks("it should return 0.0", PATCH) == []          # too short a line to be the fix


def test_without_a_model_the_template_shows_the_tests_and_how_they_fail():
    text, source, note = statement(LLM())
    assert source == "template" and note == ""
    assert F2P[0] in text and "ZeroDivisionError: division by zero" in text and "assertEqual(mean([]), 0.0)" in text
    assert patch_leaks(text, PATCH) == []


def test_a_model_writes_it_from_the_tests_only(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: it is sent the failing tests and their messages, never the patch."""
    from standin import json_reply

    llm_standin.script(json_reply({"statement": "mean([]) raises ZeroDivisionError instead of returning 0.0."}))
    text, source, _ = statement(LLM(llm_standin.config(tmp_path)))
    assert (text, source) == ("mean([]) raises ZeroDivisionError instead of returning 0.0.", "llm")
    sent = json.dumps(llm_standin.requests[0].body)
    assert "assertEqual(mean([]), 0.0)" in sent and "ZeroDivisionError" in sent
    assert "if not values" not in sent and "sum(values)" not in sent


def test_a_model_statement_that_repeats_the_fix_falls_back_to_the_template(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that gives the fix away."""
    from standin import json_reply

    llm_standin.script(json_reply({"statement": "Fix it with:\n    if not values:\n        return 0.0"}))
    text, source, note = statement(LLM(llm_standin.config(tmp_path)))
    assert source == "template" and "repeated a line" in note and text == _template(text.split(":\n\n", 1)[1])
    assert patch_leaks(text, PATCH) == []


def test_a_statement_holds_nothing_the_measuring_process_drew():
    """A failure message names objects by address and temp folders by a random name, new in every run: the
    statement written from it must be the same in every run (its task id hashes it; issues 20, 21)."""
    def message(addr: str, tmp: str) -> dict[str, str]:
        return {F2P[0]: f"assert 28 == 29\n +  where 28 = <function column_cents at {addr}>(0.29) "
                        f"<Cache object at {addr}> in {tmp}/data.csv"}
    one = _evidence(F2P, message("0x7f9788b74680", "/tmp/pytest-of-agent/pytest-3"), SOURCES)
    other = _evidence(F2P, message("0x7f2201ac5e10", "/tmp/pytest-of-agent/pytest-12"), SOURCES)
    assert one == other and "0x7f" not in one and "pytest-3" not in one
    assert "assert 28 == 29" in one and "column_cents" in one and "data.csv" in one
    assert _evidence(F2P, message("0x7f9788b74680", "/tmp/tmpa1b2c3d4"), SOURCES) == _evidence(
        F2P, message("0x7f9788b74681", "/tmp/tmpzz99yy88"), SOURCES)
