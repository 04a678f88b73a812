"""The leak audit: one function, `audit(root, rules)`, that every gate uses (publish, `taskmine audit`, the
`anonymized_leaks` and `leak_audit` asset checks), so what blocks a run is decided in one place.

Invariants:
- Every file under `root` is scanned (or `root` itself when it is a file): text as text, Parquet column by
  column (all string values), git bundles and repositories through the history they hold (every commit's
  identities, message and patch, and every blob of every tree), anything else as bytes decoded leniently.
- `Rules` says what is looked for: the dataset's known real identity strings (case-insensitive, on word
  boundaries) and secrets (`privacy.pii`'s `secret:<type>` recognizers). `Rules.of(anonymizer)` builds them
  for one dataset; callers never assemble lists themselves.
- A hit names the file, where in it, and the kind of what was found, never the string itself (the report
  may be shown to people); `index` is the string's position in the rules' list, for the owner to look up.
- Our own sha256 listings (manifest.json) are hashes next to file names like auth.py: the secret
  recognizers would read them as assignments, so only identity strings are searched there.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

if TYPE_CHECKING:
    from privacy.anonymize import Anonymizer


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
    complete: bool = True

    @property
    def ok(self) -> bool:
        return not self.hits

    def summary(self) -> str:
        """One line without any of the strings found: how many hits, of which kinds, and the first place."""
        if not self.hits:
            return f"no known identity or secret in {self.files} files"
        kinds: dict[str, int] = {}
        for h in self.hits:
            kinds[h.kind] = kinds.get(h.kind, 0) + 1
        first = self.hits[0]
        return (f"{len(self.hits)}{'' if self.complete else '+'} hits "
                f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))}); "
                f"first in {first.file} ({first.where}, {first.kind} #{first.index})")


class Rules:
    """What the audit looks for: `known` identity strings and (with `secrets`) every secret kind."""

    def __init__(self, known: Iterable[str] = (), *, secrets: bool = True):
        self.strings = sorted({s for s in known if s and len(s.strip()) >= 3}, key=lambda s: (-len(s), s))
        self.index = {s.casefold(): i for i, s in enumerate(self.strings)}
        alt = "|".join(re.escape(s) for s in self.strings)
        self._rx = re.compile(rf"(?<![\w@.])(?:{alt})(?![\w@])", re.IGNORECASE) if alt else None
        self.secrets = secrets

    @classmethod
    def of(cls, anon: Anonymizer) -> Rules:
        """The rules for the dataset `anon` anonymizes: every real identity string it knows, and secrets."""
        return cls(anon.known_strings())

    def find(self, text: str, *, secrets: bool | None = None) -> Iterator[tuple[str, int]]:
        """(kind, index) of everything in `text` that must not be published."""
        if not text:
            return
        if self._rx is not None:
            for m in self._rx.finditer(text):
                s = m.group(0)
                yield _kind(s), self.index.get(s.casefold(), -1)
        if self.secrets if secrets is None else secrets:
            from privacy import pii

            for sp in pii.find(text):
                if sp.kind.startswith("secret:"):
                    yield sp.kind, -1


def _kind(s: str) -> str:
    return "email" if "@" in s else ("name" if " " in s.strip() else "username")


def audit(root: Path, rules: Rules, *, limit: int = 200) -> Report:
    """Scan every file under `root` (a folder or one file) with `rules`; at most `limit` hits."""
    root = Path(root)
    report = Report(root)
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    repos = [] if root.is_file() else sorted(p.parent for p in root.rglob(".git") if p.is_dir())

    def add(rel: str, where: str, text: str, secrets: bool | None = None) -> bool:
        for kind, index in rules.find(text, secrets=secrets):
            report.hits.append(Hit(rel, where, kind, index))
            if len(report.hits) >= limit:
                report.complete = False
                return False
        return True

    for path in paths:
        report.files += 1
        rel = str(path.relative_to(root.parent if root.is_file() else root))
        for where, text in _texts(path):
            own_listing = path.name == "manifest.json" or "manifest" in where
            if not add(rel, where, text, secrets=False if own_listing else None):
                return report
    for repo in repos:
        report.files += 1
        rel = str(repo.relative_to(root))
        for where, text in _git_texts(repo):
            if not add(rel, where, text):
                return report
    return report


def _texts(path: Path) -> Iterator[tuple[str, str]]:
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        for name in table.column_names:
            col = table.column(name)
            for i, v in enumerate(col.to_pylist()):
                if v is not None:
                    yield f"column {name} row {i}", str(v)
        return
    if path.suffix == ".bundle":
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "r"
            subprocess.run(["git", "clone", "-q", str(path), str(repo)], check=True, capture_output=True)
            yield from _git_texts(repo)
        return
    with open(path, "rb") as f:
        offset = 0
        while chunk := f.read(1 << 20):
            yield f"bytes {offset}", chunk.decode("utf-8", "replace")
            offset += len(chunk)


def _git_texts(repo: Path) -> Iterator[tuple[str, str]]:
    """Every commit's identities, message and patch, then every blob reachable from any ref."""
    log = subprocess.run(["git", "-C", str(repo), "log", "--all", "-p", "--format=%H%n%an <%ae>%n%cn <%ce>%n%B"],
                         capture_output=True)
    yield "git log -p --all", log.stdout.decode("utf-8", "replace")
    objs = subprocess.run(["git", "-C", str(repo), "rev-list", "--objects", "--all"], capture_output=True)
    shas = [line.split()[0] for line in objs.stdout.decode().splitlines() if line]
    if shas:
        batch = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], input="\n".join(shas).encode(),
                               capture_output=True)
        yield "git objects", batch.stdout.decode("utf-8", "replace")
