"""The hand-labelled dev set of real mail (bench/data/real_mail_devset.json) still matches the real archives in
../shared/data/real, and the anonymize stage meets the privacy goals on it: person-name recall >= 0.98, contact
recall 1.000, ordinary words changed <= 1%. (`taskmine bench privacy` prints the same figures beside Presidio.)"""

import json
from pathlib import Path

import pytest

from bench.privacy import DEVSET, HELDOUT, _ours, _prepare, load_devset, score

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "real"

pytestmark = pytest.mark.real


@pytest.mark.parametrize("path, least", [(DEVSET, 40), (HELDOUT, 14)], ids=["dev", "held-out"])
def test_the_labelled_sets_store_no_text(path, least):
    doc = json.loads(path.read_text())
    assert len(doc["messages"]) >= least
    for m in doc["messages"]:
        assert set(m) == {"dataset", "file", "offset", "member", "message_id_sha256", "body_sha256", "body_chars",
                          "spans"}
        assert all(len(s) == 4 and isinstance(s[0], int) and isinstance(s[1], int) and s[2] in
                   ("person", "email", "phone") and len(s[3]) == 12 for s in m["spans"])
    text = path.read_text()
    assert "@" not in text.replace("maildir", "")  # no address, hence no text of a message


@pytest.mark.skipif(not REAL.is_dir(), reason=f"real exports not present at {REAL}")
def test_anonymization_meets_the_goals_on_the_dev_set(tmp_path):
    names = sorted({m["dataset"] for m in json.loads(DEVSET.read_text())["messages"]})
    prepared = {n: _prepare(tmp_path / "home", REAL.resolve(), n) for n in names}
    store = next(iter(prepared.values()))[0]
    messages = load_devset(store, REAL, {n: p[1] for n, p in prepared.items()})
    result = score(messages, [_ours(prepared[m["dataset"]][2], m["body"]) for m in messages])
    person, contact, words = result["person"], result["contact"], result["words"]
    assert person[0] / person[1] >= 0.98, person
    assert contact[0] == contact[1], contact
    assert words[0] / words[1] <= 0.01, words
