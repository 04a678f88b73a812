import datetime as dt
import io
import json
from pathlib import Path

import pytest
from extractor_inputs import jira_issue, jira_user, search_page, write_json
from hypothesis import given, settings
from hypothesis import strategies as st

from extractors import jsonstream
from extractors.jira import JiraJsonExtractor, parse_ts, person
from extractors.testing import ExtractorContract
from warehouse.ids import event_id
from warehouse.schemas import Event, Quarantine

UTC = dt.UTC


class TestJiraContract(ExtractorContract):
    extractor = JiraJsonExtractor
    record_kind = "issue_created"

    def make_input(self, tmp_path, n_records):
        issues = [jira_issue(f"PROJ-{i}") for i in range(n_records)]
        return write_json(tmp_path / "page.json", search_page(issues))

    def make_bad_input(self, tmp_path):
        good = [json.dumps(jira_issue(f"PROJ-{i}")) for i in range(3)]
        text = "[" + ",".join([good[0], good[1], '{"key": "PROJ-9", "fields": {"created": }}', good[2]]) + "]"
        path = tmp_path / "bad.json"
        path.write_text(text)
        return path, 3


def run(path: Path, **config) -> tuple[list[Event], list[Quarantine]]:
    rows = list(JiraJsonExtractor("ds", config, "r", root=path.parent).iter_records(path))
    return [r for r in rows if isinstance(r, Event)], [r for r in rows if isinstance(r, Quarantine)]


# --- shapes of input ------------------------------------------------------------------------------

def test_single_issue_events(tmp_path):
    issue = jira_issue("PROJ-7", comments=2, histories=1, created="2013-03-06T14:22:11.000+0200",
                       issuelinks=[{"type": {"name": "Duplicate", "inward": "is duplicated by",
                                             "outward": "duplicates"}, "outwardIssue": {"key": "PROJ-3"}}])
    events, quarantined = run(write_json(tmp_path / "PROJ-7.json", issue))
    assert quarantined == []
    assert [e.kind for e in events] == ["issue_created", "comment", "comment"] + ["field_changed"] * 2
    head, c1, _, status, assignee = events
    assert head.native_id == head.thread_key == "PROJ-7"
    assert head.ts == dt.datetime(2013, 3, 6, 12, 22, 11, tzinfo=UTC)  # +0200 -> UTC
    assert (head.actor, head.actor_name, head.title) == ("jira:rita", "Rita", "Summary of PROJ-7")
    assert head.attrs["updated"] == "2013-03-07T10:00:00+02:00"  # the source's zone is kept in attrs
    assert head.attrs["assignee"]["handle"] == "jira:alan"
    assert head.attrs["components"] == ["Core"] and head.attrs["versions"] == ["1.0"]
    assert head.attrs["issuelinks"] == [{"type": "Duplicate", "direction": "outward", "key": "PROJ-3",
                                         "relation": "duplicates"}]
    assert {(p["handle"], p["role"]) for p in head.attrs["people"]} == {
        ("jira:rita", "reporter"), ("jira:alan", "assignee"), ("jira:rita", "creator")}
    assert c1.native_id == "PROJ-7#comment-100" and c1.parent_id == head.event_id
    assert c1.actor == "jira:carl" and c1.body == "comment 0 on PROJ-7" and c1.thread_key == "PROJ-7"
    assert status.native_id == "PROJ-7#history-500-0" and status.actor == "jira:alan"
    assert status.attrs["toString"] == "In Progress" and status.attrs["history_id"] == "500"
    assert {(p["handle"], p["role"]) for p in assignee.attrs["people"]} == {
        ("jira:alan", "changelog_author"), ("jira:alan", "to")}
    assert head.provenance == {"file": "PROJ-7.json", "offset": 0}


def test_search_page_array_single_and_perceval_give_the_same_events(tmp_path):
    issues = [jira_issue("PROJ-1"), jira_issue("PROJ-2")]
    perceval = []
    for i in issues:
        data = json.loads(json.dumps(i))
        data["comments_data"] = data["fields"].pop("comment")["comments"]
        perceval.append({"backend_name": "Jira", "category": "issue", "data": data})
    shapes = {
        "page": search_page(issues),
        "sorted_page": json.loads(json.dumps(search_page(issues), sort_keys=True)),  # "issues" before "total"
        "array": issues,
        "perceval": perceval,
    }
    seen = {}
    for name, value in shapes.items():
        events, quarantined = run(write_json(tmp_path / f"{name}.json", value, indent=1))
        assert quarantined == []
        seen[name] = [(e.event_id, e.kind, e.ts, e.body) for e in events]
    assert len(seen["page"]) == 2 * 4
    assert all(v == seen["page"] for v in seen.values())
    single, _ = run(write_json(tmp_path / "one.json", issues[1]))
    assert [x[0] for x in seen["page"][4:]] == [e.event_id for e in single]


def test_offsets_point_at_each_issue(tmp_path):
    issues = [jira_issue(f"PROJ-{i}") for i in range(3)]
    path = write_json(tmp_path / "page.json", search_page(issues), indent=2)
    raw = path.read_bytes()
    events, _ = run(path)
    for e in events:
        if e.kind == "issue_created":
            issue = json.JSONDecoder().raw_decode(raw[e.provenance["offset"]:].decode())[0]
            assert issue["key"] == e.native_id


# --- identities and dates -------------------------------------------------------------------------

def test_handle_prefers_name_then_key_then_account_id():
    assert person(jira_user("ann"))["handle"] == "jira:ann"
    assert person(jira_user("ann", with_name=False))["handle"] == "jira:key-ann"
    assert person({"accountId": "5570:x", "displayName": "X"}) == {
        "handle": "jira:5570:x", "display_name": "X", "email": None, "username": None}
    assert person(jira_user("ann"))["email"] == "ann@example.com"
    assert person({"displayName": "Nobody"}) is None and person(None) is None


@pytest.mark.parametrize("raw, expected", [
    ("2013-03-06T14:22:11.000+0000", dt.datetime(2013, 3, 6, 14, 22, 11, tzinfo=UTC)),
    ("2018-05-14T23:54:10.593+0200", dt.datetime(2018, 5, 14, 21, 54, 10, 593000, tzinfo=UTC)),
    ("2018-03-25T22:22:00.000Z", dt.datetime(2018, 3, 25, 22, 22, tzinfo=UTC)),
    ("2013-03-06T14:22:11-05:00", dt.datetime(2013, 3, 6, 19, 22, 11, tzinfo=UTC)),
    ("2013-03-06T14:22:11", None),  # no zone: refused rather than guessed
    ("yesterday", None), (None, None), (17, None),
])
def test_parse_ts(raw, expected):
    ts = parse_ts(raw)
    assert (ts.astimezone(UTC) if ts else None) == expected


# --- bad input ------------------------------------------------------------------------------------

def test_bad_issues_are_quarantined_one_by_one(tmp_path):
    issues = [jira_issue("PROJ-1"), {"fields": {"created": "2013-03-06T14:22:11.000+0000"}},
              jira_issue("PROJ-3", created=None), jira_issue("PROJ-4", created="2013-03-06T14:22:11"),
              42, {"key": "PROJ-6"}, jira_issue("PROJ-7")]
    events, quarantined = run(write_json(tmp_path / "a.json", issues))
    assert [e.native_id for e in events if e.kind == "issue_created"] == ["PROJ-1", "PROJ-7"]
    assert [q.error_class for q in quarantined] == ["missing_key", "missing_created", "missing_created",
                                                    "not_an_object", "missing_fields"]
    assert all(q.file == "a.json" and q.offset and q.message for q in quarantined)
    assert [q.member for q in quarantined] == [None, "PROJ-3", "PROJ-4", None, "PROJ-6"]


def test_truncated_file_keeps_the_issues_before_the_cut(tmp_path):
    text = json.dumps(search_page([jira_issue(f"PROJ-{i}") for i in range(3)]))
    cut = text.index('"key": "PROJ-2"')
    path = tmp_path / "cut.json"
    path.write_text(text[:cut])
    events, quarantined = run(path)
    assert [e.native_id for e in events if e.kind == "issue_created"] == ["PROJ-0", "PROJ-1"]
    assert [q.error_class for q in quarantined] == ["truncated"]
    assert text[quarantined[0].offset] == "{"


@pytest.mark.parametrize("content, error_class", [
    (b"", "empty"), (b"not json at all", "json_decode"),
    (b'{"key": "PROJ-1", "fields": {"created"', "truncated"),
    (b'[{"a": 1}] trailing', "trailing_data"),
])
def test_not_json_is_quarantined(tmp_path, content, error_class):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    _, quarantined = run(path)
    assert error_class in [q.error_class for q in quarantined]
    assert all(q.file == "x.json" for q in quarantined)


def test_unreadable_file_is_one_quarantine_row(tmp_path):
    folder = tmp_path / "dir.json"
    folder.mkdir()
    for path in (folder, tmp_path / "missing.json"):
        events, quarantined = run(path)
        assert events == [] and [q.error_class for q in quarantined] == ["unreadable"]


def test_bad_comment_and_history_are_quarantined_alone(tmp_path):
    issue = jira_issue("PROJ-1", comments=2, histories=2)
    del issue["fields"]["comment"]["comments"][0]["created"]
    issue["changelog"]["histories"][1]["created"] = "never"
    events, quarantined = run(write_json(tmp_path / "i.json", issue))
    assert [e.kind for e in events] == ["issue_created", "comment", "field_changed", "field_changed"]
    assert [(q.error_class, q.member) for q in quarantined] == [("bad_comment", "PROJ-1#comment-100[0]"),
                                                               ("bad_history", "PROJ-1#history-501[1]")]


def test_issue_over_the_size_cap_is_quarantined_and_neighbours_kept(tmp_path):
    big = jira_issue("PROJ-2", description="x" * 5000)
    path = write_json(tmp_path / "a.json", [jira_issue("PROJ-1"), big, jira_issue("PROJ-3")])
    events, quarantined = run(path, max_issue_bytes=4000)
    assert [e.native_id for e in events if e.kind == "issue_created"] == ["PROJ-1", "PROJ-3"]
    assert [q.error_class for q in quarantined] == ["too_large"]
    _, single = run(write_json(tmp_path / "b.json", big), max_issue_bytes=4000)
    assert [q.error_class for q in single] == ["too_large"]


def test_invalid_utf8_is_replaced_and_flagged(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(json.dumps([jira_issue("PROJ-1", summary="caf\u00e9")]).encode().replace(
        b"caf\\u00e9", b"caf\xe9"))
    events, quarantined = run(path)
    assert quarantined == [] and events[0].title == "caf\ufffd" and events[0].attrs["encoding_error"] is True


def test_unknown_config_key_is_an_error():
    with pytest.raises(ValueError):
        JiraJsonExtractor("ds", {"max_issue_byte": 1})


# --- detection ------------------------------------------------------------------------------------

def test_detect_claims_jira_and_leaves_other_json(tmp_path):
    jira = [write_json(tmp_path / "one.json", jira_issue("PROJ-1")),
            write_json(tmp_path / "sub" / "empty_page.json", search_page([])),
            write_json(tmp_path / "perceval.json", [{"backend_name": "Jira", "data": {}}])]
    write_json(tmp_path / "project.json", {"id": "1", "key": "PROJ", "components": [{"name": "Core"}]})
    write_json(tmp_path / "slack.json", [{"type": "message", "attachments": [{"fields": [{"title": "a"}]}]}])
    write_json(tmp_path / "github.json", [{"number": 1, "title": "x", "user": {"login": "u"}}])
    (tmp_path / "notes.txt").write_text('"fields": {')
    assert JiraJsonExtractor.detect(tmp_path) == sorted(jira)


# --- the streaming reader -------------------------------------------------------------------------

def test_reader_streams_instead_of_loading_the_file(monkeypatch):
    monkeypatch.setattr(jsonstream, "CHUNK", 256)
    data = json.dumps(search_page([jira_issue(f"PROJ-{i}") for i in range(50)])).encode()
    f = io.BytesIO(data)
    items = jsonstream.iter_json_items(f, array_keys=("issues",))
    assert next(items).value["key"] == "PROJ-0"
    assert f.tell() < len(data) / 10


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8")),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(items=st.lists(json_values, max_size=6), chunk=st.integers(1, 40), indent=st.sampled_from([None, 1]),
       ascii_only=st.booleans())
def test_reader_matches_json_loads_at_any_chunk_size(items, chunk, indent, ascii_only):
    old, jsonstream.CHUNK = jsonstream.CHUNK, chunk
    try:
        data = json.dumps({"startAt": 0, "issues": items, "total": 1}, indent=indent,
                          ensure_ascii=ascii_only).encode()
        got = list(jsonstream.iter_json_items(io.BytesIO(data), array_keys=("issues",)))
    finally:
        jsonstream.CHUNK = old
    assert [g.error_class for g in got] == [None] * len(items)
    assert [g.value for g in got] == items
    for g in got:  # each offset is where that item's JSON starts
        assert json.JSONDecoder().raw_decode(data[g.offset:].decode("utf-8"))[0] == g.value


def test_event_ids_follow_the_warehouse_rule(tmp_path):
    events, _ = run(write_json(tmp_path / "one.json", jira_issue("PROJ-1")))
    assert events[0].event_id == event_id("ds", "jira", "PROJ-1")


def test_detect_ignores_a_fields_object_without_jira_dates(tmp_path):
    write_json(tmp_path / "users.json", [{"id": "U1", "profile": {"fields": {}, "real_name": "X"}}])
    keyless = jira_issue("PROJ-1")
    del keyless["key"]
    claimed = write_json(tmp_path / "keyless.json", keyless)  # still an issue: fields + a Jira date
    assert JiraJsonExtractor.detect(tmp_path) == [claimed]


def test_repeated_key_and_keyless_issues_in_nested_pages_get_distinct_rows(tmp_path):
    pages = [search_page([jira_issue("PROJ-1"), {"fields": {}}]),
             search_page([jira_issue("PROJ-1"), {"fields": {}}, jira_issue("PROJ-2")])]
    events, quarantined = run(write_json(tmp_path / "pages.json", pages))
    assert [e.native_id for e in events if e.kind == "issue_created"] == ["PROJ-1", "PROJ-2"]
    assert len({e.event_id for e in events}) == len(events)
    assert [(q.error_class, q.member) for q in quarantined] == [
        ("missing_key", "issues[1]"), ("duplicate_key", "PROJ-1"), ("missing_key", "issues[1]")]
    assert len({q.quarantine_id for q in quarantined}) == 3  # the same place in two pages: distinct offsets


def test_resolution_fields_are_normalized_for_exports_without_changelog(tmp_path):
    """Jira sets resolutiondate with the resolution (and clears it on reopening): an export without changelog
    still says when an issue was resolved."""
    done = jira_issue("PROJ-1", histories=0)
    done["fields"].update(resolutiondate="2013-03-09T08:00:00.000+0100", resolution={"name": "Fixed"},
                          status={"name": "Closed"})
    events, _ = run(write_json(tmp_path / "page.json", search_page([done, jira_issue("PROJ-2", histories=0)])))
    heads = {e.native_id: e for e in events if e.kind == "issue_created"}
    assert heads["PROJ-1"].attrs["resolved_at"] == "2013-03-09T08:00:00+01:00"
    assert heads["PROJ-1"].attrs["resolution_evidence"] == "resolutiondate"
    assert heads["PROJ-2"].attrs["resolved_at"] is None and heads["PROJ-2"].attrs["resolution_evidence"] is None
