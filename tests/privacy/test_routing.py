"""Routing and quoting lines of real mail clients (fixtures written the way the clients write them, every name
invented): the parser finds each person named there, in the line's own form, and the anonymizer replaces each
one, consistently with the identity graph ("a person known from headers is known in every form")."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from privacy.anonymize import Anonymizer, Vault
from privacy.identity import resolve
from privacy.routing import find
from warehouse.ids import event_id
from warehouse.schemas import Event

FIXTURES = Path(__file__).parent / "fixtures" / "routing"
T0 = dt.datetime(2001, 6, 14, tzinfo=dt.UTC)

# fixture -> every (name as written, order, address or None) the parser must find
EXPECTED = {
    "lotus_forward.txt": {
        ("Dana Whitfield", "first-last", None), ("Gideon Farrow", "first-last", None),
        ("Corbin Ashby", "first-last", None), ("Lorna\nPettigrew", "first-last", None),
        ("Imogen Tarrant", "first-last", None), ("Rupert Blaylock", "first-last", None),
        ("Hollis Vantreight", "first-last", None), ("Marguerite Oakes", "first-last", None)},
    "lotus_reply.txt": {
        ("Tamsin Keller", "first-last", "tamsin.keller@fernleaf.example"), ("Dana Whitfield", "first-last", None),
        ("Gideon Farrow", "first-last", None), ("Ansel Brook", "first-last", "abrook@fernleaf.example")},
    "outlook_classic.txt": {
        ("Whitfield, Dana", "last-first", "Dana.Whitfield@xyz-energy.example"), ("Farrow, Gideon", "last-first", None),
        ("Ashby, Corbin", "last-first", None), ("Pettigrew, Lorna", "last-first", None),
        ("Tamsin Keller", "first-last", None), ("Blaylock, Rupert", "last-first", None),
        ("Whitfield, Dana", "last-first", None)},
    "outlook_modern.txt": {
        ("Orla Vantongeren", "first-last", "orla.vantongeren@brightwater.example"),
        ("Caspian Wilde", "first-last", "cwilde@brightwater.example"),
        ("Priya Ramanathan", "first-last", "priya.r@brightwater.example"),
        ("Benedikt Halloran", "first-last", "bhalloran@partner.example")},
    "gmail_reply.txt": {
        ("Caspian Wilde", "first-last", "cwilde@brightwater.example"),
        ("Orla Vantongeren", "first-last", "orla.vantongeren@brightwater.example")},
    "gmail_forward.txt": {
        ("Benedikt Halloran", "first-last", "bhalloran@partner.example"),
        ("Caspian Wilde", "first-last", "cwilde@brightwater.example"),
        ("Orla Vantongeren", "first-last", "orla.vantongeren@brightwater.example")},
    "apple_mail.txt": {
        ("Ines Marchbanks", "first-last", "ines.marchbanks@icloud.example"),
        ("Tobias Fennimore", "first-last", "tobias@fennimore.example")},
    "pipermail.txt": {  # Mailman's archives write addresses "user at host"
        ("odalys", "single", "odalys@brightwater.example.org"),
        ("Konstantyn Ferrabee", "first-last", "kferrabee@lab.example.edu")},
    "git_log_pasted.txt": {  # a `git log` entry and its trailers pasted into a mail
        ("Marisol Quenby Hartwell", "first-last", "mqh@devmail.example"),
        ("Theodric Amsel", "first-last", "tamsel@review.example"), ("qbranwell", "single", "qbranwell@host.example")},
    "mutt_and_lists.txt": {
        ("Radomir Kessler", "first-last", None), ("Wendeline Oyelowo", "first-last", "wendy@lists.example"),
        ("Aurelio Vantini", "first-last", "aurelio@vantini.example"),
        ("Radomir Kessler", "first-last", "rkessler@kernel-dev.example"),
        ("Henrike Stalder", "first-last", "henrike@stalder.example"),
        ("Amandine Perrault", "first-last", "amandine@perrault.example")},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_routing_format_names_its_people(name):
    text = (FIXTURES / name).read_text()
    found = find(text)
    assert {(r.name, r.order, r.address) for r in found} == EXPECTED[name]
    assert all(text[r.start:r.end] == r.name for r in found)
    assert [r.start for r in found] == sorted(r.start for r in found)


def test_header_like_prose_is_not_a_routing_block():
    text = "Agenda\nTo: be decided next week\nThe plan is simple.\nFrom: the start, we knew.\n"
    assert find(text) == []
    assert find("Thanks to everyone on the list wrote: nothing") == []
    assert find("See Docs/API/Reference for details and src/Main/Java too.") == []


def _event(native: str, body: str, sender: str, name: str) -> Event:
    handle = f"email:{sender}"
    return Event(event_id=event_id("d", "email", native), dataset="d", source="email", kind="email",
                 native_id=native, ts=T0, actor=handle, actor_name=name, body=body,
                 attrs={"people": [{"handle": handle, "display_name": name, "email": sender, "role": "from"}]})


def test_routed_people_are_replaced_in_every_form_consistently(tmp_path):
    """Dana Whitfield is known from a header (address and name); every form of her in every routing format
    becomes her one pseudonym, in the format of its line. The others are found by discovery (routing lines)
    and replaced too. No invented name of any fixture survives."""
    from privacy.anonymize import discover
    from privacy.identity import persons

    events = [_event(f"m{i}@x", (FIXTURES / f).read_text(), "dana.whitfield@xyz-energy.example", "Dana Whitfield")
              for i, f in enumerate(sorted(EXPECTED))]
    ids = resolve("d", events)
    found = discover(events, None, people=persons(ids))
    anon = Anonymizer(ids, Vault.load(tmp_path / "v.json"), outsiders=found.outsiders, lower=found.lower)
    q = anon.pseudonym("email:dana.whitfield@xyz-energy.example")
    out = {f: anon.event(e).body for f, e in zip(sorted(EXPECTED), events)}
    real = {w for names in EXPECTED.values() for n, _, _ in names for w in n.replace(",", " ").split()}
    for f, body in out.items():
        leaked = sorted(w for w in real if w in body)
        assert not leaked, (f, leaked)
    assert f"{q.full_name}/HOU/XYZ@XYZ" in out["lotus_forward.txt"]
    assert f"From: {q.last}, {q.first} [mailto:{q.email}]" in out["outlook_classic.txt"]
    assert f"To: {q.full_name}/HOU/XYZ@XYZ" in out["lotus_reply.txt"]
    # the Lotus "Thanks,\nDana" signature is her first name, known from the header
    assert f"Thanks,\n{q.first}\n" in out["lotus_forward.txt"]
    # an outsider named on several lines gets one pseudonym everywhere
    caspian = [ln for ln in out["gmail_forward.txt"].splitlines() if ln.startswith("To: ")][0]
    assert caspian.split(" <")[0][4:] in out["outlook_modern.txt"]
