"""The leak audit: one function, `audit(root, rules)`, that every gate uses (publish, `taskmine audit`, the
`anonymized_leaks` and `leak_audit` asset checks), so what blocks a run is decided in one place; and its detector
(`Rules`) is the anonymizer's last pass, so what the audit refuses the anonymizer has replaced (convention 20).
The anonymize stage judges each record it writes with the same rules, read the same way (`privacy.withhold`), and
withholds what they still refuse.

What it looks for (`Rules`, built for one dataset by `Rules.of(anonymizer, ner)`):
- the dataset's known identity strings, which are the anonymizer's own (`Scrubber.terms`: every form of every
  person: full names, "Last, First", with middle initials, nicknames from a curated list, the handles made of a
  name, addresses, user names), any whitespace or a line wrap with its quote markers standing for a space; and
  whether one counts where it stands is the anonymizer's own decision (`Scrubber.decide`): a word that is also
  an ordinary word ("Page", "family") only where the text uses it as a name (a title, a greeting, a list of
  people, a signature, beside another name of the person, in a text that names the person in full), never in a
  URL scheme or a public host, in code only with a strong cue; an account whose name is ordinary words ("Fix
  Please") only as a whole;
- everything the pattern recognizers find (`privacy.pii`: e-mail addresses, phones, postal addresses, IPs,
  personal URLs, cards, IBANs, SSNs, secrets and credentials, in code and diffs too), except our own output
  (pseudonyms and their addresses, the fake domains, placeholders, opaque Message-IDs, the list and role
  addresses the anonymizer keeps) and what `privacy.exceptions` excuses (asset names like `icon@2x.png`, package
  scopes, `pkg@1.2.3`, Message-IDs): the anonymizer calls the same recognizers, so neither refuses what the
  other keeps;
- with NER, people in prose (titles, bodies, prompts, JSON strings, text files, commit messages): a person NER
  tags and the evidence rules accept (`names.accept_person`, the rule `anonymize.discover` applies), that is not
  a pseudonym. Paragraphs whose verdict is known are skipped (`seen`): a raw paragraph discovery read unchanged
  (NER would say the same of it, and a person accepted there was replaced, so the paragraph would have changed),
  and a paragraph the anonymizer's last pass read (`Anonymizer.settle_people` runs `fresh` and `people_spans`
  of these same rules on what anonymization changed, and replaces what they find).
- with `manifest`, that every file matches the published manifest.json (sha256), and nothing is missing or extra.

What a caller gets per text (`Rules.spans`, `Rules.find`, `Rules.residue`; cheap enough for every record after
anonymization; see `Rules`): the kind and the offsets of each finding and the listed string's index, never the
string. `audit` walks files with them.

Invariants:
- Every file under `root` is scanned (or `root` itself when it is a file): Parquet column by column (a value
  that is a JSON document as its strings, like a JSON file; `diff`, `patch` and `test_patch` as code), JSON as its
  string values (or as text when it does not parse), JSON lines (the published world's documents.jsonl) line by
  line as records whose title/body are prose, git bundles and repositories through the history they hold
  (every commit's identities and message as prose, its patch and every blob of every tree as code), anything else
  as text decoded leniently.
- A hit names the file, where in it, and the kind of what was found, never the string itself (the report may be
  shown to people); `index` is a listed string's position in the rules' list, for the owner to look it up.
- Our own sha256 listings (manifest.json, the world_manifest column) are hashes next to file names like auth.py:
  only identity strings are searched there (the secret recognizers would read assignments).
- `audit(anonymize(x))` is empty: anonymizing a text runs these rules on the result and replaces what they find
  (`Scrubber.plan`, `Anonymizer.settle_people`); tests/test_real_anonymization.py holds it on every real export.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from privacy import pii
from privacy.fastscrub import TermMatcher, norm, order, term_pattern
from privacy.names import accept_person, fold, person_words, strong_cue
from privacy.ner import cue_of, paragraphs, titled_of
from warehouse.ids import sha256_file

if TYPE_CHECKING:
    from privacy.anonymize import Anonymizer, Scrubber

# Domains only taskmine writes: the scrubber's placeholders and opaque Message-IDs, and the tool server's ids of
# messages sent in an episode and its default persona (RFC 2606 `.invalid`: never a real mailbox). An oracle
# trajectory (graders.trajectory) shows the tools' real answers, which carry them.
OWN_DOMAINS = frozenset({"redacted.example", "message-id.invalid", "episode.invalid", "company.invalid"})
PROSE_COLUMNS = frozenset({"title", "body", "prompt", "actor_name", "problem_statement", "hints_text", "messages"})
# Columns of source code and diffs: the anonymizer scrubs them as code (`code=True`), and the audit reads them so.
CODE_COLUMNS = frozenset({"diff", "patch", "test_patch"})
_PLACEHOLDER = re.compile(r"^\[[A-Za-z_:]+\]$")


@dataclass(frozen=True)
class Hit:
    file: str
    where: str
    kind: str
    index: int  # position of the string in the rules' list (-1: not a listed string, e.g. a secret)


@dataclass
class Report:
    """What one audit found; `hits` is capped at the audit's `limit` (then `complete` is False)."""

    root: Path
    hits: list[Hit] = field(default_factory=list)
    files: int = 0
    texts: int = 0
    chars: int = 0
    ner_read: int = 0  # paragraphs NER read (changed by anonymization, or never seen by discovery)
    seconds: float = 0.0
    complete: bool = True

    @property
    def ok(self) -> bool:
        return not self.hits

    def summary(self) -> str:
        """One line without any of the strings found: how many hits, of which kinds, and the first place."""
        if not self.hits:
            return f"no known identity, personal data or secret in {self.files} files"
        kinds: dict[str, int] = {}
        for h in self.hits:
            kinds[h.kind] = kinds.get(h.kind, 0) + 1
        first = self.hits[0]
        return (f"{len(self.hits)}{'' if self.complete else '+'} hits "
                f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))}); "
                f"first in {first.file} ({first.where}, {first.kind} #{first.index})")


@dataclass(frozen=True)
class Finding:
    """A span of a text that must not be published: offsets into the text given, the kind, and the listed string's
    position in the rules' list (`Rules.strings`; -1 when it is no listed string: a pattern, a person NER found).
    Never the string itself: a report may be shown to people."""

    start: int
    end: int
    kind: str
    index: int = -1


class Rules:
    """What the audit looks for (see the module docstring), and the one detector the anonymizer's last pass runs.

    Built for a dataset by `Rules.of(anonymizer, ner)` (or `Rules.of_scrubber(scrubber)`): the known strings are
    the anonymizer's own (`Scrubber.terms`: every form of every person, with nicknames, initials and handles) and
    whether one counts where it stands is the anonymizer's own decision (`Scrubber._term`: an ordinary word
    only where the text uses it as a name, never in a URL scheme or a public host name, in code only with a
    strong cue). Built from lists (`Rules(known, handles=...)`, for a file with no dataset behind it): `known`
    counts wherever it occurs, a `handles` word only where used as a user name.
    `own`: strings of our own output (pseudonyms, their addresses and user names, fake domains); `keep_email`: a
    predicate for the addresses anonymization keeps (lists, roles); `ner` and `vocab`: NER and the dataset's
    vocabulary for people in prose; `seen`: digests of the paragraphs whose verdict is known (read by discovery
    in the raw text, or by the anonymizer's last pass).

    What a caller gets, per text (cheap enough for every record after anonymization):
    - `spans(text, code=..., whole_field=...)`: a `Finding` (offsets, kind, index) for every known string and
      pattern (`privacy.pii`: addresses, phones, personal URLs, secrets) that must not be published, our own
      output and what `privacy.exceptions` excuses left out; `find(text)` the same as (kind, index) pairs;
    - `residue(text, code=...)`: the same findings as the edits that remove them (the anonymizer's last pass);
    - people in prose go through NER in batches: `fresh(text)` (the paragraphs NER must read) then
      `people(paragraphs)` / `people_spans(paragraphs)` (an NER person the evidence rules accept, as
      `anonymize.discover` accepts it: `names.accept_person`)."""

    def __init__(self, known: Iterable[str] = (), *, handles: Iterable[str] = (), own: Iterable[str] = (),
                 patterns: bool = True, secrets: bool = True, keep_email=None, ner=None, vocab=None,
                 seen: set[bytes] | None = None):
        self.strings = order({s for s in known if s and len(s.strip()) >= 3})
        self.handles = order({h for h in handles if h and len(h.strip()) >= 3} - set(self.strings))
        self.index = {s.casefold(): i for i, s in enumerate(self.strings + self.handles)}
        # on word boundaries, not inside an address or host; after an "@" only as a mention ("@jdoe", not x@jdoe);
        # a line wrap may stand where a known string has a space
        head = r"(?:(?<![\w@.])|(?<=^@)|(?<=[^\w.@-]@))"
        self._known = None
        if self.strings:
            rx = re.compile(rf"{head}(?:{'|'.join(term_pattern(s) for s in self.strings)})(?![\w@])", re.I | re.M)
            self._known = TermMatcher(rx, self.strings, term_pattern)
        self._handles = None
        if self.handles:
            rx = re.compile(rf"{head}(?:{'|'.join(term_pattern(s) for s in self.handles)})(?![\w@])", re.I | re.M)
            self._handles = TermMatcher(rx, self.handles, term_pattern)
        self.own = {o.casefold() for o in own if o}
        self.own_domains = {o for o in self.own if "." in o and "@" not in o and " " not in o}
        self.own_words = {w for o in self.own if "@" not in o for w in o.replace(",", " ").split()}
        self.patterns, self.secrets = patterns, secrets
        self.keep_email = keep_email or (lambda address: False)
        self.orgs: set[str] = set()
        self.allow: set[str] = set()  # folded names the dataset's config allows (reviewed public figures)
        self.scrub = None  # the anonymizer's Scrubber, when the rules are a dataset's
        self.ner, self.vocab, self.seen = ner, vocab, seen if seen is not None else set()

    @classmethod
    def of(cls, anon: Anonymizer, ner=None, seen: set[bytes] | None = None) -> Rules:
        """The rules for the dataset `anon` anonymizes (with `ner`, people in prose too)."""
        return cls.of_scrubber(anon.scrub, ner=ner, seen=seen)

    @classmethod
    def of_scrubber(cls, scrub: Scrubber, ner=None, seen: set[bytes] | None = None) -> Rules:
        """The rules of the dataset a `Scrubber` anonymizes: its known strings and its decisions."""
        rules = cls(own=scrub.own_strings(), keep_email=scrub.kept_email, ner=ner, vocab=scrub.vocab, seen=seen)
        rules.scrub = scrub
        rules.orgs = set(scrub.orgs)
        rules.allow = set(getattr(scrub, "allow", ()))
        rules.strings = order(k for k, t in scrub.terms.items() if t.role != "place")
        rules.index = {s: i for i, s in enumerate(rules.strings)}
        return rules

    # ----------------------------------------------------------------------------------------- finding

    def find(self, text: str, *, secrets: bool | None = None, patterns: bool | None = None,
             whole_field: bool = False, code: bool = False) -> Iterator[tuple[str, int]]:
        """(kind, index) of every known string and pattern in `text` that must not be published (people in prose
        are `people`'s: NER reads in batches). `whole_field`: `text` is one value of a structured field (a user
        name alone there is one); `code`: source code or a diff (an ordinary word counts only with a strong
        cue, as the anonymizer decides for code)."""
        for f in self.spans(text, secrets=secrets, patterns=patterns, whole_field=whole_field, code=code):
            yield f.kind, f.index

    def spans(self, text: str, *, secrets: bool | None = None, patterns: bool | None = None,
              whole_field: bool = False, code: bool = False) -> list[Finding]:
        """Every `Finding` in `text`, sorted by start (see `find`)."""
        return sorted((f for f, _ in self._candidates(text, secrets, patterns, whole_field, code)),
                      key=lambda f: (f.start, f.end))

    def residue(self, text: str, code: bool = False) -> list:
        """The anonymizer's last pass: the edits (`anonymize.Edit`, offsets into `text`, non-overlapping) that
        replace every finding of `spans(text, code=code)` the way the first pass would have (the person's
        pseudonym, a placeholder). Needs rules built from a Scrubber."""
        # privacy.anonymize imports this module (one detector, convention 20): its edits are read on first use
        from privacy.anonymize import _settle

        return _settle([e for _, e in self._candidates(text, None, None, False, code) if e is not None])

    def _candidates(self, text: str, secrets: bool | None, patterns: bool | None, whole_field: bool,
                    code: bool) -> Iterator[tuple[Finding, object]]:
        if not text:
            return
        if self.scrub is not None:
            yield from self._terms(text, code)
        else:
            yield from self._listed(text, whole_field)
        if self.patterns if patterns is None else patterns:
            yield from self._patterns(text, self.secrets if secrets is None else secrets, code)

    def _terms(self, text: str, code: bool) -> Iterator[tuple[Finding, object]]:
        """The dataset's known strings where the anonymizer's own decision (`Scrubber._term`) replaces them."""
        # privacy.anonymize imports this module (one detector, convention 20): its edits are read on first use
        from privacy.anonymize import Edit

        scrub = self.scrub
        if scrub._known is None:
            return
        for m, new in scrub.decide(text, list(scrub._known.finditer(text)), code):
            key = norm(m.group(0))
            term = scrub.terms.get(key)
            if new is None or term is None or term.role == "place" or key in self.own or key in self.own_words:
                continue
            kind = "email" if "@" in key else ("username" if term.role == "user" else "name")
            yield (Finding(m.start(), m.end(), kind, self.index.get(key, -1)),
                   Edit(m.start(), m.end(), new, "term", term.person, term.role))

    def _listed(self, text: str, whole_field: bool) -> Iterator[tuple[Finding, None]]:
        if self._known is not None:
            for m in self._known.finditer(text):
                key = norm(m.group(0))
                yield Finding(m.start(), m.end(), _kind(key), self.index.get(key, -1)), None
        if self._handles is not None:
            for m in self._handles.finditer(text):
                if whole_field and m.start() == 0 and m.end() == len(text) or \
                        strong_cue(text, m.start(), m.end(), "user"):
                    yield Finding(m.start(), m.end(), "username", self.index.get(norm(m.group(0)), -1)), None

    def _patterns(self, text: str, secrets: bool, code: bool = False) -> Iterator[tuple[Finding, object]]:
        for sp in pii.find(text):
            if sp.kind.startswith("secret:"):
                if not secrets:
                    continue
            elif self._ours(sp):
                continue
            edit = self.scrub.replacement(text, sp, code) if self.scrub is not None else None
            yield Finding(sp.start, sp.end, sp.kind, -1), edit

    def _ours(self, sp) -> bool:
        """Whether a recognized span is our own output (a pseudonym's address or user name, a fake domain, an
        opaque id) or something anonymization keeps on purpose (a list's or role's address): the same spans the
        anonymizer's first pass leaves as they are."""
        v = sp.value.casefold()
        if sp.kind == "email":
            address = re.sub(r"\s+at\s+", "@", v, count=1) if "@" not in v else v
            address = re.sub(r"\n(?:[ \t]*>)*[ \t]*", "", address)
            domain = address.rsplit("@", 1)[-1]
            return (address in self.own or domain in OWN_DOMAINS
                    or domain in self.own_domains or self.keep_email(address))
        if sp.kind == "url_personal":
            seg = (0, len(sp.value)) if not re.search(r"[/:\\]", sp.value) else pii.person_in_url(sp.value)
            name = sp.value[seg[0]:seg[1]].casefold() if seg else v
            return name in self.own or name in self.orgs or _PLACEHOLDER.match(name) is not None
        return False

    # -------------------------------------------------------------------------------------- people (NER)

    def fresh(self, text: str) -> list[str]:
        """The paragraphs of `text` NER must read: not read by discovery (anonymization changed them), nor by
        this audit or the anonymizer's last pass already (their verdict is known). Empty without NER."""
        if self.ner is None:
            return []

        out = []
        for p in paragraphs(text):
            d = _digest(p)
            if d not in self.seen:
                self.seen.add(d)
                out.append(p)
        return out

    def people(self, paragraphs: list[str]) -> Iterator[tuple[int, str]]:
        """(index in `paragraphs`, "person") for every person NER tags there that the evidence rules accept and
        that is not a pseudonym."""
        for i, _, _ in self.people_spans(paragraphs):
            yield i, "person"

    def people_spans(self, paragraphs: list[str]) -> Iterator[tuple[int, int, int]]:
        """(index in `paragraphs`, start, end) of every person NER tags there that `names.accept_person` accepts
        (the rule `anonymize.discover` applies to the raw text) and that is no pseudonym of ours."""
        self.ner_read += len(paragraphs)
        for i, spans in enumerate(self.ner.people_and_places(paragraphs)):
            text = paragraphs[i]
            for sp in spans:
                if sp.kind != "person":
                    continue
                words = person_words(sp.value)
                if not words or any(w.casefold().strip(".,") in self.own_words for w in words) or \
                        fold(" ".join(words)) in self.allow:
                    continue
                if accept_person(sp.value, self.vocab, cue_of("person", text, sp.start, sp.end),
                                 titled_of("person", text, sp.start)):
                    yield i, sp.start, sp.end

    ner_read = 0


def _digest(paragraph: str) -> bytes:
    return hashlib.blake2b(paragraph.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _kind(s: str) -> str:
    return "email" if "@" in s else ("name" if " " in s.strip() else "username")


# --------------------------------------------------------------------------------------------- the audit

def audit(root: Path, rules: Rules, *, manifest: bool = False, limit: int = 200) -> Report:
    """Scan every file under `root` (a folder or one file) with `rules`; at most `limit` hits. `manifest`: the
    folder is a published version, checked against its manifest.json first."""
    t0 = time.perf_counter()
    root = Path(root)
    report = Report(root)
    rules.ner_read = 0
    try:
        _audit(root, rules, report, manifest, limit)
    except _Full:
        report.complete = False
    report.ner_read, report.seconds = rules.ner_read, round(time.perf_counter() - t0, 3)
    return report


class _Full(Exception):
    pass


NER_BATCH = 256  # fresh paragraphs NER reads at once
MEMO_CHARS, MEMO_SIZE = 256, 50_000  # values this short are looked at once per audit (the findings reused)


def _audit(root: Path, rules: Rules, report: Report, manifest: bool, limit: int) -> None:
    pending: list[tuple[str, str, str]] = []  # (file, where, paragraph) waiting for NER

    def hit(rel: str, where: str, kind: str, index: int) -> None:
        report.hits.append(Hit(rel, where, kind, index))
        if len(report.hits) >= limit:
            raise _Full

    def flush() -> None:
        if pending:
            batch = pending[:]
            pending.clear()
            for i, kind in rules.people([p for _, _, p in batch]):
                hit(batch[i][0], batch[i][1], kind, -1)

    found: dict[tuple, list[tuple[str, int]]] = {}  # what `rules.find` gave for a short value seen before

    def add(rel: str, where: str, text: str, prose: bool = False, **kw) -> None:
        report.texts += 1
        report.chars += len(text)
        if len(text) <= MEMO_CHARS:  # a field's value recurs in every record (a role, a date format, a list)
            key = (text, *sorted(kw.items()))
            kinds = found.get(key)
            if kinds is None:
                if len(found) >= MEMO_SIZE:
                    found.clear()
                kinds = found[key] = list(rules.find(text, **kw))
        else:
            kinds = rules.find(text, **kw)
        for kind, index in kinds:
            hit(rel, where, kind, index)
        if prose:
            pending.extend((rel, where, p) for p in rules.fresh(text))
            if len(pending) >= NER_BATCH:
                flush()

    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    repos = [] if root.is_file() else sorted(p.parent for p in root.rglob(".git") if p.is_dir())
    if manifest and root.is_dir():
        for rel, kind in _manifest_problems(root, paths):
            report.hits.append(Hit(rel, "manifest.json", kind, -1))
            if len(report.hits) >= limit:
                raise _Full
    for path in paths:
        report.files += 1
        rel = str(path.relative_to(root.parent if root.is_file() else root))
        own_listing = path.name == "manifest.json"
        for where, text, kind in _texts(path):
            listing = own_listing or "manifest" in where
            add(rel, where, text, secrets=False if listing else None,
                patterns=False if listing or kind == "binary" else None, prose=kind == "prose",
                whole_field=kind in ("prose", "field"), code=kind == "code")
    for repo in repos:
        report.files += 1
        rel = str(repo.relative_to(root))
        for where, text, kind in _git_texts(repo):
            add(rel, where, text, prose=kind == "prose", patterns=False if kind == "binary" else None,
                code=kind == "code")
    flush()


def _manifest_problems(root: Path, paths: list[Path]) -> Iterator[tuple[str, str]]:
    """(file, problem) for every file that is not what the manifest says, and every listed file missing."""
    f = root / "manifest.json"
    if not f.exists():
        yield "manifest.json", "manifest:missing"
        return
    try:
        listed = json.loads(f.read_text(encoding="utf-8")).get("files", {})
    except (ValueError, OSError):
        yield "manifest.json", "manifest:unreadable"
        return
    present = {str(p.relative_to(root)): p for p in paths if p.name != "manifest.json"}
    for rel, digest in sorted(listed.items()):
        if rel not in present:
            yield rel, "manifest:missing"
        elif sha256_file(present[rel]) != digest:
            yield rel, "manifest:changed"
    for rel in sorted(set(present) - set(listed)):
        yield rel, "manifest:extra"


def _texts(path: Path) -> Iterator[tuple[str, str, str]]:
    """(where, text, kind) of a file: kind "prose" (NER reads it), "field" (a structured value), "code" (source
    or a diff), "text" or "binary"."""
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        for name in table.column_names:
            for i, v in enumerate(table.column(name).to_pylist()):
                for pointer, text, kind in value_texts(name, v):
                    yield f"column {name} row {i}{pointer}", text, kind
        return
    if path.suffix == ".bundle":
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "r"
            subprocess.run(["git", "clone", "-q", str(path), str(repo)], check=True, capture_output=True)
            yield from _git_texts(repo)
        return
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        for offset in range(0, len(data), 1 << 20):
            yield f"bytes {offset}", data[offset:offset + (1 << 20)].decode("utf-8", "replace"), "binary"
        return
    if path.suffix == ".jsonl":
        yield from _json_lines(data)
        return
    if path.suffix == ".json":
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            doc = None
        if doc is not None:
            for pointer, value, key in _strings(doc, ""):
                yield f"json {pointer}", value, "field" if key else "prose"
            return
    kind = "prose" if path.suffix in (".md", ".txt", ".eml") else "text"
    for offset in range(0, max(len(data), 1), 1 << 20):
        yield f"bytes {offset}", data[offset:offset + (1 << 20)].decode("utf-8", "replace"), kind


def value_texts(column: str, v) -> Iterator[tuple[str, str, str]]:
    """(pointer, text, kind) of one value of a table's column, as the audit reads a Parquet file: the strings of
    a nested or JSON value (so an escape (\\n) glues nothing), else the value as text; kind "prose" in a prose
    column (`PROSE_COLUMNS`), "code" in a code column (`CODE_COLUMNS`), else "field". `privacy.withhold` reads
    records the same way."""
    if v is None:
        return
    kind = "prose" if column in PROSE_COLUMNS else ("code" if column in CODE_COLUMNS else "field")
    doc = v if isinstance(v, (list, dict)) else _json_value(v)   # nested columns (trajectories)
    if doc is None:
        yield "", str(v), kind
    else:  # a JSON column (reference, rubric, world)
        for pointer, value, key in _strings(doc, ""):
            yield f" {pointer}", value, "field" if key else kind


def _json_value(v) -> dict | list | None:
    """The JSON object or array a string column holds, else None (plain text, or JSON that does not parse)."""
    if not isinstance(v, str) or not v.lstrip().startswith(("{", "[")):
        return None
    try:
        doc = json.loads(v)
    except ValueError:
        return None
    return doc if isinstance(doc, (dict, list)) else None


def _json_lines(data: bytes) -> Iterator[tuple[str, str, str]]:
    """(where, text, kind) of JSON lines: a record's prose columns (title, body, ...) are prose that NER reads,
    every other string a field; a line that does not parse is scanned as text, so nothing is skipped."""
    for i, line in enumerate(data.decode("utf-8", "replace").splitlines()):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            yield f"line {i + 1}", line, "text"
            continue
        if not isinstance(doc, dict):
            for pointer, value, _ in _strings(doc, ""):
                yield f"line {i + 1} {pointer}", value, "field"
            continue
        for name, value in doc.items():
            yield f"line {i + 1} /{name} (key)", written_key(name), "field"
            if isinstance(value, str):
                yield f"line {i + 1} /{name}", value, "prose" if name in PROSE_COLUMNS else "field"
            else:
                for pointer, v, _ in _strings(value, f"/{name}"):
                    yield f"line {i + 1} {pointer}", v, "field"


def written_key(key) -> str:
    """A JSON object's key as the document writes it (`"max":`), which is how the audit reads it: a key names a
    field, it is not a field's whole value, which a structured value equal to a name word is (`names.strong_cue`).
    So a schema word that is also someone's first name ("max", a probe's threshold, in a dataset with a
    contributor called Max) is no hit, while a key holding a full name, an address or a secret still is. Found on
    the real git-more-itertools export: 120 hits, every probe's "max", stopped its publication."""
    return json.dumps(str(key), ensure_ascii=False) + ":"


def _strings(value, pointer: str) -> Iterator[tuple[str, str, bool]]:
    """(JSON pointer, string, is a key) of every string in a JSON document, keys too (`written_key`)."""
    if isinstance(value, str):
        yield pointer or "/", value, False
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{pointer}/{i}")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield f"{pointer}/{k} (key)", written_key(k), True
            yield from _strings(v, f"{pointer}/{k}")


def _git_texts(repo: Path) -> Iterator[tuple[str, str, str]]:
    """Every commit's identities and message (prose), every patch, then every blob reachable from any ref."""
    log = subprocess.run(["git", "-C", str(repo), "log", "--all", "--format=%H%x00%an <%ae>%n%cn <%ce>%n%B%x01"],
                         capture_output=True)
    for record in log.stdout.decode("utf-8", "replace").split("\x01"):
        if record.strip():
            sha, _, rest = record.strip("\n").partition("\x00")
            yield f"commit {sha[:12]}", rest, "prose"
    patches = subprocess.run(["git", "-C", str(repo), "log", "--all", "-p", "--format=%H"], capture_output=True)
    yield "git log -p --all", patches.stdout.decode("utf-8", "replace"), "code"
    objs = subprocess.run(["git", "-C", str(repo), "rev-list", "--objects", "--all"], capture_output=True)
    shas = [line.split()[0] for line in objs.stdout.decode().splitlines() if line]
    if shas:
        batch = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], input="\n".join(shas).encode(),
                               capture_output=True).stdout
        pos = 0
        while pos < len(batch):  # "<sha> <type> <size>\n<content>\n" per object
            nl = batch.find(b"\n", pos)
            head = batch[pos:nl].split()
            if len(head) < 3:
                break
            size = int(head[2])
            data = batch[nl + 1:nl + 1 + size]
            pos = nl + 1 + size + 1
            if head[1] != b"blob":
                continue
            # a binary file (anonymization leaves it as it is): listed strings only, no patterns on noise
            kind = "binary" if b"\0" in data[:8192] or len(data) > 2_000_000 else "code"
            yield f"blob {head[0].decode()[:12]}", data.decode("utf-8", "replace"), kind
