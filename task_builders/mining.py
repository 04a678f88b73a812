"""Work items: the units of real work in the joined history (anonymized events only).

A family says which work items it wants (`Family.kinds`): the stage mines the kinds the dataset's enabled families
want, each once, and a family with a kind of its own mines it itself (`Family.mine`, given `Mining`). No kind is
mined because it exists. The built-in kinds (`MINERS`; one item per request, the item id a hash of (dataset,
kind, request's native id)):
- `issue`: a tracker's issue with its comments and field changes, its fixing commits (the commits whose messages
  name its key, whatever tracker it is in), and every mail and chat message that mentions it (by key or URL,
  from the `links` table) as context;
- `email_reply`: an e-mail that asked for something and the first reply that answered it (another
  person, not automated, adding text beyond the quote, within `answer_window_hours`); the thread's
  earlier messages are its context. A reply is found by its In-Reply-To/References; when it has none (or
  names a message the archive lacks, or a mailing-list digest) by the message its quoted text comes from
  and whose subject it continues (a reply to a digest: any subject; of equally quoted ones the latest),
  else, when its subject threads it (`Re: ...`), by the latest earlier message of the thread from someone
  else (`attrs.reply_found_by`: headers | quote | subject). "Someone else" is a person, not an address:
  the anonymized handles carry one username per person of the identity graph, so a reply from another
  address of the asker is the asker's;
- `chat_answer`: a chat question (thread parent or channel message) and its answer by someone else:
  the first thread reply within the window, else the first channel message within `channel_answer_hours`
  that mentions the asker, or the very next message by someone else within 20 minutes that is not a
  question itself; the `context_messages` before the question are context;
- `resolution`: a ticket resolved with a comment: the human comment nearest its resolution (within
  `resolution_window_hours`) is the outcome; the issue, its thread before it and its fixing commits are
  the context and the linked work. When the export has no changelog, its resolution date can be a later bulk
  close (tickets verified weeks before): then the last human comment before that date that reads like a
  resolution note (fixed, merged, verified, duplicate, PR, closing, ...) is the outcome
  (`attrs.note_by` = "last note before the resolution date").
Every candidate that does not become an item is a `Rejection` (stage `work_items`, family = the kind,
detail = the source) with one of the `SKIP_*` reasons, so the funnel counts them per source.

Invariants:
- An issue key links only on word boundaries and only when the key names an issue of the dataset:
  `ALOY-12` never matches inside `ALOY-123` or `XALOY-12`.
- A merge commit is never a fixing commit (it only carries its branch's name along).
- A work item of kind `issue` is an issue with its fixing commits (possibly none) and the events of
  its thread; every event it was built from is in its lineage.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from core.config import DatasetConfig
from core.registry import registry
from extractors.email.text import thread_subject
from extractors.references import KEY, find_keys  # noqa: F401 (KEY: links, world and clustering read it here)
from task_builders.signals import (
    DIGEST,
    REPLY_SUBJECT,
    automated,
    is_digest,
    is_reply,
    is_request,
    is_trivial,
    new_text,
    person_of,
)
from warehouse.ids import content_hash
from warehouse.schemas import Event, Rejection, WorkItem


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
        # a withheld commit keeps the keys its message named (privacy.withhold): its issue must know a fix is gone
        keys = [k for k in ev.attrs.get("keys") or [] if k in known_keys] if ev.withheld else \
            find_keys(ev.body or ev.title, known_keys)
        if not keys:
            continue
        if ev.attrs.get("merge"):
            rejections.append(Rejection(dataset=ev.dataset, stage="work_items", subject_id=ev.native_id,
                                        reason="merge commit names a key; not counted as a fix",
                                        detail=",".join(keys)))
            continue
        links.extend(Link(ev.event_id, ev.native_id, k) for k in keys)
    return links, rejections


ISSUE_KINDS = ("issue_created", "pr_created")
RESOLVED = {"resolved", "closed", "done", "fixed"}
MENTION_KINDS = {"jira_key", "issue_url"}
ADJACENT = dt.timedelta(minutes=20)  # an unaddressed channel message this soon after a question answers it

SKIP_AUTOMATED = "request is automated"
SKIP_NOT_REQUEST = "asks for nothing"
SKIP_NO_REPLY = "no reply"
SKIP_SELF_REPLY = "answered only by the asker"
SKIP_AUTO_REPLY = "reply is automated"
SKIP_EMPTY_REPLY = "reply adds nothing beyond the quote"
SKIP_LATE = "answer outside the window"
SKIP_NOT_RESOLVED = "not resolved"
SKIP_NO_NOTE = "resolved without a comment"
SKIP_EMPTY = "request has no text"
SKIP_ANSWER_TAKEN = "its answer answers an earlier question"
SKIP_WITHHELD = "a record it needs was withheld"   # privacy.withhold: the request, or a reply before the answer

SHINGLE = 5              # words in a shingle of quoted text (finding the message a reply quotes)
MIN_QUOTED = 3           # shared shingles that make a message the one a reply quotes
COMMON_SHINGLE = 20      # a shingle in more messages than this is boilerplate (a list footer), not evidence
QUOTE_WINDOW = dt.timedelta(days=60)
# the words of a resolution: what people write when they fix, merge or close, and the resolutions trackers name
# (Jira's defaults: Fixed, Won't Fix, Won't Do, Duplicate, Incomplete, Cannot Reproduce, Done, Declined, Obsolete;
# Bugzilla's FIXED, INVALID, WONTFIX, DUPLICATE, WORKSFORME; GitHub's completed, not planned, duplicate), written
# as a word, with spaces or as one token ("WONTFIX (not needed for the release)")
NOTE_HINT = re.compile(r"\b(fix(ed|es)?|merged?|verified|validated|closing|closed|resolv(ed|ing)|duplicate|"
                       r"won'?t ?(fix|do)|cannot reproduce|can'?t reproduce|works ?(as|for ?me)|released|landed|"
                       r"pull request|pr\b|committed|reverted|not a bug|invalid|done|obsolete(d)?|superseded|"
                       r"declined|not planned|out of scope)", re.I)


def build_work_items(dataset: str, events: list[Event], links: Iterable = (),
                     config: DatasetConfig | None = None, families: dict | None = None
                     ) -> tuple[list[WorkItem], list[Rejection]]:
    """The work items the dataset's families want (see the module docstring; `families`: name -> Family, default
    the enabled ones of `config`), each mined once, and a rejection per skipped candidate. Each family says what
    it wants (`Family.kinds`, and `Family.mine` for a kind of its own); the built-in kinds are mined in the order
    of MINERS, before any family's own miner."""
    config = config or DatasetConfig()
    if families is None:
        enabled = set(config.enabled())
        families = {n: r.obj() for n, r in registry("family").all().items() if n in enabled}
    m = Mining(dataset, events, list(links), config)
    wanted = {k for f in families.values() for k in f.kinds}
    for kind in MINERS:
        if kind in wanted:
            m.builtin(kind)
    found: dict[str, WorkItem] = {}
    for name, family in families.items():
        for item in family.mine(m):
            if item.kind not in family.kinds:
                raise ValueError(f"family {name!r} mined a work item of kind {item.kind!r}, which is not among its "
                                 f"kinds {family.kinds}: add it to `kinds`")
            found.setdefault(item.item_id, item)
    items = sorted(found.values(), key=lambda i: (i.ts, i.kind, i.item_id))
    return items, m.rejections


def funnel_by_source(events: Iterable[Event], items: Iterable[WorkItem],
                     rejections: Iterable[Rejection]) -> dict[str, dict]:
    """Per source: events, work items by kind, skipped candidates by reason."""
    out: dict[str, dict] = defaultdict(lambda: {"events": 0, "work_items": Counter(), "skipped": Counter()})
    for e in events:
        out[e.source]["events"] += 1
    for i in items:
        out[i.attrs.get("source", "?")]["work_items"][i.kind] += 1
    for r in rejections:
        if r.stage == "work_items":
            out[r.detail.split(":", 1)[0] or "?"]["skipped"][r.reason] += 1
    return {s: {"events": v["events"], "work_items": dict(sorted(v["work_items"].items())),
                "skipped": dict(v["skipped"].most_common())} for s, v in sorted(out.items())}


def _key(e: Event) -> tuple:
    return (e.ts, e.event_id)


def _shingles(text: str | None, limit: int = 400) -> set[int]:
    """The text's runs of SHINGLE words, each as a 64-bit blake2b (never `hash()`, which PYTHONHASHSEED draws: a
    collision, and so the parent a reply is given, must not depend on the process)."""
    words = re.findall(r"\w+", (text or "").casefold())[:limit]
    return {int.from_bytes(hashlib.blake2b(" ".join(words[i:i + SHINGLE]).encode("utf-8", "surrogatepass"),
                                           digest_size=8).digest(), "little")
            for i in range(max(0, len(words) - SHINGLE + 1))}


def _quoted(e: Event) -> str:
    """The lines of an e-mail that are not its own new text: what it quotes or forwards."""
    own = {line.strip() for line in new_text(e).split("\n") if line.strip()}
    return "\n".join(line for line in (e.body or "").split("\n") if line.strip() and line.strip() not in own)


def _when(iso: str) -> dt.datetime | None:
    try:
        ts = dt.datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC)


class Mining:
    """The dataset's anonymized events as miners read them, and the built-in miners (`MINERS`). A family's own
    miner (`Family.mine`) gets this: the events in time order (`events`, `by_id`), replies by parent (`children`),
    the mail and chat messages that mention an issue (`mentions`), and `item`, `skip`, `candidate` and
    `answer_of`, which make items and rejections the way the built-in miners do."""

    def __init__(self, dataset: str, events: list[Event], links: list, config: DatasetConfig):
        self.dataset, self.config = dataset, config
        self._mined: dict[str, list[WorkItem]] = {}
        self.events = sorted(events, key=_key)
        self.by_id = {e.event_id: e for e in self.events}
        self.rejections: list[Rejection] = []
        self.children: dict[str, list[Event]] = defaultdict(list)
        for e in self.events:
            if e.parent_id:
                self.children[e.parent_id].append(e)
        self.found_by: dict[str, str] = {}      # reply event id -> how its parent was found (e-mail)
        self._infer_email_parents()
        self.window = dt.timedelta(hours=config.answer_window_hours)
        self.issue_events = {e.native_id: e for e in self.events if e.kind in ISSUE_KINDS}
        # mail and chat messages that mention an issue (by key or URL), from the links table
        self.mentions: dict[str, list[Event]] = defaultdict(list)
        for link in links:
            if link.kind in MENTION_KINDS and link.to_event_id in self.by_id and link.from_event_id in self.by_id:
                src = self.by_id[link.from_event_id]
                if src.medium in ("mail", "chat"):
                    self.mentions[link.to_event_id].append(src)

    def _infer_email_parents(self) -> None:
        """Parents for e-mails whose headers name none we have (see the module docstring): the message whose
        text they quote, else the thread's latest earlier message from someone else when the subject threads
        them. Found parents are added to `children` like header ones."""
        mails = [e for e in self.events if e.medium == "mail"]
        orphans = [e for e in mails if is_reply(e) and (e.parent_id not in self.by_id or is_digest(self.by_id[
            e.parent_id]))]
        if not orphans:
            return
        index: dict[int, list[int]] = defaultdict(list)
        for i, m in enumerate(mails):
            if is_digest(m):
                continue
            for g in _shingles(new_text(m)):
                index[g].append(i)
        position = {m.event_id: i for i, m in enumerate(mails)}
        by_thread: dict[str, list[Event]] = defaultdict(list)
        for m in mails:
            by_thread[m.thread_key or m.event_id].append(m)
        for e in orphans:
            votes: Counter = Counter()
            for g in _shingles(_quoted(e)):
                hits = index.get(g, ())
                if len(hits) <= COMMON_SHINGLE:
                    votes.update(hits)
            me = position[e.event_id]
            subject = thread_subject(e.title)
            # the most quoted earlier message; of equally quoted ones (a patch series shares its boilerplate) the
            # one whose subject the reply's continues, then the latest
            best = [(thread_subject(mails[i].title) == subject, n, mails[i].ts, i) for i, n in votes.items()
                    if n >= MIN_QUOTED and i != me and mails[i].ts <= e.ts and e.ts - mails[i].ts <= QUOTE_WINDOW]
            if subject and not DIGEST.search(e.title or ""):
                best = [b for b in best if b[0]]     # a reply keeps its thread's subject, but to a digest
            parent, how = None, ""
            if best:
                top = max(n for _, n, _, _ in best)
                parent, how = mails[max(b for b in best if b[1] == top)[3]], "quote"
            elif e.attrs.get("thread_by") == "subject" or (not e.parent_id and e.thread_key != e.native_id):
                earlier = [m for m in by_thread[e.thread_key or e.event_id] if _key(m) < _key(e)
                           and person_of(m) != person_of(e)]
                if earlier:
                    parent, how = earlier[-1], "subject"
            if parent is not None:
                self.children[parent.event_id].append(e)
                self.children[parent.event_id].sort(key=_key)
                self.found_by[e.event_id] = how

    def builtin(self, kind: str, family: str = "") -> list[WorkItem]:
        """The work items of a built-in kind (MINERS), mined once (a second family asking gets the same)."""
        if kind not in MINERS:
            raise ValueError(f"family {family or '?'!r} wants work items of kind {kind!r}, which no built-in miner "
                             f"makes (built-in: {', '.join(MINERS)}): give the family a `mine` method that makes them")
        if kind not in self._mined:
            self._mined[kind] = MINERS[kind](self)
        return self._mined[kind]

    def skip(self, kind: str, e: Event, reason: str, detail: str = "") -> None:
        self.rejections.append(Rejection(dataset=self.dataset, stage="work_items", family=kind,
                                         subject_id=e.native_id, reason=reason,
                                         detail=f"{e.source}:{detail}"[:500]))

    def item(self, kind: str, request: Event, outcome: list[Event], context: list[Event], attrs: dict,
             thread_key: str | None = None) -> WorkItem:
        lineage = sorted({request.event_id, *(e.event_id for e in outcome), *(e.event_id for e in context)})
        context = sorted({e.event_id: e for e in context}.values(), key=_key)
        return WorkItem(item_id=content_hash("work_item", self.dataset, kind, request.event_id), dataset=self.dataset,
                        kind=kind, thread_key=thread_key or request.native_id, request_event_id=request.event_id,
                        outcome_event_ids=[e.event_id for e in outcome],
                        context_event_ids=[e.event_id for e in context],
                        ts=request.ts, attrs={"source": request.source, **attrs}, lineage=lineage)

    # -- issues and their fixing commits ------------------------------------------------------------

    @functools.cached_property
    def fixes(self) -> dict[str, list[Link]]:
        """Issue key -> the commits whose messages name it (merge commits are rejected: see `link_commits`)."""
        links, rejections = link_commits(self.events, set(self.issue_events))
        self.rejections += rejections
        fixes: dict[str, list[Link]] = defaultdict(list)
        for link in links:
            fixes[link.key].append(link)
        return fixes

    @functools.cached_property
    def threads(self) -> dict[str, list[Event]]:
        """Issue key -> the events of its thread (comments, field changes), in time order."""
        thread: dict[str, list[Event]] = defaultdict(list)
        for e in self.events:
            if e.thread_key in self.issue_events and e.kind not in ISSUE_KINDS:
                thread[e.thread_key].append(e)
        return thread

    def issues(self) -> list[WorkItem]:
        fixes, thread = self.fixes, self.threads
        commit_ts = {e.event_id: e.ts for e in self.events if e.kind == "commit"}
        items = []
        for key, issue in sorted(self.issue_events.items()):
            if issue.withheld:
                self.skip("issue", issue, SKIP_WITHHELD, f"{key}: {issue.withheld}")
                continue
            fix = sorted(fixes.get(key, []), key=lambda link: (commit_ts[link.commit_event_id], link.sha))
            gone = [link for link in fix if self.by_id[link.commit_event_id].withheld]
            fix = [link for link in fix if link not in gone]
            mentions = sorted({e.event_id: e for e in self.mentions.get(issue.event_id, [])}.values(), key=_key)
            context = [e for e in thread.get(key, []) if not e.withheld] + mentions
            items.append(self.item(
                "issue", issue, [self.by_id[link.commit_event_id] for link in fix], context,
                {"key": key, "project": issue.attrs.get("project"),
                 **({"withheld_fixes": len(gone)} if gone else {}),   # commit_link, code_change: fixes unknown
                 "fix_shas": [link.sha for link in fix],
                 "fix_ts": [commit_ts[link.commit_event_id].isoformat() for link in fix],
                 "mentions": len(mentions),
                 "sources": sorted({issue.source, *(e.source for e in context),
                                    *("git" for _ in fix[:1])})},
                thread_key=key))
        return items

    # -- e-mail: a request and the reply that answered it --------------------------------------------

    def answer_of(self, kind: str, q: Event, replies: list[Event]) -> Event | None:
        """The first reply that answers `q`; records why there is none."""
        if not replies:
            self.skip(kind, q, SKIP_NO_REPLY)
            return None
        asker, reasons = person_of(q), []
        for r in replies:
            if r.withheld:     # it may have been the answer: what it said is unknown, so no reply is taken after it
                self.skip(kind, q, SKIP_WITHHELD, f"reply {r.event_id[:12]}: {r.withheld}")
                return None
            if person_of(r) == asker:
                reasons.append(SKIP_SELF_REPLY)
            elif automated(r):
                reasons.append(SKIP_AUTO_REPLY)
            elif is_trivial(new_text(r)):
                reasons.append(SKIP_EMPTY_REPLY)
            elif r.ts - q.ts > self.window:
                reasons.append(SKIP_LATE)
            else:
                return r
        order = (SKIP_LATE, SKIP_EMPTY_REPLY, SKIP_AUTO_REPLY, SKIP_SELF_REPLY)
        self.skip(kind, q, next(x for x in order if x in reasons), f"{len(replies)} replies")
        return None

    def candidate(self, kind: str, e: Event) -> bool:
        if e.withheld:
            self.skip(kind, e, SKIP_WITHHELD, e.withheld)
            return False
        why = automated(e)
        if why:
            self.skip(kind, e, SKIP_AUTOMATED, why)
            return False
        text = new_text(e)
        if not text and not (e.title or "").strip():
            self.skip(kind, e, SKIP_EMPTY)
            return False
        # a reply's subject ("Re: Please reset my password") is its thread's request, not its own; but a
        # message threaded under another with a subject of its own (a patch series sent with In-Reply-To:
        # "[PATCH 2/3] ..." under its cover letter) asks what its subject asks
        reply = is_reply(e) if e.medium == "mail" else bool(e.parent_id)
        own = not reply or (e.medium == "mail" and not REPLY_SUBJECT.match(e.title or ""))
        if not is_request(text if reply else f"{e.title or ''}\n{text}", e.title if own else None):
            self.skip(kind, e, SKIP_NOT_REQUEST)
            return False
        return True

    def emails(self) -> list[WorkItem]:
        threads: dict[str, list[Event]] = defaultdict(list)
        for e in self.events:
            if e.medium == "mail":
                threads[e.thread_key].append(e)
        items = []
        for e in self.events:
            if e.medium != "mail" or not self.candidate("email_reply", e):
                continue
            replies = [r for r in self.children.get(e.event_id, []) if r.medium == "mail"]
            answer = self.answer_of("email_reply", e, replies)
            if answer is None:
                continue
            before = [x for x in threads[e.thread_key] if _key(x) < _key(e) and not x.withheld]
            items.append(self.item("email_reply", e, [answer], before[-self.config.context_messages:] if
                                   self.config.context_messages else [],
                                   {"subject": e.title or "", "list": e.attrs.get("list_id"),
                                    "in_thread": bool(e.parent_id),
                                    "reply_found_by": self.found_by.get(answer.event_id, "headers"),
                                    "answer_delay_h": round((answer.ts - e.ts).total_seconds() / 3600, 2)},
                                   thread_key=e.thread_key))
        return items

    # -- Slack: a question and the answer by someone else --------------------------------------------

    def chats(self) -> list[WorkItem]:
        channel: dict[str, list[Event]] = defaultdict(list)   # top-level messages per channel, time order
        for e in self.events:
            if e.medium == "chat" and not e.parent_id:
                channel[e.attrs.get("channel_id") or ""].append(e)
        keys = {c: [_key(e) for e in es] for c, es in channel.items()}
        channel_window = dt.timedelta(hours=self.config.channel_answer_hours)
        items, answered = [], set()
        for q in self.events:
            if q.medium != "chat" or q.parent_id or q.kind != "message" or not self.candidate("chat_answer", q):
                continue
            ch = q.attrs.get("channel_id") or ""
            asker = person_of(q)
            replies = [r for r in self.children.get(q.event_id, []) if r.medium == "chat"]
            in_thread = True
            if not any(person_of(r) != asker and not automated(r) for r in replies):
                # no thread answer: the next channel message by someone else that addresses the asker, comes
                # from someone the question addressed ("@Ann, are the sessions still on?"), or, when it
                # addressed nobody, is the very next message and not a question of its own
                pos = bisect.bisect_right(keys[ch], _key(q))
                later, first = [], True
                addressed = {str(m.get("name", "")).lower() for m in q.attrs.get("mentions") or []} - {""}
                for r in channel[ch][pos:]:
                    if r.ts - q.ts > channel_window:
                        break
                    if r.withheld:   # it may have been the answer (answer_of says so)
                        later = [r]
                        break
                    if person_of(r) == asker or automated(r):
                        continue
                    mentioned = {str(m.get("name", "")).lower() for m in r.attrs.get("mentions") or []}
                    if (q.actor_name or "").lower() in mentioned or (r.actor_name or "").lower() in addressed or (
                            first and not addressed and r.ts - q.ts <= ADJACENT and not is_request(new_text(r))):
                        later = [r]
                        break
                    first = False
                if later:
                    replies, in_thread = later, False
            answer = self.answer_of("chat_answer", q, replies)
            if answer is None:
                continue
            if answer.event_id in answered:        # a follow-up ("anyone?") of a question already answered
                self.skip("chat_answer", q, SKIP_ANSWER_TAKEN)
                continue
            answered.add(answer.event_id)
            pos = bisect.bisect_left(keys[ch], _key(q))
            n = self.config.context_messages
            context = [e for e in channel[ch][max(0, pos - n):pos] if not automated(e) and not e.withheld] if n else []
            items.append(self.item("chat_answer", q, [answer], context,
                                   {"channel": q.attrs.get("channel_name"), "in_thread": in_thread,
                                    "answer_delay_h": round((answer.ts - q.ts).total_seconds() / 3600, 2)},
                                   thread_key=q.thread_key))
        return items

    # -- tickets resolved with a comment -------------------------------------------------------------

    def resolutions(self) -> list[WorkItem]:
        window = dt.timedelta(hours=self.config.resolution_window_hours)
        _ = self.fixes   # linking commits records its rejections first, as when `issues` ran before
        items = []
        for key, issue in sorted(self.issue_events.items()):
            if issue.withheld:
                continue       # skipped once, as an issue
            thread = self.threads.get(key, [])
            resolved_at, evidence = None, "changelog"
            for e in thread:
                a = e.attrs or {}
                if e.kind == "field_changed" and str(a.get("field", "")).lower() in ("status", "resolution") and \
                        str(a.get("toString") or "").lower() in RESOLVED or e.kind == "closed":
                    resolved_at = resolved_at or e.ts
            if resolved_at is None and issue.attrs.get("resolved_at"):
                # no changelog entry: the resolution fields the extractor normalized (resolutiondate, closed_at)
                resolved_at = _when(issue.attrs["resolved_at"])
                evidence = str(issue.attrs.get("resolution_evidence") or "resolved_at")
            if resolved_at is None:
                self.skip("resolution", issue, SKIP_NOT_RESOLVED, key)
                continue
            human = [e for e in thread if e.kind == "comment" and not automated(e) and not is_trivial(new_text(e))]
            notes = [e for e in human if abs(e.ts - resolved_at) <= window]
            note_by = "nearest the resolution"
            if not notes and evidence != "changelog":
                # an export-time resolution date may be a bulk close long after the ticket's last word
                notes = [e for e in human if e.ts <= resolved_at and NOTE_HINT.search(new_text(e))][-1:]
                note_by = "last note before the resolution date"
            if not notes:
                self.skip("resolution", issue, SKIP_NO_NOTE, key)
                continue
            withheld = [e for e in thread if e.withheld and e.ts <= resolved_at + window]
            if withheld:   # a withheld comment or change may have been the note, or decided the resolution
                self.skip("resolution", issue, SKIP_WITHHELD, f"{key}: {len(withheld)} records withheld")
                continue
            note = min(notes, key=lambda e: (abs(e.ts - resolved_at), e.event_id))
            fix = [self.by_id[link.commit_event_id] for link in self.fixes.get(key, [])]
            before = [e for e in thread if _key(e) < _key(note)]
            mentions = [e for e in self.mentions.get(issue.event_id, []) if _key(e) < _key(note)]
            items.append(self.item("resolution", issue, [note], before + fix + mentions,
                                   {"key": key, "resolved_at": resolved_at.isoformat(),
                                    "resolution_evidence": evidence, "note_by": note_by,
                                    "resolution": issue.attrs.get("resolution"),
                                    "fix_shas": [link.sha for link in self.fixes.get(key, [])]},
                                   thread_key=key))
        return items


# The built-in work-item kinds and their miners, in the order they are mined (a family asks for them by kind).
MINERS: dict[str, Callable[[Mining], list[WorkItem]]] = {
    "issue": Mining.issues,
    "email_reply": Mining.emails,
    "chat_answer": Mining.chats,
    "resolution": Mining.resolutions,
}
