"""Pieces of the lab surfaces that need no pipeline run (the end-to-end tests run them whole): the tools each family
is served, Harbor's task.toml and the verifier's one-commit repository of a code task's test files."""

from __future__ import annotations

import datetime as dt
import subprocess
import tomllib

import pytest

from environments import actions as A
from graders.verifier import blobs, executable
from task_builders.families import served_tools
from taskmine import harbor
from warehouse.schemas import Task


def test_each_family_is_served_the_tools_it_uses():
    reads = {t.name() for t in A.READS}
    assert served_tools("ticket_triage", {}) == reads | {"jira_update"}
    assert served_tools("code_change", {}) == reads | {"git", "shell", "read_file", "list_files", "write_file"}
    assert served_tools("commit_link", {}) == reads | {"git", "shell", "read_file", "list_files", "answer"}
    assert served_tools("chat_answer", {}, [{"tool": "slack_post"}, {"tool": "jira_comment"}]) == \
        reads | {"slack_post", "jira_comment"}                      # a reference's tools are always served
    assert served_tools("email_reply", {"tools": ["answer"]}) == {"answer"}   # a task's own list wins
    assert served_tools("no_such_family", {}) is None                         # unknown: every tool


def test_harbor_task_toml_is_what_harbor_reads():
    task = Task(task_id="ab" * 16, dataset="acme", family="code_change", item_id="", prompt="Fix it.",
                cutoff=dt.datetime(2021, 3, 10, tzinfo=dt.UTC), world={"cutoff": "2021-03-10T00:00:00+00:00"},
                world_hash="x", reference={}, rubric={}, split="test", canary="CANARY-1")
    cfg = tomllib.loads(harbor._toml(task, 420.0, "easy"))
    assert cfg["version"] == "1.0" and cfg["verifier"] == {"timeout_sec": 420.0, "user": "root"}
    assert cfg["agent"]["timeout_sec"] > 0 and "user" not in cfg["agent"]      # the image's user, as Harbor runs
    assert cfg["environment"]["allow_internet"] is False
    assert cfg["environment"]["healthcheck"]["command"] == harbor.HEALTH
    assert cfg["metadata"]["canary"] == "CANARY-1" and cfg["metadata"]["taskmine_task_id"] == task.task_id
    assert harbor.folder_name(task) == "code-change-" + "ab" * 6


def test_the_verifiers_repository_holds_only_the_fixs_test_files(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(src), *a], check=True, capture_output=True,  # noqa: E731
                                    text=True).stdout.strip()
    run("init", "-q")
    (src / "pkg" / "deep").mkdir(parents=True)
    (src / "pkg" / "code.py").write_text("SECRET_FIX = 1\n")
    (src / "pkg" / "deep" / "test_code.py").write_text("def test_it():\n    assert True\n")
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    (src / "pytest.ini").write_text("[pytest]\n")
    run("add", "-A")
    run("-c", "user.name=A", "-c", "user.email=a@example.invalid", "commit", "-qm", "fix")
    fix = run("rev-parse", "HEAD")
    wanted = ["pkg/deep/test_code.py", "run.sh", "pytest.ini", "tests/deleted_by_the_fix.py"]
    sha = harbor._fix_repository(src, fix, wanted, tmp_path / "fix.git")
    got = blobs(tmp_path / "fix.git", sha, wanted)
    assert got == blobs(src, fix, wanted) and got["tests/deleted_by_the_fix.py"] is None
    assert executable(tmp_path / "fix.git", sha, ["run.sh", "pytest.ini"]) == {"run.sh"}
    listed = subprocess.run(["git", f"--git-dir={tmp_path / 'fix.git'}", "ls-tree", "-r", "--name-only", sha],
                            capture_output=True, text=True, check=True).stdout.split()
    assert sorted(listed) == sorted(wanted[:3])            # nothing else of the fix (no SECRET_FIX)


@pytest.mark.parametrize("name", ["submit", "jira_update"])
def test_openenv_actions_are_a_tool_name_and_its_arguments(name):
    pytest.importorskip("openenv")
    from taskmine.openenv_server import ToolCall

    call = ToolCall(tool=name, arguments={"key": "CORE-1"})
    assert call.tool == name and ToolCall.model_json_schema()["required"] == ["tool"]
    with pytest.raises(ValueError):
        ToolCall(tool=name, nonsense=1)
