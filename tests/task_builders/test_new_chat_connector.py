"""A chat connector nobody in the project wrote: a team-chat JSON-lines export read by a test extractor that
declares `medium = "chat"` and sets `automated` for its bot posts. Its questions become chat_answer work items
and its bot notices do not, through the same identities, anonymization and mining as Slack, with no change to
mining (which reads Event.medium and Event.automated, never source names). Every name here is invented."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from core.config import DatasetConfig
from core.registry import registry as plugins
from extractors.base import Extractor, register_extractor, registry
from taskmine import flow
from warehouse.store import Store

T0 = dt.datetime(2024, 3, 4, 9, 0, tzinfo=dt.UTC)


class TeamChat(Extractor):
    """One JSON object per line: {"id", "room", "user", "name", "text", "reply_to", "minutes", "bot"}."""

    source = "teamchat"
    medium = "chat"
    patterns = ("*.teamchat.jsonl",)

    def iter_records(self, path: Path):
        for i, line in enumerate(path.read_text().splitlines()):
            m = json.loads(line)
            person = {"handle": f"teamchat:{m['user']}", "display_name": m["name"], "email": None,
                      "username": m["user"], "role": "author"}
            root = m.get("reply_to") or m["id"]
            yield self.event(kind="message", native_id=m["id"], thread_key=f"teamchat:{m['room']}:{root}",
                             parent_id=self.event_id_of(m["reply_to"]) if m.get("reply_to") else None,
                             ts=T0 + dt.timedelta(minutes=m["minutes"]), actor=person["handle"],
                             actor_name=m["name"], body=m["text"], automated="teamchat bot" if m.get("bot") else "",
                             attrs={"channel_id": m["room"], "people": [person]},
                             provenance={"file": self.rel(path), "offset": i})

    def event_id_of(self, native_id: str) -> str:
        from warehouse.ids import event_id

        return event_id(self.dataset, self.source, native_id)


MESSAGES = [
    {"id": "m1", "room": "support", "user": "rhea", "name": "Rhea Okonkwo", "minutes": 0,
     "text": "Could someone tell me how to rotate the staging database password? The runbook link is dead."},
    {"id": "m2", "room": "support", "user": "tomas", "name": "Tomas Lindqvist", "minutes": 12, "reply_to": "m1",
     "text": "Run vaultctl rotate staging-db from the ops box, then restart the api pods; the runbook moved to "
             "the wiki under Operations."},
    {"id": "m3", "room": "support", "user": "deploybot", "name": "Deploy Bot", "minutes": 20, "bot": True,
     "text": "Can anyone approve deploy 4411 to production? Build is green."},
    {"id": "m4", "room": "support", "user": "tomas", "name": "Tomas Lindqvist", "minutes": 25, "reply_to": "m3",
     "text": "Approved deploy 4411 after checking the migration plan with the data team."},
]


@pytest.fixture
def teamchat():
    register_extractor("teamchat_jsonl")(TeamChat)
    try:
        yield
    finally:  # registered for this test only
        plugins("extractor")._items.pop("teamchat_jsonl", None)
        assert "teamchat_jsonl" not in registry()


def test_a_new_chat_connectors_questions_become_work_items(teamchat, tmp_path):
    exports = tmp_path / "exports" / "acme"
    exports.mkdir(parents=True)
    (exports / "rooms.teamchat.jsonl").write_text("".join(json.dumps(m) + "\n" for m in MESSAGES))
    store = Store(tmp_path / "home")
    config = DatasetConfig(ner_model="")
    ctx = flow.context(store, "acme", exports, config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items")
    events = {e.event_id: e for e in store.read("anonymized_events", "acme")}
    assert {e.source for e in events.values()} == {"teamchat"}
    assert {e.medium for e in events.values()} == {"chat"}
    items = [i for i in store.read("work_items", "acme") if i.kind == "chat_answer"]
    assert len(items) == 1, [(r.reason, r.detail) for r in store.read("rejections", "acme")]
    item = items[0]
    assert events[item.request_event_id].native_id == "m1"
    assert [events[x].native_id for x in item.outcome_event_ids] == ["m2"]
    # the bot's question is not a request of a person: skipped with the reason the extractor gave
    skips = [r for r in store.read("rejections", "acme") if r.stage == "work_items" and r.family == "chat_answer"]
    assert any("teamchat bot" in r.detail for r in skips), [(r.reason, r.detail) for r in skips]
