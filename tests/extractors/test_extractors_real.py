"""The Jira and git extractors on the real exports in ../shared/data/real (read in place, never copied)."""

import json
from collections import Counter
from pathlib import Path

import pytest

from extractors.detect import plan, unclaimed
from extractors.git import GitExtractor
from extractors.jira import JiraJsonExtractor
from warehouse.schemas import Event, Quarantine, to_table

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "real"
ALOY = REAL / "jira-appcelerator-tidev"
PERCEVAL = REAL / "jira-finos-perceval-fixture"

pytestmark = [pytest.mark.real,
              pytest.mark.skipif(not REAL.is_dir(), reason=f"real exports not present at {REAL}")]


def issues_in(path: Path) -> list:
    """Count independently of the extractor: the file's issues, whatever its shape (small files only)."""
    value = json.loads(path.read_bytes())
    if isinstance(value, dict):
        return value.get("issues", [value])
    return [v.get("data", v) if isinstance(v, dict) else v for v in value]


def ingest_file(root: Path, path: Path):
    rows = list(JiraJsonExtractor("real", None, "r", root=root).iter_records(path))
    return [r for r in rows if isinstance(r, Event)], [r for r in rows if isinstance(r, Quarantine)]


@pytest.mark.parametrize("root", [ALOY, PERCEVAL], ids=["aloy", "perceval"])
def test_every_jira_issue_is_accounted_for(root):
    files = [p for name, p in plan(root) if name == "jira_json"]
    assert files
    for path in files:
        events, quarantined = ingest_file(root, path)
        issues = issues_in(path)
        created = [e for e in events if e.kind == "issue_created"]
        issue_level = [q for q in quarantined if "#" not in (q.member or "")]
        assert len(created) + len(issue_level) == len(issues), path.name
        assert to_table(Event, events).num_rows == len(events)
        # every comment and changelog item of an ingested issue is an event (or quarantined alone)
        by_key = {i["key"]: i for i in issues if isinstance(i, dict) and "key" in i}
        for e in created:
            issue = by_key[e.native_id]
            comments = {str(c["id"]) for c in [*issue["fields"].get("comment", {}).get("comments", []),
                                              *(issue.get("comments_data") or [])]}
            items = sum(len(h["items"]) for h in issue.get("changelog", {}).get("histories", []))
            mine = Counter(x.kind for x in events if x.thread_key == e.native_id)
            assert mine["comment"] == len(comments) and mine["field_changed"] == items, e.native_id


def test_aloy_counts():
    files = [p for name, p in plan(ALOY) if name == "jira_json"]
    events, quarantined = [], []
    for path in files:
        e, q = ingest_file(ALOY, path)
        events += e
        quarantined += q
    kinds = Counter(e.kind for e in events)
    assert len(files) == 80 and kinds["issue_created"] == 80 and quarantined == []
    assert kinds["comment"] > 0 and kinds["field_changed"] == 0  # this export has no changelog
    assert all(e.actor and e.actor.startswith("jira:") for e in events if e.kind == "issue_created")
    # the project description and the commit metadata are not issues: left unclaimed, not misread
    assert {p.name for p in unclaimed(ALOY)} == {"project.json", "alloy_git_commits_for_sample.jsonl"}


def test_perceval_fixture_counts():
    results = {p.name: ingest_file(PERCEVAL, p) for _, p in plan(PERCEVAL)}
    assert set(results) == {"jira.json", "perceval_jira_issues_page_1_fiware_anonymized.json"}
    events, quarantined = results["jira.json"]
    assert sum(e.kind == "issue_created" for e in events) == 4
    assert [(q.error_class, q.member) for q in quarantined] == [("missing_fields", "CONTRIB-4")]
    assert any(e.kind == "field_changed" for e in events) and any(e.kind == "comment" for e in events)
    page_events, page_quarantined = results["perceval_jira_issues_page_1_fiware_anonymized.json"]
    assert page_quarantined == [] and sum(e.kind == "issue_created" for e in page_events) == 2


def test_jira_claims_only_jira_files_across_all_real_exports():
    claimed = [p for name, p in plan(REAL) if name == "jira_json"]
    assert claimed and all(p.relative_to(REAL).parts[0].startswith("jira-") for p in claimed)
    # the one repository of the real data is a git bundle; the commit metadata files are not repositories
    assert [p.name for name, p in plan(REAL) if name == "git"] == ["more-itertools.bundle"]


def test_git_extractor_refuses_the_commit_metadata_files():
    """The *_git_commits*.jsonl files are `git log` metadata, not repositories."""
    jsonl = sorted(REAL.glob("*/*_git_commits*.jsonl"))
    assert jsonl
    rows = list(GitExtractor("real", None, "r", root=REAL).iter_records(jsonl[0]))
    assert [r.error_class for r in rows] == ["not_a_repository"]


@pytest.mark.parametrize("folder, evidence, at_least", [("jira-appcelerator-tidev", "resolutiondate", 40),
                                                        ("github-issues-rust-archive", "closed_at", 25)])
def test_real_exports_without_changelog_give_resolution_items(tmp_path, folder, evidence, at_least):
    """Both exports have no changelog entry for their resolutions: every issue used to be 'not resolved'."""
    from core.config import DatasetConfig
    from taskmine import flow
    from warehouse.store import Store

    store, config = Store(tmp_path / "home"), DatasetConfig(ner_model="")
    ctx = flow.context(store, folder, REAL / folder, config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items")
    notes = [i for i in store.read("work_items", folder) if i.kind == "resolution"]
    assert len(notes) >= at_least
    assert {i.attrs["resolution_evidence"] for i in notes} == {evidence}
