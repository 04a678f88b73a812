"""The quarantine gate counts records that could not be read; a second copy of a record that was read (the
same Message-ID twice, as real list archives hold) is kept in the quarantine table but loses nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import DatasetConfig
from extractors.stages import quarantine_problem, quarantine_rate
from taskmine import flow
from warehouse.store import Store

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "real"

MSG = """From jane@example.org Mon Jun  1 10:00:00 2020
From: Jane <jane@example.org>
To: list@example.org
Subject: {subject}
Date: Mon, 1 Jun 2020 10:00:0{n} +0000
Message-ID: <{mid}@example.org>

Body {n}.

"""


def test_second_copies_are_quarantined_but_not_unreadable(tmp_path):
    ds = tmp_path / "exports" / "mail"
    ds.mkdir(parents=True)
    copies = "".join(MSG.format(subject="Same", n=1, mid="same") for _ in range(4))
    (ds / "list.mbox").write_text(copies + MSG.format(subject="Other", n=2, mid="other"))
    store = Store(tmp_path / "home")
    r = flow.run(flow.context(store, "mail", ds, run_id="t"), "raw_events")
    classes = [q.error_class for q in store.read("quarantine", "mail")]
    assert classes.count("duplicate_message_id") == 3 and r.counts["duplicates"] == 3 and len(classes) == 3
    rate, unreadable, total = quarantine_rate(store, "mail")
    assert (rate, unreadable, total) == (0.0, 0, 2) and r.counts["quarantine_rate"] == 0.0
    assert quarantine_problem(flow.context(store, "mail", config=DatasetConfig(max_quarantine_rate=0.0))) is None


@pytest.mark.skipif(not REAL.is_dir(), reason=f"real exports not present at {REAL}")
@pytest.mark.parametrize("name", ["maildir-lkml-notmuch", "pipermail-numpy-bigbang"])
def test_real_archives_with_repeated_messages_pass_the_gate(name, tmp_path):
    store = Store(tmp_path / "home")
    r = flow.run(flow.context(store, name, REAL / name, run_id="t"), "raw_events")
    assert r.counts["duplicates"] > 0   # these archives hold the same message more than once
    assert quarantine_problem(flow.context(store, name, config=DatasetConfig())) is None, quarantine_rate(store, name)
