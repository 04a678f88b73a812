"""The company world and its tools: the cutoff on every source, writes seen by later reads, the typed action
log, the `company` CLI and the MCP server (the official SDK's client), hostile calls, and the git views.
Docker tests run an agent in a real container (required on CI)."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from tiny_company import CUTOFF, at, ev, make_repo, tiny_events

from environments import actions as A
from environments.episode import Episode
from environments.gitworld import SETUP_SCRIPT, Branches, optimize, pack_view, refs_at, verify_refs, verify_view
from environments.sandbox import LocalSandbox
from environments.tools import MAX_ACTIONS, MAX_LINE, ToolServer, ToolSocket
from environments.world import World, build_world, export_documents, fts_query, import_documents

TOOL = Path(__file__).resolve().parents[2] / "environments" / "company_tool.py"


# --- the world at a cutoff ---------------------------------------------------------------------------------


def test_issue_is_shown_as_it_stood_at_the_cutoff(tiny_world):
    issue = tiny_world.at(CUTOFF).issue("PROJ-1")
    f = issue["fields"]
    assert f["priority"] == "Minor" and f["components"] == ["auth"]  # later changelog items undone
    assert "resolution" not in f and "resolutiondate" not in f and "fixVersions" not in f  # resolved later
    assert "comment_total" not in f and "updated" not in f  # export-time values never shown
    assert [c["body"] for c in issue["comments"]] == ["I can reproduce it with the staging account."]
    after = tiny_world.at(at(20)).issue("PROJ-1")["fields"]
    assert after["priority"] == "Critical" and after["resolution"] == "Fixed" and after["fixVersions"] == ["2.1"]


def test_nothing_after_the_cutoff_by_any_read(tiny_world):
    v = tiny_world.at(CUTOFF)
    assert v.issue("PROJ-2") is None and [i["key"] for i in v.issue_search("CSV header")] == []
    assert [m["message_id"] for m in v.mail_search("quarterly numbers")] == ["req-1@mail.example"]
    assert [t["message_id"] for t in v.mail("req-1@mail.example")["thread_messages"]] == ["req-1@mail.example"]
    assert v.mail("rep-1@mail.example") is None
    assert [m["text"] for m in v.chat_history("dev", "100.000001")] == [
        "Does anyone know why the nightly build is red?", "The nightly build needs the new certificate."]
    assert v.chat_search("certificate rotated green") and all("green" not in h["match"] for h in
                                                                 v.chat_search("certificate rotated green"))
    assert v.token_hits("cafe123") == [] and tiny_world.at(at(20)).token_hits("cafe123")
    assert all("cafe123" not in text for _, text in v.texts())


def test_hidden_events_are_never_returned(tiny_world):
    question = tiny_events()[9]  # the thread reply before the cutoff
    v = tiny_world.at(CUTOFF, hidden=[question.event_id])
    assert [m["text"] for m in v.chat_history("dev", "100.000001")] == [
        "Does anyone know why the nightly build is red?"]
    assert not v.phrase_hits("the nightly build needs the new certificate".split())


def test_search_is_ranked_and_survives_any_query(tiny_world):
    v = tiny_world.at(at(20))
    assert v.issue_search("login password reset")[0]["key"] == "PROJ-1"
    for q in ['"unbalanced', "AND OR NOT", "*", "NEAR(", "ü ß 中文", "x" * 5000, "'; drop table docs; --"]:
        v.issue_search(q), v.mail_search(q), v.chat_search(q)  # never an FTS syntax error
    assert fts_query("  ") is None and fts_query('"exact phrase" Word') == '("exact" AND "phrase") OR "word"'


def test_search_ranks_by_bm25_not_by_storage_order(tmp_path):
    """The index keeps no counts, and FTS5's bm25() then scores every match 0 (results came in storage order);
    the ranking is BM25 over the documents the view reaches: more of the query's rare words first, a long
    document below a short one with the same words, and what came after the cutoff weighs nothing."""
    def mail(n, day, subject, body):
        return ev("email", "email", f"m{n}@x.example", at(day), thread_key=f"m{n}@x.example", title=subject,
                  body=body, actor="email:a@x.example")

    filler = " ".join(f"word{i}" for i in range(300))
    events = [mail(1, 1, "Build notes", "the build is slow today"),                      # common word only
              mail(2, 2, "Build notes", "the build broke on the certificate"),           # + a rarer word
              mail(3, 3, "Status", "certificate rotation failed on the build server"),   # + two rarer words
              mail(4, 4, "Status", f"certificate rotation failed on the build server {filler}"),  # same, long
              *[mail(10 + i, 5, "Weekly", f"the build is green, run {i}") for i in range(6)],
              mail(30, 20, "Later", "rotation rotation rotation")]                       # after the cutoff
    world = World(build_world(events, tmp_path / "w.sqlite", "k"))
    hits = world.at(CUTOFF).mail_search("certificate rotation build", limit=5)
    ids = [h["message_id"] for h in hits]
    assert ids[0] == "m3@x.example" and set(ids[1:3]) == {"m2@x.example", "m4@x.example"}, ids  # m4: long
    scores = [h["score"] for h in world.at(CUTOFF).search("certificate rotation build", ("mail",), limit=8)]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    assert "m30@x.example" not in [h["message_id"] for h in world.at(CUTOFF).mail_search("rotation", limit=20)]


def test_documents_round_trip_through_the_published_form(tiny_world, tmp_path):
    n = export_documents(tiny_world.path, tmp_path / "documents.jsonl")
    assert n == len(tiny_events())
    rebuilt = import_documents(tmp_path / "documents.jsonl", tmp_path / "again" / "world.sqlite")
    from environments.world import World

    again = World(rebuilt).at(CUTOFF)
    assert again.issue("PROJ-1") == tiny_world.at(CUTOFF).issue("PROJ-1")
    assert again.issue_search("login")[0]["key"] == "PROJ-1"


def test_sha_mentions_are_translated_to_the_worlds_history(tmp_path):
    events = [tiny_events()[4]]  # "... see commit cafe123."
    path = build_world(events, tmp_path / "w.sqlite", "k", sha_map={"cafe1234" + "0" * 32: "beef5678" + "1" * 32})
    from environments.world import World

    body = World(path).at(at(20)).issue  # comments live on issues; read the raw text instead
    texts = [t for _, t in World(path).at(at(20)).texts()]
    assert any("beef567" in t and "cafe123" not in t for t in texts), (body, texts)


# --- the tool server (in process) --------------------------------------------------------------------------


def server(tiny_world, **kw) -> ToolServer:
    return ToolServer(tiny_world.at(CUTOFF), **kw)


def test_every_read_tool_answers(tiny_world):
    s = server(tiny_world)
    for name, args, needle in [("jira_search", {"query": "login"}, "PROJ-1"), ("jira_show", {"key": "PROJ-1"}, "Minor"),
                               ("jira_project", {"project": "PROJ"}, "priorities: Minor"),
                               ("jira_project", {}, "PROJ"),
                               ("mail_search", {"query": "quarterly"}, "req-1@mail.example"),
                               ("mail_read", {"message_id": "<req-1@mail.example>"}, "by Friday"),
                               ("slack_search", {"query": "nightly"}, "#dev"),
                               ("slack_history", {"channel": "#dev"}, "[1 replies]"),
                               ("slack_channels", {}, "#dev")]:
        r = s.call(name, args)
        assert not r.error and needle in r.text, (name, r.text)
    assert s.actions == []  # reads are not actions


def test_writes_are_logged_typed_and_seen_by_later_reads(tiny_world):
    s = server(tiny_world)
    assert not s.call("jira_update", {"key": "PROJ-1", "priority": "Major", "components": ["web", "auth"]}).error
    assert not s.call("jira_comment", {"key": "PROJ-1", "body": "Raising the pool timeout should do it."}).error
    issue = s.call("jira_show", {"key": "PROJ-1"}).data["issue"]
    assert issue["fields"]["priority"] == "Major" and issue["comments"][-1]["body"].startswith("Raising")
    r = s.call("mail_reply", {"message_id": "req-1@mail.example", "body": "Attached.", "cc": ["cy@corp.example"]})
    mid = r.data["message_id"]
    msg = s.call("mail_read", {"message_id": mid}).data["message"]
    assert msg["to"] == ["ann@corp.example"] and msg["subject"] == "Re: Quarterly numbers"
    thread = s.call("mail_read", {"message_id": "req-1@mail.example"}).data["message"]["thread_messages"]
    assert [t["message_id"] for t in thread] == ["req-1@mail.example", mid]
    s.call("slack_post", {"channel": "dev", "text": "Looking at the nightly now", "thread_ts": "100.000001"})
    hist = s.call("slack_history", {"channel": "dev", "thread_ts": "100.000001"}).data["messages"]
    assert hist[-1]["text"] == "Looking at the nightly now"
    assert s.call("slack_search", {"query": "looking nightly"}).data["results"][0]["match"].startswith("Looking")
    kinds = [type(e.action) for e in s.actions]
    assert kinds == [A.JiraUpdate, A.JiraComment, A.MailReply, A.SlackPost]
    assert [e.seq for e in s.actions] == [1, 2, 3, 4]
    assert s.actions[2].effect["message"]["in_reply_to"] == "req-1@mail.example"
    other = server(tiny_world)  # another episode of the same world sees none of it
    assert other.call("jira_show", {"key": "PROJ-1"}).data["issue"]["fields"]["priority"] == "Minor"


@pytest.mark.parametrize("name, args, needle", [
    ("jira_show", {"key": "PROJ-2"}, "no issue PROJ-2 at this moment"),
    ("jira_update", {"key": "not a key"}, "not an issue key"),
    ("jira_update", {"key": "PROJ-1"}, "give at least one field"),
    ("jira_update", {"key": "PROJ-1", "type": "Bug\nInjected"}, "must be one line"),
    ("mail_send", {"to": ["nobody"], "subject": "s", "body": "b"}, "not an e-mail address"),
    ("mail_read", {"message_id": "rep-1@mail.example"}, "no message rep-1@mail.example"),
    ("answer", {}, "exactly one of"),
    ("answer", {"sha": "xyz"}, "not a commit SHA"),
    ("answer", {"sha": "abc1234", "extra": 1}, "Extra inputs are not permitted"),
    ("jira_comment", {"key": "PROJ-1", "body": "x" * (A.TEXT + 1)}, "at most"),
    ("no_such_tool", {}, "no tool 'no_such_tool'"),
    ("shell", {"command": "id"}, "no tool 'shell' here"),  # no session: no shell
])
def test_bad_calls_get_one_line_and_record_nothing(tiny_world, name, args, needle):
    s = server(tiny_world)
    r = s.call(name, args)
    assert r.error and needle in r.text and "\n" not in r.text.strip() and "Traceback" not in r.text
    assert s.actions == []


def test_the_log_is_bounded(tiny_world):
    s = server(tiny_world)
    for i in range(MAX_ACTIONS + 5):
        s.call("answer", {"text": f"guess {i}"})
    assert len(s.actions) == MAX_ACTIONS
    assert "log is full" in s.call("answer", {"text": "one more"}).text


def test_tools_can_be_limited_per_task(tiny_world):
    s = server(tiny_world, tools={"jira_show", "answer"})
    assert {t["name"] for t in s.specs()} == {"jira_show", "answer"}
    assert s.call("mail_search", {"query": "x"}).error


def test_reference_calls_replay_as_cli_commands():
    call = A.JiraUpdate(key="PROJ-1", type="Bug", components=["web", "auth"], assignee="Bo Chen")
    assert call.cli() == "company jira update PROJ-1 --type Bug --component web --component auth --assignee 'Bo Chen'"
    assert A.MailReply(message_id="m@x", body="hi there").cli() == "company mail reply m@x --body 'hi there'"
    assert A.CALL.validate_python(call.model_dump()) == call


# --- the CLI and MCP over the socket -----------------------------------------------------------------------


@pytest.fixture
def served(tiny_world, tmp_path_factory):
    import tempfile

    s = server(tiny_world)
    folder = Path(tempfile.mkdtemp(prefix="tm-sock-"))
    with ToolSocket(s, folder) as sock:
        yield s, sock


def company(sock, *args, stdin=None):
    env = {**os.environ, "TASKMINE_TOOLS": str(sock.path)}
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, env=env, input=stdin,
                          timeout=60)


def test_cli_help_lists_every_command_with_examples(served):
    _, sock = served
    r = company(sock, "--help")
    assert r.returncode == 0
    for needle in ("jira", "mail", "slack", "answer", "examples:", "company jira show PROJ-123", "company mcp"):
        assert needle in r.stdout
    assert "company jira update" in company(sock, "jira", "update", "--help").stdout + r.stdout


def test_cli_calls_and_exit_codes(served):
    s, sock = served
    assert company(sock, "jira", "search", "login timeout").stdout.startswith("PROJ-1")
    none = company(sock, "jira", "search", "zzzunknownzzz")
    assert none.returncode == 1 and "no issue matches" in none.stdout
    r = company(sock, "jira", "update", "PROJ-1", "--priority", "Major", "--component", "web", "--component", "auth")
    assert r.returncode == 0 and r.stdout.startswith("recorded #1")
    assert company(sock, "jira", "comment", "PROJ-1", "--body", "-", stdin="From stdin.\n").returncode == 0
    bad = company(sock, "answer", "--sha", "nothex")
    assert bad.returncode == 2
    assert bad.stderr.strip() == "company: answer: sha: 'nothex' is not a commit SHA (4 to 64 hex digits)"
    assert company(sock, "jira", "nosuchverb").returncode == 2
    assert [type(e.action) for e in s.actions] == [A.JiraUpdate, A.JiraComment]
    assert s.actions[1].action.body == "From stdin."


def test_cli_without_a_server_says_so_in_one_line(tmp_path):
    env = {**os.environ, "TASKMINE_TOOLS": str(tmp_path / "nothing.sock")}
    r = subprocess.run([sys.executable, str(TOOL), "jira", "search", "x"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and r.stderr.startswith("company: the company tools are not reachable")


def _mcp_session(command: list[str], env: dict, body):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main():
        params = StdioServerParameters(command=command[0], args=command[1:], env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)

    return anyio.run(main)


def test_an_mcp_client_lists_and_calls_every_tool(served):
    """The SDK's own client, through `company mcp` (the stdio relay an agent's MCP client starts)."""
    s, sock = served

    async def body(session):
        tools = (await session.list_tools()).tools
        results = {}
        for name, args in [("jira_search", {"query": "login"}), ("jira_show", {"key": "PROJ-1"}),
                           ("jira_project", {"project": "PROJ"}), ("mail_search", {"query": "quarterly"}),
                           ("mail_read", {"message_id": "req-1@mail.example"}), ("slack_search", {"query": "nightly"}),
                           ("slack_history", {"channel": "dev"}), ("slack_channels", {}),
                           ("jira_update", {"key": "PROJ-1", "type": "Bug"}),
                           ("jira_comment", {"key": "PROJ-1", "body": "On it."}),
                           ("mail_send", {"to": ["bo@corp.example"], "subject": "Hi", "body": "Hello"}),
                           ("mail_reply", {"message_id": "req-1@mail.example", "body": "Sent."}),
                           ("slack_post", {"channel": "dev", "text": "Done."}), ("answer", {"text": "42"}),
                           ("jira_show", {"key": "NOPE-1"})]:
            r = await session.call_tool(name, args)
            results[name] = (r.isError, r.content[0].text, r.structuredContent)
        return tools, results

    env = {**os.environ, "TASKMINE_TOOLS": str(sock.path)}
    tools, results = _mcp_session([sys.executable, str(TOOL), "mcp"], env, body)
    listed = {t.name: t for t in tools}
    assert set(listed) == {n for n, t in A.TOOLS.items() if t.kind != "shell"}  # no session: no shell, git, files
    assert listed["mail_reply"].inputSchema["required"] == ["message_id", "body"]
    assert listed["jira_update"].inputSchema["additionalProperties"] is False
    assert all(not err for name, (err, _, _) in results.items() if name != "jira_show")
    assert results["jira_show"][0] and "no issue NOPE-1" in results["jira_show"][1]
    assert results["jira_search"][2]["results"][0]["key"] == "PROJ-1"
    assert [e.action.name() for e in s.actions] == ["jira_update", "jira_comment", "mail_send", "mail_reply",
                                                    "slack_post", "answer"]


def test_a_hostile_client_cannot_hurt_the_server(served):
    s, sock = served
    with socket.socket(socket.AF_UNIX) as c:  # a line longer than the limit: that connection is closed
        c.connect(str(sock.path))
        c.sendall(b"x" * (MAX_LINE + 10) + b"\n")
        c.settimeout(10)
        assert c.recv(10) == b""
    with socket.socket(socket.AF_UNIX) as c:  # garbage, then hanging up mid-message
        c.connect(str(sock.path))
        c.sendall(b"\xff\xfe not json\n{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\"\n")
    assert company(sock, "jira", "show", "PROJ-1").returncode == 0  # others are served as before


# --- git views --------------------------------------------------------------------------------------------


def test_a_view_holds_exactly_the_history_at_its_cutoff(tmp_path):
    shas = make_repo(tmp_path / "src")
    optimize(tmp_path / "src")
    refs = refs_at(tmp_path / "src", CUTOFF)
    assert refs == {"refs/heads/main": shas["Add the CSV export"]}
    fix = shas["Raise the session pool timeout"]
    assert verify_refs(tmp_path / "src", refs, hidden=[fix], needed=[shas["Add the login module"]]) == []
    assert verify_refs(tmp_path / "src", refs, hidden=[shas["Add the login module"]])  # reachable: reported
    assert verify_refs(tmp_path / "src", refs, needed=[fix])  # not reachable: reported
    folder = pack_view(tmp_path / "view", {"repo": (tmp_path / "src", refs, None)})
    assert verify_view(folder, hidden_commits=[fix], needed_commits=[shas["Add the CSV export"]]) == []
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(["sh", "-c", SETUP_SCRIPT, "setup", str(folder), str(home)], check=True)
    git = lambda *a: subprocess.run(["git", "-C", str(home / "repo"), *a], capture_output=True,  # noqa: E731
                                    text=True).stdout
    assert git("log", "--all", "--format=%s").split("\n")[:2] == ["Add the CSV export", "Add the login module"]
    objects = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    assert fix not in objects and fix not in git("rev-list", "--all", "--reflog")
    assert git("for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]
    assert (home / "repo" / "b.py").read_text() == "# Add the CSV export\n"
    assert len(list((folder / "repo" / "objects" / "pack").glob("*.idx"))) == 1  # one pack, indexed on the host
    assert Branches.read(tmp_path / "src").head == "refs/heads/main"


def test_a_view_can_check_out_an_older_commit(tmp_path):
    shas = make_repo(tmp_path / "src")
    refs = refs_at(tmp_path / "src", CUTOFF)
    folder = pack_view(tmp_path / "view", {"repo": (tmp_path / "src", refs, shas["Add the login module"])})
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(["sh", "-c", SETUP_SCRIPT, "setup", str(folder), str(home)], check=True)
    assert not (home / "repo" / "b.py").exists()


def test_nothing_before_the_first_commit(tmp_path):
    make_repo(tmp_path / "src")
    assert refs_at(tmp_path / "src", at(1) - dt.timedelta(days=1)) == {}


# --- episodes in a sandbox ---------------------------------------------------------------------------------


def _episode_world(tmp_path, tiny_world) -> tuple[Path, dict]:
    worlds = tmp_path / "worlds"
    (worlds).mkdir()
    os.link(tiny_world.path, worlds / "world.sqlite")
    shas = make_repo(tmp_path / "src")
    (worlds / "world.json").write_text(json.dumps({"repos": {"repo": {"path": str(tmp_path / "src"), "slug": "repo"}}}))
    refs = refs_at(tmp_path / "src", CUTOFF)
    return worlds, {"cutoff": CUTOFF.isoformat(), "git": {"repos": ["repo"], "refs": {"repo": refs}}, "_shas": shas}


@pytest.mark.parametrize("kind", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_an_agent_in_the_sandbox_uses_the_cli_git_and_mcp(kind, tmp_path, tiny_world, request):
    box = LocalSandbox() if kind == "local" else request.getfixturevalue("docker_sandbox")
    worlds, world = _episode_world(tmp_path, tiny_world)
    shas = world.pop("_shas")
    with Episode(worlds, world, box) as ep:
        r = ep.exec("company jira show PROJ-1 | head -3; git -C ~/repo log --all --format=%s; "
                    "company jira search CSV; echo rc=$?; company answer --sha " + shas["Add the CSV export"][:7])
        assert "PROJ-1: Login times out after password reset" in r.stdout
        assert "Add the CSV export\nAdd the login module" in r.stdout and "session pool" not in r.stdout
        assert "rc=1" in r.stdout  # PROJ-2 (the CSV issue) is filed after the cutoff
        assert [e.action.sha for e in ep.actions] == [shas["Add the CSV export"][:7]]
        if kind == "docker":
            command, env = ["docker", "exec", "-i", ep.session.name, "company", "mcp"], dict(os.environ)
        else:
            command, env = [sys.executable, str(TOOL), "mcp"], {**os.environ, **ep.session.env}

        async def body(session):
            names = {t.name for t in (await session.list_tools()).tools}
            log = await session.call_tool("git", {"args": ["log", "--format=%s", "-1"]})
            sh = await session.call_tool("shell", {"command": "ls ~/repo"})
            return names, log.content[0].text, sh.content[0].text

        names, log, sh = _mcp_session(command, env, body)
        assert names == set(A.TOOLS)  # with a repository and a session: git and shell too
        assert log.startswith("Add the CSV export") and "a.py" in sh and "b.py" in sh


def test_an_episode_cleans_up_after_itself(tmp_path, tiny_world):
    worlds, world = _episode_world(tmp_path, tiny_world)
    world.pop("_shas")
    with Episode(worlds, world, LocalSandbox()) as ep:
        rundir = ep._rundir
        root = ep.session.root
    assert not rundir.exists() and not root.exists()


def test_the_task_world_parses(tmp_path):
    from environments.episode import TaskWorld

    w = TaskWorld.of({"cutoff": "2021-03-10T12:00:00+00:00", "hidden": ["e1"], "persona": {"name": "Ann Lee"},
                      "tools": ["answer"], "git": {"repos": ["repo"], "refs": {"repo": {"refs/heads/main": "ab"}}}})
    assert w.cutoff == dt.datetime(2021, 3, 10, 12, tzinfo=dt.UTC) and w.persona.name == "Ann Lee"
    assert w.refs == {"repo": {"refs/heads/main": "ab"}} and w.repos == ("repo",) and w.tools == ("answer",)
    assert json.loads(json.dumps(w.hidden)) == ["e1"]


@pytest.mark.docker
def test_nothing_after_the_cutoff_is_anywhere_in_the_container(tmp_path, tiny_world, docker_sandbox):
    """The agent looks everywhere it can: every file of the container, every git object and ref, every tool
    with any argument. The future (a comment naming the fix, the fix's commit, a later issue) is nowhere."""
    worlds, world = _episode_world(tmp_path, tiny_world)
    shas = world.pop("_shas")
    fix = shas["Raise the session pool timeout"]
    with Episode(worlds, world, docker_sandbox) as ep:
        r = ep.exec(f"grep -rlI -e cafe123 -e {fix[:12]} -e 'session pool' -e PROJ-2 / "
                    "--exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null; echo grep-done; "
                    "cd ~/repo && git log --all --reflog --format=%H; git fsck --lost-found --no-progress 2>&1; "
                    "git cat-file --batch-all-objects --batch-check='%(objectname)'; cat .git/packed-refs 2>&1; "
                    "ls -R /world /run/company", timeout_s=300)
        assert r.stdout.split("grep-done")[0].strip() == ""
        assert fix not in r.stdout and "cafe123" not in r.stdout
        for name, args in [("jira_show", {"key": "PROJ-2"}), ("jira_search", {"query": "CSV header export"}),
                           ("mail_read", {"message_id": "rep-1@mail.example"}), ("slack_search", {"query": "rotated"}),
                           ("slack_history", {"channel": "dev", "thread_ts": "100.000001", "limit": 200}),
                           ("git", {"args": ["show", fix]}), ("shell", {"command": f"git -C ~/repo show {fix}"})]:
            out = ep.tools.call(name, args)
            assert "PROJ-2:" not in out.text and "revenue grew" not in out.text and "green again" not in out.text
            assert "pool timeout" not in out.text, (name, out.text)
