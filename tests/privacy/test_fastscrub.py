"""TermMatcher gives exactly what the Scrubber's known-term regex gives, on the real Scrubber's pattern."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from privacy.anonymize import Anonymizer, Scrubber, Vault
from privacy.fastscrub import TermMatcher, norm, speed_up, term_pattern
from privacy.identity import Person

# Letters whose case-insensitive matches are not their lower(): dotless/dotted i, long s, Kelvin sign, sharp s.
LETTERS = "aAbBiIkKsS" + "\u0131\u0130\u017f\u212a\u00df\u00e9\u00c9"
word = st.text(alphabet=LETTERS, min_size=1, max_size=6)
name = st.lists(word, min_size=1, max_size=3).map(" ".join)


def scrubber(names: list[str], usernames: list[str]) -> Scrubber:
    people = [Person(f"p{i}", (), (n,), (f"{u}@x.example",) if u else (), (u,) if u else ())
              for i, (n, u) in enumerate(zip(names, usernames, strict=False))]
    vault = Vault(Path(os.devnull), "salt", "corp-test.example", {})
    vault.assign(people)
    return Scrubber(people, vault)


def both(s: Scrubber, text: str) -> tuple[str, str]:
    def repl(m):
        term = s.terms.get(norm(m.group(0)))
        return term.replacement if term else "[PERSON]"

    matcher = TermMatcher(s._known_regex, s.terms, term_pattern)
    assert matcher.split  # the fast path is taken (else the Scrubber's pattern changed: update TermMatcher)
    spans = [(m.start(), m.end()) for m in matcher.finditer(text)]
    assert spans == [(m.start(), m.end()) for m in s._known_regex.finditer(text)]
    return matcher.sub(repl, text), s._known_regex.sub(repl, text)


@settings(max_examples=300, deadline=None)
@given(st.lists(name, min_size=1, max_size=6), st.lists(word, max_size=4), st.data())
def test_same_output_as_the_regex(names, usernames, data):
    s = scrubber(names, usernames)
    if s._known_regex is None:
        return
    pieces = st.one_of(st.sampled_from(sorted(s.terms)), name,
                       st.sampled_from([" ", ", ", "-", "@", ".", "\n", "x", " \n> ", "\t"]))
    text = "".join(data.draw(st.lists(pieces.map(lambda p: data.draw(st.sampled_from(
        [p, p.upper(), p.lower(), p.title()]))), max_size=12)))
    fast, slow = both(s, text)
    assert fast == slow


def test_same_output_on_the_sample_company_and_it_replaces_something(sample_company):
    from bench.anonymize import load_corpus
    from extractors import detect
    from privacy import identity
    from warehouse.schemas import Event

    texts, _, _ = load_corpus(sample_company, "acme")
    events = [r for r in detect.ingest("acme", sample_company / "acme", "t") if isinstance(r, Event)]
    ids = identity.resolve("acme", events)
    vault = Vault(Path(os.devnull), "salt", "corp-test.example", {})
    slow = Anonymizer(ids, vault).scrub
    slow._known = slow._known_regex  # the plain alternation, as before the fast matcher
    fast = Anonymizer(ids, vault).scrub
    speed_up(fast)  # a no-op: the Scrubber uses the TermMatcher already
    assert isinstance(fast._known, TermMatcher) and fast._known.split
    assert [fast(t) for t in texts] == [slow(t) for t in texts]
    assert sum(slow(t) != t for t in texts) > 50
