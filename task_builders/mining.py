"""Links between events and the work items built from them (anonymized events only).

Invariants:
- An issue key links only on word boundaries and only when the key names an issue of the dataset:
  `ALOY-12` never matches inside `ALOY-123` or `XALOY-12`.
- A merge commit is never a fixing commit (it only carries its branch's name along).
- A work item of kind `issue` is an issue with its fixing commits (possibly none) and the events of
  its thread; every event it was built from is in its lineage.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from warehouse.ids import content_hash
from warehouse.schemas import Event, Rejection, WorkItem

KEY = re.compile(r"(?<![A-Za-z0-9_-])([A-Z][A-Z0-9_]{0,19}-[1-9][0-9]{0,8})(?![A-Za-z0-9_]|-[0-9])")


def find_keys(text: str | None, known: set[str] | None = None) -> list[str]:
    """Issue keys mentioned in `text`, in order of first mention, filtered to `known` if given."""
    if not text:
        return []
    seen: dict[str, None] = {}
    for m in KEY.finditer(text):
        k = m.group(1)
        if known is None or k in known:
            seen.setdefault(k)
    return list(seen)


@dataclass(frozen=True)
class Link:
    commit_event_id: str
    sha: str
    key: str


def link_commits(events: Iterable[Event], known_keys: set[str]) -> tuple[list[Link], list[Rejection]]:
    links, rejections = [], []
    for ev in events:
        if ev.kind != "commit":
            continue
        keys = find_keys(ev.body or ev.title, known_keys)
        if not keys:
            continue
        if ev.attrs.get("merge"):
            rejections.append(Rejection(dataset=ev.dataset, stage="work_items", subject_id=ev.native_id,
                                        reason="merge commit names a key; not counted as a fix",
                                        detail=",".join(keys)))
            continue
        links.extend(Link(ev.event_id, ev.native_id, k) for k in keys)
    return links, rejections


def build_work_items(dataset: str, events: list[Event]) -> tuple[list[WorkItem], list[Rejection]]:
    """One work item per Jira issue: the issue, its thread, and the commits that name it."""
    issues = {e.native_id: e for e in events if e.kind == "issue_created"}
    links, rejections = link_commits(events, set(issues))
    fixes: dict[str, list[Link]] = defaultdict(list)
    for link in links:
        fixes[link.key].append(link)
    thread: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.thread_key in issues and e.kind != "issue_created":
            thread[e.thread_key].append(e)
    commit_ts = {e.event_id: e.ts for e in events if e.kind == "commit"}

    items = []
    for key, issue in sorted(issues.items()):
        fix = sorted(fixes.get(key, []), key=lambda link: (commit_ts[link.commit_event_id], link.sha))
        history = sorted(thread.get(key, []), key=lambda e: (e.ts, e.event_id))
        item_id = content_hash("work_item", dataset, "issue", key)
        items.append(WorkItem(
            item_id=item_id, dataset=dataset, kind="issue", thread_key=key,
            request_event_id=issue.event_id,
            outcome_event_ids=[link.commit_event_id for link in fix],
            context_event_ids=[e.event_id for e in history],
            ts=issue.ts,
            attrs={"key": key, "project": issue.attrs.get("project"),
                   "fix_shas": [link.sha for link in fix],
                   "fix_ts": [commit_ts[link.commit_event_id].isoformat() for link in fix]},
            lineage=sorted({issue.event_id, *(e.event_id for e in history),
                            *(link.commit_event_id for link in fix)}),
        ))
    return items, rejections
