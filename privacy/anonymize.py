"""Consistent pseudonyms and scrubbing of known identities, e-mail addresses and phone numbers.

Invariants:
- Each person gets one pseudonym (full name, first, last, e-mail, username) used in every source and
  every field, so a commit author and a Jira assignee that were the same person still are.
- Pseudonyms are drawn deterministically from a per-dataset secret salt kept in the vault
  (`$TASKMINE_HOME/private/vault/<dataset>.json`); they are never derived from the real name, and
  never equal a real name (or a real name's first/last word) seen in the dataset.
- Known identity strings are replaced wherever they occur in text, longest first, on word boundaries;
  then any remaining e-mail address and phone number is replaced. Structured person fields are
  replaced by their pseudonym directly.
- Only this module (and the extractors before it) read raw text; every later stage reads the output.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from privacy.identity import Person, fold, persons
from privacy import pii
from privacy.fastscrub import TermMatcher
from warehouse.ids import content_hash
from warehouse.schemas import Event, Identity

FIRST = tuple("""
    Avery Blake Casey Dana Eden Finley Gray Harper Indy Jules Kai Logan Morgan Noel Oakley Parker
    Quinn Reese Sage Tatum Umber Vale Wren Xen Yael Zion Arden Bellamy Cove Darcy Ellis Fenn Greer
    Hollis Isley Jaden Kendall Lennox Marlo Nico Oren Perrin Rowan Sutton Teagan Vesper Wynn Amari
    Briar Cael Dorian Emery Florian Gale Haven Ives Jory Kit Lark Milo Nova
""".split())
LAST = tuple("""
    Ashdown Birchall Calloway Dunmore Everley Fairweather Galbraith Hartwell Ingram Jessop Kingsley
    Lockhart Merriweather Northcott Oakhurst Pemberton Quimby Radcliffe Sterling Thornbury Underhill
    Vantongeren Whitlock Yardley Zeller Abernathy Blackwood Cresswell Dalgleish Eastwood Fernsby
    Gladwell Holloway Iverson Jardine Kettering Langford Marchetti Norwood Ormsby Prescott Rainsford
    Shackleton Tilbury Upton Villiers Westbrook Yelland Ainsworth Brightman Coverdale Drummond
    Eldridge Fitzwilliam Greenhalgh Hathersage Inchcombe Jolliffe
""".split())
# Words too common to treat as a username or first name in free text.
STOPWORDS = frozenset("""
    admin root user test bot build ci dev the and for not all any can will may bug fix issue team
    null none true false master main head merge release jira git mail info support help
""".split())


@dataclass(frozen=True)
class Pseudonym:
    full_name: str
    first: str
    last: str
    email: str
    username: str


class Vault:
    """The private mapping person -> pseudonym, with the dataset's secret salt. Never published."""

    def __init__(self, path: Path, salt: str, domain: str, pseudonyms: dict[str, Pseudonym]):
        self.path, self.salt, self.domain, self.pseudonyms = path, salt, domain, pseudonyms

    @classmethod
    def load(cls, path: Path) -> Vault:
        if path.exists():
            data = json.loads(path.read_text())
            return cls(path, data["salt"], data["domain"],
                       {k: Pseudonym(**v) for k, v in data["pseudonyms"].items()})
        salt = secrets.token_hex(16)
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
        real_tokens = {t for p in people for n in p.names for t in fold(n).split()}
        real_tokens |= {fold(u) for p in people for u in p.usernames}
        taken = {fold(v.full_name) for v in self.pseudonyms.values()}
        for p in people:
            if p.person_id in self.pseudonyms:
                continue
            for attempt in range(10_000):
                h = int(content_hash("pseudonym", self.salt, p.person_id, attempt)[:12], 16)
                first, last = FIRST[h % len(FIRST)], LAST[(h // len(FIRST)) % len(LAST)]
                if attempt >= len(FIRST) * len(LAST):
                    last = f"{last}{attempt}"
                full = f"{first} {last}"
                if fold(full) in taken or fold(first) in real_tokens or fold(last) in real_tokens:
                    continue
                taken.add(fold(full))
                user = f"{first[0]}{last}".lower()
                self.pseudonyms[p.person_id] = Pseudonym(full, first, last,
                                                         f"{first}.{last}@{self.domain}".lower(), user)
                break


_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
MESSAGE_ID = re.compile(r"<([^<>\s@]{1,250}@[^<>\s@]{1,250})>")
MESSAGE_ID_KEYS = ("message_id", "in_reply_to", "references")


class Scrubber:
    """Replaces known Message-IDs, known identity strings, then e-mail addresses and phone numbers."""

    def __init__(self, people: list[Person], vault: Vault, message_ids: Iterable[str] = (),
                 places: Iterable[str] = (), allow: Iterable[str] = ()):
        self.vault = vault
        # Message-IDs name hosts and often people; each becomes one opaque id, the same everywhere, so
        # threads and "see <id>" mentions still match after anonymization.
        self.message_ids = {m: f"{content_hash('message-id', vault.salt, m)[:24]}@message-id.invalid"
                            for m in message_ids}
        terms: dict[str, str] = {}
        first_owner: dict[str, set[str]] = {}
        last_owner: dict[str, set[str]] = {}
        for p in people:
            for n in p.names:
                words = n.split()
                if len(words) >= 2:
                    first_owner.setdefault(fold(words[0]), set()).add(p.person_id)
                    last_owner.setdefault(fold(words[-1]), set()).add(p.person_id)
        for p in people:
            q = vault.pseudonyms[p.person_id]
            for e in p.emails:
                terms[e] = q.email
                local = e.split("@")[0]
                if len(local) >= 4 and fold(local) not in STOPWORDS:
                    terms[local] = q.username
            for n in p.names:
                words = n.split()
                if len(words) >= 2:
                    terms[n] = q.full_name
                    terms[f"{words[-1]}, {' '.join(words[:-1])}"] = f"{q.last}, {q.first}"
                    f, last = fold(words[0]), fold(words[-1])
                    if len(f) >= 3 and f not in STOPWORDS:
                        # A first name two people share cannot get one pseudonym: it still goes, as [PERSON].
                        terms[words[0]] = q.first if first_owner.get(f) == {p.person_id} else "[PERSON]"
                    if len(last) >= 4 and last not in STOPWORDS and last_owner.get(last) == {p.person_id}:
                        terms[words[-1]] = q.last
                elif len(n) >= 3 and fold(n) not in STOPWORDS:
                    terms[n] = q.username
            for u in p.usernames:
                if len(u) >= 3 and fold(u) not in STOPWORDS:
                    terms[u] = q.username
        for place in places:  # places NER found outside the allow-list (an outsider's town)
            terms.setdefault(place, "[PLACE]")
        # Accent-free spellings of the same strings ("Jose" for "José").
        for k, v in list(terms.items()):
            terms.setdefault(_strip_accents(k), v)
        self.terms = {k.casefold(): v for k, v in terms.items() if k.strip()}
        self.known_emails = {e.casefold(): vault.pseudonyms[p.person_id].email for p in people for e in p.emails}
        self.domains = company_domains(people, vault, allow)
        self.fake_domains = set(self.domains.values())
        for p in people:  # a known address after its domain was mapped still maps to the person's pseudonym
            for e in p.emails:
                local, _, domain = e.rpartition("@")
                if domain.casefold() in self.domains:
                    mapped = f"{local}@{self.domains[domain.casefold()]}".casefold()
                    self.terms.setdefault(mapped, vault.pseudonyms[p.person_id].email)
                    self.known_emails.setdefault(mapped, vault.pseudonyms[p.person_id].email)
        dom = "|".join(re.escape(d) for d in sorted(self.domains, key=lambda d: (-len(d), d)))
        # A company host name anywhere (jira.acme-corp.example, a URL, a mail address) keeps its sub-domain
        # and gets the dataset's fake domain, so links still look like links of one company.
        self._domains = re.compile(rf"(?<![\w-])((?:[a-z0-9-]+\.)*)({dom})(?![\w-]|\.[a-z])", re.IGNORECASE) \
            if dom else None
        alternation = "|".join(re.escape(k) for k in sorted(self.terms, key=lambda s: (-len(s), s)))
        # Not part of a longer word, address or hyphenated name; inside a host name it is replaced
        # ("jdoe.blog.example"), since company domains were mapped before (see __call__).
        # An "@" before a name is a mention ("@First Last has joined"), unless a word precedes it (an address).
        self._known = re.compile(rf"(?:(?<![\w@-])|(?<=^@)|(?<=[^\w.@-]@))(?:{alternation})(?![\w@-])",
                                 re.IGNORECASE) if terms else None
        self._known_regex = self._known  # the reference the fast matcher must equal (tests)
        if self._known is not None:  # same matches, in time that does not grow with the number of names
            self._known = TermMatcher(self._known, self.terms)

    def __call__(self, text: str | None) -> str | None:
        if not text:
            return text
        text = _INVISIBLE.sub("", text)  # zero-width characters inside a name must not hide it
        if self.message_ids and "@" in text:
            text = MESSAGE_ID.sub(lambda m: f"<{self.message_ids.get(m.group(1), m.group(1))}>", text)
        if self._domains is not None:
            text = self._domains.sub(lambda m: m.group(1) + self.domains[m.group(2).casefold()], text)
        # patterns before names: a recognizer needs the whole span ("12 Sample Street\nLondon\nEC1A 3HL"),
        # which replacing a name or place inside it first would break
        text = self.patterns(text)
        if self._known is not None:
            text = self._known.sub(lambda m: self.terms.get(m.group(0).casefold(), "[PERSON]"), text)
        return text

    def patterns(self, text: str) -> str:
        """E-mail addresses become pseudonyms (known people) or consistent redacted addresses; every other
        recognized kind (phone, address, IP, personal URL, card, IBAN, SSN, secrets) a typed placeholder."""
        spans = pii.find(text)
        if not spans:
            return text
        parts, last = [], 0
        for sp in spans:
            parts.append(text[last:sp.start])
            if sp.kind == "email":
                address = sp.value
                if "@" not in address:  # "user [at] host [dot] org"
                    address = re.sub(r"\s*[\[(]?\s*(?:at|AT)\s*[\])]?\s*", "@", address, count=1)
                    address = re.sub(r"\s*[\[(]?\s*(?:dot|DOT)\s*[\])]?\s*", ".", address)
                parts.append(self._email(address))
            else:
                parts.append(pii.default_placeholder(sp))
            last = sp.end
        parts.append(text[last:])
        return "".join(parts)

    def message_id(self, value: str | None) -> str | None:
        return self.message_ids.get(value, value) if value else value

    def _email(self, address: str) -> str:
        if address in self.message_ids:
            return self.message_ids[address]
        known = self.known_emails.get(address.casefold())
        if known:
            return known
        if address.casefold().endswith((f"@{self.vault.domain}", "@message-id.invalid", "@redacted.example")) \
                or address.split("@")[-1].casefold() in self.fake_domains:
            return address  # already a pseudonym (a second pass must not change it), or a role address

        return f"person-{content_hash('email', self.vault.salt, address.casefold())[:8]}@redacted.example"


PUBLIC_MAIL = frozenset("""
    gmail.com googlemail.com yahoo.com yahoo.co.uk hotmail.com outlook.com live.com msn.com icloud.com
    me.com mac.com aol.com proton.me protonmail.com pm.me gmx.de gmx.net gmx.com web.de mail.com
    yandex.ru yandex.com qq.com 163.com 126.com fastmail.com zoho.com hey.com users.noreply.github.com
    example.com example.org example.net
""".split())


def company_domains(people: list[Person], vault: Vault, allow: Iterable[str] = ()) -> dict[str, str]:
    """Real mail domains of known people -> fake ones: the most used becomes the vault's domain, the
    others `org-<hash>.example`. Public webmail and allow-listed domains are kept as they are."""
    keep = PUBLIC_MAIL | {a.casefold() for a in allow}
    counts: dict[str, int] = {}
    for p in people:
        for e in p.emails:
            d = e.rsplit("@", 1)[-1].casefold()
            if d and "." in d and d not in keep and not d.endswith(".invalid"):
                counts[d] = counts.get(d, 0) + 1
    ranked = sorted(counts, key=lambda d: (-counts[d], d))
    return {d: vault.domain if i == 0 else f"org-{content_hash('domain', vault.salt, d)[:6]}.example"
            for i, d in enumerate(ranked)}


def _strip_accents(text: str) -> str:
    import unicodedata

    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


class Anonymizer:
    """Pseudonymizes whole events and git identities for one dataset."""

    def __init__(self, identities: Iterable[Identity], vault: Vault, message_ids: Iterable[str] = (),
                 outsiders: Iterable[str] = (), places: Iterable[str] = (), allow: Iterable[str] = ()):
        """`outsiders`: full names NER found that no identity carries (customers, family members); each
        becomes a pseudonymous person of its own, consistent across the dataset."""
        identities = list(identities)
        self.people = persons(identities)
        known = {fold(n) for p in self.people for n in p.names if len(n.split()) >= 2}
        # NER spans run over ("Jordan Ames Customer Co"): a name that extends a known or shorter found
        # name is the same person, and keeping both would make the first name look ambiguous.
        kept: list[str] = []
        for n in sorted({fold(n): n for n in outsiders}.values(), key=lambda n: (len(n.split()), n)):
            words = fold(n).split()
            if not any(words[:len(k.split())] == k.split() for k in known | {fold(x) for x in kept}):
                kept.append(n)
        self.outsiders = [Person("x_" + content_hash("outsider", fold(n))[:16], (), (n,), (), ())
                          for n in sorted(kept)]
        vault.assign(self.people + self.outsiders)
        self.vault = vault
        self.scrub = Scrubber(self.people + self.outsiders, vault, message_ids, places, allow)
        self.person_of = {i.handle: i.person_id for i in identities}

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
        return f"{source}:{q.email if source == 'git' else q.username}"

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
            "native_id": mid(ev.native_id) if ev.source == "email" else ev.native_id,
            "thread_key": mid(ev.thread_key) if ev.source == "email" else ev.thread_key,
            "actor": self.handle(ev.actor),
            "actor_name": q.full_name if q else self.scrub(ev.actor_name),
            "recipients": [self.scrub(r) for r in ev.recipients],
            "title": self.scrub(ev.title), "body": self.scrub(ev.body), "diff": self.scrub(ev.diff),
            "attrs": self._walk(ev.attrs), "provenance": self._walk(ev.provenance),
        })

    def git_identity(self, name: str, email: str) -> tuple[str, str]:
        """Map a git author/committer to the pseudonym of the person behind it."""
        handle = f"git:{email.lower()}" if email else f"git:name:{name}"
        q = self.pseudonym(handle)
        if q:
            return q.full_name, q.email
        return (self.scrub(name) or "unknown"), (self.scrub(email) or "")

    def known_strings(self) -> list[str]:
        """Every real identity string the leak audit must not find in published files."""
        out = {n for p in self.outsiders for n in p.names}
        for p in self.people:
            out.update(n for n in p.names if len(n.split()) >= 2 or len(n) >= 5)
            out.update(p.emails)
            out.update(u for u in p.usernames if len(u) >= 5 and fold(u) not in STOPWORDS)
        return sorted(out)


NER_MAX_CHARS = 200_000
NOT_NAME_WORDS = frozenset("""
    st street ave avenue road rd drive dr lane ln way blvd corp corporation inc ltd llc co company group labs
    team support customer customers phone engineer engineering software developer manager director lead
    head officer admin bot
""".split())
_NAME_WORD = re.compile(r"^[^\W\d_][^\W\d_'\u2019-]*(?:[-'\u2019][^\W\d_]+)*$")


def discover(events: Iterable[Event], ner, allow: Iterable[str] = (), workers: int = 1) -> tuple[list[str], list[str]]:
    """(outsider full names, places) NER finds in event titles and bodies (diffs excluded: code is not
    prose). Both must be words of letters; a person needs two or more; a place that shares a word with a
    name is dropped; names and places on `allow` are kept.

    NER reads each distinct paragraph once and skips paragraphs that cannot hold a name (`Ner.names`), with
    `workers` processes; an object with only `people_and_places` (the plain path: every text whole) works
    too. Streaming: the texts are not kept, only which words occur in lower case (`_LowerWords`)."""
    keep = {fold(a) for a in allow}
    lowered = _LowerWords()

    def texts() -> Iterator[str]:
        # NER reads at most the first NER_MAX_CHARS of a text (~30k chars/s: a 50 MB mail body would take half
        # an hour); the names it finds are then replaced everywhere, in every text, whole.
        for ev in events:
            for t in (ev.title, ev.body):
                if t:
                    t = t[:NER_MAX_CHARS]
                    lowered.add(t)
                    yield t

    if hasattr(ner, "names"):
        found = ner.names(texts(), workers=workers)
    else:
        found = (sp for spans in ner.people_and_places(texts()) for sp in spans)
    people: set[str] = set()
    places: set[str] = set()
    for sp in found:
        value = " ".join(sp.value.split())
        words = value.split()
        # Only words of letters: "CORE-12" or "v2 API" tagged as a place by a small model are not one.
        if fold(value) in keep or len(value) < 4 or not all(_NAME_WORD.match(w) for w in words):
            continue
        if sp.kind == "person" and len(words) >= 2:
            # "Example St", "Bench Corp", "Ingrid Prescott Software Engineer", a span over a line
            # break: not a person's name (and replacing it everywhere would break hosts and paths).
            if "\n" not in sp.value and not {fold(w) for w in words[1:]} & NOT_NAME_WORDS:
                people.add(value)
        elif sp.kind == "place":
            places.add(value)
    # A "place" that also occurs as a lower-case word ("Fixes", "Strip", "Clamp") is an ordinary word.
    places = {p for p in places if not lowered.has(p.lower())}
    # A "place" that is someone's name (small models tag first names as places) stays a name.
    name_words = {fold(w) for n in people for w in n.split()}
    places = {p for p in places if not {fold(w) for w in p.split()} & name_words}
    return sorted(people), sorted(places - people)


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


def message_ids(events: Iterable[Event]) -> set[str]:
    """Every Message-ID the dataset's e-mail events carry or refer to."""
    out: set[str] = set()
    for ev in events:
        if ev.source == "email":
            out.add(ev.native_id)
            for key in MESSAGE_ID_KEYS:
                v = ev.attrs.get(key)
                out.update(x for x in (v if isinstance(v, list) else [v]) if isinstance(x, str) and x)
    return out
