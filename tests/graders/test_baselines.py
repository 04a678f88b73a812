"""Retrieval baselines on a small world written here (our own invented text): each copies the outcome of the
nearest earlier work, so it solves a task whose answer an earlier, similar piece of work already gave, and fails
one whose answer differs from its nearest neighbour's. Replayed in a real episode (graders.replay.baseline_runs)
and graded by the task's rubric, like a probe."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

import pytest

from environments import actions as A
from environments.gitworld import refs_at
from environments.sandbox import LocalSandbox
from environments.world import build_world
from graders import baselines, replay
from graders.rubric import CheckSpec, Rubric
from warehouse.ids import event_id
from warehouse.schemas import Event, Task

UTC = dt.UTC


def at(day: int, hour: int = 9) -> dt.datetime:
    return dt.datetime(2022, 5, day, hour, 0, tzinfo=UTC)


def ev(source, kind, native, ts, **kw) -> Event:
    return Event(event_id=event_id("bl", source, native), dataset="bl", source=source, kind=kind, native_id=native,
                 ts=ts, **kw)


def issue(key, day, title, body, **fields) -> Event:
    return ev("jira", "issue_created", key, at(day), thread_key=key, actor_name="Ann Lee", title=title, body=body,
              attrs={"project": "OPS", **fields})


def events() -> list[Event]:
    mail = [{"display_name": "Ann Lee", "email": "ann@corp.example", "role": "from"},
            {"display_name": "Bo Chen", "email": "bo@corp.example", "role": "to"}]
    back = [{"display_name": "Bo Chen", "email": "bo@corp.example", "role": "from"},
            {"display_name": "Ann Lee", "email": "ann@corp.example", "role": "to"}]
    return [
        issue("OPS-1", 1, "Login page times out after a password reset",
              "After resetting the password the login page spins and gives up.", issuetype="Bug",
              priority="Critical", components=["auth"], assignee={"display_name": "Bo Chen"}),
        issue("OPS-2", 2, "Spreadsheet export drops the header row", "The exported spreadsheet has no header row.",
              issuetype="Improvement", priority="Minor", components=["export"], assignee={"display_name": "Cy Diaz"}),
        issue("OPS-3", 5, "Login times out again after a password reset",
              "Since this morning the login page times out for accounts whose password was reset."),
        issue("OPS-4", 6, "Header row missing from the spreadsheet export of large reports",
              "Large reports exported as spreadsheets have no header row."),
        ev("email", "email", "q1@mail.example", at(3), thread_key="q1@mail.example", actor_name="Ann Lee",
           title="Printer on floor three", body="Which driver does the printer on floor three need?",
           attrs={"people": mail}),
        ev("email", "email", "r1@mail.example", at(3, 11), thread_key="q1@mail.example", actor_name="Bo Chen",
           title="Re: Printer on floor three", body="It needs the PCL6 driver from the shared drive.\n\n"
           "> Which driver does the printer on floor three need?",
           attrs={"in_reply_to": "q1@mail.example", "people": back}),
        chat("100.000001", 3, "Cy Diaz", "Why is the nightly build red again?", thread="100.000001"),
        chat("100.000002", 3, "Bo Chen", "The nightly build needs the renewed certificate.", thread="100.000001",
             hour=10),
        chat("200.000001", 4, "Cy Diaz", "Where do the staging credentials live?"),
        chat("200.000002", 4, "Bo Chen", "In the vault, under staging/db.", hour=10),
        chat("300.000001", 8, "Ann Lee", "The nightly build is red, does anyone know why?"),
        chat("400.000001", 8, "Ann Lee", "Where can I find the staging credentials?", hour=10),
        ev("email", "email", "q2@mail.example", at(7), thread_key="q2@mail.example", actor_name="Ann Lee",
           title="Printer driver for floor three", body="Which driver should I install for the floor three printer?",
           attrs={"people": mail}),
    ]


def chat(ts: str, day: int, who: str, text: str, thread: str | None = None, hour: int = 9) -> Event:
    return ev("slack", "message", f"C1:{ts}", at(day, hour), thread_key=f"slack:C1:{thread or ts}", actor_name=who,
              body=text, attrs={"channel_name": "dev", "ts": ts, **({"thread_ts": thread} if thread else {})})


def chat_task(ts: str, day: int, hour: int, thread: bool) -> Task:
    ref = A.SlackPost(channel="dev", text="(the real answer)", thread_ts=ts if thread else None)
    return Task(task_id=f"t-{ts}", dataset="bl", family="chat_answer", item_id=ts, prompt="Answer.",
                cutoff=at(day, hour), world={"cutoff": at(day, hour).isoformat(), "hidden": []}, world_hash="w",
                reference={"actions": [ref.model_dump(mode="json", exclude_none=True)], "probes": [],
                           "channel": "dev", "question_ts": ts},
                rubric={"checks": []})


def make_repo(path: Path) -> dict[str, str]:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    out = {}
    for day, name, subject in ((1, "login.py", "Raise the session pool timeout of the login page"),
                               (2, "export.py", "Write the header row first in spreadsheet exports"),
                               (3, "docs.md", "Describe the deployment")):
        (path / name).write_text(f"# {subject}\n", encoding="utf-8")
        env = {"GIT_AUTHOR_DATE": at(day).isoformat(), "GIT_COMMITTER_DATE": at(day).isoformat(),
               "GIT_AUTHOR_NAME": "Bo Chen", "GIT_AUTHOR_EMAIL": "bo@corp.example", "GIT_COMMITTER_NAME": "Bo Chen",
               "GIT_COMMITTER_EMAIL": "bo@corp.example", "PATH": "/usr/bin:/bin"}
        subprocess.run(["git", "-C", str(path), "add", name], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", subject], check=True, env=env)
        out[name] = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip()
    return out


@pytest.fixture
def worlds(tmp_path) -> Path:
    root = tmp_path / "worlds"
    build_world(events(), root / "world.sqlite", "bl")
    return root


def triage_task(key: str, day: int, expected: dict) -> Task:
    checks = [CheckSpec(id="type", check="field_equals", weight=1,
                        args={"key": key, "field": "type", "expected": expected["type"]}),
              CheckSpec(id="priority", check="field_equals", weight=1,
                        args={"key": key, "field": "priority", "expected": expected["priority"]}),
              CheckSpec(id="components", check="set_overlap", weight=1,
                        args={"key": key, "field": "components", "expected": expected["components"]}),
              CheckSpec(id="assignee", check="field_equals", weight=1,
                        args={"key": key, "field": "assignee", "expected": expected["assignee"]})]
    ref = A.JiraUpdate(key=key, **expected)
    return Task(task_id=f"t-{key}", dataset="bl", family="ticket_triage", item_id=key, prompt=f"Triage {key}.",
                cutoff=at(day), world={"cutoff": at(day).isoformat(), "hidden": []}, world_hash="w",
                reference={"actions": [ref.model_dump(mode="json", exclude_none=True)], "probes": []},
                rubric=Rubric(checks=checks).model_dump(mode="json"))


def test_the_triage_baseline_solves_an_issue_like_an_earlier_one_and_fails_one_triaged_differently(worlds):
    easy = triage_task("OPS-3", 5, {"type": "Bug", "priority": "Critical", "components": ["auth"],
                                    "assignee": "Bo Chen"})
    hard = triage_task("OPS-4", 6, {"type": "Bug", "priority": "Blocker", "components": ["reports"],
                                    "assignee": "Ann Lee"})
    box = LocalSandbox()
    (solved,) = replay.baseline_runs(easy, worlds, box)
    assert solved.run_kind == "baseline:nearest_issue" and solved.score == 1.0, solved.message
    assert "copied OPS-1" in solved.message
    (failed,) = replay.baseline_runs(hard, worlds, box)
    assert "copied OPS-2" in failed.message     # the nearest earlier issue, triaged otherwise
    assert failed.score is not None and failed.score < 0.5


def test_the_triage_baseline_reads_only_issues_before_the_cutoff(worlds):
    # OPS-4 is the nearest issue to OPS-2's text, but it is filed after OPS-2: at OPS-2's filing it does not exist
    task = triage_task("OPS-2", 2, {"type": "Improvement", "priority": "Minor", "components": ["export"],
                                    "assignee": "Cy Diaz"})
    (b,) = baselines.plan(task, worlds)
    assert b.source != "OPS-4" and all("OPS-4" not in c.cli() for c in b.calls)


def test_the_reply_baseline_sends_the_answer_an_earlier_similar_question_got(worlds):
    ref = A.MailReply(message_id="q2@mail.example", body="Install the PCL6 driver from the shared drive.")
    task = Task(task_id="t-mail", dataset="bl", family="email_reply", item_id="m", prompt="Reply to q2.",
                cutoff=at(7), world={"cutoff": at(7).isoformat(), "hidden": []}, world_hash="w",
                reference={"actions": [ref.model_dump(mode="json", exclude_none=True)], "probes": [],
                           "request": "q2@mail.example"},
                rubric=Rubric(checks=[CheckSpec(id="action_type", check="action_type", weight=1,
                                                args={"scope": {"medium": "mail", "target": "q2@mail.example",
                                                                "thread": "q2@mail.example"},
                                                      "tool": "mail_reply"})]).model_dump(mode="json"))
    (b,) = baselines.plan(task, worlds)
    assert b.source == "r1@mail.example"
    (call,) = b.calls
    assert isinstance(call, A.MailReply) and call.message_id == "q2@mail.example"
    assert call.body == "It needs the PCL6 driver from the shared drive."   # the quote is not copied
    assert call.to is None and not call.cc     # to the sender: nothing of the real reply's recipients


def test_the_commit_baseline_answers_the_commit_nearest_the_issue(worlds, tmp_path):
    shas = make_repo(tmp_path / "repo.git")
    (worlds / "world.json").write_text(json.dumps({"repos": {"ops": {"path": str(tmp_path / "repo.git"),
                                                                     "slug": "repo"}}}))
    refs = refs_at(tmp_path / "repo.git", at(5))

    def task(key: str, fix: str) -> Task:
        rubric = Rubric(checks=[CheckSpec(id="sha", check="sha_equals", weight=1, args={"expected": [fix]})])
        return Task(task_id=f"c-{key}", dataset="bl", family="commit_link", item_id=key,
                    prompt=f"Issue {key}: ...\n\nThis issue was fixed by a commit.", cutoff=at(5),
                    world={"cutoff": at(5).isoformat(), "hidden": [], "git": {"repos": ["repo"],
                                                                             "refs": {"repo": refs}}},
                    world_hash="w", reference={"actions": [{"tool": "answer", "sha": fix}], "probes": []},
                    rubric=rubric.model_dump(mode="json"))

    box = LocalSandbox()
    runs = {v.run_kind: v for v in replay.baseline_runs(task("OPS-1", shas["login.py"]), worlds, box)}
    assert set(runs) == {"baseline:nearest_commit", "baseline:title_grep"}
    solved = runs["baseline:nearest_commit"]
    assert solved.score == 1.0, solved.message
    # `git log --all -i --grep` of the summary's words, run in the sandbox's repository at the cutoff: "password"
    # finds nothing, "Login" finds the login fix
    grep = runs["baseline:title_grep"]
    assert grep.score == 1.0 and "ran git log --grep of password, Login" in grep.message, grep.message
    # the real fix of OPS-2 (in this story) was the deployment note: the nearest commit is the export one
    runs = {v.run_kind: v for v in replay.baseline_runs(task("OPS-2", shas["docs.md"]), worlds, box)}
    failed = runs["baseline:nearest_commit"]
    assert shas["export.py"][:12] in failed.message and failed.score == 0.0
    assert runs["baseline:title_grep"].score == 0.0     # "Spreadsheet" greps the export commit too


def test_title_words_are_tried_most_specific_first():
    assert baselines.title_words("AttributeError in normalize_query when the query is missing") == \
        ["normalize_query", "AttributeError", "query"]     # "missing", "when", "the": everyday words
    assert baselines.title_words("v2.3 fails on None") == ["v2.3", "None"]


def test_code_change_has_no_baseline(worlds):
    task = triage_task("OPS-3", 5, {"type": "Bug", "priority": "Critical", "components": ["auth"],
                                    "assignee": "Bo Chen"}).model_copy(update={"family": "code_change"})
    assert baselines.plan(task, worlds) == [] and not baselines.applicable("code_change")


def test_baseline_rows_never_decide_validity():
    from warehouse.schemas import Validation

    def row(kind, score, error=None):
        return Validation(validation_id=kind, task_id="t", dataset="d", run_kind=kind, attempt=0, score=score,
                          duration_s=0, sandbox="local", error_class=error)

    runs = [row("oracle", 1.0), row("null", 0.0), row("baseline:nearest_issue", 1.0),
            row("rollout:m", None, "infra")]
    assert replay.judge(runs) == (True, "oracle and null as expected on every repeat")


def test_the_chat_baseline_posts_the_answer_an_earlier_similar_question_got_in_its_thread_or_channel(worlds):
    (b,) = baselines.plan(chat_task("300.000001", 8, 9, thread=True), worlds)
    (call,) = b.calls
    assert b.source == "dev:100.000002" and call.text == "The nightly build needs the renewed certificate."
    assert (call.channel, call.thread_ts) == ("dev", "300.000001")      # where the reference answers
    (b,) = baselines.plan(chat_task("400.000001", 8, 10, thread=False), worlds)
    assert b.source == "dev:200.000002" and b.calls[0].text == "In the vault, under staging/db."
