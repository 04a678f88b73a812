"""The audit sheet: a deterministic stratified sample on one offline page, and verdicts read back into the
grader's agreement with its interval."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from core.config import DatasetConfig
from graders.review import VerdictError, agreement, read_verdicts, sample, wilson, write_sheet
from graders.stages import validations
from taskmine import flow
from warehouse.store import Store


@pytest.fixture(scope="module")
def built(sample_company, tmp_path_factory):
    from environments.sandbox import LocalSandbox

    store = Store(tmp_path_factory.mktemp("review") / "home")
    config = DatasetConfig(ner_model="")
    ctx = flow.context(store, "acme", sample_company / "acme", config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items", "tasks")
    first = store.read("tasks", "acme")[:3]
    validations(flow.context(store, "acme", sandbox=LocalSandbox(), repeats=1), only=[t.task_id for t in first])
    return store


def test_the_sample_is_stratified_and_deterministic(built):
    tasks = built.read("tasks", "acme")
    a, b = sample(tasks, 6, "acme"), sample(list(reversed(tasks)), 6, "acme")
    assert [t.task_id for t in a] == [t.task_id for t in b]
    fams = [t.family for t in a]
    assert abs(fams.count("ticket_triage") - fams.count("commit_link")) <= 1
    assert len(sample(tasks, 1000, "acme")) == len(tasks)


def test_the_sheet_is_one_offline_page_with_what_a_reviewer_needs(built, tmp_path):
    tasks = sample(built.read("tasks", "acme"), 4, "acme")
    page = write_sheet(tasks, built.read("validations", "acme"), "acme", tmp_path / "review").read_text()
    assert page.count('<section class="task"') == 4
    for t in tasks:
        assert t.task_id in page and t.rubric["checks"][0]["criterion"] in page
    assert "Download verdicts" in page and "oracle" in page
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)  # nothing loaded from anywhere
    assert json.loads((tmp_path / "review" / "sample.json").read_text())["tasks"] == [t.task_id for t in tasks]


def test_verdicts_read_back_into_agreement(built, tmp_path):
    tasks = sample(built.read("tasks", "acme"), 4, "acme")
    ids = {t.task_id for t in built.read("tasks", "acme")}

    def verdicts(name, answers):
        f = tmp_path / f"verdicts-{name}.json"
        f.write_text(json.dumps({"dataset": "acme", "reviewer": name, "verdicts": [
            {"task_id": t.task_id, "family": t.family, "verdict": a, "comment": ""} for t, a in zip(tasks, answers)]}))
        return f

    a = verdicts("ann", ["agree", "agree", "disagree", "unsure"])
    b = verdicts("bo", ["agree", "disagree", "disagree", "agree"])
    result = read_verdicts([a, b], "acme", ids)
    assert result["reviewers"] == ["ann", "bo"]
    g = result["grader"]
    assert (g["reviewed"], g["agree"], g["unsure"]) == (7, 4, 1) and g["low"] < g["rate"] < g["high"]
    assert result["between_reviewers"] == {"pairs": 3, "alike": 2, "rate": round(2 / 3, 4)}
    with pytest.raises(VerdictError, match="not 'other'"):
        read_verdicts([a], "other", ids)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dataset": "acme", "verdicts": [{"task_id": "nope"}]}))
    with pytest.raises(VerdictError, match="not in acme"):
        read_verdicts([bad], "acme", ids)


def test_wilson_interval():
    low, high = wilson(9, 10)
    assert 0.59 < low < 0.6 and 0.98 < high < 0.99
    assert wilson(0, 0) == (0.0, 1.0) and wilson(10, 10)[1] == pytest.approx(1.0)
    assert agreement([]).rate is None


def test_the_cli_writes_and_reads(built, tmp_path):
    env = {"TASKMINE_HOME": str(built.home), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", "review", "--dataset", "acme", "--n", "2", "--out",
                        str(tmp_path / "r")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "wrote" in r.stdout, r.stderr
    ids = json.loads((tmp_path / "r" / "sample.json").read_text())["tasks"]
    (tmp_path / "v.json").write_text(json.dumps({"dataset": "acme", "reviewer": "cy", "verdicts": [
        {"task_id": i, "family": "x", "verdict": "agree"} for i in ids]}))
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", "review", "--dataset", "acme", "--read",
                        str(tmp_path / "v.json")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "grader agreement 1.0" in r.stdout, r.stderr
    assert json.loads((built.home / "reports" / "acme" / "review.json").read_text())["grader"]["agree"] == 2
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", "review", "--dataset", "nope", "--out", "x"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("taskmine: error: dataset 'nope' has no tasks")


def test_a_code_task_shows_its_gold_patch_and_tests_not_an_empty_list(tmp_path):
    import datetime as dt

    from warehouse.schemas import Task

    code = {"repo": "totals", "base_commit": "a" * 40, "fix_commit": "b" * 40,
            "patch": "diff --git a/totals/core.py b/totals/core.py\n+    return sum(days)\n",
            "test_patch": "diff --git a/tests/test_core.py b/tests/test_core.py\n+    assert week([1, 2]) == 3\n",
            "FAIL_TO_PASS": ["tests/test_core.py::test_two"], "PASS_TO_PASS": ["tests/test_other.py::test_import"],
            "run": ["tests/test_core.py"]}
    t = Task(task_id="c1", dataset="d", family="code_change", item_id="i", prompt="Fix it.",
             cutoff=dt.datetime(2022, 1, 1, tzinfo=dt.UTC), world={}, world_hash="h",
             reference={"actions": [], "probes": [], "code": code},
             rubric={"checks": [{"id": "resolved", "check": "tests_resolved", "weight": 1, "criterion": "tests"}]})
    page = write_sheet([t], [], "d", tmp_path).read_text()
    ref = page.split("Reference (what the grader accepts)")[1].split("<h3>")[0]
    assert "<pre>[]</pre>" not in ref
    assert "return sum(days)" in ref and "assert week([1, 2]) == 3" in ref
    assert "tests/test_core.py::test_two" in ref and "tests/test_other.py::test_import" in ref
