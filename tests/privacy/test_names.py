"""Ordinary words that are also names stay words; names are replaced where they are used as names; an NER hit
is a person only with evidence; code, URLs and public hosts keep their words (every name here is invented)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from privacy.anonymize import Anonymizer, Scrubber, Vault, company_domains, discover
from privacy.identity import Person, is_bot, persons, resolve
from privacy.names import Vocabulary, introduced, name_use, ordinary_account, person_evidence, team_name
from privacy.ner import Found
from warehouse.ids import event_id
from warehouse.schemas import Event

T0 = dt.datetime(2001, 6, 1, tzinfo=dt.UTC)


def vault() -> Vault:
    return Vault(Path(os.devnull), "salt", "corp-test.example", {})


def person(pid, names=(), emails=(), usernames=()):
    return Person(pid, (), tuple(names), tuple(emails), tuple(usernames))


def test_vocabulary_tells_ordinary_words_from_names():
    v = Vocabulary({"node": 12, "hearing": 3, "fmiao": 1})
    for word in ("Will", "June", "may", "house", "Quick", "good", "hearing", "node", "family", "Monday"):
        assert v.ordinary(word), word
    for word in ("Knorr", "Vantreight", "eharris", "fmiao", "Zachary", "Michael", "Smith"):
        assert not v.ordinary(word), word
    assert v.first_name("Zachary") and v.surname("Smith")


@pytest.mark.parametrize("text, word, role, used", [
    ("Thanks, Will", "Will", "first", True),                 # sign-off
    ("Hi June,\n\nthe report is late.", "June", "first", True),  # greeting
    ("June Hearing wrote:", "Hearing", "last", True),         # attribution ("x wrote")
    ("ask Will about it", "Will", "first", True),             # capitalized inside a sentence
    ("Will you send it?", "Will", "first", False),            # first word of a sentence
    ("I will be available", "will", "first", False),          # lower case
    ("the hearing is on June 15, 2001", "June", "first", False),  # a date
    ("Broken Widget Require On Android", "Require", "first", False),  # a title
    ("\n-- \nMark\n", "Mark", "first", True),                 # a signature line
    ("Mark, can you check?", "Mark", "first", True),          # vocative at the start of a line
    ("Mark this one as done.", "Mark", "first", False),
    ("please ping @hearing on it", "hearing", "user", True),  # a mention
    ("the hearing went well", "hearing", "user", False),
    ("Herbert> quoted text", "Herbert", "first", True),       # supercite quote prefix
    ("\"... for all time.\" \u2014 Mark", "Mark", "first", True),  # who said a quotation
    ("var x = Good(1);", "Good", "last", False),              # code: identifiers are capitalized anyway
])
def test_name_use(text, word, role, used):
    start = text.index(word)
    assert name_use(text, start, start + len(word), role, code=text.startswith("var")) is used


@pytest.mark.parametrize("words, cue, accepted", [
    ("Zachary Litten", False, True),           # a first name and a word that is no English word
    ("Mark Stone", False, True),               # a first name and a surname
    ("Closure Compiler", True, False),         # product names: no first name, ordinary words
    ("Node Version", False, False), ("Appc Studio", False, False), ("Reproduce Step", False, False),
    ("Target Platform", False, False), ("Alloy Model", False, False), ("Add XML", False, False),
    ("Will Fix", False, False),                # a first name, then an ordinary word
    ("Monte Carlo", False, False),             # two first names: no surname
    ("Mark Reinhold", True, True),             # ... unless the context says it is a name
    ("Xiaoming Zhang", False, True),           # a surname of the list, no ordinary word
    ("Vantreight Oyelowo", True, True),        # unknown to every list, but seen in a greeting or signature
    ("Vantreight Oyelowo", False, False),
])
def test_an_ner_hit_needs_evidence(words, cue, accepted):
    assert bool(person_evidence(words.split(), Vocabulary(), cue)) is accepted


@pytest.mark.parametrize("words, accepted", [
    ("Oyelaran B. Thistlethwaite", True),      # on no list of names, but written with a middle initial
    ("Vantreight Q Oyelowo", True),            # ... without its period
    ("Oyelaran Thistlethwaite", False),        # no initial, no list, no cue: nothing says person
    ("Keystone R. Ratings", False),            # an ordinary word: a firm, not a person
    ("Oyelaran B.", False),                    # an initial last is no surname
])
def test_a_middle_initial_is_evidence_of_a_person_whatever_the_lists(words, accepted):
    assert bool(person_evidence(words.split(), Vocabulary())) is accepted


@pytest.mark.parametrize("text, name, cue", [
    ("Ndubuisi Okparaeke, a spokesman for the pipeline, said", "Ndubuisi Okparaeke", True),
    ("Siddhartha Pettigrew, who heads\nthe state consumer office", "Siddhartha Pettigrew", True),
    ("Vantreight Oyelowo, 41, an engineer", "Vantreight Oyelowo", True),
    ("Rate case filed\n\nBy Lavrentiy Kwiecinski and Oyelaran Brandt\nCorrespondent", "Lavrentiy Kwiecinski",
     True),
    ("Rate case filed\n\nBy Lavrentiy Kwiecinski and Oyelaran Brandt\nCorrespondent", "Oyelaran Brandt", True),
    ("Keystone Ratings, an agency in Ohio, said", "Keystone Ratings", True),  # a cue; the evidence rules refuse it
    ("Revenue rose by Ndubuisi Okparaeke accounts", "Ndubuisi Okparaeke", False),   # "by" inside a sentence
    ("We met Ndubuisi Okparaeke, and then left", "Ndubuisi Okparaeke", False),
])
def test_news_introduces_a_person_in_a_byline_or_an_apposition(text, name, cue):
    at = text.index(name)
    assert introduced(text, at, at + len(name)) is cue
    v = Vocabulary()
    if cue:  # names on no list, introduced: a person; a firm's ordinary words stay refused
        assert bool(person_evidence(name.split(), v, cue=True)) is (name != "Keystone Ratings")


@pytest.mark.parametrize("name, account, team", [
    ("Grant Administration", True, True),      # a given name first, then a function: a team's mailbox
    ("Summer Interns", True, True),
    ("Credit Settlements", True, True),
    ("Risk Desk", True, True),
    ("Fix Please", True, False),               # a person's account of ordinary words: replaced as an account
    ("Mark Wood", False, False),               # a given name and a surname that are words: a person
    ("Will Power", False, False),
    ("Bill Street", False, False),
    ("Ken Lay", False, False),                 # a surname that is a word, on the lists
    ("Rick Buy", False, False),                # ... or on none, but shaped like no group's noun
    ("Carol Singing", False, False),           # "-ing" words are surnames too ("Browning"): no group's noun
    ("Faith Mission", False, False),
])
def test_a_team_mailbox_is_no_person_and_a_person_with_word_names_stays_one(name, account, team):
    v = Vocabulary()
    assert ordinary_account(name.split(), v) is account
    assert team_name(name.split(), v) is team
    assert is_bot(name) is team


class FakeNer:
    """NER as `discover` drives it: the spans a small model would claim, with cues."""

    def __init__(self, spans):
        self.spans = spans

    def found(self, texts, workers=1):
        for _ in texts:
            pass
        yield from self.spans


def test_discover_accepts_only_people_with_evidence():
    text = "Node Version: 8\nAppc Studio: 5\nReported by Zachary Litten. Closure Compiler fails."
    ev = Event(event_id="e1", dataset="d", source="jira", kind="comment", native_id="1", ts=T0, body=text)
    spans = [Found(0, 12, "person", "Node Version", False), Found(15, 26, "person", "Appc Studio", False),
             Found(43, 57, "person", "Zachary Litten", False), Found(59, 75, "person", "Closure Compiler", False)]
    found = discover([ev], FakeNer(spans))
    assert found.outsiders == ["Zachary Litten"]
    assert {c["name"]: c["accepted"] for c in found.candidates} == {
        "Node Version": False, "Appc Studio": False, "Zachary Litten": True, "Closure Compiler": False}
    anon = Anonymizer([], vault(), outsiders=found.outsiders, lower=found.lower)
    out = anon.scrub(text)
    assert "Zachary" not in out and "Litten" not in out
    assert out.startswith("Node Version: 8\nAppc Studio: 5\n") and "Closure Compiler fails." in out


def test_ordinary_words_that_are_names_stay_words():
    """A person named June Hearing whose mailbox is "hearing", and one named Will Good with username "good":
    every ordinary use of those words survives; every use as a name does not."""
    people = [person("p1", ["June Hearing"], ["hearing@acme.example"], ["hearing"]),
              person("p2", ["Will Good"], ["wgood@acme.example"], ["good"])]
    v = vault()
    v.assign(people)
    s = Scrubber(people, v, vocab=Vocabulary({"hearing": 4, "good": 9, "will": 30}))
    prose = ("The hearing is on June 15, 2001. I will be available. It would be a good idea to reschedule a "
             "meeting. Will you come? Good news: a really good life.")
    assert s(prose) == prose
    named = "Hi June,\n\nJune Hearing wrote: thanks Will, cc @good\n\n-- \nWill\n"
    out = s(named)
    q1, q2 = v.pseudonyms["p1"], v.pseudonyms["p2"]
    assert out == (f"Hi {q1.first},\n\n{q1.full_name} wrote: thanks {q2.first}, cc @{q2.username}\n\n-- \n"
                   f"{q2.first}\n")


def test_distinctive_names_go_everywhere_and_hyphenated_handles_too():
    people = [person("p1", ["Dorota Knorrowska"], ["dknorr@acme.example"], ["dknorr"])]
    v = vault()
    v.assign(people)
    s = Scrubber(people, v, vocab=Vocabulary())
    q = v.pseudonyms["p1"]
    out = s("knorrowska said dknorr-patch-11 and dknorr-ALOY-1215 fix it; KNORROWSKA agrees; -Dorota")
    assert "knorr" not in out.lower() and "dorota" not in out.lower()
    assert f"{q.username}-patch-11" in out and f"{q.username}-ALOY-1215" in out and out.endswith(f"-{q.first}")


def test_names_in_urls_hosts_and_handles_made_of_them():
    people = [person("p1", ["Ilse Marwood"], ["ilse@marwood.example"], ["imarwood"])]
    v = vault()
    v.assign(people)
    s = Scrubber(people, v, vocab=Vocabulary())
    q = v.pseudonyms["p1"]
    text = ("https://github.com/ilse-marwood/tools and https://ilsemarwood.example/blog "
            "and https://gitlab.com/imarwood and ilse.marwood@gmail.example")
    out = s(text)
    assert "marwood" not in out.lower() and "ilse" not in out.lower()
    assert f"https://github.com/{q.first.lower()}-{q.last.lower()}/tools" in out
    assert out.startswith("https://github.com/") and "https://gitlab.com/" in out


def test_public_hosts_schemes_and_code_keep_their_words():
    """A person whose mailbox is on github.com, user names that are code keywords and URL schemes: none of
    github.com, https, var, function is ever replaced; the person still is."""
    people = [person("p1", ["Https Github"], ["octo@github.com"], ["var", "function"]),
              person("p2", ["Rhea Quist"], ["rhea@acme.example"], ["rquist"])]
    v = vault()
    v.assign(people)
    assert "github.com" not in company_domains(people, v)
    s = Scrubber(people, v, vocab=Vocabulary({"var": 40, "function": 25}))
    code = "var x = function () { return 'https://github.com/org/repo'; }; // Author: Rhea Quist <rquist>\n"
    out = s(code, code=True)
    q = v.pseudonyms["p2"]
    assert out == code.replace("Rhea Quist", q.full_name).replace("<rquist>", f"<{q.username}>")
    assert s("clone github.com:org/repo.git from https://github.com/org/repo") == \
        "clone github.com:org/repo.git from https://github.com/org/repo"


def test_unknown_addresses_at_the_company_domain_lose_their_local_part():
    people = [person("p1", ["Rhea Quist"], ["rhea@realcorp.example"], [])]
    v = vault()
    v.assign(people)
    s = Scrubber(people, v, vocab=Vocabulary())
    out = s("write to First.Last@realcorp.example or rhea@realcorp.example; see jira.realcorp.example")
    assert "First.Last" not in out and "@redacted.example" in out
    assert v.pseudonyms["p1"].email in out and "jira.corp-test.example" in out


def test_pseudonym_pool_is_sized_to_the_identity_graph():
    people = [person(f"p{i:05d}", [f"Given{i} Family{i}"]) for i in range(6000)]
    v = vault()
    v.assign(people)
    names = [q.full_name for q in v.pseudonyms.values()]
    assert len(set(names)) == 6000
    assert not any(c.isdigit() for n in names for c in n)  # no "Yael Galbraith3539"


def test_relay_addresses_and_bots_are_not_people():
    def mail(native, sender, name):
        h = f"email:{sender}"
        return Event(event_id=event_id("d", "email", native), dataset="d", source="email", kind="email",
                     native_id=native, ts=T0, actor=h, actor_name=name, body="x",
                     attrs={"people": [{"handle": h, "display_name": name, "email": sender, "role": "from"}]})

    events = [mail("a@x", "git@forge.example", "octocat42"), mail("b@x", "git@forge.example", "Rhea Quist"),
              mail("c@x", "git@forge.example", "dev-bot"), mail("d@x", "relay@forge.example", "alpha1"),
              mail("e@x", "relay@forge.example", "beta2"), mail("f@x", "relay@forge.example", "gamma3"),
              mail("g@x", "ci@builds.example", "Apache Jenkins Server")]
    ids = resolve("d", events)
    handles = {i.handle for i in ids}
    assert "email:git@forge.example" not in handles and "email:relay@forge.example" not in handles
    assert {"email:name:octocat42", "email:name:Rhea Quist", "email:name:alpha1"} <= handles
    assert not any("bot" in h or "Jenkins" in h for h in handles)
    assert len({i.person_id for i in ids}) == len(ids)  # every relayed name is a person of its own
    assert len(persons(ids)) == len(ids)


def test_stop_words_read_from_the_file_are_spacys():
    from spacy.lang.en.stop_words import STOP_WORDS

    from privacy.names import stop_words

    assert stop_words() == frozenset(STOP_WORDS)


def test_a_name_with_an_initial_or_a_nickname_between_is_one_name():
    people = [person("p1", ["Ravindra Quist"], ["rq@acme.example"], [])]
    v = vault()
    v.assign(people)
    s = Scrubber(people, v, vocab=Vocabulary())
    q = v.pseudonyms["p1"]
    for text in ("-- \nRavindra (Ravi) Quist\n", "ask Ravindra M. Quist now", "ask Ravindra Quist now",
                 "signed R. Quist", "and Ravi K. Quist"):
        out = s(text)
        assert "Ravi" not in out and "Quist" not in out and " M." not in out and " K." not in out, (text, out)
    assert s("signed R. Quist") == f"signed {q.first[0]}. {q.last}"


def test_a_lower_case_word_after_a_greeting_is_not_counted_as_an_ordinary_word():
    from privacy.names import LowerCounts

    counts = LowerCounts()
    counts.add("Sorry herve, I missed it. Thanks jim, and the build is green.\nhi all")
    assert "herve" not in counts.counts and "jim" not in counts.counts
    assert counts.counts["missed"] == 1 and counts.counts["build"] == 1
