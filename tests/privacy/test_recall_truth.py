"""Anonymization recall on every PII item and secret planted in the sample company (its truth file):
a planted value must not survive anywhere in the anonymized events or the rewritten git history."""

import json
import re
import subprocess
from collections import Counter

import pytest

from core.config import DatasetConfig
from taskmine import flow
from warehouse.store import Store

NAMES = {"name", "first_name", "username"}


@pytest.fixture(scope="module")
def recall(sample_company, tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("recall") / "home")
    ds, src = "acme", sample_company / "acme"
    # with the real spaCy NER
    flow.prepare(flow.context(store, ds, src, config=DatasetConfig(), run_id="r1"), links_too=False)
    texts = [json.dumps(e.to_row(), ensure_ascii=False, default=str) for e in store.iter("anonymized_events", ds)]
    for repo in (store.worlds(ds) / "repos").glob("*.git"):
        texts.append(subprocess.run(["git", "-C", str(repo), "log", "--all", "-p", "--format=%an %ae%n%B"],
                                    capture_output=True, text=True, errors="replace").stdout)
    corpus = "\n".join(texts)
    truth = json.loads((sample_company / ".truth" / "acme.json").read_text())
    caught, total = Counter(), Counter()
    for item in truth["pii"]:
        kind = item["type"]
        total[kind] += 1
        value = item["value"]
        pattern = re.escape(value) if not value[:1].isalnum() else rf"(?<![\w@.-]){re.escape(value)}(?![\w@-])"
        found = re.search(pattern, corpus, re.IGNORECASE)
        if kind == "postal_address" and not found:  # a multi-line address leaks if any numbered line survives
            found = any(line.strip() in corpus for line in value.split("\n")
                        if re.search(r"\d", line) and len(line.strip()) > 6)
        caught[kind] += not found
    return caught, total


def test_recall_per_type(recall):
    caught, total = recall
    print("\ntype                         caught/planted  recall")
    for kind in sorted(total):
        print(f"{kind:<28} {caught[kind]:>6}/{total[kind]:<7} {caught[kind] / total[kind]:.3f}")
    names = sum(caught[k] for k in NAMES) / sum(total[k] for k in NAMES)
    print(f"{'names (all kinds)':<28} {names:.3f}")
    for kind in total:
        if kind not in NAMES:
            assert caught[kind] == total[kind], f"{kind}: {total[kind] - caught[kind]} planted values survive"
    assert names == 1.0  # every planted name, first name and username of the sample company


def test_slack_join_notices_name_the_pseudonym_in_full(sample_company, tmp_path):
    """"@First Last has joined the channel": the first name after "@" is replaced with the surname, and the
    notice names the same fake person as its author (a mention, not an address)."""
    store = Store(tmp_path / "home")
    ds, src = "acme", sample_company / "acme"
    ctx = flow.context(store, ds, src, config=DatasetConfig(ner_model=""), run_id="r1")
    flow.prepare(ctx, links_too=False)
    raw = {e.event_id: e for e in store.iter("events", ds)}
    joins = [e for e in store.iter("anonymized_events", ds) if e.kind == "channel_join"]
    assert joins
    for e in joins:
        real_first = raw[e.event_id].actor_name.split()[0]
        assert real_first not in e.body.split()
        assert e.body == f"@{e.actor_name} has joined the channel"
