"""The leak audit: scan everything about to be published for known real identity strings.

Invariants:
- Every file is scanned: text as text, Parquet column by column (all string values), git bundles and
  repositories through the history they hold (every commit's identities, message and patch, and
  every blob of every tree), anything else as bytes decoded leniently.
- Matching is case-insensitive on word boundaries; a hit names the file, where in it, and the
  identity string's kind, never the string itself (the report may be shown to people).
- An optional detector (the pipeline passes the secret recognizers of `privacy.pii`) adds hits
  for things no list can name: a leaked API key is a hit of kind `secret:<type>`.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq


@dataclass(frozen=True)
class Hit:
    file: str
    where: str
    kind: str
    index: int  # position of the string in the audited list (lets the owner look it up privately)


class Matcher:
    def __init__(self, strings: Iterable[str]):
        self.strings = sorted({s for s in strings if s and len(s.strip()) >= 3}, key=lambda s: (-len(s), s))
        self.index = {s.casefold(): i for i, s in enumerate(self.strings)}
        alt = "|".join(re.escape(s) for s in self.strings)
        self.rx = re.compile(rf"(?<![\w@.])(?:{alt})(?![\w@])", re.IGNORECASE) if alt else None

    extra: Detector | None = None

    def find(self, text: str) -> Iterator[str]:
        if not text:
            return
        if self.rx is not None:
            for m in self.rx.finditer(text):
                yield m.group(0)
        if self.extra is not None:
            for kind in self.extra(text):
                yield f"\0{kind}"

    def kind(self, s: str) -> str:
        if s.startswith("\0"):
            return s[1:]
        return "email" if "@" in s else ("name" if " " in s.strip() else "username")


Detector = Callable[[str], Iterable[str]]


def scan(root: Path, strings: Iterable[str], limit: int = 200, detector: Detector | None = None) -> list[Hit]:
    """All hits under `root` (a folder or a file), at most `limit`. `detector(text)` yields the kinds of
    anything else that must not be published (e.g. secrets); each is a hit too."""
    m = Matcher(strings)
    m.extra = detector
    hits: list[Hit] = []
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    repos = [] if root.is_file() else sorted(p.parent for p in root.rglob(".git") if p.is_dir())
    for path in paths:
        rel = str(path.relative_to(root.parent if root.is_file() else root))
        for where, text in _texts(path):
            # Our own sha256 listings (file manifests) are hashes next to file names like auth.py: the
            # secret detector would read them as assignments. Known identity strings are still searched.
            m.extra = None if (path.name == "manifest.json" or "manifest" in where) else detector
            for s in m.find(text):
                hits.append(Hit(rel, where, m.kind(s), m.index.get(s.casefold(), -1)))
                if len(hits) >= limit:
                    return hits
    m.extra = detector
    for repo in repos:
        rel = str(repo.relative_to(root))
        for where, text in _git_texts(repo):
            for s in m.find(text):
                hits.append(Hit(rel, where, m.kind(s), m.index.get(s.casefold(), -1)))
                if len(hits) >= limit:
                    return hits
    return hits


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
