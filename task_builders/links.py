"""Cross-source links: what any event's text mentions that names another event of the dataset.

Kinds (DESIGN.md, mining):
- `jira_key`: an issue key on word boundaries (`ALOY-12` never inside `ALOY-123`), of an issue that exists;
- `commit`: 7-40 hex digits that resolve to exactly one commit of a repository in the same dataset
  (an ambiguous prefix, or hex that names no commit, makes no link);
- `issue_url` / `commit_url`: URLs naming a Jira issue (`/browse/KEY`), a GitHub issue or pull request
  (`github.com/o/r/issues/N`), or a commit (`/commit/<sha>`) that exists in the dataset;
- `message_id`: an e-mail Message-ID (`<id@host>`) of a message in the dataset.

An issue is any event of an issue kind (`mining.ISSUE_KINDS`), named by its native id as its extractor
normalized it (a key, or `owner/repo#N`); no source is named here (DESIGN.md, Convention 16).

Invariants: reads anonymized events only (Message-IDs there are pseudonymized consistently, so a
mention and the message it names still match); a link never points at its own event; the link id is a
hash of (from, to, kind) so re-runs give the same rows.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator
from typing import Any

from extractors.base import registry
from task_builders.mining import ISSUE_KINDS, KEY
from warehouse.ids import content_hash
from warehouse.schemas import Event, Link

HEX = re.compile(r"(?<![0-9A-Za-z_/.-])([0-9a-f]{7,40})(?![0-9A-Za-z_])")
JIRA_URL = re.compile(r"https?://[^\s<>\"')\]]*?/browse/([A-Z][A-Z0-9_]{0,19}-[1-9][0-9]{0,8})(?![0-9])")
GITHUB_URL = re.compile(r"https?://github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/(\d+)")
COMMIT_URL = re.compile(r"https?://[^\s<>\"')\]]*?/commits?/([0-9a-f]{7,40})(?![0-9a-f])")
MESSAGE_ID = re.compile(r"<([^<>\s@]{1,250}@[^<>\s@]{1,250})>")
URL = re.compile(r"https?://\S+")


class CommitIndex:
    """Resolves a hex prefix to the one commit it names, or to nothing when it names none or several."""

    def __init__(self, shas: dict[str, str]):
        self.shas = sorted(shas)
        self.event_of = shas

    def resolve(self, prefix: str) -> str | None:
        i = bisect.bisect_left(self.shas, prefix)
        hits = []
        while i < len(self.shas) and self.shas[i].startswith(prefix) and len(hits) < 2:
            hits.append(self.shas[i])
            i += 1
        return self.event_of[hits[0]] if len(hits) == 1 else None


def reference_attrs() -> dict[str, tuple[str, ...]]:
    """Per source: the attrs its extractor says name other records (`Extractor.reference_attrs`)."""
    out: dict[str, set[str]] = {}
    for reg in registry().values():
        out.setdefault(reg.cls.source, set()).update(reg.cls.reference_attrs)
    return {source: tuple(sorted(keys)) for source, keys in out.items()}


def _texts(ev: Event, refs: dict[str, tuple[str, ...]]) -> Iterator[str]:
    for value in (ev.title, ev.body):
        if value:
            yield value
    # Structured fields that carry references (the links of a chat message, the commit a review names) count as
    # mentions too: which ones, its extractor says.
    for key in refs.get(ev.source, ()):
        value: Any = ev.attrs.get(key)
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            yield from (v if isinstance(v, str) else str(v.get("url", "")) for v in value if isinstance(v, (str, dict)))


def find_links(events: Iterable[Event]) -> list[Link]:
    events = list(events)
    # an issue is named by its native id, as its extractor normalized it: a key (`ALOY-12`) or `owner/repo#N`
    issues = {e.native_id: e.event_id for e in events if e.kind in ISSUE_KINDS}
    commits = CommitIndex({e.native_id.lower(): e.event_id for e in events if e.kind == "commit"})
    mails = {e.native_id: e.event_id for e in events if e.kind == "email"}
    out: dict[str, Link] = {}
    refs = reference_attrs()

    def add(ev: Event, target: str | None, kind: str, text: str) -> None:
        if target and target != ev.event_id:
            link_id = content_hash("link", ev.event_id, target, kind)[:32]
            out.setdefault(link_id, Link(link_id=link_id, dataset=ev.dataset, from_event_id=ev.event_id,
                                         to_event_id=target, kind=kind, evidence=text[:200]))

    for ev in events:
        for text in _texts(ev, refs):
            for m in JIRA_URL.finditer(text):
                add(ev, issues.get(m.group(1)), "issue_url", m.group(0))
            for m in GITHUB_URL.finditer(text):
                add(ev, issues.get(f"{m.group(1)}#{m.group(2)}"), "issue_url", m.group(0))
            for m in COMMIT_URL.finditer(text):
                add(ev, commits.resolve(m.group(1)), "commit_url", m.group(0))
            for m in MESSAGE_ID.finditer(text):
                add(ev, mails.get(m.group(1)), "message_id", m.group(0))
            bare = URL.sub(" ", text)  # keys and SHAs inside URLs were counted as URL links above
            for m in KEY.finditer(bare):
                add(ev, issues.get(m.group(1)), "jira_key", m.group(1))
            for m in HEX.finditer(bare):
                # An all-digit run links only if it resolves to exactly one commit too: a random 7-digit
                # number is a prefix of one of N commits with probability N / 16^7.
                add(ev, commits.resolve(m.group(1)), "commit", m.group(1))
    return sorted(out.values(), key=lambda link: link.link_id)
