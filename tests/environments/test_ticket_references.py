"""A ticket's history holds the commits and the other tickets that referenced it (a GitHub timeline's
"referenced this issue in commit ...", "mentioned this in #217"): the tracker showed them as they happened, so
`jira show` lists them and a note that names such a commit ("Fixed in 1a2b3c4") states a fact the world held at
the cutoff. Before, the world left these events out and every such fact was ungradable (a real project's issues
published nothing). The project and its people are invented."""

from __future__ import annotations

import datetime as dt

from environments.tools import Persona, ToolServer
from environments.world import World, build_world
from graders import facts as F
from warehouse.schemas import Event

T0 = dt.datetime(2011, 6, 1, tzinfo=dt.UTC)
SHA = "4c1e0a9b7d2f3e4a5b6c7d8e9f0a1b2c3d4e5f60"


def ev(kind: str, native: str, minutes: int, **kw) -> Event:
    return Event(event_id=f"{native}:{kind}", dataset="d", source="github", kind=kind, native_id=native,
                 thread_key="acme/widgets#14", ts=T0 + dt.timedelta(minutes=minutes), actor="github:pquill",
                 actor_name="Pat Quill", **kw)


def events() -> list[Event]:
    return [ev("issue_created", "acme/widgets#14", 0, title="Spill slots leak on early return", body="see title",
               attrs={"repo": "acme/widgets", "state": "closed"}),
            ev("cross_reference", "acme/widgets#14/cross-referenced-acme/widgets#21@x", 10,
               attrs={"event": "cross-referenced", "source": {"ref": "acme/widgets#21", "type": "issue"}}),
            ev("referenced", f"acme/widgets#14/referenced-{SHA}@y", 30, artifacts=[SHA],
               attrs={"event": "referenced", "commit_id": SHA}),
            ev("comment", "acme/widgets#14/comment-1", 31, body=f"Fixed in {SHA}")]


def test_the_history_shows_the_commits_and_tickets_that_referenced_it(tmp_path):
    world = World(build_world(events(), tmp_path / "world.sqlite", "k"))
    view = world.at(T0 + dt.timedelta(minutes=30, seconds=59), hidden=["acme/widgets#14/comment-1:comment"])
    server = ToolServer(view, persona=Persona("Pat Quill", "pat@acme.example", "pquill"))
    shown = server.call("jira_show", {"key": "acme/widgets#14"})
    assert not shown.error, shown.text
    assert SHA in shown.text and "acme/widgets#21" in shown.text
    # the note's commit is a fact the world held at the cutoff; before the commit referenced the ticket it was not
    assert F.supported(view, F.Fact("commit", SHA))
    assert not F.supported(world.at(T0 + dt.timedelta(minutes=20)), F.Fact("commit", SHA))
    assert F.supported(view, F.Fact("ref", "acme/widgets#21"))
