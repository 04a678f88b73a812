"""The published version as labs load it: a Hugging Face dataset folder (card configs and splits, read with the
`datasets` package), the agent view apart from the grader view (no reference string in any agent file), one-call
grading, oracle trajectories, and code tasks that SWE-bench's own loaders accept. A small invented company:
one issue with a comment before the cutoff and one after, a repository with a fix."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from graders.rubric import CheckSpec, Rubric
from privacy.audit import Rules
from publishing import publish as P
from publishing.loader import load_dataset
from warehouse.ids import event_id
from warehouse.schemas import Event, Task

UTC = dt.UTC
CUT = dt.datetime(2022, 5, 10, 12, tzinfo=UTC)
CANARY = "TASKMINE CANARY test-split 00000000-0000-4000-8000-000000000000"


def at(day: int) -> dt.datetime:
    return dt.datetime(2022, 5, day, 9, tzinfo=UTC)


def ev(kind, native, ts, **kw) -> Event:
    return Event(event_id=event_id("d", "jira", native), dataset="d", source="jira", kind=kind, native_id=native,
                 ts=ts, thread_key="CORE-7", **kw)


def events() -> list[Event]:
    issue = ev("issue_created", "CORE-7", at(1), actor_name="Kira Valdt", title="Totals are off by one",
               body="The weekly totals skip the last day.",
               attrs={"project": "CORE", "issuetype": "Bug", "priority": "Major", "components": ["reports"]})
    return [issue,
            ev("comment", "CORE-7#comment-1", at(2), parent_id=issue.event_id, actor_name="Oren Pask",
               body="Reproduced with the demo data; the range looks exclusive."),
            ev("comment", "CORE-7#comment-2", at(12), parent_id=issue.event_id, actor_name="Oren Pask",
               body="Solved upstream by making the upper bound inclusive.")]


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "Dev",
                               "GIT_AUTHOR_EMAIL": "dev@corp.example", "GIT_COMMITTER_NAME": "Dev",
                               "GIT_COMMITTER_EMAIL": "dev@corp.example",
                               **(env or {})}).stdout


def make_repo(root: Path) -> dict[str, str]:
    """A bare world repository 'totals': a package, its test, then a fix of the code and the test."""
    work = root / "work"
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    (work / "totals").mkdir()
    (work / "totals" / "__init__.py").write_text("from totals.core import week\n")
    (work / "totals" / "core.py").write_text("def week(days):\n    return sum(days[0:len(days) - 1])\n")
    (work / "tests").mkdir()
    (work / "tests" / "test_core.py").write_text("from totals import week\n\n\ndef test_two():\n"
                                                 "    assert week([1]) == 0\n")
    (work / "tests" / "test_other.py").write_text("import totals\n\n\ndef test_import():\n    assert totals.week\n")
    (work / "setup.cfg").write_text("[metadata]\nname = totals\nversion = 1.4.2\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "start", env={"GIT_AUTHOR_DATE": at(1).isoformat(),
                                             "GIT_COMMITTER_DATE": at(1).isoformat()})
    base = git(work, "rev-parse", "HEAD").strip()
    (work / "totals" / "core.py").write_text("def week(days):\n    return sum(days[0:len(days)])\n")
    (work / "tests" / "test_core.py").write_text("from totals import week\n\n\ndef test_two():\n"
                                                 "    assert week([1, 2]) == 3\n")
    git(work, "commit", "-qam", "inclusive upper bound", env={"GIT_AUTHOR_DATE": at(10).isoformat(),
                                                              "GIT_COMMITTER_DATE": at(10).isoformat()})
    fix = git(work, "rev-parse", "HEAD").strip()
    patch = git(work, "diff", "--full-index", base, fix, "--", "totals/core.py")
    test_patch = git(work, "diff", "--full-index", base, fix, "--", "tests/test_core.py")
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(root / "git" / "totals.git")], check=True)
    return {"base": base, "fix": fix, "patch": patch, "test_patch": test_patch}


def _env() -> dict:
    from environments.codeenv import EnvSpec

    return EnvSpec("python").to_json()          # no dependency: its image needs no network


ENV = _env()


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    from environments.world import build_world

    root = tmp_path_factory.mktemp("layout")
    world_root = root / "worlds" / "d"
    build_world(events(), world_root / "world.sqlite", "k1")
    r = make_repo(world_root)
    (world_root / "world.json").write_text(json.dumps({"key": "k1", "repos": {}}))
    triage = Task(
        task_id="t-triage", dataset="d", family="ticket_triage", item_id="i1", prompt="Triage CORE-7.", cutoff=at(1),
        world={"cutoff": at(1).isoformat(), "hidden": [], "tools": None, "persona": None},
        world_hash="h1", split="train",
        reference={"actions": [{"tool": "jira_update", "key": "CORE-7", "priority": "Blocker-Zebra"}],
                   "probes": [{"name": "as_filed", "max": 0.75, "actions": [
                       {"tool": "jira_update", "key": "CORE-7", "priority": "Major"}]}]},
        rubric=Rubric(checks=[CheckSpec(id="priority", check="field_equals", weight=1, criterion="the priority",
                                        args={"key": "CORE-7", "field": "priority",
                                              "expected": "Blocker-Zebra"})]).model_dump(mode="json"))
    reply = Task(
        task_id="t-reply", dataset="d", family="email_reply", item_id="i2", prompt="Answer Kira.", cutoff=at(2),
        world={"cutoff": at(2).isoformat(), "hidden": [events()[2].event_id],
               "requester": {"name": "Kira Valdt", "medium": "ticket", "target": "CORE-7",
                             "forbidden": "Solved upstream by making the upper bound inclusive.",
                             "messages": ["The weekly totals skip the last day."]}},
        world_hash="h2", split="test", canary=CANARY,
        reference={"actions": [{"tool": "jira_comment", "key": "CORE-7",
                                "body": "Solved upstream by making the upper bound inclusive."}], "probes": []},
        rubric=Rubric(checks=[CheckSpec(id="done", check="field_equals", weight=1, criterion="x",
                                        args={"key": "CORE-7", "field": "priority", "expected": "Never"})]
                      ).model_dump(mode="json"))
    code = {"repo": "totals", "base_commit": r["base"], "fix_commit": r["fix"], "patch": r["patch"],
            "test_patch": r["test_patch"], "run": ["tests/test_core.py", "tests/test_other.py"],
            "restore": ["tests/test_core.py", "tests/test_other.py"],
            "FAIL_TO_PASS": ["tests/test_core.py::test_two"], "PASS_TO_PASS": ["tests/test_other.py::test_import"],
            "problem_statement": "Issue CORE-7: Totals are off by one", "created_at": at(10).isoformat(),
            "tickets": ["CORE-7"]}
    change = Task(
        task_id="t-code", dataset="d", family="code_change", item_id="i3", prompt="Fix CORE-7 in ~/totals.",
        cutoff=at(10) - dt.timedelta(seconds=1),
        world={"cutoff": (at(10) - dt.timedelta(seconds=1)).isoformat(), "hidden": [],
               "git": {"repos": ["totals"], "refs": {"totals": {"refs/heads/main": r["base"]}}},
               "env": ENV},
        world_hash="h3", split="test", canary=CANARY, reference={"actions": [], "probes": [], "code": code},
        rubric=Rubric(checks=[CheckSpec(id="resolved", check="tests_resolved", weight=1, criterion="tests",
                                        args={"fail_to_pass": code["FAIL_TO_PASS"],
                                              "pass_to_pass": code["PASS_TO_PASS"]})]).model_dump(mode="json"))
    easy = {**P.UNMEASURED, "baseline_solved": True, "baseline_scores": '{"nearest_issue": 1.0}', "difficulty": "easy"}
    pub = P.publish([triage, reply, change], world_root, root / "pub", "d", funnel={"events": 3},
                    validation={}, rules=Rules([], patterns=False), difficulty={"t-reply": easy},
                    provenance=[P.Provenance("jira", 3, "2022-05-01", "2022-05-12", "CC-BY-4.0")], license="MIT",
                    remotes={"totals": "https://forge.example/acme-labs/totals.git"})
    return {"pub": pub, "code": code, "tasks": [triage, reply, change], "root": root}


def test_card_declares_configs_and_datasets_loads_each_split(published, tmp_path):
    datasets = pytest.importorskip("datasets")
    path = str(published["pub"].path)
    card = (published["pub"].path / "README.md").read_text()
    assert card.startswith("---\n") and "license: MIT" in card and CANARY in card
    assert "| jira | 3 | 2022-05-01 | 2022-05-12 | CC-BY-4.0 |" in card
    ids = {}
    for name in ("all", "ticket_triage", "code_change", "easy", "grading", "trajectories", "swebench"):
        d = datasets.load_dataset(path, name, cache_dir=str(tmp_path / "hf"))
        ids[name] = {s: sorted(d[s]["task_id"]) for s in d}
    assert ids["all"] == {"train": ["t-triage"], "test": ["t-code"]}       # the easy task is not in the default
    assert ids["easy"] == {"test": ["t-reply"]}                             # a split without a task is left out
    assert "config_name: email_reply" not in card          # its one task is easy: no split, no config
    assert ids["ticket_triage"] == {"train": ["t-triage"]}
    assert ids["grading"] == {"train": ["t-triage"], "test": ["t-code", "t-reply"]}
    assert ids["swebench"] == {"test": ["t-code"]}
    assert datasets.load_dataset(path, cache_dir=str(tmp_path / "hf"))["train"]["task_id"] == ["t-triage"]


def test_the_agent_view_holds_no_reference_string(published):
    """Every string of every reference (actions, probes, the code's patch, tests and test sets), every hidden event
    id and the requester's script: none is anywhere in an agent file."""
    pub = published["pub"].path
    agent = "\n".join(json.dumps(pq.read_table(f).to_pylist(), default=str) for f in sorted(pub.glob("tasks/*/*")))
    secrets = set()

    def strings(v):
        if isinstance(v, str):
            yield v
        elif isinstance(v, list):
            for x in v:
                yield from strings(x)
        elif isinstance(v, dict):        # a call's tool and a probe's name are no answer (the agent has the tools)
            for k, x in v.items():
                if k not in ("tool", "name"):
                    yield from strings(x)

    for t in published["tasks"]:
        ref = dict(t.reference)
        code = ref.pop("code", {}) or {}
        secrets |= {s for s in strings(ref) if len(s) > 6}
        secrets |= {s for k, v in code.items() for s in strings(v)
                    if k in ("patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS", "fix_commit")}
        secrets |= set(t.world.get("hidden") or [])
        secrets |= {s for k, v in (t.world.get("requester") or {}).items() if k in ("forbidden", "messages")
                    for s in strings(v)}
    assert "Blocker-Zebra" in secrets and published["code"]["patch"] in secrets and len(secrets) > 8
    leaked = [s[:40] for s in secrets if json.dumps(s)[1:-1] in agent or s in agent]
    assert leaked == []
    # not even the fix's SHA prefix (SWE-bench's instance_id once carried it: it answers a commit_link task)
    assert published["code"]["fix_commit"][:7] not in agent
    # ... while the grader view has every one of them
    grading = "\n".join(json.dumps(pq.read_table(f).to_pylist(), default=str) for f in pub.glob("grading/*"))
    assert all(json.dumps(s)[1:-1] in grading for s in secrets)


def test_a_tool_task_is_graded_in_one_call(published):
    ds = load_dataset(published["pub"].path)
    tools = ds.tools("t-triage")
    tools.call("jira_update", {"key": "CORE-7", "priority": "Blocker-Zebra"})
    assert ds.grade("t-triage", tools.actions).score == 1.0
    assert ds.grade("t-triage", [{"tool": "jira_update", "key": "CORE-7", "priority": "Major"}]).score == 0.0
    assert ds.grade("t-triage", []).score == 0.0
    with pytest.raises(ValueError, match="verifier"):
        ds.grade("t-code", [])
    # the environment side: hidden events and the requester come from the grader view, joined by name
    assert ds.world("t-reply")["hidden"] and ds.world("t-reply")["requester"]["forbidden"]
    assert "forbidden" not in ds.task("t-reply")["world_manifest"]["requester"]
    assert "comment-2" not in ds.tools("t-reply").call("jira_show", {"key": "CORE-7"}).text


def test_trajectories_are_tool_calling_chats_with_real_results(published, tmp_path):
    datasets = pytest.importorskip("datasets")
    d = datasets.load_dataset(str(published["pub"].path), "trajectories", cache_dir=str(tmp_path / "hf"))
    rows = {r["task_id"]: r for s in d for r in d[s]}
    assert set(rows) == {"t-triage", "t-reply", "t-code"}
    msgs = rows["t-triage"]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    call = msgs[2]["tool_calls"][0]
    assert call["function"]["name"] == "jira_update" and json.loads(call["function"]["arguments"])["priority"] == \
        "Blocker-Zebra"
    assert msgs[3]["tool_call_id"] == call["id"] and "CORE-7" in msgs[3]["content"]
    assert {t["function"]["name"] for t in json.loads(rows["t-triage"]["tools"])} >= {"jira_update", "jira_show"}
    assert CANARY in rows["t-reply"]["messages"][0]["content"]          # test rows carry the canary
    code = rows["t-code"]["messages"]
    assert [m["tool_calls"][0]["function"]["name"] for m in code if m["role"] == "assistant" and m["tool_calls"]] \
        == ["shell", "git"]
    stat = [m["content"] for m in code if m["role"] == "tool"][1]
    assert "totals/core.py" in stat and "1 file changed" in stat and "[exit 0]" in stat
    ds = load_dataset(published["pub"].path)
    assert ds.trajectory("t-code")["steps"] == 2


def test_swebench_loaders_accept_the_code_tasks(published):
    pytest.importorskip("swebench")
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import load_swebench_dataset, make_test_spec

    pub = published["pub"].path
    (inst,) = load_swebench_dataset(str(pub / "swebench"), "test")
    assert inst["repo"] == "acme-labs/totals" and inst["version"] == f"1.4.2+env.{ENV['key'][:12]}"
    assert inst["environment_setup_commit"] == published["code"]["base_commit"]
    assert "Reproduced with the demo data" in inst["hints_text"] and "upstream" not in inst["hints_text"]
    spec = make_test_spec(inst)
    assert spec.FAIL_TO_PASS == ["tests/test_core.py::test_two"] and spec.image.startswith("taskmine-swe:")
    script = spec.eval_script
    assert "-rA" in script and "tests/test_other.py" in script and "git apply" in script
    # SWE-bench's grading reads a log of the eval script: the gold run resolves, a failing one does not
    for outcome, resolved in (("PASSED", True), ("FAILED", False)):
        log = published["root"] / f"log-{outcome}.txt"
        log.write_text(f"+ : '>>>>> Start Test Output'\n{outcome} tests/test_core.py::test_two\n"
                       "PASSED tests/test_other.py::test_import\n+ : '>>>>> End Test Output'\n")
        report = get_eval_report(spec, {"instance_id": inst["instance_id"], "model_patch": inst["patch"],
                                        "model_name_or_path": "gold"}, str(log), include_tests_status=True)
        assert report[inst["instance_id"]]["resolved"] is resolved


def test_the_cards_duckdb_command_runs_without_a_duckdb_cli(published):
    import shlex
    import sys

    card = (published["pub"].path / "README.md").read_text()
    (command,) = re.findall(r"`(uv run python -c .+?)`", card)
    argv = shlex.split(command)
    r = subprocess.run([sys.executable, *argv[3:]], cwd=published["pub"].path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "ticket_triage" in r.stdout and "code_change" in r.stdout


@pytest.mark.docker
def test_swebench_harness_runs_an_instance_in_docker(published, docker_sandbox, tmp_path, monkeypatch):
    """SWE-bench's own `run_instance` on the instance image the loader builds (no registry: the image is local):
    the gold patch resolves the task, a patch that changes nothing the tests see does not."""
    pytest.importorskip("swebench")
    import docker
    from swebench.harness.run_evaluation import run_instance
    from swebench.harness.utils import make_test_spec

    from environments.codeenv import prune_env_images

    ds = load_dataset(published["pub"].path)
    image = ds.swebench_image("t-code", sandbox=docker_sandbox, cache=tmp_path / "envs")
    monkeypatch.chdir(tmp_path)                    # the harness writes logs/run_evaluation/ under the cwd
    client = docker.from_env()
    try:
        (inst,) = ds.swebench("test")
        spec = make_test_spec(inst)
        results = {}
        wrong = ("diff --git a/NOTES.txt b/NOTES.txt\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.txt\n"
                 "@@ -0,0 +1 @@\n+nothing fixed\n")
        for name, patch in (("gold", inst["patch"]), ("wrong", wrong), ("empty", "")):
            out = run_instance(spec, {"instance_id": inst["instance_id"], "model_patch": patch,
                                      "model_name_or_path": name}, client, f"taskmine-{name}", timeout=600)
            results[name] = out[1][inst["instance_id"]]["resolved"] if out else None
        # an empty prediction does not apply: the harness reports no result for it (never resolved)
        assert results == {"gold": True, "wrong": False, "empty": None}, results
    finally:
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True)
        prune_env_images(docker_sandbox.image_labels["taskmine.home"], set())


def test_a_code_task_is_graded_by_its_verifier_in_one_call(published, tmp_path):
    """`ds.verify(task_id, patch)`: the patch applied in an episode, the fix's tests restored and run (local
    sandbox here; Docker in the pipeline)."""
    from environments.sandbox import LocalSandbox

    ds = load_dataset(published["pub"].path)
    gold = ds.verify("t-code", published["code"]["patch"], sandbox=LocalSandbox(), cache=tmp_path / "w")
    assert gold.score == 1.0, (gold.message, gold.checks)
    none = ds.verify("t-code", "", sandbox=LocalSandbox(), cache=tmp_path / "w")
    assert none.score == 0.0, (none.message, none.checks)
