"""On every real export in ../shared/data/real: no known identity (from mail headers, Slack users.json,
git authors, Jira and GitHub accounts) survives anonymization. NER is off here to keep the suite fast;
it only adds names (outsiders) to what is scrubbed."""

import json
from pathlib import Path

import pytest

from task_builders.config import DatasetConfig
from taskmine import flow
from privacy.audit import Rules
from warehouse.store import Store

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "real"
EXPORTS = sorted(p for p in REAL.iterdir() if p.is_dir()) if REAL.is_dir() else []

pytestmark = pytest.mark.real


@pytest.mark.skipif(not EXPORTS, reason=f"real exports not present at {REAL}")
@pytest.mark.parametrize("export", EXPORTS, ids=lambda p: p.name)
def test_no_known_identity_survives(export, tmp_path):
    store, ds = Store(tmp_path / "home"), export.name.replace("-", "_")
    flow.prepare(store, ds, export, DatasetConfig(ner_model=""), run_id="real", links_too=False)
    known = flow.anonymizer(store, ds).known_strings()
    assert known, "the export names people; the identity stage must find them"
    rules = Rules(known, secrets=False)
    survivors = [(e.source, e.kind, kind) for e in store.iter("anonymized_events", ds)
                 for kind, _ in rules.find(json.dumps(e.to_row(), ensure_ascii=False, default=str))]
    assert survivors == []  # the strings themselves are never printed: they are real people's
