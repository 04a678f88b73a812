"""The in-container `company` tool, run as a subprocess (as the agent runs it) against a temp world."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "environments" / "company_tool.py"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    world = tmp_path / "world"
    (world / "jira").mkdir(parents=True)
    (world / "repo" / ".git").mkdir(parents=True)
    (world / "issue.json").write_text(
        json.dumps(
            {
                "key": "PROJ-7",
                "summary": "Login times out",
                "priority": {"name": "Major"},
                "description": "After 30 s the login page\nshows an error.",
                "comments": [{"author": "Ann", "created": "2020-01-02", "body": "Seen on staging too."}],
            }
        )
    )
    (world / "jira" / "PROJ-3.json").write_text(json.dumps({"key": "PROJ-3", "summary": "Older login bug"}))
    (world / "repo" / "auth.py").write_text("def login():\n    TIMEOUT = 30  # Login timeout\n")
    (world / "repo" / ".git" / "COMMIT_EDITMSG").write_text("login timeout fix\n")
    (world / "blob.bin").write_bytes(b"login\0timeout")
    (tmp_path / "outside.txt").write_text("secret login\n")
    (world / "escape").symlink_to(tmp_path / "outside.txt")
    return {
        "TASKMINE_WORLD": str(world),
        "TASKMINE_OUTBOX": str(tmp_path / "outbox.jsonl"),
        "PATH": "/usr/bin:/bin",
    }


def company(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def outbox(env: dict[str, str]) -> list[dict]:
    path = Path(env["TASKMINE_OUTBOX"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_help_lists_commands_with_examples(env):
    r = company(env, "--help")
    assert r.returncode == 0
    for text in ("search QUERY", "jira update", "answer --sha", "mail send", "slack post", "examples:"):
        assert text in r.stdout


def test_search_is_case_insensitive_and_skips_binary_git_and_symlinks(env):
    r = company(env, "search", "LOGIN TIMEOUT")
    assert r.returncode == 0
    assert r.stdout.splitlines() == ["repo/auth.py:2: TIMEOUT = 30  # Login timeout"]


def test_search_path_and_no_match(env):
    assert company(env, "search", "login", "--path", "jira").stdout.startswith("jira/PROJ-3.json:1:")
    r = company(env, "search", "no such words")
    assert r.returncode == 1 and r.stdout == "" and "no matches" in r.stderr


def test_search_is_bounded(env):
    r = company(env, "search", "o", "--max", "1")
    assert len(r.stdout.splitlines()) == 1 and "more than 1 matches" in r.stderr


def test_read_file_directory_and_refusals(env):
    assert company(env, "read", "repo/auth.py").stdout.startswith("def login():")
    assert company(env, "read", "/world/repo/auth.py").stdout.startswith("def login():")
    assert company(env, "read", ".").stdout.splitlines() == [
        "blob.bin",
        "escape",
        "issue.json",
        "jira/",
        "repo/",
    ]
    for path, message in (
        ("../outside.txt", "outside the world"),
        ("escape", "outside the world"),
        ("nope.txt", "no such file"),
        ("blob.bin", "binary file"),
    ):
        r = company(env, "read", path)
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.splitlines()) == 1


def test_jira_show(env):
    r = company(env, "jira", "show")
    assert r.returncode == 0
    assert r.stdout.startswith("PROJ-7: Login times out\n")
    assert (
        "priority: Major" in r.stdout and "shows an error." in r.stdout and "Seen on staging too." in r.stdout
    )
    assert company(env, "jira", "show", "proj-3").stdout.startswith("PROJ-3: Older login bug")
    assert json.loads(company(env, "jira", "show", "PROJ-7", "--json").stdout)["key"] == "PROJ-7"
    r = company(env, "jira", "show", "PROJ-99")
    assert r.returncode == 2 and "no issue PROJ-99" in r.stderr
    assert company(env, "jira", "show", "../etc").returncode == 2


def test_actions_append_numbered_entries(env):
    steps = [
        (
            "jira",
            "update",
            "--type",
            "Bug",
            "--priority",
            "Major",
            "--component",
            "UI",
            "--component",
            "API",
            "--assignee",
            "Ann Lee",
            "--duplicate-of",
            "proj-3",
        ),
        ("answer", "--sha", "3F2A9C1"),
        ("answer", "--text", "Restart the worker."),
        (
            "mail",
            "send",
            "--to",
            "bob@example.com,carol@example.com",
            "--subject",
            "Re: invoice",
            "--body",
            "Paid.",
        ),
        ("slack", "post", "--channel", "#general", "--text", "Deployed."),
    ]
    for step in steps:
        r = company(env, *step)
        assert r.returncode == 0, r.stderr
    entries = outbox(env)
    assert [e["seq"] for e in entries] == [1, 2, 3, 4, 5]
    assert entries[0] == {
        "seq": 1,
        "action": "jira.update",
        "fields": {
            "type": "Bug",
            "priority": "Major",
            "components": ["API", "UI"],
            "assignee": "Ann Lee",
            "duplicate_of": "PROJ-3",
        },
    }
    assert entries[1] == {"seq": 2, "action": "answer", "sha": "3f2a9c1"}
    assert entries[2] == {"seq": 3, "action": "answer", "text": "Restart the worker."}
    assert entries[3]["to"] == ["bob@example.com", "carol@example.com"] and entries[3]["in_reply_to"] is None
    assert entries[4] == {
        "seq": 5,
        "action": "slack.post",
        "channel": "general",
        "text": "Deployed.",
        "thread_ts": None,
    }


def test_text_from_stdin(env):
    assert company(env, "answer", "--text", "-", stdin="long\nanswer\n").returncode == 0
    assert outbox(env)[0]["text"] == "long\nanswer"


@pytest.mark.parametrize(
    "args, message",
    [
        (("answer",), "one of the arguments --sha --text is required"),
        (("answer", "--sha", "xyz"), "not a commit SHA"),
        (("answer", "--sha", "abc1", "--text", "t"), "not allowed with"),
        (("answer", "--text", "  "), "--text is empty"),
        (("jira", "update"), "give at least one of"),
        (("jira", "update", "--duplicate-of", "nokey"), "not an issue key"),
        (("jira", "update", "--type", "a\nb"), "must be one line"),
        (("mail", "send", "--to", "bob", "--subject", "s", "--body", "b"), "not an e-mail address"),
        (("slack", "post", "--channel", "c"), "--text"),
        (("frobnicate",), "invalid choice"),
        (("jira",), "required"),
    ],
)
def test_bad_use_is_one_line_exit_2_and_records_nothing(env, args, message):
    r = company(env, *args)
    assert r.returncode == 2 and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert outbox(env) == []


def test_outbox_must_be_configured_and_not_a_symlink(env, tmp_path):
    r = company({k: v for k, v in env.items() if k != "TASKMINE_OUTBOX"}, "answer", "--sha", "abcd")
    assert r.returncode == 2 and "TASKMINE_OUTBOX is not set" in r.stderr
    target = tmp_path / "target"
    target.write_text("")
    Path(env["TASKMINE_OUTBOX"]).symlink_to(target)
    r = company(env, "answer", "--sha", "abcd")
    assert r.returncode == 2 and "cannot open the outbox" in r.stderr and target.read_text() == ""


def test_tool_is_standalone_stdlib():
    source = TOOL.read_text()
    assert "import environments" not in source and "from environments" not in source and "warehouse" not in source
    assert source.startswith("#!/usr/bin/env python3\n")
