"""The GitHub REST JSON extractor: contract (the kit), mapping, the archive layout, detection, fuzzing.
Every person and text here is invented; the real archive is read in place by the `real` tests."""

import datetime as dt
import json
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from extractor_inputs import jira_issue, search_page
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors.detect import plan
from extractors.github import GitHubJsonExtractor, issue_ref
from extractors.jira import JiraJsonExtractor
from extractors.slack import SlackExportExtractor
from extractors.testing import ExtractorContract
from warehouse.ids import event_id
from warehouse.schemas import Event, Quarantine, to_table

UTC = dt.UTC
API = "https://api.github.com/repos/acme/widget"
WEB = "https://github.com/acme/widget"
SHA = "0123456789abcdef0123456789abcdef01234567"


def gh_user(login: str, **extra) -> dict:
    return {"login": login, "id": sum(map(ord, login)), "node_id": f"U_{login}", "type": "User",
            "url": f"https://api.github.com/users/{login}", "html_url": f"https://github.com/{login}", **extra}


def gh_issue(number: int, *, pr: bool = False, **fields) -> dict:
    """An issue as `GET /repos/acme/widget/issues/{number}` returns it (a pull request with `pr`)."""
    issue = {"url": f"{API}/issues/{number}", "repository_url": API, "html_url": f"{WEB}/issues/{number}",
             "id": 1000 + number, "node_id": f"I_{number}", "number": number, "title": f"Widget bug {number}",
             "user": gh_user("octo"), "labels": [{"name": "bug"}, {"name": "ui"}], "state": "open", "locked": False,
             "assignee": gh_user("hubot"), "assignees": [gh_user("hubot"), gh_user("mona")],
             "milestone": {"title": "v1"}, "comments": 1, "created_at": "2020-01-02T03:04:05Z",
             "updated_at": "2020-01-03T00:00:00Z", "closed_at": None, "author_association": "OWNER",
             "body": f"Steps for {number}", "reactions": {"url": "x", "total_count": 2, "+1": 2}}
    if pr:
        issue["html_url"] = f"{WEB}/pull/{number}"
        issue["pull_request"] = {"url": f"{API}/pulls/{number}", "merged_at": "2020-01-04T00:00:00Z"}
    issue.update(fields)
    return issue


def gh_comment(number: int, cid: int, **fields) -> dict:
    return {"url": f"{API}/issues/comments/{cid}", "html_url": f"{WEB}/issues/{number}#issuecomment-{cid}",
            "issue_url": f"{API}/issues/{number}", "id": cid, "node_id": f"IC_{cid}", "user": gh_user("mona"),
            "created_at": "2020-01-02T05:00:00Z", "updated_at": "2020-01-02T05:00:00Z", "body": f"comment {cid}",
            "author_association": "MEMBER", **fields}


def gh_event(event: str, eid: int, **fields) -> dict:
    return {"id": eid, "node_id": f"E_{eid}", "url": f"{API}/issues/events/{eid}", "actor": gh_user("hubot"),
            "event": event, "commit_id": None, "commit_url": None, "created_at": "2020-01-05T00:00:00Z", **fields}


def write(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1))
    return path


def run(path: Path, **config) -> tuple[list[Event], list[Quarantine]]:
    rows = list(GitHubJsonExtractor("ds", config, "r", root=path.parent).iter_records(path))
    return [r for r in rows if isinstance(r, Event)], [r for r in rows if isinstance(r, Quarantine)]


class TestGitHubContract(ExtractorContract):
    extractor = GitHubJsonExtractor
    record_kind = "issue_created"

    def make_input(self, tmp_path, n_records):
        return write(tmp_path / "issues.json", [gh_issue(i + 1) for i in range(n_records)])

    def make_bad_input(self, tmp_path):
        good = [json.dumps(gh_issue(i + 1)) for i in range(3)]
        path = tmp_path / "issues.json"
        path.write_text("[" + ",".join([good[0], '{"number": 9, "html_url": }', good[1], good[2]]) + "]")
        return path, 3


# --- mapping ------------------------------------------------------------------------------------------------

def test_issue_and_pull_requests(tmp_path):
    pulls_api = {"url": f"{API}/pulls/3", "html_url": f"{WEB}/pull/3", "id": 3003, "node_id": "PR_3", "number": 3,
                 "state": "closed", "title": "Fix widget", "user": gh_user("octo", name="Octo Cat",
                                                                          email="octo@example.com"),
                 "body": "Fixes #1", "created_at": "2020-01-03T00:00:00+02:00", "merged_at": "2020-01-04T00:00:00Z",
                 "merge_commit_sha": SHA, "merged_by": gh_user("hubot"), "draft": False,
                 "head": {"ref": "fix-1"}, "base": {"ref": "main", "repo": {"full_name": "acme/widget"}}}
    events, quarantined = run(write(tmp_path / "a.json", [gh_issue(1), gh_issue(2, pr=True), pulls_api]))
    assert quarantined == []
    issue, pr, pull = events
    assert (issue.kind, issue.native_id, issue.thread_key, issue.parent_id) == (
        "issue_created", "acme/widget#1", "acme/widget#1", None)
    assert (issue.title, issue.body, issue.actor, issue.actor_name) == (
        "Widget bug 1", "Steps for 1", "github:octo", "octo")
    assert issue.ts == dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)
    a = issue.attrs
    assert (a["repo"], a["number"], a["state"], a["labels"], a["milestone"], a["assignees"]) == (
        "acme/widget", 1, "open", ["bug", "ui"], "v1", ["hubot", "mona"])
    assert a["reactions"] == {"total_count": 2, "+1": 2} and a["is_pull_request"] is False
    assert [(p["handle"], p["role"]) for p in a["people"]] == [
        ("github:octo", "author"), ("github:hubot", "assignee"), ("github:mona", "assignee")]
    assert a["people"][0] == {"handle": "github:octo", "display_name": None, "email": None, "username": "octo",
                              "role": "author"}
    assert pr.kind == "pr_created" and pr.attrs["merged_at"] == "2020-01-04T00:00:00+00:00"
    assert (pull.kind, pull.native_id, pull.artifacts) == ("pr_created", "acme/widget#3", [SHA])
    assert (pull.attrs["head"], pull.attrs["base"], pull.attrs["merged_by"]) == ("fix-1", "main", "hubot")
    assert pull.ts == dt.datetime(2020, 1, 2, 22, tzinfo=UTC) and pull.actor_name == "Octo Cat"
    assert pull.attrs["people"][0]["email"] == "octo@example.com"
    assert issue.event_id == event_id("ds", "github", "acme/widget#1")


def test_comments_reviews_and_review_comments(tmp_path):
    review_comment = {"url": f"{API}/pulls/comments/70", "pull_request_url": f"{API}/pulls/2", "id": 70,
                      "node_id": "RC_70", "path": "src/w.py", "line": 12, "commit_id": SHA, "diff_hunk": "@@ -1 +1 @@",
                      "user": gh_user("mona"), "body": "nit", "created_at": "2020-01-03T00:00:00Z"}
    reply = {**review_comment, "id": 71, "in_reply_to_id": 70, "body": "done", "user": gh_user("octo")}
    review = {"id": 80, "node_id": "R_80", "user": gh_user("hubot"), "body": "LGTM", "state": "APPROVED",
              "commit_id": SHA, "pull_request_url": f"{API}/pulls/2", "submitted_at": "2020-01-03T01:00:00Z"}
    events, quarantined = run(write(tmp_path / "c.json", [gh_comment(1, 55), review_comment, reply, review]))
    assert quarantined == []
    comment, rc, rc_reply, rv = events
    assert (comment.kind, comment.native_id, comment.thread_key) == ("comment", "acme/widget#1/comment-55",
                                                                     "acme/widget#1")
    assert comment.parent_id == event_id("ds", "github", "acme/widget#1")
    assert (comment.actor, comment.body, comment.attrs["people"][0]["role"]) == ("github:mona", "comment 55",
                                                                                "commenter")
    assert (rc.kind, rc.native_id, rc.attrs["path"], rc.artifacts) == (
        "review_comment", "acme/widget#2/review-comment-70", "src/w.py", [SHA])
    assert rc.parent_id == event_id("ds", "github", "acme/widget#2") and rc_reply.parent_id == rc.event_id
    assert (rv.kind, rv.native_id, rv.attrs["state"], rv.body) == ("review", "acme/widget#2/review-80", "APPROVED",
                                                                   "LGTM")


def test_raw_timeline_beside_its_issue(tmp_path):
    write(tmp_path / "000001-main.json", gh_issue(1))
    timeline = [
        gh_event("labeled", 1, label={"name": "bug", "color": "f00"}),
        gh_event("referenced", 2, commit_id=SHA, commit_url=f"{API}/commits/{SHA}"),
        {"actor": gh_user("octo"), "created_at": "2020-01-06T00:00:00Z", "updated_at": "2020-01-06T00:00:00Z",
         "source": {"type": "issue", "issue": gh_issue(7, pr=True)}, "event": "cross-referenced"},
        {"sha": SHA, "node_id": "C_1", "url": f"{API}/git/commits/{SHA}", "html_url": f"{WEB}/commit/{SHA}",
         "author": {"name": "Ann Dev", "email": "Ann.Dev@Example.com", "date": "2020-01-04T10:00:00Z"},
         "message": "Fix the widget (#1)", "event": "committed"},
        {**gh_comment(1, 56), "event": "commented", "actor": gh_user("mona")},
        gh_event("assigned", 3, assignee=gh_user("mona")),
        gh_event("closed", 4, commit_id=SHA, state_reason="completed"),
    ]
    events, quarantined = run(write(tmp_path / "000001-timeline.json", timeline))
    assert quarantined == []
    assert [e.kind for e in events] == ["labeled", "referenced", "cross_reference", "committed", "comment",
                                        "assigned", "closed"]
    labeled, referenced, xref, committed, comment, assigned, closed = events
    assert {e.thread_key for e in events} == {"acme/widget#1"}
    assert {e.parent_id for e in events} == {event_id("ds", "github", "acme/widget#1")}
    assert labeled.native_id == "acme/widget#1/event-1" and labeled.attrs["label"] == "bug"
    assert referenced.attrs["commit_id"] == SHA and referenced.artifacts == [SHA]
    assert xref.attrs["source"] == {"type": "pull_request", "ref": "acme/widget#7", "title": "Widget bug 7"}
    assert xref.native_id == "acme/widget#1/cross-referenced-acme/widget#7@2020-01-06T00:00:00+00:00"
    assert xref.actor == "github:octo"
    assert (committed.native_id, committed.actor, committed.artifacts) == (
        f"acme/widget#1/commit-{SHA}", "github:email:ann.dev@example.com", [SHA])
    assert committed.attrs["people"][0]["display_name"] == "Ann Dev"
    assert comment.native_id == "acme/widget#1/comment-56"  # the same id the comments endpoint gives it
    assert [(p["handle"], p["role"]) for p in assigned.attrs["people"]] == [
        ("github:hubot", "author"), ("github:mona", "assignee")]
    assert closed.attrs["state_reason"] == "completed" and closed.artifacts == [SHA]


def test_archive_layout_and_its_sidecars(tmp_path):
    items = tmp_path / "items"
    write(items / "000001-main.json", {**gh_issue(1), "_meta": {"type": "issue"}})
    write(items / "000001-comments.json", [gh_comment(1, 55)])
    xrefs = write(items / "000001-xrefs.json", [
        {"event": "cross-referenced", "from": 12, "type": "issue", "actor": "octo", "date": "2020-02-01T00:00:00Z"},
        {"event": "cross-referenced", "from": 13, "type": "issue", "actor": None, "date": "2020-02-02T00:00:00Z"},
        {"event": "referenced", "commit": SHA, "actor": "mona", "date": "2020-02-03T00:00:00Z"}])
    write(items / "000002-main.json", gh_issue(2))
    empty = write(items / "000002-comments.json", [])
    orphan = write(items / "000009-xrefs.json", [{"event": "referenced", "commit": SHA, "actor": "x",
                                                  "date": "2020-02-03T00:00:00Z"}])
    claimed = GitHubJsonExtractor.detect(tmp_path)
    assert xrefs in claimed and empty in claimed and orphan not in claimed and len(claimed) == 5
    events, quarantined = run(xrefs)
    assert quarantined == []
    a, ghost, ref = events
    assert (a.kind, a.actor, a.attrs["source"]) == ("cross_reference", "github:octo",
                                                    {"type": "issue", "ref": "acme/widget#12"})
    assert ghost.actor is None and ghost.attrs["people"] == []
    assert (ref.kind, ref.artifacts, ref.native_id) == (
        "referenced", [SHA], f"acme/widget#1/referenced-{SHA}@2020-02-03T00:00:00+00:00")
    assert run(empty) == ([], [])
    events, quarantined = run(orphan)  # read on its own, it cannot tell its issue
    assert events == [] and [q.error_class for q in quarantined] == ["unknown_issue"]


def test_issue_events_api_and_search_pages_name_their_issue(tmp_path):
    events_api = [gh_event("closed", 9, issue=gh_issue(4))]
    page = {"total_count": 2, "incomplete_results": False, "items": [gh_issue(5), gh_issue(6, pr=True)]}
    events, quarantined = run(write(tmp_path / "events.json", events_api))
    assert quarantined == [] and events[0].native_id == "acme/widget#4/event-9"
    events, quarantined = run(write(tmp_path / "search.json", page))
    assert quarantined == [] and [e.native_id for e in events] == ["acme/widget#5", "acme/widget#6"]


@pytest.mark.parametrize("record, ref", [
    ({"html_url": "https://github.com/o/r/issues/5"}, ("o/r", 5)),
    ({"url": "https://api.github.com/repos/o/r/pulls/6"}, ("o/r", 6)),
    ({"issue_url": "https://ghe.example.com/api/v3/repos/o/r/issues/7"}, ("o/r", 7)),
    ({"html_url": "https://github.com/o/r/pull/8#discussion_r1"}, ("o/r", 8)),
    ({"number": 9, "repository_url": "https://api.github.com/repos/o/r"}, ("o/r", 9)),
    ({"url": "https://api.github.com/repos/o/r/issues/events/10"}, None),
    ({"url": "https://api.github.com/repos/o/r/issues/comments/11"}, None),
    ({"number": 12}, None),
])
def test_issue_ref(record, ref):
    assert issue_ref(record) == ref


# --- bad input ------------------------------------------------------------------------------------------

def test_bad_records_are_quarantined_alone(tmp_path):
    no_date = gh_issue(3)
    del no_date["created_at"]
    records = [gh_issue(1), 42, {"hello": "world"}, no_date, gh_issue(4, created_at="2020-01-02T03:04:05"),
               gh_comment(1, 5, id=None), gh_issue(1), {"number": 7, "title": "no url"}, gh_comment(1, 6)]
    events, quarantined = run(write(tmp_path / "a.json", records))
    assert [e.native_id for e in events] == ["acme/widget#1", "acme/widget#1/comment-6"]
    assert [(q.error_class, q.member) for q in quarantined] == [
        ("not_an_object", None), ("unknown_record", None), ("missing_date", "acme/widget#3"),
        ("bad_date", "acme/widget#4"), ("missing_id", "acme/widget#1"), ("duplicate", "acme/widget#1"),
        ("unknown_issue", None)]
    assert all(q.file == "a.json" and q.offset and q.message for q in quarantined)


@pytest.mark.parametrize("content, error_class", [
    (b"", "empty"), (b"not json", "json_decode"), (b'[{"number": 1, "html_url"', "truncated"),
    (b"[] []", "trailing_data"),
])
def test_not_json_is_quarantined(tmp_path, content, error_class):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    events, quarantined = run(path)
    assert events == [] and error_class in [q.error_class for q in quarantined]


def test_record_over_the_size_cap_is_quarantined(tmp_path):
    path = write(tmp_path / "a.json", [gh_issue(1), gh_issue(2, body="x" * 5000), gh_issue(3)])
    events, quarantined = run(path, max_record_bytes=4000)
    assert [e.native_id for e in events] == ["acme/widget#1", "acme/widget#3"]
    assert [q.error_class for q in quarantined] == ["too_large"]


# --- detection ----------------------------------------------------------------------------------------------

def test_detect_claims_github_and_only_github(tmp_path):
    github = [write(tmp_path / "gh" / "issues.json", [gh_issue(1)]),
              write(tmp_path / "gh" / "comments.json", [gh_comment(1, 2)]),
              write(tmp_path / "gh" / "timeline.json", [gh_event("closed", 3)])]
    jira = [write(tmp_path / "jira" / "PROJ-1.json", jira_issue("PROJ-1")),
            write(tmp_path / "jira" / "page.json", search_page([jira_issue("PROJ-2")]))]
    write(tmp_path / "slack.json", [{"type": "message", "text": "see https://github.com/o/r/issues/1",
                                     "attachments": [{"title_link": "https://github.com/o/r/issues/1"}]}])
    write(tmp_path / "plain.json", [{"number": 1, "title": "x", "user": {"login": "u"}}])
    assert GitHubJsonExtractor.detect(tmp_path) == sorted(github)
    assert JiraJsonExtractor.detect(tmp_path) == sorted(jira)  # Jira leaves the GitHub files alone


# --- fuzzing ------------------------------------------------------------------------------------------------

HOSTILE = {
    "deep": lambda: b"[" * 100_000 + b"]" * 100_000,
    "deep_member": lambda: b'{"number": 1, "html_url": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "unclosed_deep": lambda: b"[" * 100_000,
    "huge_string": lambda: json.dumps("x" * 10_000_000).encode(),
    "huge_body": lambda: json.dumps(gh_issue(99, body="y" * 10_000_000)).encode(),
    "long_line": lambda: b'{"number": 98, "body": "' + b"z" * 10_000_000 + b'", "broken": }',
}
PARTS = [json.dumps(r).encode() for r in [gh_issue(1), gh_comment(1, 11), gh_issue(2, pr=True),
                                          gh_comment(2, 12), gh_issue(3), gh_comment(3, 13)]]
IDS = ["acme/widget#1", "acme/widget#1/comment-11", "acme/widget#2", "acme/widget#2/comment-12", "acme/widget#3",
       "acme/widget#3/comment-13"]


def fuzz_run(data: bytes) -> set[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.json"
        path.write_bytes(data)
        events, quarantined = run(path)  # never raises
    assert to_table(Event, events).num_rows == len(events)
    assert len({e.event_id for e in events}) == len(events)
    assert all(q.file == "f.json" for q in quarantined)
    return {e.native_id for e in events}


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(mode=st.sampled_from(["truncate", "random", "flip"]), where=st.floats(0, 1), junk=st.binary(max_size=64),
       bit=st.integers(0, 7))
def test_fuzz_damaged_file_keeps_every_record_before_the_damage(mode, where, junk, bit):
    data = bytearray(b"[" + b",".join(PARTS) + b"]")
    at = int(where * (len(data) - 1))
    if mode == "truncate":
        data = data[:at]
    elif mode == "random":
        data[at:at + len(junk)] = junk
    else:
        data[at] ^= 1 << bit
    ends = [sum(len(p) + 1 for p in PARTS[:k + 1]) for k in range(len(PARTS))]
    assert {i for i, end in zip(IDS, ends) if end <= at} <= fuzz_run(bytes(data))


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(hostile=st.sampled_from(sorted(HOSTILE)), slot=st.integers(0, 6))
def test_fuzz_hostile_record_between_good_ones(hostile, slot):
    got = fuzz_run(b"[" + b",".join(PARTS[:slot] + [HOSTILE[hostile]()] + PARTS[slot:]) + b"]")
    assert set(IDS[:slot] if hostile == "unclosed_deep" else IDS) <= got


# --- the real archive (read in place, never copied) -----------------------------------------------------------

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "real"
ARCHIVE = REAL / "github-issues-rust-archive"


def real(test):
    return pytest.mark.real(pytest.mark.skipif(not REAL.is_dir(), reason=f"real exports not present at {REAL}")(test))


@real
def test_real_archive_every_record_is_accounted_for():
    files = GitHubJsonExtractor.detect(ARCHIVE)
    assert len(files) == 90 and {p.name.split("-")[1] for p in files} == {"main.json", "comments.json", "xrefs.json"}
    expected, events, quarantined = Counter(), [], []
    for path in files:
        value = json.loads(path.read_bytes())  # counted independently of the extractor
        records = value if isinstance(value, list) else [value]
        for r in records:
            expected[r.get("event", "comment" if "issue_url" in r else "issue")] += 1
        e, q = run(path)
        assert len(e) + len(q) == len(records), path.name
        events += e
        quarantined += q
    assert quarantined == []
    kinds = Counter(e.kind for e in events)
    assert kinds == {"issue_created": expected["issue"], "comment": expected["comment"],
                     "referenced": expected["referenced"], "cross_reference": expected["cross-referenced"]}
    assert sum(kinds.values()) == 3016
    assert len({e.event_id for e in events}) == len(events)
    assert to_table(Event, events).num_rows == len(events)
    issues = {e.event_id for e in events if e.kind == "issue_created"}
    assert all(e.parent_id in issues for e in events if e.kind != "issue_created")
    assert all(e.artifacts and len(e.artifacts[0]) == 40 for e in events if e.kind == "referenced")
    assert sum(e.actor is None for e in events) == sum(1 for e in events if e.kind == "cross_reference"
                                                       and not e.attrs["people"])


@real
def test_real_github_and_jira_and_slack_claim_only_their_own_files():
    claims = plan(REAL)
    github = [p for name, p in claims if name == "github_json"]
    assert len(github) == 90 and all(p.relative_to(REAL).parts[0] == ARCHIVE.name for p in github)
    assert not [p for name, p in claims if name == "jira_json" and ARCHIVE in p.parents]
    assert not [p for name, p in claims if name == "slack_export" and ARCHIVE in p.parents]
    assert SlackExportExtractor.detect(ARCHIVE) == []


def test_closed_issues_carry_the_normalized_resolution(tmp_path):
    closed = gh_issue(1, state="closed", closed_at="2014-05-02T10:00:00Z", state_reason="completed")
    events, _ = run(write(tmp_path / "issues.json", [closed, gh_issue(2, state="open")]))
    heads = {e.native_id.split("#")[-1]: e for e in events if e.kind == "issue_created"}
    assert heads["1"].attrs["resolution_evidence"] == "closed_at"
    assert heads["1"].attrs["resolved_at"].startswith("2014-05-02T10:00:00")
    assert heads["2"].attrs["resolved_at"] is None
