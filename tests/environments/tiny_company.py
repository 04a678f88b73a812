"""A small company written event by event (our own invented text), so every rule of the world has one fact
before the cutoff and one after it: `tiny_events()`, `CUTOFF`, `make_repo` (the fixture `tiny_world` is in
conftest.py).

Before the cutoff: PROJ-1 filed as Minor, its first comment, a mail thread's request, a chat question with
one thread reply, the repository's first two commits. After it: PROJ-1 raised to Critical and resolved, a
second comment naming the fix, the mail reply, a second chat reply, PROJ-2, the third commit.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

from environments.gitworld import refs_at
from environments.world import build_world
from warehouse.ids import event_id
from warehouse.schemas import Event

UTC = dt.UTC
CUTOFF = dt.datetime(2021, 3, 10, 12, 0, tzinfo=UTC)


def at(day: int, hour: int = 9) -> dt.datetime:
    return dt.datetime(2021, 3, day, hour, 0, tzinfo=UTC)


def ev(source: str, kind: str, native: str, ts: dt.datetime, **kw) -> Event:
    return Event(event_id=event_id("tiny", source, native), dataset="tiny", source=source, kind=kind, native_id=native,
                 ts=ts, **kw)


def tiny_events() -> list[Event]:
    issue = ev("jira", "issue_created", "PROJ-1", at(1), thread_key="PROJ-1", actor="jira:ann", actor_name="Ann Lee",
               title="Login times out after password reset",
               body="After resetting the password the login page spins for 30 seconds and gives up.",
               attrs={"project": "PROJ", "issuetype": "Bug", "priority": "Critical", "status": "Resolved",
                      "resolution": "Fixed", "resolutiondate": at(12).isoformat(), "resolved_at": at(12).isoformat(),
                      "components": ["auth", "web"], "fixVersions": ["2.1"], "assignee": {"display_name": "Bo Chen"},
                      "comment_total": 2, "updated": at(12).isoformat()})
    pid = issue.event_id
    return [
        issue,
        ev("jira", "field_changed", "PROJ-1#history-1-0", at(11), thread_key="PROJ-1", parent_id=pid,
           actor_name="Bo Chen", attrs={"field": "priority", "fromString": "Minor", "toString": "Critical"}),
        ev("jira", "field_changed", "PROJ-1#history-2-0", at(11), thread_key="PROJ-1", parent_id=pid,
           actor_name="Bo Chen", attrs={"field": "Component", "fromString": None, "toString": "web"}),
        ev("jira", "comment", "PROJ-1#comment-1", at(2), thread_key="PROJ-1", parent_id=pid, actor_name="Bo Chen",
           body="I can reproduce it with the staging account."),
        ev("jira", "comment", "PROJ-1#comment-2", at(12), thread_key="PROJ-1", parent_id=pid, actor_name="Bo Chen",
           body="Fixed by raising the session pool timeout in 2.1, see commit cafe123."),
        ev("jira", "issue_created", "PROJ-2", at(15), thread_key="PROJ-2", actor_name="Ann Lee",
           title="Export to CSV drops the header row", body="The CSV export has no header.",
           attrs={"project": "PROJ", "issuetype": "Bug", "priority": "Major"}),
        ev("email", "email", "req-1@mail.example", at(3), thread_key="req-1@mail.example",
           actor="email:ann@corp.example",
           actor_name="Ann Lee", title="Quarterly numbers", body="Could you send me the quarterly numbers by Friday?",
           attrs={"people": [{"display_name": "Ann Lee", "email": "ann@corp.example", "role": "from"},
                             {"display_name": "Bo Chen", "email": "bo@corp.example", "role": "to"}]}),
        ev("email", "email", "rep-1@mail.example", at(14), thread_key="req-1@mail.example", actor_name="Bo Chen",
           title="Re: Quarterly numbers", body="Here they are: revenue grew 12 percent over the quarter.",
           attrs={"in_reply_to": "req-1@mail.example",
                  "people": [{"display_name": "Bo Chen", "email": "bo@corp.example", "role": "from"},
                             {"display_name": "Ann Lee", "email": "ann@corp.example", "role": "to"}]}),
        ev("slack", "message", "C1:100.000001", at(4), thread_key="slack:C1:100.000001", actor_name="Cy Diaz",
           body="Does anyone know why the nightly build is red?",
           attrs={"channel_name": "dev", "ts": "100.000001", "thread_ts": "100.000001"}),
        ev("slack", "message", "C1:100.000002", at(5), thread_key="slack:C1:100.000001", actor_name="Bo Chen",
           body="The nightly build needs the new certificate.",
           attrs={"channel_name": "dev", "ts": "100.000002", "thread_ts": "100.000001"}),
        ev("slack", "message", "C1:100.000003", at(13), thread_key="slack:C1:100.000001", actor_name="Cy Diaz",
           body="Rotated the certificate, the nightly is green again.",
           attrs={"channel_name": "dev", "ts": "100.000003", "thread_ts": "100.000001"}),
    ]


def make_repo(path: Path) -> dict[str, str]:
    """A repository with three commits on main, dated days 1, 5 and 12 of March 2021: subject -> SHA."""
    path.mkdir(parents=True)
    out = {}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    for day, name, subject in ((1, "a.py", "Add the login module"), (5, "b.py", "Add the CSV export"),
                               (12, "a.py", "Raise the session pool timeout")):
        (path / name).write_text(f"# {subject}\n", encoding="utf-8")
        env = {"GIT_AUTHOR_DATE": at(day).isoformat(), "GIT_COMMITTER_DATE": at(day).isoformat(),
               "GIT_AUTHOR_NAME": "Bo Chen", "GIT_AUTHOR_EMAIL": "bo@corp.example",
               "GIT_COMMITTER_NAME": "Bo Chen", "GIT_COMMITTER_EMAIL": "bo@corp.example", "PATH": "/usr/bin:/bin"}
        subprocess.run(["git", "-C", str(path), "add", name], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", subject], check=True, env=env)
        out[subject] = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                      check=True).stdout.strip()
    return out


def episode_world(tmp_path: Path) -> tuple[Path, dict, dict]:
    """The tiny company as a world folder with its repository, the world an Episode gets at CUTOFF, the shas."""
    worlds = tmp_path / "worlds"
    build_world(tiny_events(), worlds / "world.sqlite", "tiny-1")
    shas = make_repo(tmp_path / "src")
    (worlds / "world.json").write_text(json.dumps({"repos": {"repo": {"path": str(tmp_path / "src"),
                                                                         "slug": "repo"}}}))
    world = {"cutoff": CUTOFF.isoformat(), "git": {"repos": ["repo"], "refs": {"repo": refs_at(tmp_path / "src",
                                                                                                 CUTOFF)}}}
    return worlds, world, shas
