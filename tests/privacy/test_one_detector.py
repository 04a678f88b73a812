"""One detector, two uses: every form of a known person is replaced and refused alike, what is no personal data
is neither, and what the leak audit would still find after the first pass the last pass replaces (every name
here is invented)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from privacy import pii
from privacy.anonymize import Anonymizer, Vault, discover
from privacy.audit import Rules, audit
from privacy.identity import resolve
from privacy.ner import Found
from warehouse.schemas import Event

T0 = dt.datetime(2001, 6, 1, tzinfo=dt.UTC)


def _person(handle, name, email=None, username=None):
    return {"handle": handle, "display_name": name, "email": email, "username": username, "role": "to"}


def anonymizer(*people, lower=None, outsiders=()) -> Anonymizer:
    ev = Event(event_id="e0", dataset="d", source="mail", kind="email", native_id="0", ts=T0, body="-",
               attrs={"people": [_person(*p) for p in people]})
    return Anonymizer(resolve("d", [ev]), Vault(Path(os.devnull), "salt", "corp-test.example", {}), lower=lower,
                      outsiders=outsiders)


STEVEN = ("mail:steven.halvard@acme.example", "Steven Halvard", "steven.halvard@acme.example")
HAROLD = ("mail:harold.page@acme.example", "Harold Page", "harold.page@acme.example")
KENNETH = ("mail:kenneth.brisco@acme.example", "Kenneth Brisco", "kenneth.brisco@acme.example")


def replaced_and_clean(anon: Anonymizer, text: str, *gone: str) -> str:
    """Scrub `text`; every string of `gone` must be gone and the audit's detector must find nothing left."""
    out = anon.scrub(text)
    for g in gone:
        assert g not in out, (g, out)
    assert Rules.of(anon).spans(out) == [], out
    return out


RICH = ("mail:rich.page@acme.example", "Rich Page", "rich.page@acme.example")


@pytest.mark.parametrize("text, gone", [
    ("Steve, please call me. Thanks, Steve", ["Steve"]),                       # a nickname of the known given name
    ("Steve's memo was late.", ["Steve"]),                                      # ... with a possessive
    ("Halvard, Steve; Brisco, Ken", ["Steve", "Halvard", "Ken", "Brisco"]),    # "Last, First" lists, nicknames
    ("Signed: S. Halvard and S Halvard and S.J. Halvard", ["Halvard", " S ", "S.J."]),  # initials, periods or not
])
def test_every_form_of_a_known_person_is_replaced(text, gone):
    replaced_and_clean(anonymizer(STEVEN, HAROLD, KENNETH), text, *gone)


@pytest.mark.parametrize("text", [
    "I spoke to Rich\n> Page yesterday.",                    # a quoting client wrapped the name
    "Forwarded to Rich \nPage/HOU/ACME@ACME on Monday",       # Notes wrapped its recipient list
])
def test_a_name_of_ordinary_words_wrapped_over_two_lines_is_replaced(text):
    anon = anonymizer(RICH, lower={"page": 3, "rich": 3})
    out = replaced_and_clean(anon, text, "Rich", "Page")
    assert "\n" in out  # the line break stays


@pytest.mark.parametrize("text, gone", [
    ("Talk to Steve Halvard about it.", ["Steve", "Halvard"]),
    ("Steven J. Halvard spoke first.", ["Steven", "Halvard", " J. "]),
    ("Halvard's memo was late.", ["Halvard"]),
    ("To: Steven \nHalvard/HOU/ACME@ACME, Harold \nPage/HOU/ACME@ACME\ncc: Ken Brisco/HOU/ACME@ACME",
     ["Steven", "Halvard", "Harold", "Brisco"]),
])
def test_forms_the_first_pass_always_replaced_still_are(text, gone):
    replaced_and_clean(anonymizer(STEVEN, HAROLD, KENNETH), text, *gone)


def test_a_surname_that_is_a_word_is_replaced_only_where_the_context_says_name():
    anon = anonymizer(HAROLD, STEVEN, lower={"page": 4})
    words = "See page 3; the page on the intranet is old. I will page you."
    assert anon.scrub(words) == words
    q = anon.pseudonym(HAROLD[0])
    for text in ("Please thank Mr. Page for it.", "Attendees: Halvard, Page", "Thanks to Hal Page.",
                 "\n-- \nH. Page\n", "Page, Harold: see the memo"):
        out = replaced_and_clean(anon, text, "Page")
        assert q.last in out, out


def test_an_account_of_ordinary_words_is_replaced_as_an_account_never_word_by_word():
    anon = anonymizer(("jira:fixplease", "Fix Please", None, "fixplease"), STEVEN)
    for text in ("Resolution: Won't Fix", "[ALOY-12] Fix mapping sample", "Please fix it.", "ok, fix please and ship"):
        assert anon.scrub(text) == text, text
    q = anon.pseudonym("jira:fixplease")
    assert anon.scrub("Closed by Fix Please yesterday") == f"Closed by {q.full_name} yesterday"
    assert "fixplease" not in anon.scrub("assigned to @fixplease")


@pytest.mark.parametrize("text", [
    "M  Resources/iphone/Default@2x.png\nA  Resources/android/appicon-72@2x.png\nM  img/icon@2x~ipad.png",
    "logo@3x.webp and sprite@hover.svg",
    "npm i @brisco/core lodash@4.17.21 react@^18.2",
    "In-Reply-To: <20010614123456.ABC12@mail.partner.example>",
    "see <1234567890.12345.JavaMail.app@host42.partner.example>",
])
def test_what_is_no_personal_data_is_neither_replaced_nor_refused(text):
    anon = anonymizer(STEVEN, ("npm:brisco", "Brisco", None, "brisco"), ("npm:lodash", "Lodash", None, "lodash"),
                      lower={"brisco": 3, "lodash": 3})
    assert anon.scrub(text) == text
    assert Rules.of(anon).spans(text) == []
    assert not [sp for sp in pii.find(text) if sp.kind == "email"]


def test_a_personal_address_and_a_mention_are_still_found():
    anon = anonymizer(STEVEN, ("npm:brisco", "Brisco", None, "brisco"), lower={"brisco": 3})
    text = "mail jane.roe@partner.example, cc @brisco"
    assert {f.kind for f in Rules.of(anon).spans(text)} == {"email", "username"}
    out = replaced_and_clean(anon, text, "jane.roe", "@brisco")
    assert "@redacted.example" in out


@pytest.mark.parametrize("line", [
    '+    "url": "http:\\/\\/deploy:Xk9#mQ2v@ci.acme.example\\/hook",',       # a JSON fixture escapes slashes
    '+    URL = "https://deploy:Xk9mQ2vL@ci.acme.example/hook"',
])
def test_credentials_in_urls_in_diffs_are_found_and_replaced(line):
    anon = anonymizer(STEVEN)
    assert any(f.kind == "secret:url_password" for f in Rules.of(anon).spans(line, code=True))
    out = anon.scrub(line, code=True)
    # in code a secret becomes one fake per value (tests comparing it still pass), in prose a typed placeholder
    assert "Xk9" not in out and "deploy:fake" in out
    assert Rules.of(anon).spans(out, code=True) == []
    prose = anon.scrub(line.lstrip("+ "))
    assert "Xk9" not in prose and "[SECRET:URL_PASSWORD]" in prose


class FakeNer:
    """NER as `discover` and the audit drive it: persons found wherever their names occur."""

    def __init__(self, names):
        self.names = names

    def _spans(self, text):
        from privacy.pii import Span

        out = []
        for n in self.names:
            at = text.find(n)
            while at >= 0:
                out.append(Span(at, at + len(n), "person", n))
                at = text.find(n, at + 1)
        return sorted(out)

    def found(self, texts, workers=1):
        from privacy.ner import cue_of, paragraphs, titled_of

        for t in texts:
            for p in paragraphs(t):
                for sp in self._spans(p):
                    yield Found(sp.start, sp.end, sp.kind, sp.value, cue_of("person", p, sp.start, sp.end),
                                titled_of("person", p, sp.start))

    def people_and_places(self, texts):
        for t in texts:
            yield self._spans(t)


def test_outsiders_with_middle_initials_and_titles_are_replaced_consistently():
    body = ("Senate panel advances bill\n\nBy Laurel K. Whitmire\nStaff Writer\n\n"
            "Sen. Edmund R. Tallis said the bill would pass. Mr. Tallis spoke for an hour.\n"
            "Mr. Quarrendon, an analyst, disagreed.")
    ev = Event(event_id="e1", dataset="d", source="mail", kind="email", native_id="1", ts=T0, body=body)
    found = discover([ev], FakeNer(["Laurel K. Whitmire", "Edmund R. Tallis", "Tallis", "Quarrendon"]))
    assert {"Laurel K. Whitmire", "Edmund R. Tallis"} <= set(found.outsiders)
    assert "Mr. Quarrendon" in found.outsiders  # a surname after a title
    anon = Anonymizer([], Vault(Path(os.devnull), "salt", "corp-test.example", {}), outsiders=found.outsiders,
                      lower=found.lower)
    out = anon.scrub(body)
    for gone in ("Whitmire", "Tallis", "Quarrendon", "Laurel", "Edmund"):
        assert gone not in out, out
    assert out.count(anon.vault.pseudonyms[next(p.person_id for p in anon.outsiders
                                                 if "Edmund R. Tallis" in p.names)].last) == 2


def test_the_last_pass_replaces_a_person_ner_sees_only_after_anonymization(tmp_path):
    """A person the evidence rules accept in the anonymized text that discovery never accepted (NER tagged it
    differently in the raw paragraph) is replaced by the last pass, so the audit finds nothing."""
    anon = anonymizer(STEVEN)
    raw = Event(event_id="e1", dataset="d", source="mail", kind="email", native_id="1", ts=T0,
                body="Steve met Orville Brandquist at the plant.")
    out = anon.event(raw)
    ner = FakeNer(["Orville Brandquist"])
    seen: set[bytes] = set()
    settled, stats = anon.settle_people([out], ner, seen)
    assert "Brandquist" not in settled[0].body and stats["persons_found"] == 1
    from privacy.audit import _digest

    assert _digest(out.body) not in seen  # only clean paragraphs join the audit's skip list: a copy elsewhere is read
    assert anon.prose(raw.body) == settled[0].body  # the same text elsewhere (a commit message) gets the same
    # the audit, with the same NER and the paragraphs the last pass read, finds nothing
    from warehouse.store import Store

    store = Store(tmp_path / "home")
    store.replace("anonymized_events", "d", settled)
    rules = Rules.of(anon, ner=FakeNer(["Orville Brandquist"]), seen=set())
    assert audit(store.partition("anonymized_events", "d"), rules).hits == []
    again, _ = anon.settle_people([out], ner, set())
    assert again[0].body == settled[0].body  # the same pseudonym for the same name


def test_a_reviewed_public_figure_on_allow_is_neither_replaced_nor_refused(tmp_path):
    body = "Sen. Edmund R. Tallis said the bill would pass; Laurel K. Whitmire reported it."
    ev = Event(event_id="e1", dataset="d", source="mail", kind="email", native_id="1", ts=T0, body=body)
    ner = FakeNer(["Laurel K. Whitmire", "Edmund R. Tallis"])
    found = discover([ev], ner, allow=["Edmund R. Tallis"])
    anon = Anonymizer([], Vault(Path(os.devnull), "salt", "corp-test.example", {}), outsiders=found.outsiders,
                      lower=found.lower, allow=["Edmund R. Tallis"])
    settled, _ = anon.settle_people([anon.event(ev)], ner, set())
    assert "Edmund R. Tallis" in settled[0].body and "Whitmire" not in settled[0].body
    from warehouse.store import Store

    store = Store(tmp_path / "home")
    store.replace("anonymized_events", "d", settled)
    assert audit(store.partition("anonymized_events", "d"), Rules.of(anon, ner=ner, seen=set())).hits == []


def test_a_pseudonym_the_last_pass_gave_is_never_replaced_again():
    """NER tags the pseudonym it put in the text as a person too (it is name-shaped): it stays, the same."""
    anon = anonymizer(STEVEN)
    raw = Event(event_id="e1", dataset="d", source="mail", kind="email", native_id="1", ts=T0,
                body="Steve met him at the plant.\n\nThanks, Orville Brandquist")
    pseudonym = anonymizer(STEVEN)._late_person("Orville Brandquist")  # the same salt: the same pseudonym
    settled, _ = anon.settle_people([anon.event(raw)], FakeNer(["Orville Brandquist", pseudonym]), set())
    assert pseudonym in settled[0].body and "[PERSON]" not in settled[0].body


def test_people_news_introduces_are_replaced_though_no_list_knows_their_names():
    """Forwarded news names people no list of names knows: a middle initial, a byline or an apposition ("X, a
    spokesman for ...", "X, who heads ...") is the evidence; a later mention of the surname alone goes too."""
    article = ("Pipeline seeks rate increase\n\nBy Lavrentiy Kwiecinski\nCorrespondent\n\n"
               "Ndubuisi Okparaeke, a spokesman for the pipeline, said the increase was needed.\n\n"
               "Oyelaran B. Thistlethwaite said shippers would contest it. Siddhartha Pettigrew, who heads\n"
               "the consumer office, called it a wish list.")
    reply = "The Okparaeke quote is useful. I would not cite Pettigrew; ask Thistlethwaite instead."
    names = ["Lavrentiy Kwiecinski", "Ndubuisi Okparaeke", "Oyelaran B. Thistlethwaite", "Siddhartha Pettigrew"]
    events = [Event(event_id=f"e{i}", dataset="d", source="mail", kind="email", native_id=str(i), ts=T0, body=b)
              for i, b in enumerate((article, reply))]
    found = discover(events, FakeNer(names))
    assert set(names) <= set(found.outsiders), found.candidates
    anon = Anonymizer([], Vault(Path(os.devnull), "salt", "corp-test.example", {}), outsiders=found.outsiders,
                      lower=found.lower)
    for text in (article, reply):
        out = replaced_and_clean(anon, text, "Kwiecinski", "Okparaeke", "Thistlethwaite", "Pettigrew", "Ndubuisi")
        assert "shippers would contest" in out or "quote is useful" in out


def test_a_team_mailbox_keeps_its_name_and_its_words():
    """A team's or a function's mailbox ("Summer Interns", "Credit Settlements"; a first word that is also a
    given name changes nothing) is nobody's: its name and its words stay in prose and on routing lines, while a
    person's account of ordinary words ("Fix Please") is still replaced as an account."""
    anon = anonymizer(STEVEN, ("mail:summer.interns@acme.example", "Summer Interns", "summer.interns@acme.example"),
                      ("mail:credit.settlements@acme.example", "Credit Settlements",
                       "credit.settlements@acme.example"),
                      ("mail:grant.admin@acme.example", "Grant Administration", "grant.admin@acme.example"),
                      ("jira:fixplease", "Fix Please", None, "fixplease"))
    assert {p.names for p in anon.people} == {("Steven Halvard",), ("Fix Please",)}
    for text in ("Please copy Credit Settlements on every confirmation.",
                 "To: Summer Interns\ncc: Grant Administration/HOU/ACME@ACME, Steven Halvard/HOU/ACME@ACME",
                 "The summer interns' lunch is at noon. Grant administration staff will join.",
                 "Manager, Grant Administration Support"):
        out = anon.scrub(text)
        assert out == text.replace("Steven Halvard", anon.pseudonym(STEVEN[0]).full_name), out
        assert Rules.of(anon).spans(out) == []
    assert "Fix Please" not in anon.scrub("Closed by Fix Please yesterday")
