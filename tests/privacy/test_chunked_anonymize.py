"""The anonymize stage in chunks over worker processes gives what one process gives (core.parallel,
privacy.stages.anonymize): the same anonymized events (the same file, byte for byte: the world's key hashes it),
the same withheld rows, the same vault, and downstream the same task ids; and the two pieces of per-event work
that depended on what the process had seen before are now the same whatever came before (a secret's quoted
literals in diffs; a withheld row's reason)."""

from __future__ import annotations

import datetime as dt

import pytest

from core import parallel
from core.config import DatasetConfig
from privacy.anonymize import Anonymizer, Vault, settle_secret_literals
from privacy.audit import Rules
from privacy.ner import load_ner
from privacy.stages import _scrub, vault_path
from privacy.withhold import Check
from taskmine import flow
from warehouse.ids import event_id
from warehouse.schemas import Event
from warehouse.store import Store

FAMILIES = ("ticket_triage", "commit_link", "email_reply", "chat_answer", "resolution_note")
T0 = dt.datetime(2021, 3, 1, tzinfo=dt.UTC)


def _run(sample_company, home, workers: int, chunk: int) -> Store:
    store = Store(home)
    config = DatasetConfig(families=FAMILIES, workers=workers, chunk_events=chunk)
    ctx = flow.context(store, "acme", sample_company / "acme", config=config, run_id="r")
    flow.run(ctx, "raw_events", "identities", "anonymized_events", "links", "work_items", "clusters", "world",
             "tasks")
    return store


@pytest.fixture(scope="module")
def runs(sample_company, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TASKMINE_SALT", "chunked-anonymize-test")   # both runs draw the same pseudonyms
    try:
        base = tmp_path_factory.mktemp("chunked")
        yield _run(sample_company, base / "one", 1, 2000), _run(sample_company, base / "two", 2, 40)
    finally:
        mp.undo()


def test_two_workers_in_small_chunks_give_what_one_process_gives(runs):
    one, two = runs
    assert one.count("events", "acme") > 3 * 40   # several chunks per worker
    rows = [[e.to_row() for e in s.iter("anonymized_events", "acme")] for s in runs]
    assert rows[0] == rows[1]
    assert one.partition("anonymized_events", "acme").read_bytes() == \
        two.partition("anonymized_events", "acme").read_bytes()
    assert [w.to_row() for w in one.read("withheld", "acme")] == [w.to_row() for w in two.read("withheld", "acme")]
    assert vault_path(one, "acme").read_bytes() == vault_path(two, "acme").read_bytes()
    assert [q.to_row() for q in one.read("quarantine", "acme")] == [q.to_row() for q in two.read("quarantine", "acme")]
    ids = [sorted(t.task_id for t in s.read("tasks", "acme")) for s in runs]
    assert ids[0] and ids[0] == ids[1]


def _event(kind: str, native: str, **fields) -> Event:
    return Event(event_id=event_id("d", "git", native), dataset="d", source="git", kind=kind, native_id=native,
                 ts=T0, **fields)


def test_a_secret_found_in_a_later_chunk_reaches_the_literals_of_an_earlier_diff(tmp_path):
    """A diff's quoted literal that repeats a secret value is replaced by the value's fake wherever the value was
    found: before, only when the event that revealed it came earlier in the same process."""
    secret = "Zq8vT3pLm9"
    diff = f'diff --git a/t.py b/t.py\n+++ b/t.py\n+    assert parse(url).password == "{secret}"\n'
    events = [_event("commit", "a" * 40, body="test the parser", diff=diff),
              *(_event("commit", f"{i:x}" * 40, body="docs") for i in range(1, 4)),
              _event("commit", "f" * 40, body=f"mirror at https://deploy:{secret}@git.example.org/r.git")]
    results = {}
    for workers, chunk in ((1, 100), (2, 2), (1, 1)):
        anon = Anonymizer([], Vault.load(tmp_path / f"v{workers}{chunk}.json", salt="s"))
        rows = []
        for done, _, secrets in parallel.fork_map(_scrub, parallel.chunked(events, chunk), workers, anon):
            rows += done
            anon.scrub.code_secrets.update(secrets)
        settle_secret_literals(anon, events, rows)
        results[workers, chunk] = [r.to_row() for r in rows]
        assert secret not in rows[0].diff and anon.scrub.fake_secret(secret) in rows[0].diff
    assert results[1, 100] == results[2, 2] == results[1, 1]


def test_a_withheld_rows_reason_is_its_first_hit_whatever_was_judged_before(tmp_path):
    """The reason of a row with a person in its prose and an address after it is the person (the first hit), both
    when NER still has to read the paragraph and when an earlier row gave its verdict already."""
    ner = load_ner("en_core_web_sm")
    if ner is None:
        pytest.skip("the spaCy model en_core_web_sm is not installed (uv sync installs it)")
    anon = Anonymizer([], Vault.load(tmp_path / "v.json", salt="s"))
    said = "Yesterday Henrietta Oyelaran called from the ministry about the contract renewal."
    row = {"body": said, "recipients": ["henrietta.o@ministry-mail.org"]}
    fresh = Check(Rules.of(anon, ner=ner, seen=set()))
    warm = Check(Rules.of(anon, ner=ner, seen=set()))
    assert warm.rows([("before", {"body": said})]) == {"before": "person"}
    assert fresh.rows([("x", row)]) == warm.rows([("x", row)]) == {"x": "person"}
    only_address = {"title": "Renewal", "recipients": ["henrietta.o@ministry-mail.org"]}
    assert fresh.rows([("y", only_address)]) == {"y": "email"}


def test_the_last_pass_for_people_reads_its_events_a_batch_at_a_time(tmp_path):
    """The anonymize stage's memory is bounded by its chunks, not the dataset: the last pass for people in prose
    is a stream that has read at most one batch when it gives its first events (before, it took a list of every
    event of the dataset and returned another), and a person it finds is replaced in every later copy of the
    paragraph, in a later batch too."""
    from tests.privacy.test_one_detector import FakeNer

    pulled = 0
    para = "Ask Orville Brandquist about the release."

    def events():
        nonlocal pulled
        for i in range(2_000):
            pulled += 1
            yield _event("message", f"m{i}", body=para if i in (3, 1_500) else f"note {i}")

    anon = Anonymizer([], Vault.load(tmp_path / "v.json", salt="s"))
    stats: dict = {}
    out = anon.settle_people_stream(events(), FakeNer(["Orville Brandquist"]), set(), batch=50, stats=stats)
    first = [next(out) for _ in range(50)]
    assert pulled == 50
    assert "Orville" not in first[3].body and "Brandquist" not in first[3].body
    rest = list(out)
    assert pulled == 2_000 and len(rest) == 1_950
    assert rest[1_450].body == first[3].body          # the later copy, in batch 31, replaced the same way
    assert stats["events_changed"] == 2 and anon.people_verdicts


def test_a_spill_gives_its_chunks_back_in_order_and_leaves_nothing(tmp_path):
    with parallel.Spill(tmp_path / "spill") as spill:
        for k in range(3):
            spill.put([_event("message", f"s{k}-{i}", body=f"b{k}") for i in range(k + 1)])
        assert len(list(spill.folder.iterdir())) == 3
        back = list(spill.drain())
        assert [len(c) for c in back] == [1, 2, 3] and back[2][0].body == "b2"
        assert not list(spill.folder.iterdir())     # each chunk's file is gone once read
    assert not list((tmp_path / "spill").iterdir())
