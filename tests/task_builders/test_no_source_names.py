"""Past the extractors nothing tests a source name (DESIGN.md, Convention 16): a tracker, a forge or a chat whose
connector is not one of ours (its source unknown to every later stage) is linked, mined and served exactly as its
normalized fields say: an issue by its kind and native id, a chat message by its medium, whatever its kind."""

import datetime as dt

from environments.world import World, build_world
from core.config import DatasetConfig
from task_builders.links import find_links
from task_builders.mining import build_work_items
from warehouse.ids import event_id
from warehouse.schemas import Event

T0 = dt.datetime(2023, 4, 3, 9, tzinfo=dt.UTC)


def ev(source: str, kind: str, native: str, hours: float, medium: str, **kw) -> Event:
    return Event(event_id=event_id("d", source, native), dataset="d", source=source, kind=kind, native_id=native,
                 ts=T0 + dt.timedelta(hours=hours), medium=medium, **kw)


def events() -> list[Event]:
    issue = ev("youtrack", "issue_created", "APP-7", 0, "tracker", thread_key="APP-7", title="Upload stalls at 99%",
               body="Large uploads never finish.", attrs={"project": "APP"})
    forge = ev("forgejo", "issue_created", "team/app#3", 1, "tracker", thread_key="team/app#3",
               title="Dark mode resets", body="After a restart the theme is light again.")
    fix = ev("git", "commit", "c0ffee1234567890c0ffee1234567890c0ffee12", 30, "code",
             title="Fix APP-7: flush the last chunk", body="Fix APP-7: flush the last chunk", attrs={"repo": "app"})
    mail = ev("groupmail", "email", "<q1@mail.test>", 2, "mail", thread_key="<q1@mail.test>",
              title="Uploads", body="Is https://tracker.example/browse/APP-7 on anyone's list?")
    chat = ev("teamchat", "post", "c1:1", 3, "chat", thread_key="c1:1", body="see https://github.com/team/app/issues/3",
              attrs={"channel_id": "c1", "channel_name": "dev"})
    return [issue, forge, fix, mail, chat]


def test_links_name_an_issue_of_any_tracker_by_its_native_id():
    evs = events()
    by_id = {e.event_id: e for e in evs}
    links = {(by_id[x.from_event_id].native_id, by_id[x.to_event_id].native_id, x.kind) for x in find_links(evs)}
    assert ("<q1@mail.test>", "APP-7", "issue_url") in links            # a /browse/KEY URL of any host
    assert ("c1:1", "team/app#3", "issue_url") in links                  # a forge's issue URL, any forge's source
    assert ("c0ffee1234567890c0ffee1234567890c0ffee12", "APP-7", "jira_key") in links


def test_a_commit_naming_the_key_of_any_trackers_issue_is_its_fix():
    items, _ = build_work_items("d", events(), find_links(events()),
                                DatasetConfig(ner_model="", families=("commit_link",)))
    [app] = [i for i in items if i.thread_key == "APP-7"]
    assert app.attrs["fix_shas"] == ["c0ffee1234567890c0ffee1234567890c0ffee12"]
    assert app.attrs["mentions"] == 1                                    # the mail that links it


def test_the_world_places_events_by_medium_whatever_their_kind(tmp_path):
    world = World(build_world(events(), tmp_path / "world.sqlite", "k"))
    placed = {r["native_id"]: r["cls"] for r in world.rows("SELECT native_id, cls FROM docs")}
    assert placed == {"APP-7": "issue", "team/app#3": "issue", "<q1@mail.test>": "mail", "c1:1": "chat"}
