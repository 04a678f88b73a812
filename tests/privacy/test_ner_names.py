"""Dataset-wide NER (`Ner.names`, `anonymize.discover`): each distinct paragraph is read once, paragraphs that
cannot hold a name are skipped, and what is found is exactly what reading every text whole finds."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privacy.anonymize import _LowerWords, discover
from privacy.ner import Ner, _Seen, may_name, paragraphs

PARENT = "Hi all,\n\nWEB-2 is hurting customers.\nPlease ask Jordan Ames to look.\n\n-- \nSofia Moreau\n"
REPLY = ("Hi Sofia,\n\nI'll take WEB-2.\n\nOn 07/11/2020 09:48, Sofia Moreau wrote:\n> Hi all,\n>\n"
         "> WEB-2 is hurting customers.\n> Please ask Jordan Ames to look.\n\n-- \nKenji Lindgard\n")


def test_paragraphs_cut_at_blank_lines_and_quote_depth_without_quote_markers():
    assert paragraphs(PARENT) == ["Hi all,", "WEB-2 is hurting customers.\nPlease ask Jordan Ames to look.",
                                  "-- \nSofia Moreau"]
    assert paragraphs(REPLY) == ["Hi Sofia,", "I'll take WEB-2.", "On 07/11/2020 09:48, Sofia Moreau wrote:",
                                 "Hi all,", "WEB-2 is hurting customers.\nPlease ask Jordan Ames to look.",
                                 "-- \nKenji Lindgard"]
    assert paragraphs("a\n>> b\n> c\n  > > d\n>>e\n   code\n\n\n") == ["a", "b", "c", "d\ne", "   code"]
    assert paragraphs("") == [] and paragraphs("\n \n>\n") == []


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab> \t\n"), max_size=200))
def test_paragraphs_keep_every_non_blank_line_in_order(text):
    lines = [re.sub(r"^[ \t]*(?:>[ \t]?)+", "", x) for x in text.split("\n")]
    assert "\n".join(paragraphs(text)).split("\n") == [x for x in lines if x.strip()] or not any(
        x.strip() for x in lines)


def test_may_name_needs_a_capitalized_word_that_is_not_a_stop_word():
    stop = {"the", "i", "we", "could"}
    assert may_name("Thanks Sofia , see you".split(), stop)
    assert may_name(["O'Brien"], stop) and may_name(["Jean", "-", "Luc"], stop) and may_name(["张伟"], stop)
    assert may_name(["LONDON"], stop)
    assert not may_name("merged 1150f39 ( WEB-35 )".split(), stop)  # one token with digits: not a name's word
    assert not may_name("The fix is in , I think ; we could ship".split(), stop)
    assert not may_name(["<@U0WG6DSAQ7>", "has", "joined"], stop) and not may_name([], stop)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("aAbé -'’1_\n.É"), max_size=40), max_size=4),
       st.text(alphabet=st.sampled_from("abé -'’"), min_size=1, max_size=8))
def test_lower_words_answers_as_a_regex_search_of_every_text(texts, phrase):
    index = _LowerWords()
    for t in texts:
        index.add(t)
    truth = any(re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", t) for t in texts)
    runs = re.split(r"[ '’-]", phrase)
    if all(runs) and len(runs) <= 2:
        assert index.has(phrase) == truth
    else:
        assert not index.has(phrase)  # longer or odd phrases: "not seen", so a place is kept


def test_lower_words_stops_growing_at_its_limit():
    index = _LowerWords(limit=3)
    index.add("alpha beta gamma delta")
    index.add("epsilon zeta")
    assert len(index.one) == 4 and not index.has("epsilon")  # full after the first text: the safe answer


def test_seen_remembers_two_generations_then_forgets():
    seen = _Seen(2)
    assert [seen.add(x) for x in "abab"] == [True, True, False, False]
    assert seen.add("c") and not seen.add("a")  # a, b moved to the old generation
    assert seen.add("d") and seen.add("e")  # the old generation (a, b) is dropped
    assert seen.add("a") and len(seen.new) + len(seen.old) <= 4


class _Doc(SimpleNamespace):
    def __iter__(self):
        return iter(SimpleNamespace(text=w) for w in self.text.split())


class _FakeNlp:
    """Tokens are whitespace-separated words; two capitalized words in a row are a person, "Paris" a place."""

    Defaults = SimpleNamespace(stop_words={"the", "hi"})

    def __init__(self):
        self.read: list[str] = []
        self.tokenizer = SimpleNamespace(pipe=lambda texts: (_Doc(text=t) for t in texts))

    def pipe(self, docs, batch_size):
        for doc in docs:
            self.read.append(doc.text)
            ents = [SimpleNamespace(start_char=m.start(), end_char=m.end(), text=m.group(0),
                                    label_="GPE" if m.group(0) == "Paris" else "PERSON")
                    for m in re.finditer(r"Paris|[A-Z][a-z]+ [A-Z][a-z]+", doc.text)]
            yield SimpleNamespace(text=doc.text, ents=ents)


def _fake() -> tuple[Ner, _FakeNlp]:
    nlp = _FakeNlp()
    return Ner(nlp, "fake"), nlp


def test_names_reads_each_distinct_paragraph_once_and_skips_those_without_a_name():
    ner, nlp = _fake()
    texts = [PARENT, REPLY, REPLY, "the fix is in main\n\nsee you in Paris", "hi all, done"]
    spans = list(ner.names(texts))
    assert {(s.kind, s.value) for s in spans} == {("person", "Jordan Ames"), ("person", "Sofia Moreau"),
                                                   ("person", "Kenji Lindgard"), ("place", "Paris")}
    assert len(nlp.read) == len(set(nlp.read))  # nothing read twice: the quote is the parent's paragraph
    assert "Please ask Jordan Ames to look." in nlp.read[0] and "see you in Paris" in nlp.read
    assert not {"Hi all,", "the fix is in main", "hi all, done"} & set(nlp.read)  # only a stop word capitalized
    assert ner.stats == {"paragraphs": 18, "distinct": 10, "read": len(nlp.read),
                         "read_chars": sum(map(len, nlp.read))}


def test_names_gives_the_same_spans_with_a_pool_of_workers():
    ner, _ = _fake()
    texts = [f"Ann Lee {i}\n\nPaula Gray met Paris {i % 7}" for i in range(300)] + [REPLY] * 3
    assert list(ner.names(texts, workers=2)) == list(ner.names(texts, workers=1))


# ------------------------------------------------------------------------------- the real model, sample texts


@pytest.fixture(scope="module")
def corpus(sample_company):
    from bench.anonymize import load_corpus

    return load_corpus(sample_company, "acme")


class _Plain:
    """The plain path: NER on every text, whole (what discover did before paragraphs)."""

    def __init__(self, ner: Ner):
        self.ner = ner

    def people_and_places(self, texts):
        return self.ner.people_and_places(texts)


def test_discover_finds_exactly_what_the_plain_path_finds(real_ner, corpus):
    texts, prose, _ = corpus
    docs = [SimpleNamespace(title=None, body=t) for t, p in zip(texts, prose) if p]
    plain = discover(docs, _Plain(real_ner), allow=("Bench",))
    assert plain.outsiders and plain.candidates  # people to compare (places are compared too, when any)
    def same(d):  # the decisions (NER's rejected noise and the counts differ: each paragraph is read once)
        return d.outsiders, d.places, d.lower, d.lists, sorted(c["name"] for c in d.candidates if c["accepted"])

    assert same(discover(docs, real_ner, allow=("Bench",))) == same(plain)
    assert same(discover(docs, real_ner, allow=("Bench",), workers=2)) == same(plain)
    stats = real_ner.stats
    assert stats["read_chars"] < 0.8 * sum(len(d.body) for d in docs)  # the dedup and the skip do something
    assert stats["read"] < stats["distinct"] < stats["paragraphs"]


def test_no_planted_name_or_address_is_in_a_skipped_paragraph(real_ner, corpus):
    texts, prose, planted = corpus
    nlp, checked = real_ner.nlp, 0
    for p in planted:
        if not prose[p.doc] or p.type not in ("name", "first_name", "postal_address"):
            continue  # user names and addresses are the known-term pass's, never NER's
        line = p.value.split("\n")[0]
        holders = [q for q in paragraphs(texts[p.doc]) if line in q]
        assert holders, p
        assert any(may_name([t.text for t in nlp.tokenizer(q)], nlp.Defaults.stop_words) for q in holders), p
        checked += 1
    assert checked and any(p.outsider for p in planted if p.type == "name")
