import datetime as dt

from task_builders.mining import build_work_items, find_keys
from warehouse.ids import event_id
from warehouse.schemas import Event

T0 = dt.datetime(2021, 3, 1, tzinfo=dt.UTC)


def ev(kind, native, ts_h=0, **kw):
    src = "git" if kind == "commit" else "jira"
    return Event(event_id=event_id("d", src, native), dataset="d", source=src, kind=kind, native_id=native,
                 ts=T0 + dt.timedelta(hours=ts_h), **kw)


def test_keys_respect_word_boundaries():
    known = {"ALOY-12", "ALOY-123", "CORE-1"}
    assert find_keys("fix ALOY-123 crash", known) == ["ALOY-123"]
    assert find_keys("fix ALOY-12: crash", known) == ["ALOY-12"]
    assert find_keys("XALOY-12 and ALOY-12x and ALOY-12-3", known) == []
    assert find_keys("[ALOY-12] (CORE-1), ALOY-12 again", known) == ["ALOY-12", "CORE-1"]
    assert find_keys("branch ALOY-12-fix-crash", known) == ["ALOY-12"]
    assert find_keys("ALOY-999 is not an issue here", known) == []


def test_work_items_link_fixes_and_skip_merges():
    events = [
        ev("issue_created", "ALOY-12", thread_key="ALOY-12", title="crash"),
        ev("issue_created", "ALOY-123", thread_key="ALOY-123", title="other"),
        ev("commit", "a" * 40, 5, body="ALOY-123: other fix", attrs={"merge": False}),
        ev("commit", "b" * 40, 3, body="Fix crash (ALOY-12)", attrs={"merge": False}),
        ev("commit", "c" * 40, 6, body="Merge branch 'ALOY-12'", attrs={"merge": True}),
        ev("comment", "ALOY-12#comment-1", 1, thread_key="ALOY-12", body="looking"),
    ]
    items, rejections = build_work_items("d", events)
    by_key = {i.thread_key: i for i in items if i.kind == "issue"}
    assert by_key["ALOY-12"].attrs["fix_shas"] == ["b" * 40]
    assert by_key["ALOY-123"].attrs["fix_shas"] == ["a" * 40]
    assert len(by_key["ALOY-12"].context_event_ids) == 1
    assert [r.subject_id for r in rejections if r.reason.startswith("merge")] == ["c" * 40]
    assert {r.reason for r in rejections if r.family == "resolution"} == {"not resolved"}
    again, _ = build_work_items("d", list(reversed(events)))
    assert [i.item_id for i in again] == [i.item_id for i in items]


def test_resolution_without_a_changelog_uses_the_resolution_fields():
    """A Jira export without changelog (or GitHub issue JSON) still says when an issue was resolved: the
    extractor normalizes it to attrs.resolved_at, and mining uses it when no changelog entry exists."""
    done = T0 + dt.timedelta(hours=10)
    events = [
        ev("issue_created", "ALOY-1", thread_key="ALOY-1", title="crash",
           attrs={"resolved_at": done.isoformat(), "resolution_evidence": "resolutiondate", "resolution": "Fixed"}),
        ev("comment", "ALOY-1#comment-1", 9.5, thread_key="ALOY-1", body="Fixed in the 2.1 branch by checking null."),
        ev("issue_created", "ALOY-2", thread_key="ALOY-2", title="open one"),
        ev("issue_created", "ALOY-3", thread_key="ALOY-3", title="changelog wins",
           attrs={"resolved_at": (done + dt.timedelta(days=30)).isoformat(), "resolution_evidence": "resolutiondate"}),
        ev("field_changed", "ALOY-3#ch-1", 11, thread_key="ALOY-3", attrs={"field": "status", "toString": "Resolved"}),
        ev("comment", "ALOY-3#comment-1", 11.2, thread_key="ALOY-3", body="Resolved by the config change in 2.1."),
    ]
    items, rejections = build_work_items("d", events)
    notes = {i.thread_key: i for i in items if i.kind == "resolution"}
    assert notes["ALOY-1"].attrs["resolution_evidence"] == "resolutiondate"
    assert notes["ALOY-1"].attrs["resolved_at"] == done.isoformat()
    assert notes["ALOY-3"].attrs["resolution_evidence"] == "changelog"
    assert notes["ALOY-3"].attrs["resolved_at"] == (T0 + dt.timedelta(hours=11)).isoformat()
    assert [r.subject_id for r in rejections if r.reason == "not resolved"] == ["ALOY-2"]
