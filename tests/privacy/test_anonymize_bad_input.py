"""Texts of any size, script and charset: the anonymizer never crashes and never silently skips."""

import datetime as dt

from privacy.anonymize import Anonymizer, Vault
from privacy.identity import resolve
from warehouse.ids import event_id
from warehouse.schemas import Event

T0 = dt.datetime(2021, 3, 1, tzinfo=dt.UTC)


def ev(native, body, name="Zoë\u200b Gallo\u200dway", source="email"):
    handle = f"{source}:zoe@acme.example"
    return Event(event_id=event_id("d", source, native), dataset="d", source=source, kind="email", native_id=native,
                 ts=T0, actor=handle, actor_name=name, body=body,
                 attrs={"people": [{"handle": handle, "display_name": "Zoë Galloway", "email": "zoe@acme.example",
                                    "username": None, "role": "from"}]})


def test_huge_binary_emoji_and_zero_width_texts(tmp_path):
    big = ("Zoë Galloway wrote the report; call +44 20 7946 0958. " * 200_000)  # ~11 MB
    junk = bytes(range(256)).decode("latin-1") * 1000 + "\x00\ufffd\U0001f600 Zoë Galloway"
    slack = "👋 Z\u200boë Galloway 🎉 " * 100_000  # ~2 MB, zero-width characters inside the name
    events = [ev("m1", big), ev("m2", junk), ev("m3", slack, source="slack"), ev("m4", "日本語のテキスト Zoë Galloway")]
    anon = Anonymizer(resolve("d", events), Vault.load(tmp_path / "v.json"))
    out = [anon.event(e) for e in events]
    q = anon.vault.pseudonyms[next(iter(anon.vault.pseudonyms))]
    for e in out:
        assert "Galloway" not in e.body and "7946 0958" not in e.body
        assert q.full_name in e.body
    assert out[0].body.count("wrote the report") == 200_000  # nothing was dropped
    assert out[3].body.startswith("日本語のテキスト")
