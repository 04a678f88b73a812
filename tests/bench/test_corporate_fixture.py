"""The invented corporate-mail sets of `taskmine bench privacy` read back through the e-mail extractor exactly as
labelled: every message is found by its Message-ID, and every labelled span is the text that was marked."""

import re

import pytest

from bench import corporate
from task_builders.config import DatasetConfig
from taskmine import flow
from warehouse.store import Store


@pytest.mark.parametrize("path", [corporate.DEVSET, corporate.HELDOUT], ids=lambda p: p.name)
def test_the_fixture_reads_back_as_labelled(path, tmp_path):
    messages = corporate.parse(path)
    assert len(messages) >= (40 if path == corporate.DEVSET else 12)
    text = path.read_text(encoding="utf-8")
    text = text[text.index("\n=====\n"):]  # the comments before the first message explain the marks
    marked = re.findall(r"\[\[(.+?)(?:\|(?:person|email|phone))?\]\]", text, re.S)
    assert [m.body[s:e] for m in messages for s, e, _ in m.spans] == marked
    corporate.write_mbox(messages, tmp_path / "corp" / "mailbox.mbox")
    store = Store(tmp_path / "home")
    flow.ingest(store, "corp", tmp_path / "corp", "t")
    labelled = corporate.labelled(store, "corp", messages, "corp")
    assert [m["body"][s:e] for m in labelled for s, e, _, _ in m["spans"]] == marked
    # the identity graph: every sender is a person with a display name
    flow.identities(store, "corp")
    assert len({i.person_id for i in store.read("identities", "corp")}) >= 10


def test_a_mark_left_open_is_refused(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("=====\nFrom: a@b.example\nMessage-ID: <x@y.example>\n\nHi [[Jane\n", encoding="utf-8")
    with pytest.raises(corporate.FixtureError, match="left open"):
        corporate.parse(bad)
