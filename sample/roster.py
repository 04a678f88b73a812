"""Fictional people, outsiders and PII-bearing text for the sample company.

Invariants:
- Every name list here was written for this generator; nothing is taken from a real export.
- Every e-mail domain is reserved (`*.example`, RFC 2606) and every phone number is in a range set aside
  for fiction (North American 555-0100..0199, Ofcom drama ranges), so no planted item reaches a real person.
- A `Text` knows the exact [start, end) offsets (Python str indices, i.e. Unicode code points) of every
  planted item it rendered, so the ground truth can say where each one is.
- Everything is drawn from the `random.Random` passed in; nothing reads the clock or the environment.
"""

from __future__ import annotations

import random
import string
import unicodedata
from dataclasses import dataclass, field

FIRST_NAMES = (
    "Maria", "Tomas", "Priya", "Kenji", "Amara", "Lukas", "Sofia", "Diego", "Hana", "Oren", "Nadia",
    "Felix", "Inés", "Ravi", "Yuki", "Bruno", "Leila", "Anton", "Chloe", "Mateo", "Zoë", "Ivan", "Elif",
    "Kofi", "Marta", "Nils", "Asha", "Pablo", "Greta", "Omar", "Lena", "Tariq", "Freya", "Joaquín", "Mina",
    "Emil", "Rosa", "Dario", "Ingrid", "Sami",
)
LAST_NAMES = (
    "Lopez", "Brandvik", "Raghavan", "Okonjo", "Tamura", "Feldhaus", "Castellano", "Adeyemi", "Novacek",
    "Lindgard", "Marchetti", "Haddad", "Quintero", "Pellegrino", "Nakashima", "Drummond", "Albescu",
    "Kovalenko", "Ferreira", "Holmgren", "Ishida", "Varga", "Østby", "Mendel", "Ashworth", "Carvalho",
    "Delgado", "Eriksen", "Fontaine", "Galloway", "Hartmann", "Iwasaki", "Jovanic", "Kettering", "Laurent",
    "Moreau", "Nyberg", "Oyelaran", "Prescott", "Rinaldi",
)
# Outsiders: customers who appear only inside free text (the anonymizer must find them by pattern/NER).
OUTSIDER_NAMES = (
    "Jordan Ames", "Priscilla Vane", "Hollis Grant", "Beatrix Lund", "Casimir Holt", "Odette Marsh",
    "Rufus Penhale", "Wren Calloway", "Ignatius Boyle", "Marisol Reyes", "Tobiah Ferro", "Delphine Okoro",
)
OUTSIDER_DOMAINS = ("customer-co.example", "globex.example", "initech.example", "northpeak.example")
# IANA zones without daylight saving, so one fixed offset per person is also correct on every date.
TIMEZONES = (
    ("Etc/UTC", 0), ("Pacific/Pitcairn", -480), ("Asia/Kolkata", 330), ("America/Bogota", -300),
    ("Asia/Tokyo", 540), ("Africa/Lagos", 60), ("America/Sao_Paulo", -180), ("Asia/Singapore", 480),
    ("Africa/Nairobi", 180), ("Asia/Dubai", 240), ("America/Phoenix", -420), ("Australia/Brisbane", 600),
)
PERSONAL_DOMAIN = "mail.example"
HOUR = 3_600_000  # times are integer milliseconds since the epoch, UTC
DAY = 24 * HOUR


def ascii_fold(text: str) -> str:
    """'Zoë Østby' -> 'Zoe Ostby': e-mail local parts and usernames are ASCII, display names are not."""
    text = text.replace("Ø", "O").replace("ø", "o")
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


@dataclass(frozen=True)
class Person:
    name: str
    first: str
    username: str
    email: str
    timezone: str
    offset: int  # minutes east of UTC
    role: str  # lead | dev | support
    git: tuple[tuple[str, str], ...]  # (name, email) identities; the first is the usual one
    alt_rate: float  # share of commits made under git[1] when it exists

    def git_identity(self, rng: random.Random) -> tuple[str, str]:
        return self.git[1] if len(self.git) > 1 and rng.random() < self.alt_rate else self.git[0]


@dataclass(frozen=True)
class Outsider:
    name: str
    email: str
    phone: str


@dataclass(frozen=True)
class Pii:
    type: str  # name | first_name | email | phone | username, or a planted.py type (ip, ..., secret:<kind>)
    value: str
    person: str | None = None  # Jira username of a roster person; None for outsiders and for secrets


def make_roster(rng: random.Random, n: int, domain: str) -> list[Person]:
    """`n` people with unique full names and usernames; roles: 2 leads, ~1/8 support, the rest devs.

    Git identity variants (recorded, and always sharing the e-mail or the full name with the Jira
    account so identity resolution can merge them): person 2 commits as "M. Lopez" with the company
    e-mail, person 3 sometimes commits with a personal e-mail; others get a variant at random.
    """
    pairs = rng.sample([(f, la) for f in FIRST_NAMES for la in LAST_NAMES], n)
    n_support = max(1, n // 8)
    people, usernames = [], set()
    for i, (first, last) in enumerate(pairs):
        af, al = ascii_fold(first).lower(), ascii_fold(last).lower()
        user = base = af[0] + al
        k = 2
        while user in usernames:
            user, k = f"{base}{k}", k + 1
        usernames.add(user)
        name, email = f"{first} {last}", f"{af}.{al}@{domain}"
        variant = {2: "initial", 3: "personal"}.get(i) or rng.choices(
            ("none", "initial", "personal"), (0.6, 0.2, 0.2))[0]
        git = ((name, email),)
        if variant == "initial":
            git = ((f"{first[0]}. {last}", email),)
        elif variant == "personal":
            git = ((name, email), (name, f"{af}.{al}@{PERSONAL_DOMAIN}"))
        tz, offset = TIMEZONES[i % len(TIMEZONES)]
        role = "lead" if i < 2 else ("support" if i >= n - n_support else "dev")
        people.append(Person(name, first, user, email, tz, offset, role, git, rng.uniform(0.3, 0.6)))
    return people


def make_outsiders(rng: random.Random, n: int) -> list[Outsider]:
    names = list(OUTSIDER_NAMES)
    while len(names) < n:  # large scales: recombine first and last names of the list
        a, b = rng.sample(OUTSIDER_NAMES, 2)
        cand = f"{a.split()[0]} {b.split()[1]}"
        if cand not in names:
            names.append(cand)
    out = []
    for i, name in enumerate(names[:n]):
        local = ascii_fold(name).lower().replace(" ", ".")
        domain = "customer-co.example" if i == 0 else rng.choice(OUTSIDER_DOMAINS)
        out.append(Outsider(name, f"{local}@{domain}", fake_phone(rng)))
    return out


def working_time(rng: random.Random, t: int, offset: int) -> int:
    """The first moment >= t inside working hours (Mon-Fri 09:00-18:00) at `offset` minutes east of UTC.

    A moment outside them moves to a random time in the first 6 hours of the next working day, so work
    does not all start at 09:00 sharp."""
    off = offset * 60_000
    day, ms = divmod(t + off, DAY)
    if (day + 3) % 7 < 5 and 9 * HOUR <= ms < 18 * HOUR:  # 1970-01-01 was a Thursday
        return t
    if not ((day + 3) % 7 < 5 and ms < 9 * HOUR):
        day += 1
        while (day + 3) % 7 >= 5:
            day += 1
    return day * DAY + 9 * HOUR + rng.randrange(6 * HOUR) - off


def fake_phone(rng: random.Random) -> str:
    """A number from a fiction range, in one of the international formats people really type."""
    fmt = rng.choice(("+1 {us} 555 01{nn}", "+1 ({us}) 555-01{nn}", "+44 20 7946 0{nnn}",
                      "+44 161 496 0{nnn}", "+44 7700 900{nnn}"))
    return fmt.format(us=rng.choice((415, 206, 312, 617, 503, 646)), nn=f"{rng.randrange(100):02d}",
                      nnn=f"{rng.randrange(1000):03d}")


def mention(person: Person, kind: str) -> Pii:
    """A roster person as a planted item: full name, first name, e-mail or Jira @-mention."""
    value = {"name": person.name, "first_name": person.first, "email": person.email,
             "username": person.username}[kind]
    return Pii(kind, value, person.username)


@dataclass
class Text:
    """Free text assembled from templates whose `{slots}` may be planted `Pii` items."""

    parts: list[str] = field(default_factory=list)
    spans: list[tuple[Pii, int, int]] = field(default_factory=list)
    size: int = 0

    def add(self, template: str, **slots: str | Pii) -> Text:
        for literal, name, _spec, _conv in string.Formatter().parse(template):
            self._put(literal)
            if name is not None:
                value = slots[name]
                if isinstance(value, Pii):
                    self.spans.append((value, self.size, self.size + len(value.value)))
                    value = value.value
                self._put(value)
        return self

    def extend(self, other: Text, prefix: str = "") -> Text:
        """Append `other` with each line prefixed (a "> " mail quote; empty lines get the prefix stripped),
        keeping its planted items at their shifted offsets. An item that spans a line break (a private key,
        a multi-line address) cannot be quoted: the prefix would change its value."""
        if prefix and any("\n" in pii.value for pii, _, _ in other.spans):
            raise ValueError("a planted item spans a line break; it cannot be quoted with a prefix")
        lines, starts, old = str(other).split("\n"), [], 0
        for n, line in enumerate(lines):
            starts.append((old, self.size + len(prefix)))
            self._put((prefix + line if line else prefix.rstrip()) + ("\n" if n < len(lines) - 1 else ""))
            old += len(line) + 1
        for pii, start, end in other.spans:
            line_old, line_new = max(s for s in starts if s[0] <= start)
            self.spans.append((pii, line_new + start - line_old, line_new + end - line_old))
        return self

    def _put(self, s: str) -> None:
        self.parts.append(s)
        self.size += len(s)

    def truth(self, file: str, location: str, path: str | None = None) -> list[dict]:
        """The planted items as ground-truth records: exact [start, end) offsets into str(self); `path` (a file
        inside the repository, for commit:<sha>:diff locations) is added only when given."""
        extra = {} if path is None else {"path": path}
        return [{"type": x.type, "value": x.value, "person": x.person, "file": file, "location": location,
                 **extra, "start": start, "end": end} for x, start, end in self.spans]

    def __str__(self) -> str:
        return "".join(self.parts)
