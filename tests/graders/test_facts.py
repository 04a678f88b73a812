"""Facts of a reply (graders.facts): what is extracted, how it is matched, when the world supports it."""

from __future__ import annotations

import datetime as dt

import pytest

from environments.world import World, build_world
from graders.facts import Fact, extract, mentions, stated_in, supported
from warehouse.ids import event_id
from warehouse.schemas import Event


def kinds(text, limit=20):
    return [(f.kind, f.text) for f in extract(text, limit=limit)]


def test_each_kind_of_fact_is_extracted_once_and_most_specific_first():
    text = ("Fixed in TSM-88 and 2.4.0-rc.2: run `tsm lock --frozen` in src/parser.c, see "
            "https://tracker.toolsmith.example/browse/TSM-88?focus=1. The cache_hit_ratio() of RunOrderCalculator "
            "was wrong since 3f2a9c1d; it took 350 ms, 12% of 1,200 runs since March 3rd. Thread: "
            "<20010305.1812.a1b2c3@mail.orrin.example>. Also #57.")
    got = kinds(text)
    assert got == [("issue_key", "TSM-88"), ("commit", "3f2a9c1d"),
                   ("url", "https://tracker.toolsmith.example/browse/TSM-88?focus=1"),
                   ("message", "20010305.1812.a1b2c3@mail.orrin.example"), ("file", "src/parser.c"),
                   ("command", "tsm lock --frozen"), ("identifier", "cache_hit_ratio()"),
                   ("identifier", "RunOrderCalculator"), ("version", "2.4.0-rc.2"), ("ref", "#57"),
                   ("date", "March 3rd"), ("number", "350 ms"), ("number", "12%"), ("number", "1,200")]
    assert kinds(text, limit=12) == got[:12]          # at most MAX_FACTS, the most specific kinds kept


def test_placeholders_and_what_they_cut_short_are_no_facts():
    assert kinds("Hi [PERSON], the password is [SECRET:PASSWORD]; see https://git.example/[PERSON]/repo") == []
    assert kinds("email person-1a2b@redacted.example or https://mail.redacted.example/x/y") == []
    assert kinds("Dana Whitfield <dana.whitfield@orrin.example> wrote") == []          # an address, no Message-ID


def test_years_small_numbers_and_product_names_are_no_facts():
    assert kinds("In 2019 we moved 3 jobs to GitHub and JavaScript.") == []


def test_a_short_sha_of_digits_only_is_a_commit_when_the_text_holds_the_full_one():
    assert kinds("fixed in 3512803 (https://git.example/acme/repo/commit/3512803abc91)")[0] == ("commit", "3512803")


@pytest.mark.parametrize("fact,text,ok", [
    (Fact("version", "3.0.0"), "shipped in 3.0.0.", True),
    (Fact("version", "3.0.0"), "shipped in 13.0.0", False),
    (Fact("version", "3.0.0"), "shipped in 3.0.0.1", False),
    (Fact("issue_key", "ALOY-12"), "see ALOY-123", False),
    (Fact("issue_key", "ALOY-12"), "see aloy-12", True),
    (Fact("url", "https://x.example/a/b"), "at x.example/a/b/ now", True),
    (Fact("number", "1,200"), "1200 units", True),
    (Fact("identifier", "cache_hit_ratio()", ("cache_hit_ratio",)), "call cache_hit_ratio on it", True),
    (Fact("command", "tsm lock --frozen"), "run `tsm  lock --frozen`", True),
    (Fact("ref", "#57"), "merged #57", True),
    (Fact("ref", "#57"), "merged #571", False),
    (Fact("person", "[~kmensah]", ("Kofi Mensah", "Kofi")), "Kofi, please verify", True),
])
def test_mentions_on_word_boundaries(fact, text, ok):
    assert mentions(text, fact) is ok
    assert mentions(text, fact.to_json()) is ok


def test_stated_in_finds_the_facts_a_request_already_holds():
    facts = extract("TSM-88 is fixed in 2.4.0")
    assert stated_in(facts, "Any news on TSM-88?") == [Fact("issue_key", "TSM-88")]


def test_the_world_supports_a_fact_it_holds_at_the_cutoff(tmp_path):
    t0 = dt.datetime(2021, 3, 1, tzinfo=dt.UTC)
    issue = Event(event_id=event_id("d", "jira", "TSM-88"), dataset="d", source="jira", kind="issue_created",
                  native_id="TSM-88", thread_key="TSM-88", ts=t0, title="Long paths fail", body="E1203 on Windows",
                  attrs={"project": "TSM"})
    later = Event(event_id=event_id("d", "jira", "TSM-88#c1"), dataset="d", source="jira", kind="comment",
                  native_id="TSM-88#c1", thread_key="TSM-88", ts=t0 + dt.timedelta(days=2),
                  body="set TSM_LONG_PATHS=1 (since 2.4.0)")
    path = build_world([issue, later], tmp_path / "world.sqlite", "k")
    view = World(path).at(t0 + dt.timedelta(days=1))
    assert supported(view, Fact("issue_key", "TSM-88"))
    assert supported(view, Fact("identifier", "E1203"))
    assert not supported(view, Fact("version", "2.4.0"))                 # said only after the cutoff
    assert supported(World(path).at(t0 + dt.timedelta(days=3)), Fact("version", "2.4.0"))
    assert not supported(None, Fact("issue_key", "TSM-88"))


def test_the_world_supports_a_person_who_wrote_in_it_by_the_cutoff(tmp_path):
    """A reply that names a colleague ("Dana Example knows the cifs code") states a fact the agent could
    know when that person sent mail or commented by then, though no text names them."""
    t0 = dt.datetime(2021, 3, 1, tzinfo=dt.UTC)
    mail = Event(event_id=event_id("d", "email", "m1@x"), dataset="d", source="email", kind="email", native_id="m1@x",
                 thread_key="m1@x", ts=t0, title="cifs oops", body="trace attached", actor="email:dexample",
                 actor_name="Dana Example", attrs={})
    later = Event(event_id=event_id("d", "email", "m2@x"), dataset="d", source="email", kind="email",
                  native_id="m2@x", thread_key="m2@x", ts=t0 + dt.timedelta(days=2), title="hello", body="hi",
                  actor="email:kormsby", actor_name="Kai Ormsby", attrs={})
    path = build_world([mail, later], tmp_path / "world.sqlite", "k")
    view = World(path).at(t0 + dt.timedelta(days=1))
    assert supported(view, Fact("person", "Dana Example", ("Dana",)))
    assert supported(view, Fact("person", "[~dexample]", ("dana example", "Dana")))
    assert not supported(view, Fact("person", "Kai Ormsby", ("Kai",)))          # wrote only after the cutoff
    assert not supported(World(path).at(t0 + dt.timedelta(days=1), [mail.event_id]),
                         Fact("person", "Dana Example"))                      # her mail is hidden from the task
    assert not supported(view, Fact("identifier", "Dana"))                    # only a person is found by author
