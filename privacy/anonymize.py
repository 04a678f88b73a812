"""Consistent pseudonyms and scrubbing of known identities, outsiders' names, e-mail addresses, phone numbers,
addresses, secrets and the people named by mail routing lines.

Invariants:
- Each person gets one pseudonym (full name, first, last, e-mail, username) used in every source and
  every field, so a commit author and a Jira assignee that were the same person still are.
- Pseudonyms are drawn deterministically from a per-dataset secret salt kept in the vault
  (`$TASKMINE_HOME/private/vault/<dataset>.json`); they are never derived from the real name, never equal a
  real name (or a real name's first/last word) seen in the dataset, and are no English word. The pool is
  sized to the identity graph (double-barrelled surnames before any number).
- A text is scrubbed in one pass over the original: every recognizer proposes replacements (Message-IDs,
  `privacy.pii` patterns, `privacy.routing` names, known identity strings, company domains), overlaps are
  settled by priority in that order (then the longer span), and the text is rewritten once. Then the last pass:
  the leak audit's own detector (`privacy.audit.Rules`, built from this Scrubber: its known strings and its
  decision `decide`, the same recognizers, the same exceptions) reads the result, and what it still finds is
  replaced the same way, the edits composed onto the original, until it finds nothing; for people in prose,
  `Anonymizer.settle_people` does the same with NER on every paragraph anonymization changed. So the audit
  never refuses what anonymization wrote (`audit(anonymize(x))` is empty).
- A known person is known in every form: full name, "Last, First", "F. Last", "F Last", "F.M. Last", with
  middle names or initials, the nicknames of the given name from a curated list (`names.nicknames`: "Steve" and
  "Steve Roe" for Steven Roe), possessives, any of those wrapped over a line (quote markers too), the user names
  and mailboxes, the handles people make of their name ("jane.roe", "janeroe", "jroe") and any of those in a URL
  path or host. Full forms, addresses and distinctive tokens are replaced wherever they occur; a single first
  name, nickname, surname or user name that is also an ordinary word of the language or of this dataset
  (`privacy.names.Vocabulary.ordinary`: "Page", "Swift", "Bill") only where the text uses it as a name
  (`names.name_use`: a title, a greeting, a list of people, a signature; or beside another name of the person,
  or in a text that names the person in full), and never before a place word ("Allen Center").
- An account whose display name is ordinary words ("Fix Please", "Build Master": `names.ordinary_account`) is
  replaced as an account (its handles, its whole name where used as a name), never word by word: "Won't Fix"
  stays. A team's or a function's mailbox ("Risk Desk", "Field Operations": `names.team_name`) is no person at
  all (`identity.is_bot`): its name stays as written.
- An outsider (a person no structured field names) exists only with evidence (`discover`, with the rule the
  audit applies: `names.accept_person`): NER's claim plus a first-name or surname list, a name-shaped context
  (a greeting, a signature, a byline, an apposition: "X, an analyst at ...") or a middle initial (a line wrap or
  a possessive changes nothing), a surname after a title ("Mr. X"), or a routing line; the forms of a known
  person's name (a nickname, a middle initial) are that person's. Its full name is replaced everywhere, a
  single word of it only where used as a name (a surname on the surname list that is no English word
  everywhere). A reviewed allow-list of public figures (`allow` in taskmine.toml) keeps a name.
- Public hosts (`PUBLIC_HOSTS`: code hosting, mail providers, foundations) are never a company domain and a
  known string inside their names is never replaced; URL schemes are never replaced. Source code (`code=True`:
  repository files, diffs) keeps its identifiers: an ordinary word there is replaced only with a strong cue.
- Only this module (and the extractors before it) read raw text; every later stage reads the output.
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import re
import secrets
import unicodedata
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from extractors.git import author_handle
from privacy import pii, routing
from privacy.fastscrub import SEP, TermMatcher, norm, term_pattern
from privacy.identity import Person, UnionFind, fold, handle_values, is_bot, persons
from privacy.names import (
    LowerCounts,
    Vocabulary,
    accept_person,
    frequency_rank,
    full_forms,
    handle_forms,
    is_english,
    name_keys,
    name_parts,
    name_use,
    nicknames,
    ordinary_account,
    person_words,
    place_after,
    strong_cue,
)
from privacy.ner import Found, cue_of, paragraph_offsets, titled_of, to_text
from warehouse.ids import content_hash
from warehouse.schemas import Event, Identity

# Pseudonym pools: invented for this purpose; any that is an English word is dropped at use (`_pools`).
FIRST = tuple("""
    Adair Aeron Alaric Alessa Amari Anouk Ansel Arden Arlo Astrid Auden Aurelie Avery Bastian Beckett Bellamy
    Blaise Bram Brielle Bryony Caelan Calla Callum Casimir Cassian Cato Cerys Corin Cosima Cyrus Dacey Darcy
    Dario Delphine Desmond Devon Dorian Dov Eamon Eira Elio Ellery Elowen Emery Emrys Eero Evander Fabian Fenna
    Fenwick Fiora Florian Gaius Galen Greer Gwen Hadley Halle Hollis Idris Ilse Imara Isolde Ivo Jago Jarek
    Jory Juno Kael Kasimir Keaton Kiran Lachlan Laszlo Leif Lennox Linnea Lior Lorcan Lucan Lyra Maelis Maren
    Marlo Mika Milo Mireille Nalani Naoise Nerys Niamh Nico Noor Oisin Orla Oren Orrin Osric Pascale Perrin
    Quillon Rafferty Remy Rhiannon Ronan Rowan Saoirse Selim Seren Silas Solenne Soren Sunniva Tamsin Teodor
    Thea Tiernan Tove Ulla Ulric Vasco Vesna Wilder Wynn Xanthe Yael Yannick Ysolde Zaid Zara Zephyr Zinnia
    Anselm Benedek Cillian Dagny Elspeth Fintan Gunnar Ingmar Jolyon Katell Malin Nesta Odile Pim Quentin
    Rasmus Sigrid Torben Unai Valentin Xavi Yorick Zelie Aneira Bertil Carys Dragan Elowyn Folke Gesine Halvard
    Ione Jensine Kjeld Liesel Mairead Niklas Oriel Petronel Ragnhild Saskia Tegan Ulrike Verity Wendell
""".split())
LAST = tuple("""
    Abernathy Ainsworth Ashdown Aubertin Birchall Blackwood Bramwell Brightman Calloway Carrow Castellane
    Chadwick Coverdale Cresswell Dalgleish Dunmore Eastwood Eldridge Everley Fairweather Farquhar Fernsby
    Fitzwilliam Galbraith Gladwell Greenhalgh Hartwell Hathersage Holloway Inchcombe Iverson Jardine Jessop
    Jolliffe Kingsley Langford Lockhart Merriweather Northcott Norwood Oakhurst Ormsby Pemberton Quimby
    Radcliffe Rainsford Shackleton Thornbury Tilbury Underhill Vantongeren Villiers Westbrook Whitlock Yardley
    Yelland Zeller Achterberg Albrechtsen Amundsen Arkwright Ballantyne Bartholdi Beauchamp Bellingham Berwick
    Bickerstaff Blythe Bosworth Braddock Brockhurst Cadogan Caldecott Carmody Cartwright Colquhoun Cottingham
    Crabtree Dashwood Delacroix Dewhurst Donnelly Dorrington Duckworth Easterbrook Ellingham Etherington
    Falconer Featherstone Finchley Fotheringham Garroway Gillespie Goldsworthy Grimshaw Haldane Halloway
    Harrowgate Haverford Hawksworth Heathcote Hollingsworth Huxley Ingleby Jellicoe Kavanagh Kilbride
    Kingsbury Kirkpatrick Latimer Lethbridge Littlejohn Llewellyn Loxley Macaulay Mallory Marchbanks Mayhew
    Montague Mortimer Muirhead Netherwood Oldroyd Overbury Pankhurst Pennington Pickering Quarrington
    Ravenscroft Redgrave Rothwell Rutherford Saltonstall Satterthwaite Scrimgeour Selwyn Shawcross Sheringham
    Somerville Stainforth Stanhope Stourbridge Strathmore Sutcliffe Tattersall Templeton Thistlewood
    Tollemache Trelawney Tremayne Treadwell Ufford Vandermeer Vavasour Wainwright Wakefield Walsingham
    Warrender Waverley Weatherby Wetherell Whitmore Wickham Wilberforce Winterbottom Woodhouse Wolstenholme
    Wycliffe Yarborough Zouche Aldridge Ashcombe Bannerman Belcourt Brandreth Cholmondeley Dalrymple
    Drinkwater Elphinstone Fanshawe Grosvenor Hepplewhite Illingworth Kenworthy Lamberton Mainwaring
    Nettleship Oxenham Parkinson Ridgeway Sackville Tennyson Umfreville Verrall Whitelaw Yeardley
""".split())
# Words too common to treat as a username or first name in free text.
STOPWORDS = frozenset("""
    admin root user test bot build ci dev the and for not all any can will may bug fix issue team
    null none true false master main head merge release jira git mail info support help
""".split())
# Hosts that belong to everyone: never a company domain, and never a person's identifier inside their name.
PUBLIC_HOSTS = frozenset("""
    github.com github.io githubusercontent.com gitlab.com gitlab.io bitbucket.org sourceforge.net
    sf.net googlecode.com google.com googlegroups.com gmane.org kernel.org vger.kernel.org lkml.org apache.org
    python.org pypi.org npmjs.com npmjs.org rust-lang.org crates.io golang.org mozilla.org mozilla.com debian.org
    ubuntu.com launchpad.net gnu.org fsf.org eclipse.org java.net oracle.com microsoft.com apple.com
    amazon.com amazonaws.com stackoverflow.com stackexchange.com wikipedia.org w3.org ietf.org scipy.org
    numpy.org readthedocs.io readthedocs.org slack.com twitter.com x.com linkedin.com facebook.com youtube.com
    medium.com atlassian.com atlassian.net jira.com nabble.com
    mail-archive.com marc.info spinics.net
""".split())


@dataclass(frozen=True)
class Pseudonym:
    full_name: str
    first: str
    last: str
    email: str
    username: str


class VaultError(ValueError):
    """A vault that cannot be opened as asked (another salt than the one it was made with)."""


class Vault:
    """The private mapping person -> pseudonym, with the dataset's secret salt. Never published."""

    def __init__(self, path: Path, salt: str, domain: str, pseudonyms: dict[str, Pseudonym]):
        self.path, self.salt, self.domain, self.pseudonyms = path, salt, domain, pseudonyms

    @classmethod
    def load(cls, path: Path, salt: str | None = None) -> Vault:
        """The vault at `path`, or a new one. A new vault draws its salt at random unless `salt` is given (a run
        is reproducible given its salt: the same salt gives the same pseudonyms, domains and Message-IDs); an
        existing vault keeps its own, and asking for another is an error (its pseudonyms are already out)."""
        if salt is not None and not salt.strip():
            raise VaultError("the pseudonym salt is empty: set TASKMINE_SALT to a secret string (e.g. "
                             "`openssl rand -hex 16`) or unset it")
        if path.exists():
            data = json.loads(path.read_text())
            if salt is not None and salt != data["salt"]:
                raise VaultError(f"{path} was made with another salt than TASKMINE_SALT: unset TASKMINE_SALT to "
                                 "keep this dataset's pseudonyms, or remove that vault (and re-run from the "
                                 "anonymize stage) to draw them from the new salt")
            return cls(path, data["salt"], data["domain"],
                       {k: Pseudonym(**v) for k, v in data["pseudonyms"].items()})
        salt = salt if salt is not None else secrets.token_hex(16)
        return cls(path, salt, f"corp-{content_hash('domain', salt)[:6]}.example", {})

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)
        data = {"salt": self.salt, "domain": self.domain,
                "pseudonyms": {k: asdict(v) for k, v in sorted(self.pseudonyms.items())}}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)

    def assign(self, people: list[Person]) -> None:
        """Give every person without one a pseudonym that collides with no real or fake name."""
        real_tokens = {t for p in people for n in p.names for t in fold(n).replace(",", " ").split()}
        # the nicknames of real given names are real names of theirs too ("Nico" of Nicholas): a pseudonym may
        # not be one, or the last pass could not tell it from the person's own nickname
        real_tokens |= {k for t in list(real_tokens) for k in nicknames(t)}
        real_tokens |= {fold(u) for p in people for u in p.usernames}
        real_tokens |= {fold(e.split("@")[0]) for p in people for e in p.emails}
        taken = {fold(v.full_name) for v in self.pseudonyms.values()}
        firsts, lasts = _pools(len(people) + len(self.pseudonyms))
        size = len(firsts) * len(lasts)
        for p in people:
            if p.person_id in self.pseudonyms:
                continue
            for attempt in range(4 * size + 10_000):
                h = int(content_hash("pseudonym", self.salt, p.person_id, attempt)[:15], 16)
                first, last = firsts[h % len(firsts)], lasts[(h // len(firsts)) % len(lasts)]
                if attempt >= 2 * size:
                    last = f"{last}{attempt}"  # only when the pools are exhausted
                full = f"{first} {last}"
                if fold(full) in taken or fold(first) in real_tokens or fold(last) in real_tokens:
                    continue
                taken.add(fold(full))
                user = f"{first[0]}{last}".lower().replace("-", "")
                self.pseudonyms[p.person_id] = Pseudonym(full, first, last,
                                                         f"{first}.{last}@{self.domain}".lower(), user)
                break


@lru_cache(maxsize=8)
def _pools(people: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(first names, surnames) to draw from: the lists above without English words; when people are more than
    a quarter of the combinations, double-barrelled surnames are added until they are not."""
    firsts = tuple(f for f in FIRST if not is_english(f))
    lasts = tuple(la for la in LAST if not is_english(la))
    if people * 4 > len(firsts) * len(lasts):
        extra = [f"{a}-{b}" for a in lasts for b in lasts if a != b]
        need = people * 4 // len(firsts) + 1 - len(lasts)
        lasts = lasts + tuple(extra[:max(0, need)])
    return firsts, lasts


# Every form a salted fake takes in anonymized text (what `Vault` draws and `Scrubber` writes): a name made of pool
# words (a full name, a first or last name alone, a double-barrelled surname, "Last9" when the pools run out), a
# handle made of them ("aabernathy", "arlo.abernathy", "abernathy_arlo"), the company's and other companies'
# domains, Message-IDs, redacted addresses, and the fakes of secrets in code.
_POOL_WORD = "|".join(sorted({w.casefold() for w in (*FIRST, *LAST)}, key=len, reverse=True))
_UNSALTED = (
    (re.compile(r"\b[0-9a-f]{24}@message-id\.invalid\b"), "msgid@message-id.invalid"),
    (re.compile(r"\bperson-[0-9a-f]{8}@redacted\.example\b"), "person@redacted.example"),
    (re.compile(r"\b(corp|org)-[0-9a-f]{6}\.example\b"), r"\1.example"),
    (re.compile(r"\bfake[0-9a-f]{8,28}\b"), "fakesecret"),
    (re.compile(rf"(?i)(?<!\w)[a-z]?(?:{_POOL_WORD})(?:[._-]?(?:{_POOL_WORD}))*\d*(?!\w)"), "name"),
)


def unsalted(text: str) -> str:
    """`text` (anonymized) with every pseudonym replaced by one stand-in of its kind: what stays of a text whatever
    salt was drawn. Decisions made from the words of anonymized text (near-duplicate groups, families and their
    splits) are made from this, so that which tasks a dataset gets does not hinge on the fake names drawn (the
    same sample under two salts: tests/task_builders/test_salt.py). Real names never reach here; only the
    pools' invented words and the salted forms above are replaced, so two requests that differ only in who
    wrote them read alike."""
    for pattern, stand_in in _UNSALTED:
        text = pattern.sub(stand_in, text)
    return text


_NEVER = re.compile(r"(?!)")
_TITLES = frozenset("mr mrs ms miss dr prof sir dame".split())
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
MESSAGE_ID = re.compile(r"<([^<>\s@]{1,250}@[^<>\s@]{1,250})>")
MESSAGE_ID_KEYS = ("message_id", "in_reply_to", "references")


@dataclass(frozen=True)
class Term:
    """What a known string becomes, and how sure we are that it names a person wherever it occurs.

    `role`: "full" (a full name form, an address: replaced everywhere), "handle" (a user name made of a name,
    "jane.roe": replaced everywhere, but a real user name of someone else wins), "first", "last" (a name word),
    "nick" (a nickname or the given name it shortens: "Steve" of Steven), "user" (a user name or mailbox),
    "place". `ambiguous`: the string is also an ordinary word, so it is replaced only where `names.name_use` says
    the text uses it as a name; `strict`: only with a strong cue (`names.strong_cue`) or beside another of the
    person's names ("Rich Kinder"): a nickname that is a word ("Will", "Rich") is a weaker claim than a name
    the person was seen with."""

    replacement: str
    role: str
    ambiguous: bool = False
    person: str = ""
    strict: bool = False


# Higher wins when two recognizers propose overlapping replacements.
SECRET_LITERAL_MIN = 6   # a secret value this long repeated in a quoted literal of code is replaced there too
_PRIO = {"message_id": 6, "secret": 5, "pattern": 4, "routing": 3, "term": 2, "domain": 1, "residue": 0}
MEMO_CHARS, MEMO_SIZE = 256, 50_000  # prose values this short are scrubbed once (Scrubber.__call__)
_ROLE_RANK = {"full": 0, "user": 1, "handle": 2, "first": 3, "last": 4, "nick": 5, "place": 6}


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str
    source: str  # which recognizer: a key of _PRIO
    person: str = ""  # the person a name edit stands for
    role: str = ""  # the Term role of a name edit


class Scrubber:
    """Rewrites a text once, from the replacements every recognizer proposes (see the module invariants)."""

    def __init__(self, people: list[Person], vault: Vault, message_ids: Iterable[str] = (),
                 places: Iterable[str] = (), allow: Iterable[str] = (), outsiders: Iterable[Person] = (),
                 vocab: Vocabulary | None = None, lists: Iterable[str] = (), orgs: Iterable[str] = ()):
        self.vault = vault
        self.lists = {x.strip("<> ").casefold() for x in lists if x}
        self.orgs = {x.casefold() for x in orgs}
        self.vocab = vocab or Vocabulary()
        outsiders = list(outsiders)
        # Message-IDs name hosts and often people; each becomes one opaque id, the same everywhere, so
        # threads and "see <id>" mentions still match after anonymization.
        self.message_ids = {m: f"{content_hash('message-id', vault.salt, m)[:24]}@message-id.invalid"
                            for m in message_ids}
        self.terms: dict[str, Term] = {}
        self.person_by_name: dict[str, str] = {}   # folded full-name form -> person id (unambiguous only)
        self.first_of: dict[str, str] = {}         # folded first name -> its one owner's person id
        self._build_terms(people, outsiders, places)
        self.known_emails = {e.casefold(): vault.pseudonyms[p.person_id].email for p in people for e in p.emails}
        self.person_by_email = {e.casefold(): p.person_id for p in people for e in p.emails}
        self.allow = {fold(a) for a in allow}  # reviewed public names and domains: nobody's to replace or refuse
        self.domains = company_domains(people, vault, allow)
        self.fake_domains = set(self.domains.values())
        self.own_emails = {q.email.casefold() for q in vault.pseudonyms.values()}
        for p in people:  # a known address after its domain was mapped still maps to the person's pseudonym
            for e in p.emails:
                local, _, domain = e.rpartition("@")
                if domain.casefold() in self.domains:
                    mapped = f"{local}@{self.domains[domain.casefold()]}".casefold()
                    self.known_emails.setdefault(mapped, vault.pseudonyms[p.person_id].email)
        dom = "|".join(re.escape(d) for d in sorted(self.domains, key=lambda d: (-len(d), d)))
        # A company host name anywhere (jira.acme-corp.example, a URL, a mail address) keeps its sub-domain
        # and gets the dataset's fake domain, so links still look like links of one company.
        self._domains = re.compile(rf"(?<![\w-])((?:[a-z0-9-]+\.)*)({dom})(?![\w-]|\.[a-z])", re.IGNORECASE) \
            if dom else None
        self._domain_cache: dict[tuple, re.Pattern] = {}
        self._memo: dict[str, str] = {}  # short prose values already scrubbed (see __call__)
        alternation = "|".join(term_pattern(k) for k in sorted(self.terms, key=lambda s: (-len(s), s)))
        # Not part of a longer word or address; inside a host name it is replaced ("jdoe.blog.example").
        # An "@" before a name is a mention ("@First Last has joined"), unless a word precedes it (an address);
        # one or two hyphens before it are a signature ("-Jeff", "--Ken").
        # A hyphen may follow (a branch "jdoe-patch-1"); a name word glued to one is checked in _term.
        self._known = re.compile(rf"(?:(?<![\w@-])|(?<=^@)|(?<=[^\w.@-]@)|(?<=^-)|(?<=[ \t\n>]-)|(?<=^--)|"
                                 rf"(?<=[ \t\n>]--))(?:{alternation})"
                                 r"(?![\w@])", re.IGNORECASE | re.MULTILINE) if self.terms else None
        self._known_regex = self._known  # the reference the fast matcher must equal (tests)
        if self._known is not None:  # same matches, in time that does not grow with the number of names
            self._known = TermMatcher(self._known, self.terms, term_pattern)
        self._detector = None
        # Secrets in source code (code=True) become fakes, one per secret value (`fake_secret`): the same in every
        # file and commit, and in the quoted literals that repeat a value found anywhere, so tests that compare
        # them still pass. Prose keeps the typed placeholders ([SECRET:URL_PASSWORD]).
        self.code_secrets: dict[str, str] = {}
        self._secret_literals: re.Pattern | None = None
        self._secret_literals_of = 0

    # ------------------------------------------------------------------------------------------- terms

    def _build_terms(self, people: list[Person], outsiders: list[Person], places: Iterable[str]) -> None:
        """Every string of every person, with its replacement and role; on a clash the stronger role wins
        (a full form over a user name over a first name over a surname over a nickname), then the person seen
        first. A known person's given name brings its nicknames (`names.nicknames`: "Steve", "Steve Kearns",
        "Kearns, Steve" for Steven Kearns). An account whose display name is made of ordinary words ("Fix
        Please": `names.ordinary_account`) is replaced as an account (its whole name, its handles), never word
        by word."""
        vocab, pseudo = self.vocab, self.vault.pseudonyms
        cands: dict[str, list[tuple[int, int, Term]]] = {}
        order = 0

        def add(key: str, term: Term) -> None:
            nonlocal order
            key = key.strip()
            if len(key) < 2:
                return
            order += 1
            for k in {key, _strip_accents(key)}:
                cands.setdefault(k.casefold(), []).append((_ROLE_RANK[term.role], order, term))

        first_owner: dict[str, set[str]] = {}
        last_owner: dict[str, set[str]] = {}
        nick_owner: dict[str, set[str]] = {}
        parsed: dict[str, list[tuple[str, tuple[str, ...], str]]] = {}
        accounts: dict[str, set[tuple[str, str]]] = {}  # person -> (first, last) of names made of ordinary words
        outsider_ids = {p.person_id for p in outsiders}
        nicks: dict[tuple[str, str], list[str]] = {}  # (person, given name) -> its nicknames, as written
        for p in people + outsiders:
            parts = [x for x in (name_parts(n) for n in p.names) if x]
            parsed[p.person_id] = parts
            for f, m, la in parts:
                if ordinary_account([f, *m, la], vocab):
                    accounts.setdefault(p.person_id, set()).add((f, la))
                    continue
                first_owner.setdefault(fold(f), set()).add(p.person_id)
                last_owner.setdefault(fold(la), set()).add(p.person_id)
                if p.person_id not in outsider_ids and f[:1].isalpha() and len(f.rstrip(".")) >= 2:
                    names = [n.capitalize() for n in sorted(nicknames(f)) if n != fold(la)]
                    nicks[(p.person_id, f)] = names
                    for n in names:
                        nick_owner.setdefault(fold(n), set()).add(p.person_id)
        name_owner: dict[str, set[str]] = {}
        for p in people + outsiders:
            for f, m, la in parsed[p.person_id]:
                for given in (f, *nicks.get((p.person_id, f), ())):
                    for form, _ in full_forms(given, m, la):
                        name_owner.setdefault(fold(form), set()).add(p.person_id)
        self.person_by_name = {k: next(iter(v)) for k, v in name_owner.items() if len(v) == 1}
        self.first_of = {k: next(iter(v)) for k, v in first_owner.items() if len(v) == 1}
        self.first_names = {pid: {fold(f) for f, _, _ in parts} | {fold(n) for (q, _), ns in nicks.items()
                                                                    if q == pid for n in ns}
                            for pid, parts in parsed.items()}
        self.last_names = {pid: {fold(la) for _, _, la in parts} for pid, parts in parsed.items()}

        for p in people + outsiders:
            q = pseudo[p.person_id]
            outsider = p.person_id in outsider_ids
            pid = p.person_id
            words_of = accounts.get(pid, set())
            firsts = {fold(f) for f, _, la in parsed[pid] if (f, la) not in words_of}
            lasts = {fold(la) for f, _, la in parsed[pid] if (f, la) not in words_of}
            for e in p.emails:
                add(e, Term(q.email, "full", person=pid))
                local = e.split("@")[0]
                if len(local) < 3 or fold(local) in STOPWORDS:
                    continue
                # a mailbox named after its owner's first name or surname ("manfred@...") is that name
                if fold(local) in firsts:
                    add(local, Term(q.first, "first", vocab.ordinary(local), pid))
                elif fold(local) in lasts:
                    add(local, Term(q.last, "last", vocab.ordinary(local), pid))
                else:
                    add(local, Term(q.username, "user", vocab.ordinary(local) or len(local) < 4, pid))
            for u in p.usernames:
                if len(u) >= 3 and fold(u) not in STOPWORDS:
                    add(u, Term(q.username, "user", vocab.ordinary(u), pid))
            for n in p.names:
                n = " ".join(w for w in n.strip().strip("\"'").split() if any(c.isalpha() for c in w))
                if name_parts(n) is not None or len(n) < 3 or fold(n) in STOPWORDS or " " in n or outsider:
                    continue
                # a one-word display name is the person's first name, surname or a user name ("Tibor17")
                if fold(n) in firsts or (fold(n) not in lasts and vocab.first_name(n) and n[:1].isupper()):
                    add(n, Term(q.first, "first", vocab.ordinary(n), pid))
                elif fold(n) in lasts or (vocab.surname(n) and n[:1].isupper()):
                    add(n, Term(q.last, "last", vocab.ordinary(n), pid))
                else:
                    add(n, Term(q.username, "user", vocab.ordinary(n), pid))
            for f, m, la in parsed[pid]:
                styled = {"full": q.full_name, "last-first": f"{q.last}, {q.first}"}
                account = (f, la) in words_of
                for given in (f, *nicks.get((pid, f), ())):
                    for form, style in full_forms(given, m, la):
                        if name_owner.get(fold(form)) == {pid}:
                            # an account's name of ordinary words ("Risk Desk") only where used as a name
                            add(form, Term(styled[style], "full", account, person=pid))
                for handle, style in handle_forms(f, la):
                    if len(handle) >= 5 and not vocab.ordinary(handle) and not is_english(handle):
                        add(handle, Term(_handle(q, style), "handle", person=pid))
                if account:
                    continue  # "Fix Please": the words of an account's name are words
                ff, ll = fold(f), fold(la)
                if outsider and vocab.ordinary(la) and not vocab.surname(la):
                    ll = ""  # an outsider's surname that is a word is replaced only next to the first name
                if len(ff) >= 2 and f[:1].isalpha():
                    # A first name two people share cannot get one pseudonym: it still goes, as [PERSON].
                    unique = first_owner.get(ff) == {pid}
                    add(f, Term(q.first if unique else "[PERSON]", "first",
                                outsider or vocab.ordinary(f) or len(ff) < 3 or ff in STOPWORDS, pid if unique else ""))
                if len(ll) >= 2 and la[:1].isalpha():
                    unique = last_owner.get(ll) == {pid}
                    # an outsider's surname is a claim of NER's: everywhere only when the surname list has it
                    # and it is no English word ("Pritchard"), else where used as a name
                    doubt = outsider and not (vocab.surname(la) and not is_english(la))
                    add(la, Term(q.last if unique else "[PERSON]", "last",
                                 doubt or vocab.ordinary(la) or len(ll) < 3 or ll in STOPWORDS,
                                 pid if unique else ""))
                for n in nicks.get((pid, f), ()):
                    fn = fold(n)
                    unique = nick_owner.get(fn) == {pid}
                    ordinary = vocab.ordinary(n) or len(fn) < 3 or fn in STOPWORDS
                    # a nickname that is also a word ("Bill", "Mac", "Rick") is a weaker claim than a name the
                    # person was seen with: a strong cue, another name of theirs beside it, or a text that names
                    # them (never a capital in mid-sentence alone: "on the Mac")
                    add(n, Term(q.first if unique else "[PERSON]", "nick", ordinary, pid if unique else "",
                                strict=ordinary))
            if outsider:
                for n in p.names:
                    words = n.split()
                    if name_parts(n) is None and len(words) == 2 and words[0].rstrip(".").casefold() in _TITLES:
                        add(words[1], Term(q.last, "last", True, pid))  # "Mr. Waxman": a surname after a title
                    elif name_parts(n) is None and " " not in n.strip() and len(n) >= 3:
                        add(n, Term(q.first, "first", True, pid))
        for place in places:  # places NER found outside the allow-list (an outsider's town)
            add(place, Term("[PLACE]", "place"))
        self.terms = {k: min(v, key=lambda c: (c[0], c[1]))[2] for k, v in cands.items()}

    # ------------------------------------------------------------------------------------------ scrubbing

    def __call__(self, text: str | None, code: bool = False) -> str | None:
        if not text:
            return text
        # A short prose value recurs in every event (a role, a charset, a list's address, a sender's name): its
        # output is computed once. Prose only: in code the fakes of secrets found so far change what a literal
        # becomes; in prose the same text always gets the same replacements (terms, patterns, the detector).
        memo = not code and len(text) <= MEMO_CHARS
        if memo:
            out = self._memo.get(text)
            if out is not None:
                return out
        raw = text
        text = _INVISIBLE.sub("", text)  # zero-width characters inside a name must not hide it
        edits = self.plan(text, code)
        out = _apply(text, edits) if edits else text
        if memo:
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            self._memo[raw] = out
        return out

    @property
    def detector(self):
        """The leak audit's detector for this dataset (`privacy.audit.Rules` without NER): the last pass."""
        if self._detector is None:
            from privacy.audit import Rules  # audit imports this module's types; built on first use

            self._detector = Rules.of_scrubber(self)
        return self._detector

    def plan(self, text: str, code: bool = False) -> list[Edit]:
        """The replacements for `text` (already free of invisible characters): non-overlapping, in order.

        First every recognizer proposes (`first_pass`); then the last pass: the leak audit's own detector
        (`self.detector.residue`) reads the result, and what it still finds is replaced too, the edits composed
        back onto `text`, until it finds nothing (three rounds at most; what is left then is the audit's to
        report). A text the first pass leaves as it is needs no last pass: the detector decides with the same
        functions on the same text (the known-term decision `_term`, `pii.find` and what keeps a span)."""
        edits = self.first_pass(text, code)
        if not edits:
            return edits
        for _ in range(3):
            out = _apply(text, edits)
            found = self.detector.residue(out, code)
            if not found:
                break
            edits = _compose(text, edits, out, found)
        return edits

    def first_pass(self, text: str, code: bool = False) -> list[Edit]:
        """What the recognizers propose for `text`, settled (see the module invariants)."""
        cands: list[Edit] = []
        if self.message_ids and "@" in text:
            for m in MESSAGE_ID.finditer(text):
                new = self.message_ids.get(m.group(1))
                if new:
                    cands.append(Edit(m.start(1), m.end(1), new, "message_id"))
        for sp in pii.find(text):
            edit = self.replacement(text, sp, code)
            if edit is not None:
                cands.append(edit)
        if code and self.code_secrets:
            for m in self._literals().finditer(text):
                cands.append(Edit(m.start(), m.end(), self.code_secrets[m.group(0)], "secret"))
        for r in () if code else routing.find(text):  # source code has no mail routing lines
            new = self._routed(r)
            if new is not None:
                cands.append(Edit(r.start, r.end, new, "routing"))
        if self._known is not None:
            for m, new in self.decide(text, list(self._known.finditer(text)), code):
                if new is not None:
                    term = self.terms.get(norm(m.group(0)))
                    cands.append(Edit(m.start(), m.end(), new, "term", term.person if term else "",
                                      term.role if term else ""))
        if self._domains is not None:
            for m in self._domain_rx(text).finditer(text):
                cands.append(Edit(m.start(2), m.end(2), self.domains[m.group(2).casefold()], "domain"))
        edits = _settle(cands)
        return self._name_runs(text, edits) if len(edits) and not code else edits

    def _name_runs(self, text: str, edits: list[Edit]) -> list[Edit]:
        """A known surname and the name words before it are one name: "Jeff M. Whitaker" (the first name and
        the surname replaced, the initial between them kept) and "Jeffrey S. Whitaker" (a first name we did not
        know for that person, before the surname we did) become the person's full pseudonym, "J. Whitaker" its
        initial and surname, so no initial or nickname is left beside it."""
        out: list[Edit] = []
        for e in edits:
            q = self.vault.pseudonyms.get(e.person) if e.source == "term" and e.role == "last" else None
            if q is None:
                out.append(e)
                continue
            prev = out[-1] if out else None
            own_first = prev is not None and (
                prev.person == e.person or fold(text[prev.start:prev.end]) in self.first_names.get(e.person, ()))
            if own_first and prev.source == "term" and prev.role in ("first", "nick") \
                    and _NAME_GAP.fullmatch(text, prev.end, e.start):
                # "Jeff M. Whitaker", "Riyafa (Harry) Hameed": first name, initial or nickname, surname: one name
                out[-1] = Edit(prev.start, e.end, _cased(text[prev.start:e.end], q.full_name), "term", e.person,
                               "full")
                continue
            line_start = text.rfind("\n", 0, e.start) + 1
            m = _BEFORE_SURNAME.search(text, max(line_start, e.start - 48), e.start)
            if m is None:
                out.append(e)
                continue
            word = m.group(1)
            prev = out[-1] if out else None
            if prev is not None and prev.end > m.start():
                # the first name was replaced already: one name when it is this person's (or only a placeholder)
                if prev.start == m.start() and prev.source == "term" and prev.role in ("first", "nick") and (
                        prev.person == e.person or fold(word) in self.first_names.get(e.person, ())):
                    out[-1] = Edit(prev.start, e.end, _cased(text[prev.start:e.end], q.full_name), "term",
                                   e.person, "full")
                    continue
                out.append(e)
                continue
            if not any(c.islower() for c in word):  # "J. Roe", "J Roe", "J.R. Roe", "JR Roe": initials
                out.append(Edit(m.start(), e.end, f"{q.first[0]}. {q.last}", "term", e.person, "full"))
            elif self.vocab.first_name(word) or fold(word) in self.first_names.get(e.person, ()):
                out.append(Edit(m.start(), e.end, q.full_name, "term", e.person, "full"))
            else:
                out.append(e)
        return out

    def _domain_rx(self, text: str) -> re.Pattern:
        """The company-domain regex for just the domains `text` holds (a substring test each, in C), so a text
        without any is not scanned by a pattern that may start at every character."""
        low = text.lower()
        present = tuple(d for d in self.domains if d in low)
        if not present:
            return _NEVER
        rx = self._domain_cache.get(present)
        if rx is None:
            if len(self._domain_cache) > 1024:
                self._domain_cache.clear()
            dom = "|".join(re.escape(d) for d in sorted(present, key=lambda d: (-len(d), d)))
            rx = self._domain_cache[present] = re.compile(
                rf"(?<![\w-])((?:[a-z0-9-]+\.)*)({dom})(?![\w-]|\.[a-z])", re.IGNORECASE)
        return rx

    def decide(self, text: str, matches: list[re.Match], code: bool) -> list[tuple[re.Match, str | None]]:
        """(match, replacement or None) for every known-string match of `text`, in two rounds: first with the
        people the text names in full (`named`), then, for what stayed, with every person a first-round
        replacement stands for too ("Rick, Hal: ... Swift will publish": the text speaks of Rick Swift)."""
        named = self.named(matches)
        out = [(m, self._term(text, m, code, named)) for m in matches]
        if any(new is None for _, new in out):
            more = named | {t.person for m, new in out if new is not None
                            and (t := self.terms.get(norm(m.group(0)))) is not None and t.person}
            if more != named:
                out = [(m, new if new is not None else self._term(text, m, code, more)) for m, new in out]
        return out

    def named(self, matches: Iterable[re.Match]) -> frozenset[str]:
        """The people a text names in full (a full name form of theirs among `matches`, the known-string matches
        of the text): there, a capitalized first name or surname of theirs is theirs ("Victor Amadi ... Victor
        can be reached at")."""
        out = set()
        for m in matches:
            key = norm(m.group(0))
            term = self.terms.get(key)
            if term is not None and term.role == "full" and term.person and not term.ambiguous and " " in key \
                    and "@" not in key:
                out.add(term.person)
        return frozenset(out)

    def _term(self, text: str, m: re.Match, code: bool, named: frozenset[str] = frozenset()) -> str | None:
        """The replacement of the known string `m` matched in `text`, or None where it stays: the one decision
        the first pass and the leak audit's detector share. `named`: the people the text names in full."""
        s, e = m.start(), m.end()
        term = self.terms.get(norm(m.group(0)))
        if term is None:
            return "[PERSON]"
        nxt = text[e:e + 3]
        if nxt.startswith("://"):
            return None  # a URL scheme
        if nxt[:1] == "-" and nxt[1:2].isalpha() and term.role in ("first", "last", "nick", "place"):
            return None  # a word of a hyphenated name ("Jean-Luc"): not this name
        if (nxt[:1] == "." or text[s - 1:s] == ".") and _in_public_host(text, s, e):
            return None  # github.com, maven.apache.org: hosts of everyone
        if term.role in ("first", "nick") and place_after(text, e):
            return None  # "Allen Center", "Jordan River": a place's name
        if term.ambiguous and not self._used_as_name(text, s, e, term, code, named):
            return None
        if term.role == "place" and (_CAMEL.search(m.group(0)) or not m.group(0)[:1].isupper()):
            return None  # "IntelliJ", "intellij": an identifier, not the place NER saw
        return _rewrap(m.group(0), _cased(m.group(0), term.replacement))

    def _used_as_name(self, text: str, s: int, e: int, term: Term, code: bool,
                      named: frozenset[str] = frozenset()) -> bool:
        """Whether an ambiguous known word is used as a name at text[s:e]: `names.name_use` (`strong_cue` only
        for a strict term), or, for a capitalized name word, beside another name of the same person ("Ken Lay",
        "Lay, Kenneth", "Rick S. Buy") or in a text that names that person in full."""
        role = "user" if term.role == "user" else ("first" if term.role == "nick" else term.role)
        if (strong_cue(text, s, e, role) or (not code and _vocative(text, s, e))) if term.strict \
                else name_use(text, s, e, role, code):
            return True
        if role == "user" or code or not term.person or not text[s:s + 1].isupper() or text[s:e].isupper():
            return False
        if _VERB_FIRST.match(text, e) and _sentence_start(text, s):
            return False  # "Will you ...", "Mark the date": a verb opening a sentence
        return term.person in named or self._beside_own_name(text, s, e, term.person)

    def _beside_own_name(self, text: str, s: int, e: int, person: str) -> bool:
        """Whether a given name or surname of `person` stands right before text[s:e] (an initial may sit
        between) or right after it ("Lay, Ken": the surname, a comma, the given name)."""
        before = _WORD_BEFORE.search(text, max(0, s - 40), s)
        after = _WORD_AFTER.match(text, e)
        names = self.first_names.get(person, set()) | self.last_names.get(person, set())
        here = fold(text[s:e])
        if not text[s:s + 1].isupper():
            return False  # "please fix it": words in lower case are words
        initial = _INITIAL_BEFORE.search(text, max(0, s - 6), s)
        if initial and initial.group(1).casefold() in {n[:1] for n in self.first_names.get(person, ())}:
            return True  # "H. Page", "H Page": the initial of the person's given name
        return bool(before and fold(before.group(1)) in names - {here}) or \
            bool(after and fold(after.group(1)) in names - {here})

    def fake_secret(self, value: str) -> str:
        """The fake that stands for a secret value in source code: derived from the value and the vault's salt
        (the same value, the same fake, in every file, commit and run; none leads back to it), shaped like a
        word (valid in a URL's user info, a header, an assignment), and a placeholder to the leak audit
        (`fake...`, privacy.pii)."""
        fake = self.code_secrets.get(value)
        if fake is None:
            digest = content_hash("secret", self.vault.salt, value)
            fake = self.code_secrets[value] = "fake" + digest[:max(8, min(len(value), 32) - 4)]
        return fake

    def _literals(self) -> re.Pattern:
        """Quoted literals that are a secret value found anywhere (a password a test compares a URL's with)."""
        if self._secret_literals is None or self._secret_literals_of != len(self.code_secrets):
            values = sorted((v for v in self.code_secrets if len(v) >= SECRET_LITERAL_MIN and "\n" not in v),
                            key=lambda v: (-len(v), v))
            self._secret_literals = re.compile(rf"(?<=[\"'`])(?:{'|'.join(map(re.escape, values))})(?=[\"'`])") \
                if values else _NEVER
            self._secret_literals_of = len(self.code_secrets)
        return self._secret_literals

    def has_secret_literals(self) -> bool:
        """Whether any secret value found so far is one a quoted literal can repeat (`_literals`)."""
        return self._literals() is not _NEVER

    def _pattern(self, sp: pii.Span, code: bool = False) -> str:
        if sp.kind.startswith("secret:"):
            fake = self.fake_secret(sp.value)   # known from now on, for the literals of later code
            if code:
                return fake
        if sp.kind == "email":
            address = re.sub(r"\n(?:[ \t]*>)*[ \t]*", "", sp.value)  # wrapped by a quoting client
            if "@" not in address:  # "user [at] host [dot] org"
                address = re.sub(r"\s*[\[(]?\s*(?:at|AT)\s*[\])]?\s*", "@", address, count=1)
                address = re.sub(r"\s*[\[(]?\s*(?:dot|DOT)\s*[\])]?\s*", ".", address)
            new = self._email(address)
            return sp.value if new is None else new
        return pii.default_placeholder(sp)

    def _personal_segment(self, sp: pii.Span) -> tuple[int, int, str] | None:
        """(start, end, replacement) of the person's part of a personal URL or home path ("http://twitter.com/
        <user>", "/home/<user>/..."), relative to the span: a path is not a URL and the rest of a link is nobody's;
        a known user name becomes its pseudonym, any other "[USER]". None: replace the whole span."""
        seg = (0, len(sp.value)) if not re.search(r"[/:\\]", sp.value) else pii.person_in_url(sp.value)
        if seg is None:
            return None
        name = sp.value[seg[0]:seg[1]]
        if name.casefold() in self.orgs:
            return 0, 0, ""  # the project's own organization (see discover): nobody's, kept
        term = self.terms.get(name.casefold())
        new = term.replacement if term is not None and term.role in ("user", "handle") else "[USER]"
        return seg[0], seg[1], _cased(name, new)

    def _routed(self, r: routing.Routed) -> str | None:
        """The pseudonym of the person a routing line names, in the line's own format; None when the words
        are not a name we know of and not shaped like one."""
        pid = self.person_by_email.get(r.address.casefold()) if r.address else None
        words = r.name.replace(",", " ").split()
        if r.order == "last-first" and "," in r.name:
            last, _, first = r.name.partition(",")
            key = fold(f"{first} {last}")
        else:
            key = fold(r.name)
        pid = pid or self.person_by_name.get(key)
        if pid is None and len(words) == 1:
            pid = self.first_of.get(fold(words[0]))
        q = self.vault.pseudonyms.get(pid) if pid else None
        if q is None:
            term = self.terms.get(r.name.casefold())
            if term is not None and term.person:
                q = self.vault.pseudonyms.get(term.person)
        if q is None and len(words) == 1 and _own_login(words[0], r.address):
            return "[USER]"
        if q is None:
            shaped = all(w[:1].isupper() or (r.address and w.isalpha()) for w in words) and (
                len(words) >= 2 or self.vocab.first_name(words[0])) and not all(self.vocab.ordinary(w) for w in words)
            return "[PERSON]" if shaped else None
        if len(words) == 1:
            word = fold(words[0])
            new = q.last if word == fold(q.last) or self.terms.get(word, Term("", "first")).role == "last" else q.first
        elif r.order == "last-first":
            new = f"{q.last}, {q.first}"
        else:
            new = q.full_name
        return _cased(r.name, new)

    def own_strings(self) -> list[str]:
        """The pseudonyms' names, addresses, user names and the handles made of them ("jane-roe"), and the fake
        domains: our own output, which neither the last pass nor the audit counts as real."""
        out = {self.vault.domain, *self.fake_domains}
        for q in self.vault.pseudonyms.values():
            out.update((q.full_name, q.first, q.last, q.email, q.username, f"{q.last}, {q.first}"))
            out.update(_handle(q, style) for style in ("firstlast", "first.last", "first_last", "first-last",
                                                       "last.first"))
        return sorted(out)

    def replacement(self, text: str, sp: pii.Span, code: bool = False) -> Edit | None:
        """The edit the first pass makes for a span `pii.find` gave (offsets into `text`), or None where it stays:
        the person's part of a personal URL, a placeholder, an address's pseudonym."""
        seg = self._personal_segment(sp) if sp.kind == "url_personal" else None
        if seg is not None:  # only the person's part of a link or path goes
            a, b, new = seg
            return Edit(sp.start + a, sp.start + b, new, "pattern") if b > a else None
        new = self._pattern(sp, code)
        if new == sp.value:
            return None
        return Edit(sp.start, sp.end, new, "secret" if sp.kind.startswith("secret:") else "pattern")

    def message_id(self, value: str | None) -> str | None:
        return self.message_ids.get(value, value) if value else value

    def kept_email(self, address: str) -> bool:
        """Whether an address stays as written: a mailing list's own (from its List-Id) or a role's."""
        local, _, domain = address.casefold().rpartition("@")
        return bool(self.lists and f"{_LIST_SUFFIX.sub('', local)}.{domain}" in self.lists) \
            or _role_address(local, domain)

    def _email(self, address: str) -> str | None:
        """The replacement of an address; None when it stays as written (a list's or a role's: its domain is
        still mapped like any host)."""
        if address in self.message_ids:
            return self.message_ids[address]
        folded = address.casefold()
        known = self.known_emails.get(folded)
        if known:
            return known
        if folded in self.own_emails or folded.endswith(("@message-id.invalid", "@redacted.example")):
            return address  # already a pseudonym: a second pass must not change it
        if self.kept_email(address):
            # a mailing list's own addresses (post, -unsubscribe, -help, ...) and role addresses are nobody's
            return None
        return f"person-{content_hash('email', self.vault.salt, folded)[:8]}@redacted.example"


# Between a replaced first name and surname: blanks, an initial, or a nickname in parentheses or quotes.
_NAME_GAP = re.compile(r"[ \t]+(?:[A-Z]\.?[ \t]+|[(\"'\u201c][A-Z][\w'\u2019-]*[)\"'\u201d][ \t]+)?")
# A capitalized word and an optional initial right before a surname ("Jeffrey S. " before "Whitaker"), or
# initials alone ("J. ", "J ", "J.R. ", "JR " before "Roe"; not "A" or "I", which are words).
_BEFORE_SURNAME = re.compile(r"(?<![\w.$-])([A-Z][a-z\u00df-\u00ff'\u2019-]+|[A-Z]\.(?:[ \t]?[A-Z]\.){0,2}|"
                             r"[B-HJ-Z][A-Z]?)[ \t]+(?:[A-Z]\.?[ \t]+)?\Z")
_LIST_SUFFIX = re.compile(r"-(?:unsubscribe|subscribe|help|owner|request|digest|digest-unsubscribe|digest-subscribe|"
                          r"allow-subscribe|allow-unsubscribe|info|faq|index|get)$")


_ROLE_LOCAL = re.compile(r"(?:^(?:majordomo|listserv|mailman|owner-.+|noreply|no-reply|do-not-reply|donotreply|"
                         r"mailer-daemon|postmaster|hostmaster|webmaster|notifications?|git|info|support|sales|"
                         r"contact|office|abuse|security|help|admin|root)$|-(?:discussion|devel|dev|users?|announce|request|"
                         r"admin|owner|bounces|help|unsubscribe|subscribe|digest|commits|cvs|patches|bugs|issues|"
                         r"general|lists?)$)")


def _role_address(local: str, domain: str) -> bool:
    """A mailing list's or a service's address (numpy-discussion@lists..., linux-kernel@vger..., majordomo@...):
    nobody's, kept as it is. A personal address on a list host is still a person's only if its local part is
    none of those forms."""
    return bool(_ROLE_LOCAL.search(local)) or (domain.split(".", 1)[0] in ("lists", "list", "vger")
                                               and "-" in local)


_WRAP = re.compile(SEP)
_INITIAL_BEFORE = re.compile(r"(?<![\w.])([A-Z])\.?[ \t]+\Z")
# A pronoun or determiner right after a sentence's first word: that word is a verb ("Will you", "Mark the").
_VERB_FIRST = re.compile(r"[ \t]+(?:you|we|i|they|he|she|it|this|that|these|those|the|a|an|there|someone|anyone|"
                         r"everyone|me|us|them|him|her|my|our|your|his|its|their)\b")


# Whom a message speaks to, at the start of a line: "Rick, ...", "Bill - ...", "Mike, Rick -", "Rick, Hal:".
_VOCATIVE_BEFORE = re.compile(r"(?:^|\n)(?:[ \t]*>)*[ \t]*(?:[A-Z][a-z'\u2019]+[ \t]*(?:,|&|\band\b)[ \t]*){0,3}\Z")
_VOCATIVE_AFTER = re.compile(r"[ \t]*(?:,|[ \t]-[ \t]|[ \t]?\u2013[ \t]|:(?=[ \t]*$)|-[ \t]*$)", re.M)


def _vocative(text: str, s: int, e: int) -> bool:
    """Whether text[s:e] is a name a message addresses at the start of a line (see _VOCATIVE_BEFORE)."""
    return _VOCATIVE_BEFORE.search(text, max(0, s - 60), s) is not None and _VOCATIVE_AFTER.match(text, e) is not None


def _sentence_start(text: str, s: int) -> bool:
    before = text[max(0, s - 4):s].rstrip(" \t\"'(")
    return not before or before[-1] in ".!?:\n"
# A capitalized name word (and an initial) right before a span; right after it, a comma or blanks (and an
# initial), then a capitalized name word: the neighbours `Scrubber._beside_own_name` reads.
_WORD_BEFORE = re.compile(r"(?<![\w.-])([A-Z][\w'\u2019-]+)[ \t]+(?:[A-Z]\.?[ \t]+)?\Z")
_WORD_AFTER = re.compile(r"(?:,[ \t]*|[ \t]+(?:[A-Z]\.?[ \t]+)?)([A-Z][\w'\u2019-]+)(?![\w-])")


def _rewrap(original: str, new: str) -> str:
    """`new` with the line wraps `original` had between its words ("Douglas \\nCondon" -> "Dorian
    \\nPemberton"), so a wrapped recipient list keeps its lines."""
    if "\n" not in original:
        return new
    seps = _WRAP.findall(original)
    words = new.split(" ")
    if len(words) == len(seps) + 1:
        return "".join(w + (seps[i] if i < len(seps) else "") for i, w in enumerate(words))
    head, _, tail = new.rpartition(" ")
    return f"{head}{next(x for x in seps if chr(10) in x)}{tail}" if head else new


def _apply(text: str, edits: list[Edit]) -> str:
    parts, last = [], 0
    for e in edits:
        parts += (text[last:e.start], e.text)
        last = e.end
    parts.append(text[last:])
    return "".join(parts)


def _compose(text: str, edits: list[Edit], out: str, found: list[Edit]) -> list[Edit]:
    """`edits` (on `text`, giving `out`) and `found` (on `out`) as one list of edits on `text`: an edit of `found`
    inside text the first kept moves back by the shift before it; one that overlaps replaced text joins those
    replacements into one edit, whose text is `out` over their union with `found`'s replacements in it."""
    units: list[tuple[int, int, Edit | None, int]] = []  # (out start, out end, first edit or None, shift before)
    shift = 0
    for e in edits:
        a = e.start + shift
        units.append((a, a + len(e.text), e, shift))
        shift += len(e.text) - (e.end - e.start)
    marks = sorted([(u[0], u[1], 0, i) for i, u in enumerate(units)] + [(f.start, f.end, 1, i)
                                                                          for i, f in enumerate(found)])
    result: list[Edit] = []
    i = 0
    while i < len(marks):
        lo, hi = marks[i][0], marks[i][1]
        j = i + 1
        while j < len(marks) and marks[j][0] < hi:
            hi = max(hi, marks[j][1])
            j += 1
        group = marks[i:j]
        i = j
        firsts = [units[m[3]] for m in group if m[2] == 0]
        news = [found[m[3]] for m in group if m[2] == 1]
        if not news:
            result.extend(u[2] for u in firsts)
            continue

        def back(pos: int, end: bool, firsts=firsts) -> int:
            """`pos` (a bound of the group in `out`) on `text`."""
            for a, b, e, _ in firsts:
                if (pos == b if end else pos == a):
                    return e.end if end else e.start
            before = [u for u in units if u[1] <= pos]
            if not before:
                return pos
            _, _, e, sh = before[-1]
            return pos - (sh + len(e.text) - (e.end - e.start))

        pieces, at = [], lo
        for f in sorted(news, key=lambda f: f.start):
            pieces += (out[at:f.start], f.text)
            at = f.end
        pieces.append(out[at:hi])
        owner = next((u[2] for u in firsts if u[2].person), None)
        result.append(Edit(back(lo, False), back(hi, True), "".join(pieces), "residue",
                           owner.person if owner else "", owner.role if owner else ""))
    return result


def _settle(cands: list[Edit]) -> list[Edit]:
    """Non-overlapping edits: higher priority first, then the longer, then the earlier; sorted by start."""
    if len(cands) <= 1:
        return cands
    cands.sort(key=lambda c: (-_PRIO[c.source], c.start - c.end, c.start))
    starts: list[int] = []
    chosen: list[Edit] = []
    for c in cands:
        i = bisect.bisect_left(starts, c.start)
        if i > 0 and chosen[i - 1].end > c.start:
            continue
        if i < len(chosen) and chosen[i].start < c.end:
            continue
        starts.insert(i, c.start)
        chosen.insert(i, c)
    return chosen


def _handle(q: Pseudonym, style: str) -> str:
    f, la = q.first.lower(), q.last.lower().replace("-", "")
    return {"firstlast": f + la, "first.last": f"{f}.{la}", "first_last": f"{f}_{la}", "first-last": f"{f}-{la}",
            "flast": q.username, "last.first": f"{la}.{f}"}[style]


def _cased(original: str, new: str) -> str:
    """`new` in the case style of `original` when that is all lower or all upper case (a placeholder or an
    address as it is)."""
    if new.startswith("[") or "@" in new or not any(c.isalpha() for c in original):
        return new
    if original.islower():
        return new.lower()
    if original.isupper() and len(original) > 1:
        return new.upper()
    return new


_HOST = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")


def _in_public_host(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] reaches into the public part of a host name (the "github" of "github.com", the
    "apache" of "maven.apache.org"); the sub-domain of a personal host ("jdoe" in jdoe.github.io) does not."""
    lo, hi = start, end
    while lo > 0 and (text[lo - 1].isalnum() or text[lo - 1] in ".-"):
        lo -= 1
    while hi < len(text) and (text[hi].isalnum() or text[hi] in ".-"):
        hi += 1
    while lo < hi and text[lo] in ".-":
        lo += 1
    while hi > lo and text[hi - 1] in ".-":
        hi -= 1
    host = text[lo:hi].casefold()
    for public in PUBLIC_HOSTS:
        if host == public or host.endswith("." + public):
            return end > hi - len(public)
    return False


PUBLIC_MAIL = frozenset("""
    gmail.com googlemail.com yahoo.com yahoo.co.uk hotmail.com outlook.com live.com msn.com icloud.com
    me.com mac.com aol.com proton.me protonmail.com pm.me gmx.de gmx.net gmx.com web.de mail.com
    yandex.ru yandex.com qq.com 163.com 126.com fastmail.com zoho.com hey.com users.noreply.github.com
    example.com example.org example.net
""".split())


def company_domains(people: list[Person], vault: Vault, allow: Iterable[str] = ()) -> dict[str, str]:
    """Real mail domains of known people -> fake ones: the most used becomes the vault's domain, the
    others `org-<hash>.example`. Public webmail, public hosts (and their sub-domains) and allow-listed
    domains are kept as they are."""
    keep = PUBLIC_MAIL | {a.casefold() for a in allow}
    counts: dict[str, int] = {}
    for p in people:
        for e in p.emails:
            d = e.rsplit("@", 1)[-1].casefold()
            if not d or "." not in d or d in keep or d.endswith(".invalid") or _public(d):
                continue
            counts[d] = counts.get(d, 0) + 1
    ranked = sorted(counts, key=lambda d: (-counts[d], d))
    return {d: vault.domain if i == 0 else f"org-{content_hash('domain', vault.salt, d)[:6]}.example"
            for i, d in enumerate(ranked)}


def _public(domain: str) -> bool:
    return any(domain == h or domain.endswith("." + h) for h in PUBLIC_HOSTS)


def _strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _known_inside(words: list[str], known: Iterable[str]) -> bool:
    """Whether folded `words` end or start with a known full name of two or more words, after a stray word
    ("ping kathy lindqvist", "kathy lindqvist thanks")."""
    known = set(known) if not isinstance(known, (set, dict, frozenset)) else known
    return len(words) >= 3 and any(" ".join(words[i:]) in known for i in range(1, len(words) - 1)) or \
        len(words) >= 3 and any(" ".join(words[:i]) in known for i in range(2, len(words)))


def merge_namesakes(people: list[Person]) -> tuple[list[Person], dict[str, str]]:
    """People who share a full name (two or more words, folded) become one for pseudonyms: (merged people,
    person id -> the id it was merged into). Why: the identity graph keeps "Jane Roe <jane@a>" and "Jane Roe
    <jane@b>" apart without an account that anchors them, but a text naming "Jane Roe" cannot say which one
    it means; one pseudonym for both keeps the text readable and consistent, and merging never reveals more."""
    uf = UnionFind()
    by_name: dict[str, str] = {}
    for p in people:
        uf.find(p.person_id)
        for n in p.names:
            parts = name_parts(n)
            if parts:
                key = fold(f"{parts[0]} {parts[2]}")
                if key in by_name:
                    uf.union(by_name[key], p.person_id)
                else:
                    by_name[key] = p.person_id
    groups: dict[str, list[Person]] = {}
    for p in people:
        groups.setdefault(uf.find(p.person_id), []).append(p)
    merged, canonical = [], {}
    for root, ps in sorted(groups.items()):
        if len(ps) == 1:
            merged.append(ps[0])
            continue
        for p in ps:
            canonical[p.person_id] = root
        merged.append(Person(root, *(tuple(sorted({x for p in ps for x in getattr(p, f)}))
                                     for f in ("handles", "names", "emails", "usernames"))))
    return merged, canonical


class Anonymizer:
    """Pseudonymizes whole events and git identities for one dataset."""

    def __init__(self, identities: Iterable[Identity], vault: Vault, message_ids: Iterable[str] = (),
                 outsiders: Iterable[str] = (), places: Iterable[str] = (), allow: Iterable[str] = (),
                 lower: dict[str, int] | None = None, lists: Iterable[str] = (), orgs: Iterable[str] = ()):
        """`outsiders`: names of people no identity carries (customers, family members) that `discover`
        accepted; each becomes a pseudonymous person of its own, consistent across the dataset. `lower`: the
        dataset's lower-case word counts (`Discovery.lower`), for `Vocabulary.ordinary`. `lists`: the List-Ids
        of the dataset's mailing lists, whose own addresses stay as they are. `orgs`: the project's own
        organization on its forge (`Discovery.orgs`), kept in merge messages."""
        identities = list(identities)
        people = persons(identities)
        # NER spans run over ("Karl Heinz Marbaise" after "Karl Heinz"): a name that extends a known or
        # shorter found name is that person too, and its whole span is replaced.
        owner = {fold(n): p.person_id for p in people for n in p.names if len(n.split()) >= 2}
        # "Jeffrey M. Pellegrino", "Jeff Pellegrino": another form of a known person's name (a middle initial, a
        # nickname) is that person's
        keys = {k: p.person_id for p in people for n in p.names for k in name_keys(n)}
        extra: dict[str, list[str]] = {}
        found: dict[str, list[str]] = {}
        for n in sorted({fold(n): n for n in outsiders}.values(), key=lambda n: (len(n.split()), n)):
            words = fold(n).split()
            if fold(n) in owner:
                continue
            if _known_inside(words, owner) or _known_inside(words, keys):
                continue  # "Ping Kathy Lindqvist": a known name with a stray word NER took along
            prefix = next((" ".join(words[:i]) for i in range(len(words) - 1, 1, -1)
                           if " ".join(words[:i]) in owner), None) if len(words) > 2 else None
            key = next((k for k in name_keys(n) if k in keys), None)
            pid = owner[prefix] if prefix else keys[key] if key else "x_" + content_hash("outsider", fold(n))[:16]
            (extra if pid.startswith("p_") else found).setdefault(pid, []).append(n)
            owner[fold(n)] = pid
        # a lone first name found ("Joshua") that starts a longer name ("Joshua Slive"), or that is a known
        # person's nickname ("Ken" of Kenneth), is that person's
        starts = {k.split()[0] for k in owner if len(k.split()) >= 2}
        starts |= {n for p in people for x in map(name_parts, p.names) if x for n in nicknames(x[0])}
        found = {pid: names for pid, names in found.items() if len(names) > 1 or len(names[0].split()) > 1
                 or fold(names[0]) not in starts}
        people = [Person(p.person_id, p.handles, tuple(sorted({*p.names, *extra.get(p.person_id, ())})), p.emails,
                         p.usernames) for p in people]
        people += [Person(pid, (), tuple(sorted(names)), (), ()) for pid, names in sorted(found.items())]
        # namesakes (two handles, one full name; an outsider "Laurence H Cohen" and "Laurence Cohen") are one
        merged, canonical = merge_namesakes(people)
        self.people = [p for p in merged if p.person_id.startswith("p_")]
        self.outsiders = [p for p in merged if not p.person_id.startswith("p_")]
        vault.assign(self.people + self.outsiders)
        self.vault = vault
        self.vocab = Vocabulary(lower, first=[x[0] for p in self.people for n in p.names if (x := name_parts(n))],
                                last=[x[2] for p in self.people for n in p.names if (x := name_parts(n))])
        self.scrub = Scrubber(self.people, vault, message_ids, places, allow, self.outsiders, self.vocab, lists, orgs)
        self.person_of = {i.handle: canonical.get(i.person_id, i.person_id) for i in identities}
        self.handle_values = handle_values()   # per source, what an anonymized handle holds (the extractor says)
        self.people_verdicts: dict[bytes, list[tuple[int, int]]] = {}  # the last pass's people, per paragraph

    def pseudonym(self, handle: str | None) -> Pseudonym | None:
        pid = self.person_of.get(handle or "")
        return self.vault.pseudonyms.get(pid) if pid else None

    def handle(self, handle: str | None) -> str | None:
        if not handle:
            return handle
        q = self.pseudonym(handle)
        if q is None:
            return self.scrub(handle)
        source = handle.split(":", 1)[0]
        return f"{source}:{q.email if self.handle_values.get(source) == 'email' else q.username}"

    def person(self, p: dict[str, Any]) -> dict[str, Any]:
        q = self.pseudonym(p.get("handle"))
        out = {k: self._walk(v) for k, v in p.items()}
        out["handle"] = self.handle(p.get("handle"))
        if q:
            for key, value in (("display_name", q.full_name), ("email", q.email), ("username", q.username),
                               ("name", q.username), ("key", q.username), ("emailAddress", q.email),
                               ("displayName", q.full_name)):
                if p.get(key):
                    out[key] = value
        return out

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            if "handle" in value:
                return self.person(value)
            return {k: self._message_ids(v) if k in MESSAGE_ID_KEYS else self._walk(v) for k, v in value.items()}
        return value

    def _message_ids(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.scrub.message_id(v) if isinstance(v, str) else v for v in value]
        return self.scrub.message_id(value) if isinstance(value, str) else value

    def event(self, ev: Event) -> Event:
        q = self.pseudonym(ev.actor)
        mid = self.scrub.message_id
        return ev.model_copy(update={
            "native_id": mid(ev.native_id) if ev.medium == "mail" else ev.native_id,
            "thread_key": mid(ev.thread_key) if ev.medium == "mail" else ev.thread_key,
            "actor": self.handle(ev.actor),
            "actor_name": q.full_name if q else self.scrub(ev.actor_name),
            "recipients": [self.scrub(r) for r in ev.recipients],
            "title": self.scrub(ev.title), "body": self.scrub(ev.body), "diff": self.scrub(ev.diff, code=True),
            "attrs": self._walk(ev.attrs), "provenance": self._walk(ev.provenance),
        })

    def settle_people(self, events: list[Event], ner, seen: set[bytes] | None = None,
                      batch: int = 256) -> tuple[list[Event], dict[str, int]]:
        """`settle_people_stream` over a list: the events and the counts (paragraphs read, persons replaced, events
        changed)."""
        stats: dict[str, int] = {}
        return list(self.settle_people_stream(events, ner, seen, batch, stats)), stats

    def settle_people_stream(self, events: Iterable[Event], ner, seen: set[bytes] | None = None, batch: int = 256,
                             stats: dict[str, int] | None = None) -> Iterator[Event]:
        """The last pass for people in prose: anonymized events whose prose (the title, body and actor name the
        leak audit reads as prose) still holds a person NER tags and the evidence rules accept (the audit's own
        `Rules.fresh` and `Rules.people_spans`) get that person replaced, by a pseudonym of its own (the same
        for the same name everywhere, added to the vault like any outsider's: the caller saves the vault), until
        NER finds none (three rounds; a person still found then becomes "[PERSON]").

        A stream, `batch` events at a time in the stream's order, each batch's rounds done before the next is read:
        memory holds a batch, not the dataset (the anonymize stage's events pass through here chunk by chunk), and
        the output does not depend on how the caller cut the stream. A paragraph's verdict is made where it first
        occurs and applies to every later copy.

        `seen`: digests of the paragraphs whose verdict is known (discovery read them in the raw text); it
        grows by every paragraph this pass reads, so the audit afterwards reads only what changed since (its
        `seen`). `stats` (optional) gets the counts: paragraphs read, persons found, events changed. The vault and
        `people_verdicts` hold what was found once the stream is exhausted."""
        from privacy.audit import Rules, _digest  # the audit's own detector (audit imports this module's types)

        rules = Rules.of(self, ner=ner, seen=seen if seen is not None else set())
        verdicts: dict[bytes, list[tuple[int, int]]] = {}
        stats = stats if stats is not None else {}
        for k in ("paragraphs_read", "persons_found", "events_changed"):
            stats.setdefault(k, 0)
        fields = ("title", "body", "actor_name")
        it = iter(events)
        while block := list(itertools.islice(it, max(1, batch))):
            out = list(block)
            todo = range(len(out))
            for round_ in range(4):
                changed: list[int] = []
                self._own_words(rules)  # pseudonyms given so far are ours: never a person to replace again
                fresh: list[str] = []
                for i in todo:
                    for f in fields:
                        fresh += rules.fresh(getattr(out[i], f) or "")
                stats["paragraphs_read"] += len(fresh)
                found: dict[int, list[tuple[int, int]]] = {}
                for k, a, b in rules.people_spans(fresh) if fresh else ():
                    found.setdefault(k, []).append((a, b))
                for k, spans in found.items():
                    verdicts[_digest(fresh[k])] = spans
                    rules.seen.discard(_digest(fresh[k]))  # not clean: the audit reads any copy left elsewhere
                    stats["persons_found"] += len(spans)
                for i in todo:
                    update = {}
                    for f in fields:
                        text = getattr(out[i], f) or ""
                        edits = self._people_edits(text, verdicts, last=round_ == 3)
                        if edits:
                            update[f] = _apply(text, edits)
                    if update:
                        out[i] = out[i].model_copy(update=update)
                        changed.append(i)
                if not changed:
                    break
                todo = changed
            stats["events_changed"] += sum(1 for a, b in zip(out, block, strict=True) if a is not b)
            yield from out
        self.people_verdicts.update(verdicts)
        if seen is not None:
            seen |= rules.seen

    def prose(self, text: str | None) -> str | None:
        """`scrub(text)`, then the people the last pass found in the events (`settle_people`) replaced where the
        same paragraph occurs here too: for prose outside the events that repeats theirs (the commit messages of
        a rewritten repository)."""
        out = self.scrub(text)
        if not out or not self.people_verdicts:
            return out
        edits = self._people_edits(out, self.people_verdicts, last=False)
        return _apply(out, edits) if edits else out

    def plan_all(self, text: str, rules=None, code: bool = False) -> list[Edit]:
        """Every edit anonymization makes to one text, on `text`: `Scrubber.plan` (the first pass and the
        detector's last pass), then, with `rules` that have NER (`Rules.of(self, ner, seen)`), the last pass
        for people in prose as `settle_people` makes it for the events of a dataset (one text at a time)."""
        edits = self.scrub.plan(text, code)
        if rules is None or rules.ner is None or code:
            return edits
        verdicts: dict[bytes, list[tuple[int, int]]] = {}
        from privacy.audit import _digest  # the audit's paragraph digest (audit imports this module's types)

        for round_ in range(4):
            out = _apply(text, edits) if edits else text
            self._own_words(rules)
            fresh = rules.fresh(out)
            for k, a, b in rules.people_spans(fresh) if fresh else ():
                verdicts.setdefault(_digest(fresh[k]), []).append((a, b))
                rules.seen.discard(_digest(fresh[k]))
            found = self._people_edits(out, verdicts, last=round_ == 3)
            if not found:
                break
            edits = _compose(text, edits, out, found) if edits else found
        return edits

    def _own_words(self, rules) -> None:
        """Add the words of every pseudonym of the vault (those the last pass just gave too) to `rules.own_words`."""
        if len(self.vault.pseudonyms) != getattr(rules, "_own_count", -1):
            rules.own_words |= {w.casefold() for q in self.vault.pseudonyms.values() for w in (q.first, q.last)}
            rules._own_count = len(self.vault.pseudonyms)

    def _people_edits(self, text: str, verdicts: dict, last: bool) -> list[Edit]:
        """The edits that replace every person span the verdicts (paragraph digest -> spans) give for the
        paragraphs of `text` (see settle_people)."""
        if not text or not verdicts:
            return []
        from privacy.audit import _digest  # the audit's paragraph digest (audit imports this module's types)

        edits: list[Edit] = []
        for para, starts in paragraph_offsets(text):
            for a, b in verdicts.get(_digest(para)) or ():
                s, e = to_text(para, starts, a), to_text(para, starts, b - 1) + 1
                edits.append(Edit(s, e, "[PERSON]" if last else self._late_person(text[s:e]), "residue"))
        return _settle(edits)

    def _late_person(self, value: str) -> str:
        """The pseudonym of a person the last pass found (consistent: one per name, kept in the vault), in the
        span's own shape: a possessive kept, line wraps kept, a titled surname as a surname."""
        words = person_words(value)
        name = " ".join(words)
        pid = "x_" + content_hash("outsider", fold(name))[:16]
        if pid not in self.vault.pseudonyms:
            self.vault.assign([Person(pid, (), (name,), (), ())])
        q = self.vault.pseudonyms[pid]
        new = q.full_name if len(words) >= 2 else q.last
        tail = re.search(r"(?:'s|\u2019s|'|\u2019)$", value.rstrip())
        return _rewrap(value, new) + (tail.group(0) if tail and len(words) else "")

    def git_identity(self, name: str, email: str) -> tuple[str, str]:
        """Map a git author/committer to the pseudonym of the person behind it (its handle as the git connector
        writes it)."""
        q = self.pseudonym(author_handle(email, name))
        if q:
            return q.full_name, q.email
        return (self.scrub(name) or "unknown"), (self.scrub(email) or "")

    def known_strings(self) -> list[str]:
        """The main real identity strings of the dataset (full names, addresses, distinctive single names and user
        names), as written: for a person to look at. The leak audit reads every form the Scrubber knows
        (`Scrubber.terms`, through `privacy.audit.Rules.of`), which is more."""
        return sorted(s for s, _ in self.audit_strings())

    def audit_strings(self) -> list[tuple[str, bool]]:
        """(string, counts only where used as a name) for the main real identity strings (see known_strings):
        full names of people and outsiders, addresses, and the single-word names and user names of five
        letters or more; a single word that is also an ordinary word ("family", "e-mail") counts only where it
        is used as a user name (`names.strong_cue`), never as the word."""
        out: dict[str, bool] = {}
        for p in self.outsiders:
            for n in p.names:
                if len(n.split()) >= 2:
                    out[n] = False
        for p in self.people:
            for n in p.names:
                if len(n.split()) >= 2:
                    out[n] = False
                elif len(n) >= 5:
                    out.setdefault(n, self.vocab.ordinary(n))
            for e in p.emails:
                out[e] = False
            for u in p.usernames:
                if len(u) >= 5 and fold(u) not in STOPWORDS:
                    out.setdefault(u, self.vocab.ordinary(u))
        return sorted(out.items())

    def own_strings(self) -> list[str]:
        """The pseudonyms' names, addresses, user names and the handles made of them ("jane-roe"), and the fake
        domains: what the audit must not count as real."""
        return self.scrub.own_strings()


def settle_secret_literals(anon: Anonymizer, raw: Iterable[Event], rows: list[Event]) -> int:
    """Give every diff the quoted literals of every secret value found in the dataset's events (`Scrubber._literals`:
    a password a test compares a URL's with), not only of those found before it: the anonymize stage scrubs its
    events in chunks over processes, where "before" would depend on the chunk. `anon.scrub.code_secrets` holds
    every value found (the chunks' merged); `raw` are the events `rows` were made from, in the same order. A diff
    the first scrub gave fewer values to is scrubbed again only where the whole set's literals occur in it (where
    they do not, the literals changed nothing: every other edit of a diff is the same for any set). Returns the
    number of diffs scrubbed again."""
    scrub = anon.scrub
    if not scrub.has_secret_literals():
        return 0
    literals = scrub._literals()
    at = {r.event_id: i for i, r in enumerate(rows) if r.diff}
    n = 0
    for e in raw:
        i = at.get(e.event_id)
        if i is not None and e.diff and literals.search(_INVISIBLE.sub("", e.diff)):
            rows[i] = rows[i].model_copy(update={"diff": scrub(e.diff, code=True)})
            n += 1
    return n


NER_MAX_CHARS = 200_000
_NAME_WORD = re.compile(r"^[^\W\d_][^\W\d_'\u2019-]*(?:[-'\u2019][^\W\d_]+)*$")
_CAMEL = re.compile(r"[a-z][A-Z]|^[A-Z]{2,}[a-z]")
_MERGE_LOGIN = re.compile(r"Merge pull request #\d{1,9} from ([A-Za-z0-9][A-Za-z0-9-]{0,38})/")
COMMON_PLACE = 20_000  # a place word before this frequency rank is a well-known place's
_TECH_SUFFIX = re.compile(r"(?i)(?:file|js|rc|conf|cfg|lib|db|sql|api|sdk|cli|ui)$")


def _plain_found(ner, texts: Iterable[str]) -> Iterator:
    """The plain path (NER on every text whole), each span with its cue as `Ner.found` gives it."""
    pending: deque = deque()

    def feed() -> Iterator[str]:
        for t in texts:
            pending.append(t)
            yield t

    for spans in ner.people_and_places(feed()):
        text = pending.popleft()
        for sp in spans:
            yield Found(sp.start, sp.end, sp.kind, sp.value, cue_of(sp.kind, text, sp.start, sp.end),
                        titled_of(sp.kind, text, sp.start))


@dataclass(eq=True)
class Discovery:
    """What `discover` found: the outsiders it accepts, the places, every NER person candidate with the
    evidence for it (or none), and the lower-case counts of the words that matter to the anonymizer."""

    outsiders: list[str] = field(default_factory=list)
    places: list[str] = field(default_factory=list)
    candidates: list[dict] = field(default_factory=list)
    lower: dict[str, int] = field(default_factory=dict)
    lists: list[str] = field(default_factory=list)
    orgs: list[str] = field(default_factory=list)  # logins of merge messages that are the project's organization


def discover(events: Iterable[Event], ner, allow: Iterable[str] = (), workers: int = 1,
             people: Iterable[Person] = ()) -> Discovery:
    """Outsiders and places in event titles and bodies (diffs excluded: code is not prose).

    Persons come from NER and from mail routing lines (`privacy.routing`); a known person (by address or any
    form of a known name) is no outsider. An NER person is a claim: it is accepted only with evidence
    (`names.person_evidence`: a first-name or surname list, a name-shaped context), a routing name when it is
    shaped like a name. A single word (NER's "Zachary", a routing line's "Dana") is accepted only as a first
    name: the anonymizer then replaces it only where it is used as a name. Places: words of letters, not
    English words (a well-known place is not identifying), not camel-cased identifiers, never occurring in
    lower case, sharing no word with a name; names and places on `allow` are kept.

    NER reads each distinct paragraph once and skips paragraphs that cannot hold a name (`Ner.found`), with
    `workers` processes; an object with only `people_and_places` (the plain path: every text whole) works
    too. Streaming: the texts are not kept, only word counts (`_LowerWords`, `names.LowerCounts`)."""
    keep = {fold(a) for a in allow}
    people = list(people)
    lowered = _LowerWords()
    counts = LowerCounts()
    routed: Counter = Counter()
    lists: set[str] = set()
    merges: Counter = Counter()  # login -> merge messages "Merge pull request #N from <login>/<branch>"
    projects: set[str] = set()

    def texts() -> Iterator[str]:
        # NER reads at most the first NER_MAX_CHARS of a text (~30k chars/s: a 50 MB mail body would take half
        # an hour); the names it finds are then replaced everywhere, in every text, whole.
        for ev in events:
            attrs = getattr(ev, "attrs", None) or {}
            list_id = attrs.get("list_id")
            if isinstance(list_id, str):
                lists.add(list_id.strip("<> ").casefold())
            if isinstance(attrs.get("repo"), str):  # "rust-lang/rust", "more-itertools": the project's own names
                projects.update(p.casefold() for p in attrs["repo"].split("/") if p)
            for t in (ev.title, ev.body):
                if t:
                    t = t[:NER_MAX_CHARS]
                    lowered.add(t)
                    counts.add(t)
                    if "Merge pull request #" in t:
                        merges.update(m.group(1).casefold() for m in _MERGE_LOGIN.finditer(t))
                    for r in routing.find(t):
                        routed[(r.name, r.order, (r.address or "").casefold())] += 1
                    yield t

    if hasattr(ner, "found"):
        found = ner.found(texts(), workers=workers)
    elif ner is not None:
        found = _plain_found(ner, texts())
    else:
        found = ()
        for _ in texts():
            pass
    person_seen: Counter = Counter()
    person_cue: Counter = Counter()
    places: set[str] = set()
    place_cue: Counter = Counter()
    titled: Counter = Counter()  # one word NER tagged right after a title ("Mr. Waxman")
    for sp in found:
        if sp.kind == "person":
            # the words as the audit reads them (`names.person_words`): a line wrap or a possessive is no reason
            # to let a name through; the evidence rules (`names.accept_person`) judge their shape
            words = person_words(sp.value)
            value = " ".join(words)
            if fold(value) in keep or len(value) < 3:
                continue
            if len(words) == 1 and getattr(sp, "titled", False):
                titled[value] += 1
            if len(words) >= 2 or _NAME_WORD.match(value):
                person_seen[value] += 1
                person_cue[value] += bool(getattr(sp, "cue", False))
            continue
        value = " ".join(sp.value.split())
        value = re.sub(r"(?:'s|\u2019s)$", "", value)
        words = value.split()
        # Only words of letters: "CORE-12" or "v2 API" tagged as a place by a small model are not one.
        if fold(value) in keep or len(value) < 3 or not all(_NAME_WORD.match(w) for w in words):
            continue
        if sp.kind == "place" and len(value) >= 4:
            places.add(value)
            place_cue[value] += bool(getattr(sp, "cue", False))

    known_names = {fold(form) for p in people for n in p.names if (x := name_parts(n))
                   for form, _ in full_forms(*x)}
    known_names |= {fold(n) for p in people for n in p.names}
    known_keys = {k for p in people for n in p.names for k in name_keys(n)}  # "Jeff Pellegrino", middle aside
    known_names |= known_keys
    known_emails = {e.casefold() for p in people for e in p.emails}
    known_words = {fold(w) for p in people for n in p.names if (x := name_parts(n)) for w in (x[0], x[2])}
    # a known person's nickname ("Ken" of Kenneth) is that person's, not an outsider's
    known_words |= {k for p in people for n in p.names if (x := name_parts(n)) for k in nicknames(x[0])}
    vocab = Vocabulary(counts.counts, first=[x[0] for p in people for n in p.names if (x := name_parts(n))],
                       last=[x[2] for p in people for n in p.names if (x := name_parts(n))])
    accepted: dict[str, str] = {}
    candidates: list[dict] = []
    for value, seen in sorted(person_seen.items()):
        words = value.split()
        if is_bot(value, team=False):
            continue
        if fold(value) in known_names or name_keys(value) & known_keys or _known_inside(fold(value).split(),
                                                                                          known_names):
            candidates.append({"name": value, "seen": seen, "evidence": "known person", "accepted": False})
            continue
        if len(words) == 1:
            # one word: a first name in a name context ("Thanks Jay"; a word that is also ordinary is fine, a
            # one-word outsider is replaced only where used as a name), or a first name that is no word, tagged
            # in two or more paragraphs ("whether Guido will accept")
            cued = person_cue[value] > 0
            ok = vocab.first_name(value) and fold(value) not in known_words and (
                cued or (seen >= 2 and not vocab.ordinary(value)))
            why = (f"first-name list and {'a name context' if cued else f'NER in {seen} paragraphs'} (one word: "
                   "replaced only where used as a name)") if ok else None
        else:
            why = accept_person(value, vocab, cue=person_cue[value] > 0)
        candidates.append({"name": value, "seen": seen, "cue": person_cue[value], "evidence": why,
                           "accepted": bool(why)})
        if why:
            accepted[fold(value)] = value
    # "Mr. Waxman" with no first name anywhere: the surname after a title, unless a person known or found has it
    surnames = known_words | {fold(v.split()[-1]) for v in accepted.values() if len(v.split()) >= 2}
    for value, seen in sorted(titled.items()):
        if fold(value) in surnames or fold(value) in accepted or is_bot(value, team=False):
            continue
        why = accept_person(value, vocab, titled=True)
        candidates.append({"name": f"Mr. {value}", "seen": seen, "evidence": why, "accepted": bool(why)})
        if why:
            accepted[fold(value)] = f"Mr. {value}"  # the title marks a surname (Anonymizer: role "last")
    for (name, order, address), seen in sorted(routed.items()):
        if address in known_emails:
            continue
        if order == "last-first" and "," in name:
            last, _, first = name.partition(",")
            name = " ".join(f"{first} {last}".split())
        words = name.split()
        if fold(name) in known_names or fold(name) in accepted or fold(name) in keep or is_bot(name):
            continue
        if len(words) == 1:
            # "Author: jdoe <jdoe@host>": a login the line pairs with the same mailbox is its person's user name
            ok = (words[0][:1].isupper() and vocab.first_name(name) and fold(name) not in known_words) or \
                _own_login(name, address)
        else:
            # people write their own name in lower case too ("jane roe <jane@...> wrote:"): with an address
            # the line says it is a name
            ok = all(w[:1].isupper() or w.casefold() in ("van", "von", "de", "da", "del", "der", "le", "la")
                     or (address and w.isalpha()) for w in words) and not all(vocab.ordinary(w) for w in words)
        candidates.append({"name": name, "seen": seen, "evidence": "routing line" if ok else None,
                           "accepted": ok, "source": "routing"})
        if ok:
            accepted[fold(name)] = name
    people_found = sorted(accepted.values())
    # A "place" that also occurs as a lower-case word ("Fixes", "Strip", "Clamp") is an ordinary word; one
    # of English words only is too well known to identify anyone ("London", "New York") or no place ("Key
    # Fingerprint"); a camel-cased one is an identifier ("UglifyJS").
    # A single word is a place only when NER saw it after "in", "from", "near"... ("in Jenkinsfile" aside); a
    # place whose every word is a frequent word ("San Francisco", "Ann Arbor", "Ventura") is too well known.
    places = {p for p in places if not lowered.has(p.lower()) and not _CAMEL.search(p)
              and all(w[:1].isupper() for w in p.split()) and not is_bot(p, team=False)
              and not all(is_english(w) or (frequency_rank(w) or COMMON_PLACE) < COMMON_PLACE for w in p.split())
              and not (len(p.split()) == 1 and (not place_cue[p] or _TECH_SUFFIX.search(p)))}
    # A "place" that is someone's name (small models tag first names as places) stays a name.
    name_words = {fold(w) for n in people_found for w in n.split()} | known_words
    places = {p for p in places if not {fold(w) for w in p.split()} & name_words}
    interest = known_words | {fold(w) for n in people_found for w in n.split()}
    interest |= {fold(u) for p in people for u in p.usernames} | {fold(e.split("@")[0]) for p in people
                                                                   for e in p.emails}
    lower = {w: counts.counts[w] for w in sorted(interest) if counts.counts.get(w)}
    # the project's own organization (a name of one of its repositories) merges pull requests from its own
    # branches: not a person
    orgs = sorted(x for x in merges if x in projects)
    return Discovery(people_found, sorted(places - set(people_found)), candidates, lower, sorted(lists), orgs)


_LETTERS = r"[^\W\d_]+"
_SEP = "[ '\u2019-]"
_LOWER_ONE = re.compile(rf"(?<!\w){_LETTERS}(?!\w)")
_LOWER_TWO = re.compile(rf"(?<!\w)(?=({_LETTERS}{_SEP}{_LETTERS})(?!\w))")
_PHRASE = re.compile(rf"{_LETTERS}(?:{_SEP}{_LETTERS})?")
_SEP_ONE = re.compile(_SEP)


class _LowerWords:
    r"""Whether a one- or two-word phrase occurs, as it is and as whole words, in the texts added so far:
    `has(x)` is `re.search(rf"(?<!\w){re.escape(x)}(?!\w)", t)` for some added `t`, for any lower-case `x`
    of letter runs joined by one space, hyphen or apostrophe, without keeping the texts. It keeps the distinct
    letter-only words and pairs that equal their lower case, at most `limit` of each: past that, and for a
    longer phrase, `has` answers False (a place is then kept and replaced: the safe side)."""

    def __init__(self, limit: int = 250_000):
        self.one: set[str] = set()
        self.two: set[str] = set()
        self.limit = limit

    def add(self, text: str) -> None:
        if len(self.one) < self.limit:
            self.one.update(w for w in set(_LOWER_ONE.findall(text)) if w == w.lower())
        if len(self.two) < self.limit:
            self.two.update(w for w in set(_LOWER_TWO.findall(text)) if w == w.lower())

    def has(self, phrase: str) -> bool:
        if not _PHRASE.fullmatch(phrase):
            return False
        return phrase in (self.two if _SEP_ONE.search(phrase) else self.one)


def _own_login(word: str, address: str | None) -> bool:
    """A routing line's single word that is its own address's mailbox ("jdoe <jdoe@host>"): a user name."""
    return bool(address) and len(word) >= 3 and fold(word) == fold(address.split("@", 1)[0])


def message_ids(events: Iterable[Event]) -> set[str]:
    """Every Message-ID the dataset's mail events carry or refer to."""
    out: set[str] = set()
    for ev in events:
        if ev.medium == "mail":
            out.add(ev.native_id)
            for key in MESSAGE_ID_KEYS:
                v = ev.attrs.get(key)
                out.update(x for x in (v if isinstance(v, list) else [v]) if isinstance(x, str) and x)
    return out
