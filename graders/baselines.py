"""Retrieval baselines: agents without a model that copy the outcome of the most similar earlier work the task's
world holds at its cutoff. They tell how hard a task is for nothing smarter than search: a task a baseline solves
is easy (its answer is a lookup away), whatever a model later scores on it.

Every baseline reads only what an agent could read: the world at the task's cutoff without the events the task
hides (`environments.world.WorldView`, its own BM25 index), and the task's repositories at their refs at the
cutoff. It ends as typed tool calls (environments.actions) replayed in the task's episode like a probe
(graders.replay.baseline_runs, run kind `baseline:<name>`), so the real rubric grades it.

- ticket_triage, `nearest_issue`: the type, priority, components and assignee of the nearest earlier issue (its
  fields as they stood at the cutoff) set on the task's issue.
- commit_link, `nearest_commit`: the commit reachable at the cutoff whose message and diff (its changed lines
  and paths, the first DIFF_CHARS) are nearest the issue (BM25 over the repository's commits, computed here:
  commits are not documents of the world).
- email_reply / chat_answer, `nearest_reply`: the reply someone gave to the earlier message nearest the request
  (a mail that answers it; a later message of its chat thread by someone else, or of its channel, among the next
  three, when it started no thread), sent through the same tool and
  to the same place as the reference (the request's thread, its sender; nothing of the real reply's recipients).
- resolution_note, `nearest_resolution`: the nearest earlier resolved issue's resolution (or status) and its last
  comment, set and posted on the task's issue.
- code_change: no baseline. Another commit's patch does not apply to other code, and a retrieval agent has
  nothing else to submit; the family is reported as "no baseline", never as solved or failed.

A family names its baselines (`Family.baselines`, in its own module); these are the built-in families'. A
baseline that finds no earlier neighbour submits nothing (its run is the null run). Deterministic: BM25 ranks
with ties broken by the index's order, and nothing random is drawn.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from core.registry import registry
from environments import actions as A
from environments.gitworld import git
from environments.world import World, WorldView
from warehouse.schemas import Task

NEIGHBOURS = 20          # ranked documents a baseline looks through for a usable neighbour
MAX_WORDS = 64           # distinct words of a query looked up
COMMON = 0.3             # a word in more than this share of the documents is skipped (near-zero IDF)
CANDIDATES = 200         # documents re-scored with full BM25
DIFF_CHARS = 4000        # characters of a commit's diff (its +/- lines and file headers) a commit is ranked by
MAX_QUERY = 2000         # characters of a request used as the query
MAX_TEXT = 20_000        # characters of a copied reply
_WORD = re.compile(r"[^\W_]+", re.UNICODE)   # the world index's tokens (unicode61)
_QUOTE_HEAD = re.compile(r"^\s*(on .{0,200}wrote:|-+ ?original message ?-+)\s*$", re.I)
_SIGNATURE = re.compile(r"\n-- ?\n")


@dataclass(frozen=True)
class Baseline:
    """One baseline's outcome for one task: the calls it submits (empty: it found nothing) and what it copied,
    or a shell command it runs in the task's sandbox like an agent (`shell`: a search in the task's repository
    at its cutoff, then its answer through the `company` CLI)."""

    name: str
    calls: list[A.Tool] = field(default_factory=list)
    source: str = ""          # the neighbour it copied (a key, a SHA, a Message-ID, a chat ts), or why none
    shell: str | None = None

    def command(self) -> str:
        """The shell command, or the calls replayed through the `company` CLI, like a probe ("true" when it
        submits nothing)."""
        if self.shell is not None:
            return self.shell
        return " && ".join(c.cli() for c in self.calls) or "true"


Builder = Callable[[Task, WorldView | None, Path], Baseline]


def of(family: str) -> tuple[Builder, ...]:
    """The baselines family `family` declares (`Family.baselines`; each is one run, `baseline:<name>`); none for a
    family without any (code_change) or one not registered here."""
    try:
        return tuple(registry("family").get(family).obj.baselines)
    except KeyError:
        return ()


def applicable(family: str) -> bool:
    return bool(of(family))


def plan(task: Task, worlds_dir: Path) -> list[Baseline]:
    """The baselines of `task` (none for a family without one, e.g. code_change)."""
    fns = of(task.family)
    view = view_of(task, worlds_dir) if fns else None
    return [fn(task, view, Path(worlds_dir)) for fn in fns]


def view_of(task: Task, worlds_dir: Path) -> WorldView | None:
    """The world as the task's agent sees it: at the cutoff, without what the task hides."""
    wf = Path(worlds_dir) / "world.sqlite"
    if not wf.exists():
        return None
    return World(wf).at(dt.datetime.fromisoformat(task.world["cutoff"]), task.world.get("hidden") or ())


def _calls(task: Task) -> list[A.Tool]:
    return [A.CALL.validate_python(a) for a in task.reference.get("actions") or []]


def _query(*parts: str | None) -> str:
    return " ".join(p for p in parts if p)[:MAX_QUERY]


def _valid(cls: type[A.Tool], **arguments) -> A.Tool | None:
    """The call, or None when a copied value does not make a valid one (a two-line field, a bad key)."""
    try:
        return cls(**arguments)
    except (ValidationError, ValueError):
        return None


def rank(view: WorldView, query: str, classes: tuple[str, ...], limit: int = NEIGHBOURS) -> list[dict]:
    """Documents of `classes` reachable in `view`, nearest `query` first (BM25), from the world's own index.

    The world's index keeps no positions nor counts (detail=none, contentless), so FTS5's bm25() scores every
    match 0 and `WorldView.search` returns matches in storage order, not by relevance. Here every query word is
    looked up in the index on its own (its documents at the cutoff: its document frequency), documents are
    scored by the IDF of the words they hold, and the best CANDIDATES are re-scored with full BM25 (term
    frequencies and lengths from their text). Words in more than COMMON of the documents are skipped (their
    IDF is near zero and their lists are long). Ties: the older document first."""
    world, t = view.world, view.t
    marks = ",".join("?" * len(classes))
    n = world.con.execute(f"SELECT count(*) AS n FROM docs WHERE ts <= ? AND cls IN ({marks})",
                          (t, *classes)).fetchone()["n"]
    if not n:
        return []
    words = [w for w in dict.fromkeys(w.casefold() for w in _WORD.findall(query)) if len(w) < 100][:MAX_WORDS]
    idf: dict[str, float] = {}
    coarse: Counter = Counter()
    for w in words:
        ids = [r["id"] for r in world.con.execute(
            f"SELECT d.id AS id FROM fts JOIN docs d ON d.id = fts.rowid WHERE fts MATCH ? AND d.ts <= ? "
            f"AND d.cls IN ({marks})", (f'"{w}"', t, *classes)).fetchall()]
        if not ids or (n > 20 and len(ids) > COMMON * n):
            continue
        idf[w] = math.log(1 + (n - len(ids) + 0.5) / (len(ids) + 0.5))
        for i in ids:
            coarse[i] += idf[w]
    best = sorted(coarse, key=lambda i: (-coarse[i], i))[:CANDIDATES]
    if not best:
        return []
    rows = [r for r in world.rows(f"SELECT * FROM docs WHERE id IN ({','.join('?' * len(best))})", tuple(best))
            if r["event_id"] not in view.hidden]
    toks = {r["id"]: [w.casefold() for w in _WORD.findall(f"{r['title'] or ''} {r['title'] or ''} {r['body'] or ''}")]
            for r in rows}
    avg = sum(len(v) for v in toks.values()) / max(1, len(toks)) or 1.0
    k1, b = 1.2, 0.75
    for r in rows:
        tf = Counter(w for w in toks[r["id"]] if w in idf)
        length = len(toks[r["id"]])
        r["bm25"] = sum(idf[w] * c * (k1 + 1) / (c + k1 * (1 - b + b * length / avg)) for w, c in tf.items())
    rows.sort(key=lambda r: (-r["bm25"], r["ts"], r["id"]))
    return [r for r in rows if r["bm25"] > 0][:limit]


def new_text(body: str) -> str:
    """What a message adds: no quoted lines, no quote header, no signature."""
    m = _SIGNATURE.search("\n" + body)
    if m:
        body = ("\n" + body)[:m.start()]
    lines = [ln for ln in body.splitlines() if not ln.lstrip().startswith(">") and not _QUOTE_HEAD.match(ln)]
    return "\n".join(lines).strip()[:MAX_TEXT]


# --- ticket_triage -----------------------------------------------------------------------------------------

def _issues(view: WorldView, query: str, own: str) -> list[str]:
    """Keys of the issues nearest `query` (by their text or a comment's), best first, without `own`."""
    keys = [r["thread"] if r["cls"] == "comment" else r["native_id"]
            for r in rank(view, query, ("issue", "comment"), limit=NEIGHBOURS * 3)]
    return [k for k in dict.fromkeys(keys) if k and k != own][:NEIGHBOURS]


def nearest_issue(task: Task, view: WorldView | None, worlds_dir: Path) -> Baseline:
    ref = next((c for c in _calls(task) if isinstance(c, A.JiraUpdate)), None)
    if ref is None or view is None:
        return Baseline("nearest_issue", source="no issue or no world")
    me = view.issue(ref.key) or {}
    for key in _issues(view, _query(me.get("summary"), me.get("description")), ref.key):
        f = (view.issue(key) or {}).get("fields") or {}
        values = {"type": f.get("issuetype"), "priority": f.get("priority"), "assignee": f.get("assignee"),
                  "components": [c for c in f.get("components") or [] if isinstance(c, str)] or None}
        values = {k: v for k, v in values.items() if isinstance(v, (str, list)) and v}
        call = _valid(A.JiraUpdate, key=ref.key, **values) if values else None
        if call is None:
            continue
        return Baseline("nearest_issue", [call], key)
    return Baseline("nearest_issue", source="no earlier issue with triage fields")


# --- commit_link -------------------------------------------------------------------------------------------

def bm25(query: str, docs: list[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 of every document for the query's words (the same ranking function as the world's FTS5)."""
    toks = [[w.casefold() for w in _WORD.findall(d)] for d in docs]
    n = len(toks)
    if not n:
        return []
    avg = sum(len(t) for t in toks) / n or 1.0
    df = Counter(w for t in toks for w in set(t))
    q = set(w.casefold() for w in _WORD.findall(query))
    out = []
    for t in toks:
        tf = Counter(t)
        s = 0.0
        for w in q:
            if tf[w]:
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                s += idf * tf[w] * (k1 + 1) / (tf[w] + k1 * (1 - b + b * len(t) / avg))
        out.append(s)
    return out


def commits_at(repo: Path, refs: dict[str, str]) -> list[tuple[str, str]]:
    """(SHA, message, touched paths and the first DIFF_CHARS of its diff) of every commit the refs reach,
    newest first (merges: message and paths only)."""
    tips = sorted(set(refs.values()))
    if not tips:
        return []
    out = git(repo, "log", "-p", "--unified=0", "--no-color", "--format=%x1e%H%n%B%x1f", *tips)
    commits = []
    for chunk in out.split("\x1e")[1:]:
        sha, _, rest = chunk.partition("\n")
        message, _, diff = rest.partition("\x1f")
        lines = [ln for ln in diff.splitlines() if ln.startswith(("+", "-", "diff --git"))]
        commits.append((sha.strip(), f"{message}\n" + "\n".join(lines)[:DIFF_CHARS]))
    return commits


def repo_paths(worlds_dir: Path) -> dict[str, Path]:
    """World repository slug -> its path (worlds/<dataset>/world.json)."""
    meta = Path(worlds_dir) / "world.json"
    if not meta.exists():
        return {}
    return {r.get("slug") or Path(r["path"]).stem: Path(r["path"])
            for r in json.loads(meta.read_text())["repos"].values()}


def nearest_commit(task: Task, view: WorldView | None, worlds_dir: Path) -> Baseline:
    key = re.match(r"Issue (\S+):", task.prompt)
    issue = view.issue(key.group(1)) if key and view is not None else None
    query = _query(issue["summary"], issue["description"]) if issue else task.prompt.split("\n\nThis issue")[0]
    paths = repo_paths(worlds_dir)
    best: tuple[float, int, str] | None = None
    for slug, refs in sorted(((task.world.get("git") or {}).get("refs") or {}).items()):
        if slug not in paths:
            continue
        commits = commits_at(paths[slug], refs)
        for i, score in enumerate(bm25(query, [text for _, text in commits])):
            if score > 0 and (best is None or (-score, i) < (-best[0], best[1])):
                best = (score, i, commits[i][0])
    if best is None:
        return Baseline("nearest_commit", source="no commit shares a word with the issue")
    return Baseline("nearest_commit", [A.Answer(sha=best[2])], best[2][:12])


TITLE_STOP = frozenset("""the and for with when from that this into not does should fails error issue bug
crash crashes wrong broken missing some when""".split())


def title_words(title: str) -> list[str]:
    """The words of an issue's summary an agent would `git log --grep` for, most specific first: identifiers
    (with `_`, a digit, a dot or an inner capital: a function, a file, a version), then the longer words; no
    word under four letters, none of the summary's everyday words (TITLE_STOP)."""
    words = list(dict.fromkeys(re.findall(r"[A-Za-z_][\w.-]*[A-Za-z0-9_]", title)))
    words = [w for w in words if len(w) >= 4 and w.casefold() not in TITLE_STOP]

    def specific(w: str) -> tuple:
        ident = bool(re.search(r"[_\d.]|[a-z][A-Z]", w))
        return (not ident, -len(w))

    return sorted(words, key=specific)


def title_grep(task: Task, view: WorldView | None, worlds_dir: Path) -> Baseline:
    """`git log --all -i --grep=<word>` in the task's repository at its cutoff, for the words of the issue's
    summary in `title_words` order, answering the newest commit of the first word that finds any: the search an
    agent tries first. Run in the sandbox like an agent (the repository is the task's, refs at the cutoff)."""
    key = re.match(r"Issue (\S+): (.*)", task.prompt)
    issue = view.issue(key.group(1)) if key and view is not None else None
    title = (issue or {}).get("summary") or (key.group(2) if key else "")
    repos = sorted((task.world.get("git") or {}).get("refs") or {})
    words = title_words(title or "")
    if not repos or not words:
        return Baseline("title_grep", source="no repository or no summary word to search for")
    loop = " ".join(shlex.quote(w) for w in words[:8])
    shell = (f"cd ~/{shlex.quote(repos[0])} && sha= && for w in {loop}; do "
             "sha=$(git log --all --format=%H -i -F --grep=\"$w\" | head -n 1); [ -n \"$sha\" ] && break; done; "
             "if [ -n \"$sha\" ]; then company answer --sha \"$sha\"; fi; true")
    return Baseline("title_grep", source=f"git log --grep of {', '.join(words[:8])}", shell=shell)


# --- communication -----------------------------------------------------------------------------------------

def _respond(task: Task, text: str) -> list[A.Tool]:
    """The reference's calls with another text, addressed by default (a reply goes to the sender)."""
    out = []
    for call in _calls(task):
        if isinstance(call, A.MailReply):
            out.append(A.MailReply(message_id=call.message_id, body=text))
        elif isinstance(call, A.JiraComment):
            out.append(call.model_copy(update={"body": text}))
        elif isinstance(call, A.SlackPost):
            out.append(call.model_copy(update={"text": text}))
    return out


def nearest_mail_reply(task: Task, view: WorldView | None, worlds_dir: Path) -> Baseline:
    request = task.reference.get("request")
    me = view.mail(request) if request and view is not None else None
    if me is None:
        return Baseline("nearest_reply", source="no request or no world")
    for hit in rank(view, _query(me["subject"], new_text(me["body"] or "")), ("mail",)):
        if hit["native_id"] == me["message_id"]:
            continue
        msg = view.mail(hit["native_id"]) or {}
        for later in msg.get("thread_messages") or []:
            if later["message_id"] in (me["message_id"], hit["native_id"]):
                continue
            reply = view.mail(later["message_id"]) or {}
            if (reply.get("in_reply_to") or "").strip().strip("<>") != hit["native_id"]:
                continue
            text = new_text(reply.get("body") or "")
            if text:
                return Baseline("nearest_reply", _respond(task, text), later["message_id"])
    return Baseline("nearest_reply", source="no earlier message with a reply")


def nearest_chat_reply(task: Task, view: WorldView | None, worlds_dir: Path) -> Baseline:
    channel, ts = task.reference.get("channel"), task.reference.get("question_ts")
    if view is None or not channel or not ts:
        return Baseline("nearest_reply", source="no question or no world")
    question = next((m for m in view.chat_history(channel, thread_ts=ts, limit=200) if m["ts"] == ts), None)
    if question is None:
        return Baseline("nearest_reply", source="the question is not in the world")
    for hit in rank(view, _query(question["text"]), ("chat",)):
        place, at = hit["place"], hit["chat_ts"]
        if (place, at) == (channel, ts) or not at:
            continue
        later = [m for m in view.chat_history(place, thread_ts=hit["chat_thread"] or at, limit=200)
                 if m["ts"] and float(m["ts"]) > float(at)]
        if not later and (hit["chat_thread"] or at) == at:   # no thread: the next messages of the channel
            later = [m for m in view.chat_history(place, limit=200) if m["ts"] and float(m["ts"]) > float(at)][:3]
        for m in later:
            if m["author"] != hit["author"] and (m["text"] or "").strip() and (place, m["ts"]) != (channel, ts):
                return Baseline("nearest_reply", _respond(task, new_text(m["text"]) or m["text"]), f"{place}:{m['ts']}")
    return Baseline("nearest_reply", source="no earlier message with a reply")


def nearest_resolution(task: Task, view: WorldView | None, worlds_dir: Path) -> Baseline:
    calls = _calls(task)
    update = next((c for c in calls if isinstance(c, A.JiraUpdate)), None)
    if update is None or view is None:
        return Baseline("nearest_resolution", source="no issue or no world")
    wanted = [k for k in ("resolution", "status") if getattr(update, k)]
    me = view.issue(update.key) or {}
    for key in _issues(view, _query(me.get("summary"), me.get("description")), update.key):
        other = view.issue(key) or {}
        f = other.get("fields") or {}
        values = {k: f.get(k) for k in wanted if isinstance(f.get(k), str) and f.get(k)}
        comments = [c for c in other.get("comments") or [] if (c.get("body") or "").strip()]
        if "resolution" in wanted and "resolution" not in values or not values or not comments:
            continue   # not resolved by the cutoff, or nothing was said
        set_ = _valid(A.JiraUpdate, key=update.key, **values)
        say = _valid(A.JiraComment, key=update.key, body=comments[-1]["body"][:MAX_TEXT])
        if set_ is None or say is None:
            continue
        return Baseline("nearest_resolution", [set_, say], key)
    return Baseline("nearest_resolution", source="no earlier resolved issue with a comment")
