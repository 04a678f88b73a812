"""The company as it stood at a moment: one world file per dataset, and a view of it at any cutoff.

A dataset's world is built once from its anonymized events (`worlds/<dataset>/world.sqlite`): every issue,
comment, field change, e-mail and chat message, with a BM25 full-text index (SQLite FTS5, part of Python's
sqlite3; DuckDB's fts extension would download itself on first use). A task never gets a copy of it: it gets
a cutoff T and the events it hides, and every read goes through `WorldView(world, T, hidden)`.

Invariants:
- Only anonymized events are read (the world is built from `anonymized_events`), and commit SHAs named in
  text are translated to the SHAs of the world's rewritten repositories, so the text and the git history of
  one world agree.
- A view returns nothing dated after its cutoff, by any method: searches, issue pages, threads, channel
  histories, and the texts the hidden-facts check reads. Hidden events are never returned either.
- An issue is shown as it stood at the cutoff: every changelog item after it is undone (the value it had
  before), fields that an export records only as of the day it was made (counts, `updated`) are never
  shown, and fields set when an issue is resolved (status, resolution, resolution and close dates, fix
  versions) are shown only when the issue was resolved by the cutoff or the changelog says what they were.
  These are field semantics of issue trackers (named once, below), not branches on a source.
- Every result is bounded (rows and characters), so no call returns an unbounded amount of text.
- Rebuilt only when its inputs change (a content key over the events file and the SHA map).
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import json
import math
import re
import sqlite3
import threading
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from warehouse.ids import content_hash
from warehouse.schemas import Event

WORLD_VERSION = 4   # 3: documents say whether a machine wrote them (`automated`); 4: a ticket's references
UTC = dt.UTC

# What an event is in the world, from its medium (the extractor's normalization, Event.medium): every mail event is
# a message of a mailbox, every chat event a message of a channel (a new chat connector is served as is, whatever
# its kinds), commits are read from the repositories; a tracker's events are an issue, a comment on one or a
# change of one field by their kind, in the normalized vocabulary the tracker connectors share (other tracker
# events, e.g. a timeline's cross-references, are no document). An event without a medium (built by hand) is
# placed by the same vocabulary and the kinds `email` and `message`.
ISSUE_KINDS = {"issue_created", "pr_created"}
COMMENT_KINDS = {"comment"}
# a ticket's history: its field changes, and the commits and other tickets that referenced it (a tracker's
# timeline: "referenced this issue in commit 1a2b3c4", "mentioned this in #217"), which the tracker showed its
# readers as they happened; such a change's text is the commit or ticket it names, so search finds it
REFERENCE_KINDS = {"referenced", "cross_reference"}
CHANGE_KINDS = {"field_changed", *REFERENCE_KINDS}
_TRACKER = {**dict.fromkeys(ISSUE_KINDS, "issue"), **dict.fromkeys(COMMENT_KINDS, "comment"),
            **dict.fromkeys(CHANGE_KINDS, "change")}
_WITHOUT_MEDIUM = {**_TRACKER, "email": "mail", "message": "chat"}

# Issue-tracker field semantics (Jira REST v2 and GitHub REST attribute names, as the extractors store them).
EXPORT_TIME_FIELDS = {"updated", "updated_at", "comment_total", "changelog_total", "comments", "reactions",
                      "subtasks"}
RESOLUTION_FIELDS = {"status", "resolution", "resolutiondate", "resolved_at", "resolution_evidence", "closed_at",
                     "closed_by", "state", "state_reason", "merged_at", "merged_by", "merge_commit_sha",
                     "fixVersions"}
INTERNAL_FIELDS = {"people", "id", "key", "encoding_error", "html_url", "bot"}
NORMALIZED_FIELDS = {"resolved_at", "resolution_evidence"}  # read by the world, not shown to the agent
MULTI_FIELDS = {"components", "fixVersions", "versions", "labels"}
# changelog item field names (case- and space-insensitive) -> the attribute they change
CHANGELOG_FIELDS = {"issuetype": "issuetype", "type": "issuetype", "priority": "priority", "status": "status",
                    "resolution": "resolution", "component": "components", "components": "components",
                    "fixversion": "fixVersions", "fixversions": "fixVersions", "version": "versions",
                    "versions": "versions", "affectsversion": "versions", "labels": "labels",
                    "assignee": "assignee", "reporter": "reporter", "summary": "summary",
                    "description": "description", "priorityid": "priority"}

MAX_RESULTS = 50
MAX_BODY = 20_000
MAX_SNIPPET = 300
_HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
_WORD = re.compile(r"\w+", re.UNICODE)
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)  # what the unicode61 tokenizer keeps as one token

# Storage (a world must stay within about 2x its anonymized events): documents are sorted by thread and time
# and their bodies and metadata compressed together in blocks of about BLOCK bytes (zlib level 9), so a reply
# that quotes its thread compresses against it (per-document compression left mail archives at 2.5x their
# Parquet events); the full-text index keeps no positions (detail=none, contentless). Without positions FTS5
# has no phrase queries: `phrase_hits` finds candidates with an AND query and checks the words in the text,
# and snippets are cut in Python. Reading a document decompresses its block (cached per thread).
BLOCK = 128 * 1024
SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE docs(
    id INTEGER PRIMARY KEY, event_id BLOB, cls TEXT, kind TEXT, source TEXT, native_id TEXT,
    thread TEXT, parent BLOB, ts REAL, author TEXT, author_handle TEXT, place TEXT, chat_ts TEXT,
    chat_thread TEXT, title TEXT, automated TEXT, block INTEGER, start INTEGER, size INTEGER);
CREATE TABLE blocks(id INTEGER PRIMARY KEY, data BLOB);
CREATE INDEX docs_thread ON docs(thread);
CREATE INDEX docs_native ON docs(native_id);
CREATE INDEX docs_place ON docs(place, ts);
CREATE VIRTUAL TABLE fts USING fts5(title, body, content='', detail=none,
                                    tokenize='unicode61 remove_diacritics 2');
CREATE TEMP TABLE staging(n INTEGER PRIMARY KEY, sort TEXT, row TEXT);
"""


def _cls(e: Event) -> str | None:
    """What `e` is in the world (see ISSUE_KINDS): issue, comment, change, mail, chat, or None (no document)."""
    if e.medium in ("mail", "chat"):
        return e.medium
    if e.medium == "tracker":
        return _TRACKER.get(e.kind)
    return None if e.medium else _WITHOUT_MEDIUM.get(e.kind)


def _epoch(ts: dt.datetime) -> float:
    return ts.astimezone(UTC).timestamp()


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, UTC).isoformat()


class ShaTranslator:
    """Commit SHAs (full, or an unambiguous prefix of at least 7) named in text -> the same-length prefix of
    the commit's SHA in the world's rewritten history."""

    def __init__(self, sha_map: dict[str, str]):
        self.raw = sorted(sha_map)
        self.map = sha_map

    def __call__(self, text: str | None) -> str | None:
        if not text or not self.raw:
            return text
        return _HEX.sub(self._one, text)

    def _one(self, m: re.Match) -> str:
        token = m.group(0)
        i = bisect.bisect_left(self.raw, token)
        hits = []
        while i < len(self.raw) and self.raw[i].startswith(token) and len(hits) < 2:
            hits.append(self.raw[i])
            i += 1
        return self.map[hits[0]][:len(token)] if len(hits) == 1 else token


def world_key(events_digest: str, sha_map: dict[str, str]) -> str:
    """The content key of a world: the digest of its anonymized events' content (`Store.content_digest`: without
    the run ids, so two runs of the same input give one key, and every task id that names it stays) and the SHA
    map (and this module's version)."""
    return content_hash("world", WORLD_VERSION, events_digest, sorted(sha_map.items()))


def build_world(events: Iterable[Event], dest: Path, key: str, sha_map: dict[str, str] | None = None) -> Path:
    """Write the world file for `events` (anonymized) at `dest`, atomically; reused when `key` matches."""
    if dest.exists():
        try:
            with sqlite3.connect(f"file:{dest}?mode=ro", uri=True) as con:
                row = con.execute("SELECT value FROM meta WHERE key='key'").fetchone()
            if row and row[0] == key:
                return dest
        except sqlite3.Error:
            pass
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    translate = ShaTranslator(sha_map or {})
    con = sqlite3.connect(tmp)
    try:
        con.executescript(SCHEMA)
        seen: set[str] = set()
        _stage(con, (_doc_row(e, cls, translate) for e in events
                     if (cls := _cls(e)) is not None and not (e.event_id in seen or seen.add(e.event_id))))
        _write(con)
        con.execute("INSERT INTO meta VALUES ('key', ?)", (key,))
        con.execute("INSERT INTO meta VALUES ('version', ?)", (str(WORLD_VERSION),))
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
    tmp.replace(dest)
    return dest


DOC_COLUMNS = ("event_id", "cls", "kind", "source", "native_id", "thread", "parent", "ts", "author", "author_handle",
               "place", "chat_ts", "chat_thread", "title", "body", "meta", "automated")


def export_documents(world: Path, out: Path) -> int:
    """Every document of a world file as JSON lines (the published form of a world); returns the count."""
    n = 0
    w = World(world)
    with open(out, "w", encoding="utf-8") as f:
        for row in w.rows("SELECT * FROM docs ORDER BY id"):
            f.write(json.dumps({c: row[c] for c in DOC_COLUMNS}, ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    return n


AS_OF = "_as_of"   # an issue document of a cut world (`cut_documents`): its meta is its state at this moment


def cut_documents(world: Path, cutoff: dt.datetime, hidden: Iterable[str], out: Path) -> int:
    """The documents a view at `cutoff` without `hidden` reaches, as JSON lines (the published form), for a world
    that holds nothing after the cutoff (a task folder that carries its world, e.g. Harbor's): every document
    dated at or before it and not hidden, each issue as it stood then (its fields with later changes undone,
    marked AS_OF, so `WorldView.issue` shows them as they are: the changes that undid them are not there).
    Returns the count."""
    view = World(world).at(cutoff, hidden)
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        for row in view._rows("SELECT * FROM docs WHERE ts <= ? ORDER BY id", (view.t,)):
            doc = {c: row[c] for c in DOC_COLUMNS}
            if row["cls"] == "issue":
                issue = view.issue(row["native_id"])
                if issue is None:
                    continue
                doc.update(title=issue["summary"], body=issue["description"],
                           meta={**issue["fields"], AS_OF: cutoff.isoformat()})
            f.write(json.dumps(doc, ensure_ascii=False, sort_keys=True, default=str) + "\n")
            n += 1
    return n


def import_documents(documents: Path, dest: Path) -> Path:
    """A world file (with its full-text index) from published JSON lines; reused when already built."""
    key = hashlib.sha256(documents.read_bytes()).hexdigest()
    if dest.exists():
        try:
            with sqlite3.connect(f"file:{dest}?mode=ro", uri=True) as con:
                if (con.execute("SELECT value FROM meta WHERE key='key'").fetchone() or [""])[0] == key:
                    return dest
        except sqlite3.Error:
            pass
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.executescript(SCHEMA)
        with open(documents, encoding="utf-8") as f:
            _stage(con, (tuple(json.loads(line).get(c) for c in DOC_COLUMNS) for line in f))
        _write(con)
        con.execute("INSERT INTO meta VALUES ('key', ?)", (key,))
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
    tmp.replace(dest)
    return dest


def _stage(con: sqlite3.Connection, rows: Iterable[tuple]) -> None:
    """Documents (DOC_COLUMNS tuples, meta a dict) into the staging table, keyed for thread-and-time order."""
    batch = []
    for row in rows:
        d = dict(zip(DOC_COLUMNS, row))
        sort = f"{d['thread'] or d['native_id']}\x00{float(d['ts']):020.6f}"
        batch.append((sort, json.dumps(d, ensure_ascii=False, default=str)))
        if len(batch) >= 5000:
            con.executemany("INSERT INTO staging(sort, row) VALUES (?, ?)", batch)
            batch = []
    con.executemany("INSERT INTO staging(sort, row) VALUES (?, ?)", batch)


def _write(con: sqlite3.Connection) -> None:
    """Staged documents -> docs rows, compressed blocks and the index, in thread-and-time order."""
    docs: list[tuple] = []
    index: list[tuple] = []
    payload, block = bytearray(), 1
    columns = ", ".join(c for c in DOC_COLUMNS if c not in ("body", "meta"))

    def flush() -> None:
        nonlocal payload, block
        if payload:
            con.execute("INSERT INTO blocks(id, data) VALUES (?, ?)", (block, zlib.compress(bytes(payload), 9)))
            block, payload = block + 1, bytearray()
        con.executemany(f"INSERT INTO docs(id, {columns}, block, start, size) "
                        f"VALUES ({','.join('?' * (len(DOC_COLUMNS) + 2))})", docs)
        con.executemany("INSERT INTO fts(rowid, title, body) VALUES (?, ?, ?)", index)
        docs.clear()
        index.clear()

    staged = con.execute("SELECT row FROM staging ORDER BY sort, n")
    for n, (raw,) in enumerate(iter(staged.fetchone, None), 1):
        d = json.loads(raw)
        body = (d["body"] or "").encode("utf-8")
        meta = d["meta"] if isinstance(d["meta"], dict) else json.loads(d["meta"] or "{}")
        data = body + b"\0" + json.dumps(meta, ensure_ascii=False, sort_keys=True, default=str).encode("utf-8")
        values = [bytes.fromhex(d[c]) if c in ("event_id", "parent") and _is_hex(d[c]) else d[c]
                  for c in DOC_COLUMNS if c not in ("body", "meta")]
        docs.append((n, *values, block, len(payload), len(data)))
        index.append((n, d["title"] or "", d["body"] or ""))
        payload += data
        if len(payload) >= BLOCK:
            flush()
    flush()
    con.execute("DROP TABLE staging")


def _is_hex(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _decoded(cursor: sqlite3.Cursor, row: tuple) -> dict:
    """A row as a dict, ids as hex."""
    return {name: value.hex() if name in ("event_id", "parent") and isinstance(value, bytes) else value
            for (name, *_), value in zip(cursor.description, row)}


def _doc_row(e: Event, cls: str, translate: ShaTranslator) -> tuple:
    a = e.attrs
    if cls == "issue":
        place = a.get("project") or a.get("repo") or (e.native_id.split("-")[0] if "-" in e.native_id else "")
        meta = {k: v for k, v in a.items() if k not in INTERNAL_FIELDS}
    elif cls in ("comment", "change"):
        place = ""
        meta = {k: a.get(k) for k in ("field", "fromString", "toString", "from", "to", "event") if k in a}
        if e.kind in REFERENCE_KINDS:
            source = a.get("source")
            named = {"commit": translate(e.artifacts[0]) if e.artifacts else None,
                     "source": source.get("ref") if isinstance(source, dict) else None}
            meta.update({k: v for k, v in named.items() if v})
            e = e.model_copy(update={"body": e.body or " ".join(v for v in named.values() if v)})
    elif cls == "mail":
        people = [p for p in a.get("people") or [] if isinstance(p, dict)]
        meta = {"message_id": e.native_id, "in_reply_to": a.get("in_reply_to"), "list_id": a.get("list_id"),
                **{role: [_addr(p) for p in people if p.get("role") == role] for role in ("from", "to", "cc")}}
        place = a.get("list_id") or ""
    else:
        place = a.get("channel_name") or a.get("channel_id") or ""
        meta = {"channel": place, "ts": a.get("ts"), "thread_ts": a.get("thread_ts"), "subtype": a.get("subtype"),
                "bot": a.get("bot")}
    chat = cls == "chat"
    return (e.event_id, cls, e.kind, e.source, e.native_id, e.thread_key, e.parent_id, _epoch(e.ts),
            e.actor_name, e.actor, place, a.get("ts") if chat else None, a.get("thread_ts") if chat else None,
            translate(e.title), translate((e.body or "")[:200_000]), meta, e.automated or "")


def _addr(p: dict) -> str:
    name, email = p.get("display_name") or "", p.get("email") or ""
    return f"{name} <{email}>" if name and email else (email or name)


def fts_query(text: str) -> str | None:
    """A free-text query as one FTS5 expression over the index's own tokens: its parts (`fts_parts`) OR-ed;
    None when the text has no word."""
    parts = fts_parts(text)
    return " OR ".join(parts) if parts else None


def fts_parts(text: str) -> list[str]:
    """The parts of a free-text query, each an FTS5 expression: a word, or a quoted phrase as all its words
    (AND: the index keeps no positions); at most 32."""
    phrases = re.findall(r'"([^"]+)"', text)
    rest = re.sub(r'"[^"]*"', " ", text)
    parts = []
    for p in phrases:
        words = list(dict.fromkeys(_TOKEN.findall(p.casefold())))[:16]
        if words:
            parts.append("(" + " AND ".join(f'"{w[:100]}"' for w in words) + ")")
    parts += [f'"{w[:100]}"' for w in dict.fromkeys(_TOKEN.findall(rest.casefold()))]
    return list(dict.fromkeys(parts))[:32]


class World:
    """One dataset's world file, opened read-only; thread-safe (one connection per thread)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: no world file; run the tasks stage first")
        self._local = threading.local()
        self._people: dict[str, str] | None = None    # WorldView.people
        self._names_re = None                         # WorldView.name_pattern

    @property
    def con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            con.row_factory = _decoded
            self._local.con = con
        return con

    def key(self) -> str:
        row = self.con.execute("SELECT value FROM meta WHERE key='key'").fetchone()
        return row["value"] if row else ""

    def rows(self, sql: str, args: tuple = ()) -> list[dict]:
        """Query the documents; a row that names its block gets its `body` (str) and `meta` (dict) back."""
        out = self.con.execute(sql, args).fetchall()
        for r in out:
            if r.get("block") is not None:
                data = self._block(r["block"])[r["start"]:r["start"] + r["size"]]
                body, _, meta = data.partition(b"\0")
                r["body"], r["meta"] = body.decode("utf-8"), json.loads(meta)
        return out

    def _block(self, n: int) -> bytes:
        cache = getattr(self._local, "blocks", None)
        if cache is None:
            cache = self._local.blocks = {}
        if n not in cache:
            if len(cache) >= 32:
                cache.pop(next(iter(cache)))
            row = self.con.execute("SELECT data FROM blocks WHERE id = ?", (n,)).fetchone()
            cache[n] = zlib.decompress(row["data"])
        return cache[n]

    def at(self, cutoff: dt.datetime, hidden: Iterable[str] = ()) -> WorldView:
        return WorldView(self, cutoff, hidden)


class WorldView:
    """The world at `cutoff`, without the events in `hidden` (see the module docstring)."""

    def __init__(self, world: World, cutoff: dt.datetime, hidden: Iterable[str] = ()):
        self.world = world
        self.cutoff = cutoff
        self.t = _epoch(cutoff)
        self.hidden = frozenset(hidden)

    # -- low level ------------------------------------------------------------------------------------
    def _rows(self, sql: str, args: tuple = ()) -> list[dict]:
        return [r for r in self.world.rows(sql, args) if r["event_id"] not in self.hidden]

    def search(self, query: str, classes: tuple[str, ...], limit: int = 10, place: str | None = None) -> list[dict]:
        """BM25-ranked documents of the given classes, dated at or before the cutoff, best first.

        The index keeps no positions or counts (detail=none), and FTS5's own bm25() scores every match 0 without
        them, so the ranking is computed here: BM25 with binary term frequency, sum over the query's parts a
        document holds of idf(part) x (k1 + 1) / (1 + k1 (1 - b + b len/avglen)), k1 = 1.2, b = 0.75, len = the
        document's stored bytes. Document frequencies and lengths count only the documents the view reaches
        (at the cutoff, of these classes), so the ranking says nothing of what came later."""
        parts = fts_parts(query)
        if not parts:
            return []
        limit = max(1, min(int(limit), MAX_RESULTS))
        where = f"d.ts <= ? AND d.cls IN ({','.join('?' * len(classes))})" + (" AND d.place = ?" if place else "")
        scope: tuple = (self.t, *classes, *((place,) if place else ()))
        row = self.world.con.execute(f"SELECT count(*) AS n, avg(size) AS a FROM docs d WHERE {where}",
                                     scope).fetchone()
        total, avg = row["n"], row["a"]
        if not total:
            return []
        weights = []
        for part in parts:
            df = self.world.con.execute(f"SELECT count(*) AS n FROM fts JOIN docs d ON d.id = fts.rowid "
                                        f"WHERE fts MATCH ? AND {where}", (part, *scope)).fetchone()["n"]
            if df:
                weights.append((part, math.log(1 + (total - df + 0.5) / (df + 0.5))))
        if not weights:
            return []
        hits = " UNION ALL ".join("SELECT rowid AS id, ? AS w FROM fts WHERE fts MATCH ?" for _ in weights)
        sql = (f"WITH hits(id, w) AS ({hits}) SELECT d.*, sum(h.w) * 2.2 / (1 + 1.2 * (0.25 + 0.75 * d.size / ?)) "
               f"AS score FROM hits h JOIN docs d ON d.id = h.id WHERE {where} GROUP BY d.id "
               f"ORDER BY score DESC, d.ts DESC, d.id LIMIT ?")
        args = (*(x for part, w in weights for x in (w, part)), max(avg or 1.0, 1.0), *scope,
                limit + len(self.hidden))
        out = self._rows(sql, args)[:limit]
        for r in out:
            r["snip"] = snippet(r["body"] or r["title"] or "", query)
        return out

    def phrase_hits(self, words: list[str], limit: int = 5) -> list[dict]:
        """Documents reachable at the cutoff that hold `words` as a run of words, case-insensitive (for the
        hidden-facts check): the index finds the documents holding all of them, the text decides."""
        want = [t for w in words for t in _TOKEN.findall(w.casefold())]
        if not want:
            return []
        q = " AND ".join(f'"{w}"' for w in dict.fromkeys(want))
        rows = self._rows("SELECT d.* FROM fts JOIN docs d "
                          "ON d.id = fts.rowid WHERE fts MATCH ? AND d.ts <= ? LIMIT 500", (q, self.t))
        out = []
        for r in rows:
            text = _TOKEN.findall(f"{r['title'] or ''}\n{r['body'] or ''}".casefold())
            if any(text[i:i + len(want)] == want for i in range(len(text) - len(want) + 1)):
                out.append({"event_id": r["event_id"], "native_id": r["native_id"], "cls": r["cls"]})
                if len(out) >= limit:
                    break
        return out

    def token_hits(self, token: str, limit: int = 3, content: bool = False) -> list[dict]:
        """Documents reachable at the cutoff that hold `token` (case-insensitive; as a prefix of a longer word,
        so a SHA prefix finds the full SHA). `content`: only documents a person wrote (no join notice, bot post
        or auto-reply: `automated`), the only evidence that the company knew something."""
        words = _TOKEN.findall(token.casefold())
        if not words:
            return []
        q = " AND ".join(f'"{w}"' for w in words[:-1]) + (" AND " if len(words) > 1 else "") + f'"{words[-1]}"*'
        human = " AND coalesce(d.automated, '') = ''" if content else ""
        rows = self._rows("SELECT d.* FROM fts JOIN docs d "
                          f"ON d.id = fts.rowid WHERE fts MATCH ? AND d.ts <= ?{human} LIMIT ?", (q, self.t, 500))
        needle = token.casefold()
        out = [{"event_id": r["event_id"], "native_id": r["native_id"], "cls": r["cls"]} for r in rows
               if needle in f"{r['title'] or ''}\n{r['body'] or ''}".casefold()]
        return out[:limit]

    def authored(self, name: str, limit: int = 3, content: bool = False) -> list[dict]:
        """Documents reachable at the cutoff written by `name` (a pseudonym, case-insensitive): a person the
        world knows as an author (a sender, a commenter) though no text names them; `mail_search` and `jira
        show` show who wrote what. `content`: only what the person wrote, not a notice a machine wrote in their
        name (a channel-join notice is membership, not something they said)."""
        name = " ".join(name.split())
        if not name:
            return []
        human = " AND coalesce(automated, '') = ''" if content else ""
        rows = self._rows("SELECT event_id, native_id, cls FROM docs WHERE author = ? COLLATE NOCASE AND ts <= ?"
                          f"{human} LIMIT ?", (name, self.t, limit + len(self.hidden)))
        return [{"event_id": r["event_id"], "native_id": r["native_id"], "cls": r["cls"]} for r in rows][:limit]

    def name_pattern(self) -> re.Pattern | None:
        """One pattern finding the people of `people()` in a text: a full name (two words or more) or a mention
        (`@handle`, `[~handle]`); group 1 is the name, group 2 the handle. None when the world has no author."""
        if getattr(self.world, "_names_re", None) is None:
            people = self.people()
            fulls = sorted({n for n in people if len(n.split()) >= 2}, key=lambda n: (-len(n), n))
            handles = sorted({h for h in people.values() if h}, key=lambda h: (-len(h), h))
            parts = []
            if fulls:
                parts.append(r"(?<![\w~@])(" + "|".join(map(re.escape, fulls)) + r")(?![\w])")
            if handles:
                parts.append(r"(?:@|\[~)(" + "|".join(map(re.escape, handles)) + r")(?![\w])")
            self.world._names_re = re.compile("|".join(parts), re.I) if parts else False
        return self.world._names_re or None

    def people(self) -> dict[str, str]:
        """Every author of the world (any time: a name is a name, whenever it wrote) -> their handle ("" when
        none): the people a response can name (graders.communication counts the candidates a reply names)."""
        cache = self.world._people
        if cache is None:
            cache = {}
            for r in self.world.con.execute("SELECT author, author_handle FROM docs WHERE author IS NOT NULL "
                                            "AND author != '' ORDER BY id").fetchall():
                handle = str(r["author_handle"] or "").split(":", 1)[-1]
                if not cache.get(r["author"]):
                    cache[r["author"]] = handle
            self.world._people = cache
        return cache

    def texts(self) -> Iterator[tuple[str, str]]:
        """(native id, title + body) of every document reachable at the cutoff."""
        for r in self._rows("SELECT * FROM docs WHERE ts <= ? ORDER BY id", (self.t,)):
            yield r["native_id"], f"{r['title'] or ''}\n{r['body'] or ''}"

    # -- issues ---------------------------------------------------------------------------------------
    def issue_search(self, query: str, limit: int = 10, project: str | None = None) -> list[dict]:
        """Issues matching `query` in their text or their comments up to the cutoff, best first, one row each."""
        hits = self.search(query, ("issue", "comment"), limit=MAX_RESULTS)
        out: dict[str, dict] = {}
        for h in hits:
            key = h["thread"] if h["cls"] == "comment" else h["native_id"]
            if key in out or not key:
                continue
            issue = self.issue(key)
            if issue is None or (project and issue["project"] != project):
                continue
            out[key] = {"key": key, "summary": issue["summary"], "status": issue["fields"].get("status"),
                        "created": issue["created"], "match": (h["snip"] or "")[:MAX_SNIPPET]}
            if len(out) >= limit:
                break
        return list(out.values())

    def issue(self, key: str) -> dict | None:
        """An issue as it stood at the cutoff: fields, description, comments and history up to then."""
        rows = self._rows("SELECT * FROM docs WHERE native_id = ? AND cls = 'issue' AND ts <= ?", (key, self.t))
        if not rows:
            return None
        head = rows[0]
        # every change, hidden or not: undoing the ones after the cutoff needs them all
        everything = self.world.rows("SELECT * FROM docs WHERE thread = ? AND cls IN ('comment', 'change') "
                                     "ORDER BY ts, id", (head["thread"] or key,))
        thread = [r for r in everything if r["event_id"] not in self.hidden]
        fields = dict(head["meta"])
        changes = [r for r in thread if r["cls"] == "change"]
        if AS_OF in fields:     # a cut world's issue: already as it stood (its later changes are not there)
            state = {k: v for k, v in fields.items() if k != AS_OF} | {"summary": head["title"],
                                                                       "description": head["body"]}
        else:
            state = issue_state(fields, [(r["ts"], r["meta"]) for r in everything if r["cls"] == "change"],
                                self.t, title=head["title"], body=head["body"])
        comments = [{"id": r["native_id"], "author": r["author"], "created": _iso(r["ts"]),
                     "body": (r["body"] or "")[:MAX_BODY]}
                    for r in thread if r["cls"] == "comment" and r["ts"] <= self.t]
        history = [{"at": _iso(r["ts"]), "by": r["author"],
                    **{k: v for k, v in r["meta"].items()
                       if k in ("field", "fromString", "toString", "event", "commit", "source")}}
                   for r in changes if r["ts"] <= self.t]
        return {"key": key, "project": head["place"], "summary": state.pop("summary"),
                "description": (state.pop("description") or "")[:MAX_BODY], "reporter": head["author"],
                "created": _iso(head["ts"]), "fields": state, "comments": comments[-MAX_RESULTS:],
                "history": history[-MAX_RESULTS:]}

    def project(self, project: str) -> dict:
        """The values a project's issues used up to the cutoff (types, priorities, components, people), from
        each issue's fields as they stood then: what a triager knows of the project."""
        rows = self._rows("SELECT event_id, native_id FROM docs WHERE cls = 'issue' AND place = ? AND ts <= ? "
                          "ORDER BY ts DESC LIMIT 2000", (project, self.t))
        seen: dict[str, set] = {"types": set(), "priorities": set(), "components": set(), "assignees": set()}
        for r in rows:
            issue = self.issue(r["native_id"])
            if issue is None:
                continue
            f = issue["fields"]
            for name, attr in (("types", "issuetype"), ("priorities", "priority"), ("assignees", "assignee")):
                if isinstance(f.get(attr), str):
                    seen[name].add(f[attr])
            seen["components"].update(c for c in f.get("components") or [] if isinstance(c, str))
        return {"project": project, "issues": len(rows), **{k: sorted(v) for k, v in seen.items()}}

    def projects(self) -> list[str]:
        return [r["place"] for r in self._rows("SELECT '' AS event_id, place FROM docs WHERE cls = 'issue' AND ts <= ? "
                                               "GROUP BY place ORDER BY place", (self.t,)) if r["place"]]

    def issue_keys(self) -> list[str]:
        return [r["native_id"] for r in self._rows(
            "SELECT event_id, native_id FROM docs WHERE cls = 'issue' AND ts <= ? ORDER BY ts", (self.t,))]

    # -- mail -----------------------------------------------------------------------------------------
    def mail_search(self, query: str, limit: int = 10) -> list[dict]:
        return [{"message_id": h["native_id"], "subject": h["title"], "from": h["author"], "date": _iso(h["ts"]),
                 "match": (h["snip"] or "")[:MAX_SNIPPET]} for h in self.search(query, ("mail",), limit)]

    def mail(self, message_id: str) -> dict | None:
        """One message up to the cutoff, with the other messages of its thread (up to the cutoff)."""
        mid = message_id.strip().strip("<>")
        rows = self._rows("SELECT * FROM docs WHERE native_id = ? AND cls = 'mail' AND ts <= ?", (mid, self.t))
        if not rows:
            return None
        r = rows[0]
        meta = r["meta"]
        thread = self._rows("SELECT event_id, native_id, title, author, ts FROM docs WHERE thread = ? AND cls = 'mail' "
                            "AND ts <= ? ORDER BY ts, id", (r["thread"], self.t))
        return {"message_id": mid, "subject": r["title"], "from": (meta.get("from") or [r["author"]])[0],
                "to": meta.get("to") or [], "cc": meta.get("cc") or [], "date": _iso(r["ts"]),
                "in_reply_to": meta.get("in_reply_to"), "list": meta.get("list_id"), "thread": r["thread"],
                "body": (r["body"] or "")[:MAX_BODY],
                "thread_messages": [{"message_id": t["native_id"], "subject": t["title"], "from": t["author"],
                                     "date": _iso(t["ts"])} for t in thread][-MAX_RESULTS:]}

    # -- chat -----------------------------------------------------------------------------------------
    def chat_search(self, query: str, limit: int = 10, channel: str | None = None) -> list[dict]:
        return [{"channel": h["place"], "ts": h["chat_ts"], "author": h["author"],
                 "date": _iso(h["ts"]), "thread_ts": h["chat_thread"],
                 "match": (h["snip"] or "")[:MAX_SNIPPET]} for h in self.search(query, ("chat",), limit, channel)]

    def channels(self) -> list[dict]:
        rows = self._rows("SELECT '' AS event_id, place, COUNT(*) AS n, MAX(ts) AS last FROM docs WHERE cls = 'chat' "
                          "AND ts <= ? GROUP BY place ORDER BY place", (self.t,))
        return [{"channel": r["place"], "messages": r["n"], "last": _iso(r["last"])} for r in rows]

    def chat_history(self, channel: str, thread_ts: str | None = None, limit: int = 50,
                     before: str | None = None) -> list[dict]:
        """The last `limit` messages of a channel (top level and thread roots) or of one thread, up to the
        cutoff (and before `before`, a message ts, when given), oldest first."""
        limit = max(1, min(int(limit), MAX_RESULTS * 4))
        channel = channel.lstrip("#")
        sql = "SELECT * FROM docs WHERE cls = 'chat' AND place = ? AND ts <= ?"
        rows = self._rows(sql + " ORDER BY ts DESC, id DESC", (channel, self.t))
        out = []
        for r in rows:
            m = r["meta"]
            if thread_ts:
                if m.get("thread_ts") != thread_ts and m.get("ts") != thread_ts:
                    continue
            elif m.get("thread_ts") and m.get("thread_ts") != m.get("ts"):
                continue  # a reply: shown in its thread
            if before and m.get("ts") and float(m["ts"]) >= float(before):
                continue
            out.append({"ts": m.get("ts"), "thread_ts": m.get("thread_ts"), "author": r["author"],
                        "date": _iso(r["ts"]), "subtype": m.get("subtype"), "text": (r["body"] or "")[:MAX_BODY],
                        "replies": self._reply_count(channel, m.get("ts")) if not thread_ts else None})
            if len(out) >= limit:
                break
        return list(reversed(out))

    def _reply_count(self, channel: str, ts: str | None) -> int:
        if not ts:
            return 0
        rows = self._rows("SELECT event_id FROM docs WHERE cls = 'chat' AND place = ? AND ts <= ? AND chat_thread = ? "
                          "AND chat_ts != ?", (channel, self.t, ts, ts))
        return len(rows)


def snippet(text: str, query: str, width: int = 120) -> str:
    """The text around the first word of `query` it holds, that word in [brackets] (bounded)."""
    words = [w for w in _WORD.findall(query.casefold()) if len(w) > 1]
    low = text.casefold()
    at = min((m.start() for w in words for m in [re.search(rf"\b{re.escape(w)}", low)] if m), default=-1)
    if at < 0:
        return text[:MAX_SNIPPET]
    start, end = max(0, at - width), min(len(text), at + width)
    w = next(w for w in words if low.startswith(w, at))
    return ("... " if start else "") + text[start:at] + "[" + text[at:at + len(w)] + "]" + text[at + len(w):end] + \
        (" ..." if end < len(text) else "")


def issue_state(fields: dict, changes: list[tuple[float, dict]], t: float, *, title: str | None,
                body: str | None) -> dict:
    """The fields of an issue at epoch `t`: the stored (export-time) values with every later change undone.

    `changes` are (epoch, changelog item) in time order; an item has `field`, `fromString`, `toString`."""
    state = {k: v for k, v in fields.items() if k not in EXPORT_TIME_FIELDS}
    state["summary"], state["description"] = title, body
    known = set()
    for ts, item in reversed(changes):
        name = CHANGELOG_FIELDS.get(re.sub(r"[\s_-]+", "", str(item.get("field") or "")).casefold())
        if name is None:
            continue
        known.add(name)
        if ts <= t:
            continue
        before, after = item.get("fromString"), item.get("toString")
        if name in MULTI_FIELDS:
            values = list(state.get(name) or [])
            if after in values:
                values.remove(after)
            if before and before not in values:
                values.append(before)
            state[name] = sorted(values)
        elif name in ("assignee", "reporter"):
            state[name] = {"display_name": before} if before else None
        else:
            state[name] = before
    resolved = _parse_epoch(fields.get("resolved_at"))
    if resolved is None or resolved > t:
        for name in RESOLUTION_FIELDS:
            if name not in known:  # what the changelog does not tell was not known yet
                state.pop(name, None)
        for name in ("resolution", "resolutiondate", "resolved_at", "resolution_evidence", "closed_at", "closed_by",
                     "merged_at", "merged_by", "merge_commit_sha", "state_reason"):
            state.pop(name, None)
        if "status" not in state and "state" not in state:
            state["status"] = "open (its status at this moment is not recorded)" if resolved else None
    return {k: _display(v) for k, v in state.items() if v not in (None, "", [], {}) and k not in NORMALIZED_FIELDS} | {
        "summary": state.get("summary"), "description": state.get("description")}


def _parse_epoch(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        ts = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return _epoch(ts if ts.tzinfo else ts.replace(tzinfo=UTC))


def _display(value: Any) -> Any:
    if isinstance(value, dict):
        return value.get("display_name") or value.get("displayName") or value.get("name") or value.get("key") \
            or json.dumps(value, sort_keys=True)[:200]
    if isinstance(value, list):
        return [_display(v) for v in value][:50]
    return value
