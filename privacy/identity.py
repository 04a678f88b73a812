"""Who is who across sources: handles (Jira accounts, git authors, ...) resolved to persons.

Invariants:
- Input is the structured people of raw events (`Event.actor`, `Event.attrs["people"]`), never free text.
- Two handles merge only on strong evidence: the same e-mail address, or the same full name (two or
  more words, after case/accent folding) held by exactly one directory account (Jira, Slack, GitHub),
  which anchors every git author or mail sender of that name. Two accounts under one name, or a name
  with no account, merge nothing: ambiguous, and the reason is kept as evidence.
- A person's id is a hash of the dataset and its smallest handle, so it is stable across re-runs.
- Every merge keeps its evidence (`Identity.evidence`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from extractors.base import registry
from privacy.names import team_name
from warehouse.ids import content_hash
from warehouse.schemas import Event, Identity


def directory_sources() -> set[str]:
    """Sources whose accounts are a directory's (one account per person: a tracker's or a chat's users), as their
    extractors declare (`Extractor.directory`); mail senders and git authors are observed, not listed."""
    return {reg.cls.source for reg in registry().values() if reg.cls.directory}


def handle_values() -> dict[str, str]:
    """Per source: what its handles hold once anonymized, "username" or "email", as its extractor declares
    (`Extractor.handle_value`); a source no extractor declares keeps user names."""
    return {reg.cls.source: reg.cls.handle_value for reg in registry().values()}


def fold(text: str | None) -> str:
    """Case- and accent-folded, whitespace-collapsed form used to compare names."""
    if not text:
        return ""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c) and unicodedata.category(c)[0] != "C")
    return " ".join(text.casefold().split())


@dataclass
class _Handle:
    handle: str
    source: str
    names: set[str] = field(default_factory=set)
    emails: set[str] = field(default_factory=set)
    usernames: set[str] = field(default_factory=set)


class UnionFind:
    """Disjoint sets over any sortable keys; the smallest key of a set is its root."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


ROLE_LOCAL_PARTS = frozenset("noreply no-reply do-not-reply donotreply mailer-daemon postmaster "
                             "notifications notification git gitbox jira jenkins hudson buildbot builds "
                             "confluence github gitlab bot bots".split())
_NAME_ADDR = re.compile(r"\s*([^<>@]*?)\s*<([^<>@\s]+@[^<>@\s]+)>")
RELAY_NAMES = 3  # an address seen with this many different display names is a relay, not a person
_BOT_NAME = re.compile(r"(?:^|[\s\-_\[(])(?:bot|robot|bots)(?:$|[\s\-_\])])|\b(?:build|ci|jenkins|hudson) server\b|"
                       r"\bbuild (?:bot|system|daemon)\b|\bnotifications?\b|\bno-?reply\b|\bdaemon\b|^(?:jenkins|"
                       r"hudson|gitbox|github|gitlab|jira|confluence|buildbot|travis|travis ci|circleci|asfgit|git|"
                       r"github actions|dependabot|renovate|codecov|sonarcloud|teamcity|bamboo)$")


_GROUP_LAST = frozenset("""list lists dev devs developers users user team private pmc committers group announce
    support security community discuss discussion commits issues notifications general staff everyone info admin
    admins board members owners moderators digest""".split())
_GROUP_ANY = frozenset("list lists mailing pmc committers announce".split())


def is_bot(name: str, team: bool = True) -> bool:
    """Whether a display name or user name is a service's or a group's ("GitBox", "ASF GitHub Bot",
    "dependabot[bot]", "Asterix build server", "Maven Developers List", "Apache Maven Private", a team's mailbox:
    "Risk Desk", "Summer Interns": `names.team_name`), not a person's.
    A person's surname that is also a tool ("Ann Jenkins") or a first name that is a group word ("Dev Patel")
    is not. `team` False leaves teams out (a name NER tagged in prose is judged by the evidence rules: a team's
    name there is ordinary words, refused anyway)."""
    n = fold(re.sub(r"\s*\((?:jira|github|gitbox)\)\s*$", "", name, flags=re.I))
    words = n.split()
    if len(words) >= 2 and (words[-1] in _GROUP_LAST or set(words) & _GROUP_ANY):
        return True
    if _BOT_NAME.search(n):
        return True
    # a team's or a function's mailbox ("Risk Desk", "Field Operations", "Summer Interns"): ordinary words
    # ending in a group's or a function's noun (`names.team_name`, on the word lists alone)
    return team and 2 <= len(words) <= 4 and all(w.isalpha() for w in words) and team_name(words)


def collect_handles(events: Iterable[Event]) -> dict[str, _Handle]:
    """Every handle of a person seen in structured fields. A mailing list's own address (its List-Id is
    `local.domain`), role senders (noreply, mailer-daemon, git, jira, ...) and bots ("GitBox", "... Bot") are not
    people and are left out. A role or relay address (one sending under `RELAY_NAMES` or more display names, as
    a forge's notifications do: "Tibor17 <git@...>") is no person either, but each display name on it that is
    not a bot's is one: it becomes a handle of its own, `<source>:name:<display name>`."""
    handles: dict[str, _Handle] = {}
    list_ids: set[str] = set()

    def add(handle, source, name=None, email=None, username=None):
        if not handle:
            return
        h = handles.setdefault(handle, _Handle(handle, source))
        if name and "<" in name:  # a header the extractor could not split: "Jane Roe <jane@x.example> jroe"
            m = _NAME_ADDR.match(name)
            if m:
                name = m.group(1).strip(' "\'')
                h.emails.add(m.group(2).lower())
        if name and name.strip():
            h.names.add(name.strip())
        if email and "@" in email:
            h.emails.add(email.strip().lower())
        if username and username.strip():
            h.usernames.add(username.strip())

    for ev in events:
        if isinstance(ev.attrs.get("list_id"), str):
            list_ids.add(ev.attrs["list_id"].strip("<> ").lower())
        if ev.actor:
            add(ev.actor, ev.source, ev.actor_name)
        for p in ev.attrs.get("people") or []:
            if isinstance(p, dict):
                add(p.get("handle"), ev.source, p.get("display_name"), p.get("email"), p.get("username"))

    def listed(h: _Handle) -> bool:
        return any(f"{e.partition('@')[0]}.{e.partition('@')[2]}" in list_ids for e in h.emails)

    def role(h: _Handle) -> bool:
        return any(e.partition("@")[0] in ROLE_LOCAL_PARTS for e in h.emails)

    out: dict[str, _Handle] = {}
    for k, h in handles.items():
        if listed(h):
            continue  # a mailing list's own address: its display names are the list's
        names = {re.sub(r"\s*\((?:jira|github|gitbox)\)\s*$", "", n, flags=re.I).strip() for n in h.names}
        relay = h.emails and len({fold(n) for n in names}) >= RELAY_NAMES
        if role(h) or relay:
            for n in sorted(names):
                if n and not is_bot(n) and "@" not in n:
                    key = f"{h.source}:name:{n}"
                    out.setdefault(key, _Handle(key, h.source)).names.add(n)
            continue
        if all(is_bot(x) for x in h.names | h.usernames) and (h.names or h.usernames):
            continue
        out.setdefault(k, h)
    return out


def resolve(dataset: str, events: Iterable[Event]) -> list[Identity]:
    """Resolve every handle seen in `events` to a person; returns one Identity row per handle."""
    handles = collect_handles(events)
    uf = UnionFind()
    evidence: dict[str, list[str]] = defaultdict(list)

    by_email: dict[str, list[str]] = defaultdict(list)
    for h in handles.values():
        uf.find(h.handle)
        for e in h.emails:
            by_email[e].append(h.handle)
    for hs in by_email.values():
        for other in hs[1:]:
            uf.union(hs[0], other)
            evidence[other].append(f"same e-mail as {hs[0]}")
            evidence[hs[0]].append(f"same e-mail as {other}")

    by_name: dict[str, list[str]] = defaultdict(list)
    for h in handles.values():
        for n in {fold(n) for n in h.names}:
            if len(n.split()) >= 2:
                by_name[n].append(h.handle)
    directories = directory_sources()
    for name, hs in sorted(by_name.items()):
        # Accounts of a directory (Jira, Slack, GitHub users) are distinct people by construction: a name
        # held by two of them is ambiguous and merges nothing. Observed identities (git authors, mail
        # senders) join the one account that carries their full name; with no account to anchor them,
        # a shared name alone is not enough.
        anchors = sorted({uf.find(x) for x in hs if handles[x].source in directories})
        if len(anchors) != 1:
            if len({uf.find(x) for x in hs}) > 1:
                why = (f"several {'/'.join(sorted({handles[x].source for x in hs}))} accounts" if anchors
                       else "no account to anchor it")
                for x in hs:
                    evidence[x].append(f"name '{name}' shared, {why}: not merged")
            continue
        anchor = next(x for x in sorted(hs) if uf.find(x) == anchors[0])
        for other in hs:
            if uf.find(other) != uf.find(anchor):
                uf.union(anchor, other)
                evidence[other].append(f"same full name as {anchor}")

    groups: dict[str, list[str]] = defaultdict(list)
    for h in handles:
        groups[uf.find(h)].append(h)
    rows = []
    for members in groups.values():
        person = "p_" + content_hash("person", dataset, min(members))[:16]
        for m in sorted(members):
            h = handles[m]
            rows.append(Identity(
                dataset=dataset, handle=m, source=h.source, person_id=person,
                display_name=_pick(h.names), email=_pick(h.emails), username=_pick(h.usernames),
                names=sorted(h.names), emails=sorted(h.emails), usernames=sorted(h.usernames),
                evidence=sorted(set(evidence[m])) or ["only handle of this person"],
            ))
    return sorted(rows, key=lambda r: r.handle)


def _pick(values: set[str]) -> str | None:
    """A deterministic representative: the longest, then lexicographically first."""
    return sorted(values, key=lambda v: (-len(v), v))[0] if values else None


@dataclass(frozen=True)
class Person:
    person_id: str
    handles: tuple[str, ...]
    names: tuple[str, ...]
    emails: tuple[str, ...]
    usernames: tuple[str, ...]


def persons(identities: Iterable[Identity]) -> list[Person]:
    """Group identity rows into persons with every name, e-mail and username they were seen with."""
    acc: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for i in identities:
        a = acc[i.person_id]
        a["handles"].add(i.handle)
        a["names"].update(i.names)
        a["emails"].update(i.emails)
        a["usernames"].update(i.usernames)
    return [Person(pid, *(tuple(sorted(a[k])) for k in ("handles", "names", "emails", "usernames")))
            for pid, a in sorted(acc.items())]
