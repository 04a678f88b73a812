"""Cross-source links and identities measured against the sample company's ground truth."""

import json
from collections import Counter
from itertools import combinations

import pytest

from core.config import DatasetConfig
from taskmine import flow
from warehouse.ids import event_id
from warehouse.store import Store

SOURCE_OF = {"jira_key": "jira", "issue_url": "jira", "commit": "git", "commit_url": "git", "message_id": "email"}


@pytest.fixture(scope="module")
def linked(sample_company, tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("links") / "home")
    ds, src = "acme", sample_company / "acme"
    ctx = flow.context(store, ds, src, config=DatasetConfig(ner_model=""), run_id="r1")
    flow.prepare(ctx)
    truth = json.loads((sample_company / ".truth" / "acme.json").read_text())
    return store, truth


def scores(store, truth):
    want = {(event_id("acme", t["from"]["source"], t["from"]["native_id"]),
             event_id("acme", SOURCE_OF[t["to"]["kind"]], t["to"]["value"]), t["to"]["kind"])
            for t in truth["links"]}
    sources = {t["from"]["source"] for t in truth["links"]}
    source_of_event = {e.event_id: e.source for e in store.iter("anonymized_events", "acme")}
    got = {(x.from_event_id, x.to_event_id, x.kind) for x in store.read("links", "acme")
           if source_of_event.get(x.from_event_id) in sources}
    out = {}
    for kind in sorted({k for *_, k in want | got}):
        w = {x for x in want if x[2] == kind}
        g = {x for x in got if x[2] == kind}
        out[kind] = (len(w & g) / len(g) if g else 1.0, len(w & g) / len(w) if w else 1.0, len(w), len(g))
    return out


def test_links_precision_and_recall(linked):
    store, truth = linked
    per_kind = scores(store, truth)
    print("\nkind         precision  recall  truth  found")
    for kind, (p, r, w, g) in per_kind.items():
        print(f"{kind:<12} {p:>9.3f} {r:>7.3f} {w:>6} {g:>6}")
    assert per_kind["jira_key"][0] == 1.0 and per_kind["commit"][0] == 1.0  # the bar: no false link
    for kind, (p, r, _, _) in per_kind.items():
        assert r >= 0.95, f"{kind}: recall {r:.3f}"
        assert p >= 0.95, f"{kind}: precision {p:.3f}"


def test_identities_resolve_across_all_sources(linked):
    store, truth = linked
    person = {i.handle: i.person_id for i in store.read("identities", "acme")}
    same, total_pairs, split = 0, 0, []
    for who in truth["identities"]:
        handles = [h for h in who["handles"] if h in person]
        assert len(handles) == len(who["handles"]), f"handles never seen: {set(who['handles']) - set(handles)}"
        for a, b in combinations(handles, 2):
            total_pairs += 1
            same += person[a] == person[b]
            if person[a] != person[b]:
                split.append((a, b))
    wrongly_merged = Counter()
    owner = {h: i for i, who in enumerate(truth["identities"]) for h in who["handles"]}
    for a, b in combinations(sorted(owner), 2):
        if owner[a] != owner[b] and person.get(a) == person.get(b) is not None:
            wrongly_merged[(a, b)] += 1
    print(f"\nidentity pairs merged: {same}/{total_pairs}; wrong merges: {len(wrongly_merged)}")
    assert not wrongly_merged, list(wrongly_merged)[:5]
    assert same == total_pairs, split[:5]
    evidence = {i.handle: i.evidence for i in store.read("identities", "acme")}
    assert all(evidence[h] for h in owner if h in evidence)
