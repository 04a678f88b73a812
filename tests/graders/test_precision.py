"""Precision of the communication checks (issue 18): a fact counts only when the reply commits to it. A list of the
candidates of a fact's kind (people, files, versions, keys, URLs, SHAs) voids the facts it holds; a fact is
supported at the cutoff by content, never by a join notice; a fact most of the world names is not graded. The
world is our own invented chat of one team."""

from __future__ import annotations

import datetime as dt

import pytest

from environments.tools import Persona, ToolServer
from environments.world import World, build_world
from graders import facts as F
from graders.rubric import CheckSpec, Context, Rubric, grade
from warehouse.ids import event_id
from warehouse.schemas import Event

T0 = dt.datetime(2022, 5, 2, 9, tzinfo=dt.UTC)
PEOPLE = ["Ines Okafor", "Tomas Lindqvist", "Ravi Menon", "Yuki Sato", "Nadia Haddad", "Pavel Novak",
          "Greta Holm", "Omar Farouk", "Lena Brandt", "Chidi Eze"]
SCOPE = {"medium": "chat", "target": "dev", "thread": "1651482000.000100"}


def chat(n: int, who: str, text: str, minutes: int, automated: str = "") -> Event:
    handle = who.split()[0][0].lower() + who.split()[1].lower()
    ts = f"{1651482000 + minutes * 60}.{n:06d}"
    return Event(event_id=event_id("p", "slack", f"C1:{ts}"), dataset="p", source="slack",
                 kind="channel_join" if automated else "message", native_id=f"C1:{ts}",
                 thread_key=f"slack:C1:{ts}", ts=T0 + dt.timedelta(minutes=minutes), actor=f"slack:{handle}",
                 actor_name=who, body=text, automated=automated,
                 attrs={"channel_id": "C1", "channel_name": "dev", "ts": ts})


def events() -> list[Event]:
    out = [chat(i, who, f"morning all, looking at the build of `core/pom.xml` for 4.{i}.0 today", i)
           for i, who in enumerate(PEOPLE)]
    out.append(chat(50, "Wanda Pierce", "<@wpierce> has joined the channel", 50, automated="slack channel_join"))
    out.append(chat(51, "Ines Okafor", "the search indexer lives in `search/indexer.py`, Ravi Menon wrote it", 51))
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return World(build_world(events(), tmp_path_factory.mktemp("w") / "world.sqlite", "k"))


def view_of(world):
    return world.at(T0 + dt.timedelta(hours=2))


def post(world, text: str):
    server = ToolServer(view_of(world), persona=Persona("Chidi Eze", "chidi@team.example", "ceze"))
    r = server.call("slack_post", {"channel": "dev", "text": text, "thread_ts": SCOPE["thread"]})
    assert not r.error, r.text
    return server.actions


def fact_score(world, fact: dict, text: str, named: list[str] | None) -> float:
    args = {"scope": SCOPE, "fact": fact, "prose": True, "min_words": 3, "max_mentions": 10,
            **({"named": named} if named is not None else {})}
    rubric = Rubric(checks=[CheckSpec(id="f", check="states_fact", weight=1, args=args)])
    g = grade(rubric, post(world, text), Context(view=view_of(world)))
    assert g.error_class is None, g.message
    return g.score


def test_a_list_of_people_commits_to_none_of_them(world):
    fact = {"kind": "person", "text": "Ravi Menon"}
    answer = "Ravi Menon wrote the indexer, ask him about it."
    assert fact_score(world, fact, answer, ["Ravi Menon"]) == 1.0
    # a second name the real reply does not give is no list
    assert fact_score(world, fact, answer + " Yuki Sato reviewed it.", ["Ravi Menon"]) == 1.0
    listing = "It should be one of these: " + ", ".join(PEOPLE[:9]) + ". I hope that helps."
    assert fact_score(world, fact, listing, ["Ravi Menon"]) == 0.0
    mentions = "probably one of " + " ".join(f"@{p.split()[0][0].lower()}{p.split()[1].lower()}" for p in PEOPLE[:9])
    assert fact_score(world, {**fact, "variants": ["@rmenon"]}, mentions, ["Ravi Menon"]) == 0.0
    # before this rubric knew what the real reply names, the same list passed
    assert fact_score(world, fact, listing, None) == 1.0


def test_a_list_of_files_or_versions_commits_to_none_of_them(world):
    files = "It is in one of search/indexer.py, core/a.py, core/b.py, core/c.py, core/pom.xml; hope that helps"
    assert fact_score(world, {"kind": "file", "text": "search/indexer.py"}, files, ["search/indexer.py"]) == 0.0
    one = "It lives in search/indexer.py, next to core/pom.xml where the build is set up"
    assert fact_score(world, {"kind": "file", "text": "search/indexer.py"}, one, ["search/indexer.py"]) == 1.0
    versions = "the fix is in one of 4.0.0, 4.1.0, 4.2.0, 4.3.0, 4.4.0 or 4.5.0, not sure which"
    assert fact_score(world, {"kind": "version", "text": "4.2.0"}, versions, ["4.2.0"]) == 0.0
    # what the request named is no guess: three versions the asker listed do not void the answer
    asked = "it is 4.2.0, not 4.0.0, 4.1.0 or 4.3.0 as you thought"
    assert fact_score(world, {"kind": "version", "text": "4.2.0"}, asked, ["4.2.0", "4.0.0", "4.1.0", "4.3.0"]) == 1.0


def test_a_join_notice_supports_no_fact_content_does(world):
    view = view_of(world)
    # Wanda Pierce only joined the channel: the world shows her, she said nothing
    assert view.authored("Wanda Pierce") and not view.authored("Wanda Pierce", content=True)
    assert not F.supported(view, F.Fact("person", "Wanda Pierce"))
    assert F.supported(view, F.Fact("person", "Ines Okafor"))
    assert F.supported(view, F.Fact("file", "search/indexer.py"))


def test_prevalence_ranks_what_most_documents_name(world):
    from task_builders.prevalence import Prevalence  # here: the other tests of this module run without it

    prev = Prevalence.of(events(), names={p.casefold(): p for p in [*PEOPLE, "Wanda Pierce"]})
    t = (T0 + dt.timedelta(hours=2)).timestamp()
    # every message names core/pom.xml: the commonest file, in nearly every document
    assert prev.commonest("file", t, 1) == ["core/pom.xml"]
    assert prev.count("file", "pom.xml", t) == prev.count("file", "core/pom.xml", t) == len(PEOPLE)
    assert prev.rank("file", "search/indexer.py", t) == 2
    # people: Ines Okafor wrote twice, Ravi Menon wrote once and is named once; the join notice counts nothing
    assert prev.commonest("person", t, 2) == ["Ines Okafor", "Ravi Menon"]
    assert prev.count("person", "Wanda Pierce", t) == 0
    # a hidden document does not count at the cutoff, nor does one after it
    hidden = [events()[-1].event_id]
    assert prev.count("file", "search/indexer.py", t, hidden) == 0
    assert prev.count("file", "search/indexer.py", T0.timestamp()) == 0


def test_a_link_named_once_among_many_is_no_common_fact():
    """Ties share the best rank, but a short list of the commonest links holds a link named once only in the
    orders of its tie group that put it first: one of a dozen links named once stays gradable (a small chat's
    links, issue 18's rule once left none of them), the link most messages name is common, and so is a link
    named once beside one other, when a list has room for both."""
    from types import SimpleNamespace

    from task_builders.families.chat_answer import ChatAnswer
    from task_builders.prevalence import Prevalence

    sites = [f"https://docs{i}.team.example/guide" for i in range(12)]
    once = [chat(i, PEOPLE[i % len(PEOPLE)], f"have a look at {url} for the setup", i) for i, url in enumerate(sites)]
    wiki = [chat(20 + i, PEOPLE[i], "the wiki is at https://wiki.team.example/start as usual", 20 + i)
            for i in range(3)]
    cutoff = T0 + dt.timedelta(hours=2)
    ex = SimpleNamespace(cutoff=cutoff, hidden_events=[])

    def common(evs, url: str) -> bool:
        prev = Prevalence.of(evs)
        fact = F.Fact("url", url)
        return bool(ChatAnswer().common_facts(SimpleNamespace(prevalence=lambda: prev), ex, [fact], [fact]))

    assert not common(once + wiki, sites[5])   # a list of 3 links holds it in 2 of 12 orders of its tie group
    assert common(once + wiki, "https://wiki.team.example/start")   # the commonest link
    assert common(once[:2] + wiki, sites[1])   # one of two links named once: a list of three holds both
    prev, t = Prevalence.of(once + wiki), cutoff.timestamp()
    assert prev.rank("url", sites[5], t) == 2 and prev.reach("url", sites[5], t, 3) == 2 / 12
    assert prev.reach("url", sites[5], t, 1) == 0.0 and prev.reach("url", "https://none.example/", t, 3) == 0.0


def test_the_commonest_list_breaks_ties_by_the_order_a_document_names_them():
    """Values first named by one document tie on count and first appearance: the commonest list (what the listing
    probes name) keeps the order that document names them in, never a set's order, which PYTHONHASHSEED draws
    (issues 20, 21: two runs of one input and salt gave listing probes in another order and with other values)."""
    from task_builders.prevalence import Prevalence

    files = ["web/app.py", "core/pom.xml", "README.md", "api/auth.py", "search/indexer.py", "docs/setup.md",
             "core/cache.py", "tests/test_api.py"]
    prev = Prevalence.of([chat(1, PEOPLE[0], "touched " + ", ".join(f"`{f}`" for f in files) + " today", 1)])
    t = (T0 + dt.timedelta(hours=2)).timestamp()
    assert prev.commonest("file", t, len(files)) == files
    assert prev.commonest("file", t, 3) == files[:3]


@pytest.mark.parametrize("kind, fact, listing", [
    # each value joined to a word by a dash: the extractor's boundaries skip it, the matcher's do not
    ("version", "4.2.0", "the fix is in one of " + ", ".join(f"release-4.{i}.0" for i in range(9)) + ", not sure"),
    ("file", "search/indexer.py", "it is in one of " + ", ".join(f"x:{p}" for p in
                                  ["search/indexer.py", "core/a.py", "core/b.py", "core/c.py", "core/pom.xml"])
     + " i think"),
    ("issue_key", "CORE-12", "it is tracked as one of " + ", ".join(f"see-CORE-{i}" for i in range(10, 19))
     + " i think"),
    ("commit", "abc1234", "it went in with one of " + ", ".join(f"sha-{c}" for c in
                           ["abc1234", "bcd2345", "cde3456", "def4567", "aaa1111"]) + " i think"),
    # values inside a link: the link is one fact, the versions in its path were none
    ("version", "4.2.0", "see one of " + " ".join(f"https://docs.team.example/4.{i}.0/notes" for i in range(6))
     + " for the fix"),
    # people with their names spaced apart, or across a line break: the matcher collapses whitespace
    ("person", "Ravi Menon", "It should be one of these: " + ", ".join(p.replace(" ", "  ") for p in PEOPLE[:9])
     + ". I hope that helps."),
    ("person", "Ravi Menon", "It should be one of these: " + ", ".join(p.replace(" ", "\n") for p in PEOPLE[:9])
     + ". I hope that helps."),
    ("person", "Ravi Menon", "It should be one of these: " + ", ".join(p.replace(" ", "\u00a0") for p in PEOPLE[:9])
     + ". I hope that helps."),
])
def test_a_list_the_extractor_cannot_see_commits_to_none_of_them_either(world, kind, fact, listing):
    """The values a response names are found as the matcher finds the fact (graders.facts.mentions: whitespace
    collapsed, any non-word character a boundary), not only where the extractor sees a value: a list of
    candidates written so the extractor misses them (a dash before each, inside a link, a name's words spaced
    apart) scored 1.0 while the fact was credited."""
    assert F.mentions(listing, F.Fact(kind, fact))
    assert fact_score(world, {"kind": kind, "text": fact}, listing, [fact]) == 0.0


def test_a_list_of_identifiers_after_dashes_commits_to_none_of_them(world):
    names = ["build_index", "flush_cache", "load_config", "parse_args", "read_rows"]
    listing = "it is one of " + ", ".join(f"fn-{n}" for n in names) + " i think"
    assert F.mentions(listing, F.Fact("identifier", "flush_cache"))
    assert fact_score(world, {"kind": "identifier", "text": "flush_cache"}, listing, ["flush_cache"]) == 0.0
    # one identifier with its module after a dash is an answer
    assert fact_score(world, {"kind": "identifier", "text": "flush_cache"}, "call search-flush_cache after the run",
                      ["flush_cache"]) == 1.0


@pytest.mark.parametrize("kind, value", [("version", "4.2.0"), ("issue_key", "CORE-12"), ("commit", "abc1234f"),
                                         ("file", "search/indexer.py"), ("identifier", "flush_cache")])
def test_the_disguised_listing_probe_hides_values_from_the_extractor_not_from_the_count(kind, value):
    """task_builders.probes.disguise writes what the catalogue's `listing_disguised` probe lists: the extractor
    sees no value of the kind, the matcher and the precision count (values_named) do."""
    from task_builders.probes import disguise

    text = "it is " + disguise(value, kind) + " i think"
    key = F.key_of(kind, value)
    assert not [f for f in F.extract(text, limit=10**6) if f.kind == kind and F.key_of(kind, f.text) == key]
    assert F.mentions(text, F.Fact(kind, value))
    assert F.key_of(kind, value) in F.values_named(text, kind)
