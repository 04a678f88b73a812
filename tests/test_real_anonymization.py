"""On every real export in ../shared/data/real: no known identity (from mail headers, Slack users.json,
git authors, Jira and GitHub accounts) survives anonymization, nor any address, phone or personal URL the
recognizers find that is not our own output. NER is off here to keep the suite fast;
it only adds names (outsiders) to what is scrubbed. A folder that holds only a git bundle is cloned first, as
its SOURCES.md says a user does (`git clone <name>.bundle`)."""

import json
import subprocess
from pathlib import Path

import pytest

from task_builders.config import DatasetConfig
from taskmine import flow
from privacy.audit import Rules
from warehouse.store import Store

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "real"


def as_user_has_it(export: Path, tmp: Path) -> Path:
    """The export as its user runs it: a folder of only git bundles becomes a folder of their clones."""
    bundles = sorted(export.glob("*.bundle"))
    if not bundles or any(p for p in export.iterdir() if p.suffix != ".bundle"):
        return export
    out = tmp / "exports" / export.name
    out.mkdir(parents=True)
    for b in bundles:
        subprocess.run(["git", "clone", "-q", str(b), str(out / b.stem)], check=True, capture_output=True)
    return out
EXPORTS = sorted(p for p in REAL.iterdir() if p.is_dir()) if REAL.is_dir() else []

pytestmark = pytest.mark.real


@pytest.mark.skipif(not EXPORTS, reason=f"real exports not present at {REAL}")
@pytest.mark.parametrize("export", EXPORTS, ids=lambda p: p.name)
def test_no_known_identity_survives(export, tmp_path):
    store, ds = Store(tmp_path / "home"), export.name.replace("-", "_")
    flow.prepare(store, ds, as_user_has_it(export, tmp_path), DatasetConfig(ner_model=""), run_id="real",
                 links_too=False)
    anon = flow.anonymizer(store, ds)
    assert anon.known_strings(), "the export names people; the identity stage must find them"
    # the gate's rules without NER: known identities, and every address, phone or personal URL the recognizers
    # find that is not our own output (a pseudonym's address is one, so the bare known strings are not enough)
    rules = Rules.of(anon)
    rules.secrets = False
    survivors = [(e.source, e.kind, kind) for e in store.iter("anonymized_events", ds)
                 for kind, _ in rules.find(json.dumps(e.to_row(), ensure_ascii=False, default=str))]
    assert survivors == []  # the strings themselves are never printed: they are real people's
