"""Residue is withheld, not fatal (DESIGN.md, Conventions 19 and 20): a record that still holds something the leak
audit refuses after anonymization is left out, counted by kind and reason, and everything else goes on.

`Check(rules)` is the leak audit's judgement of one record, with the audit's own rules (`privacy.audit.Rules`, the
one detector every gate uses) and read the way the audit reads it, so a record this passes is one the audit
passes where it is published:
- a table row (an event, a task's row) column by column as `audit.value_texts` gives it (prose columns through
  NER too);
- git content as `audit._git_texts` reads a repository: a blob as text (a binary or huge one for listed strings
  only), a path as text (it is in every patch), a commit's message as prose.
It answers the kind of the first thing found (`email`, `name`, `secret:url_password`, `person`, ...), never the
text, or None. `Check.rows` judges many rows at once, NER batched.

`attribute(report, root)` maps the hits of an audit of a published folder back to the task rows and world
documents they are in (the audit names a Parquet hit by column and row, a JSON-lines hit by line), so publishing
can withhold those and audit again.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Hashable, Iterable
from pathlib import Path

import pyarrow.parquet as pq

from core.stage import RunContext
from extractors.references import find_keys
from privacy.audit import NER_BATCH, Hit, Report, Rules, _digest, value_texts
from privacy.ner import paragraphs
from warehouse.schemas import Event, Withheld
from warehouse.store import Store

BIG_BLOB = 2_000_000   # as the audit: a blob this big, or with NUL bytes, is binary (listed strings only)


class Check:
    """The audit's verdict on one record at a time (see the module docstring).

    NER's verdict is kept per paragraph: the audit reads a paragraph once (`Rules.fresh`) and reports its first
    place, but withholding needs every record that holds it, so a paragraph read once gives its verdict to every
    later record. A paragraph discovery read unchanged in the raw text (`Rules.seen`) has no person left."""

    def __init__(self, rules: Rules):
        self.rules = rules
        self.verdicts: dict[bytes, str | None] = {}    # paragraph digest -> NER's hit ("person") or None

    def text(self, text: str, kind: str = "text") -> str | None:
        """The kind of the first hit in `text` read as `kind` ("prose", "field", "text" or "binary"), or None."""
        for hit, _ in self.rules.find(text, patterns=False if kind == "binary" else None,
                                      whole_field=kind in ("prose", "field")):
            return hit
        if kind == "prose":
            known, todo = self._paragraphs(text)
            if known or not todo:
                return known
            self._read(todo)
            return next((self.verdicts[d] for d, _ in todo if self.verdicts[d]), None)
        return None

    def _paragraphs(self, text: str) -> tuple[str | None, list[tuple[bytes, str]]]:
        """(a hit NER already found in one of `text`'s paragraphs, the paragraphs it has still to read)."""
        if self.rules.ner is None:
            return None, []
        known, todo = None, []
        for p in paragraphs(text):
            d = _digest(p)
            if d in self.verdicts:
                known = known or self.verdicts[d]
            elif d not in self.rules.seen and all(d != x for x, _ in todo):
                todo.append((d, p))
        return known, todo

    def _read(self, todo: list[tuple[bytes, str]]) -> None:
        for d, _ in todo:
            self.verdicts[d] = None
        for i, hit in self.rules.people([p for _, p in todo]):
            self.verdicts[todo[i][0]] = hit

    def blob(self, data: bytes) -> str | None:
        binary = b"\0" in data[:8192] or len(data) > BIG_BLOB
        return self.text(data.decode("utf-8", "replace"), "binary" if binary else "text")

    def git(self, what: str, content: bytes | str) -> str | None:
        """`privacy.gitrewrite.Residue`: a blob, a path, or a commit's message."""
        if what == "blob":
            return self.blob(content if isinstance(content, bytes) else content.encode("utf-8"))
        text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
        return self.text(text, "prose" if what == "message" else "text")

    def rows(self, rows: Iterable[tuple[Hashable, dict]]) -> dict[Hashable, str]:
        """key -> the kind of the first hit, for every row (column -> value) the audit would refuse; NER reads the
        rows' prose in batches.

        "First" is by place, never by when NER answered: the row's texts in order (`value_texts` of each column),
        and in one text a listed string or pattern before a person in its prose. So a row's reason does not
        depend on which rows were judged before it in this process (a paragraph's verdict already known, or still
        waiting in a batch): the anonymize stage judges its events in chunks over processes and must give each
        the reason one process gives it."""
        first: dict[Hashable, tuple[int, str]] = {}     # key -> (place, kind) of its first hit so far
        pending: dict[bytes, str] = {}                  # paragraph digest -> paragraph, waiting for NER
        waiting: dict[bytes, list[tuple[Hashable, int]]] = {}   # paragraph digest -> (row, place) that hold it

        def note(key: Hashable, place: int, kind: str) -> None:
            if key not in first or place < first[key][0]:
                first[key] = (place, kind)

        def flush() -> None:
            todo = list(pending.items())
            pending.clear()
            self._read(todo)
            for d, _ in todo:
                if self.verdicts[d]:
                    for key, place in waiting[d]:
                        note(key, place, self.verdicts[d])
            waiting.clear()

        for key, row in rows:
            n = 0
            for column, value in row.items():
                for _, text, kind in value_texts(column, value):
                    n += 2
                    if key in first and first[key][0] < n:
                        continue    # a hit before this text: nothing here can come first
                    for hit, _ in self.rules.find(text, whole_field=True):
                        note(key, n, hit)
                        break
                    if kind != "prose" or (key in first and first[key][0] < n + 1):
                        continue
                    known, todo = self._paragraphs(text)
                    if known:
                        note(key, n + 1, known)
                    for d, p in todo:
                        pending.setdefault(d, p)
                        waiting.setdefault(d, []).append((key, n + 1))
                    if len(pending) >= NER_BATCH:
                        flush()
        if pending:
            flush()
        return {key: kind for key, (_, kind) in first.items()}


_ROW = re.compile(r"^column \S+ row (\d+)")
_LINE = re.compile(r"^line (\d+)")


def attribute(report: Report, root: Path) -> tuple[dict[str, str], dict[str, str], list[Hit]]:
    """(task id -> reason, document event id -> reason, hits in neither) of an audit of the published folder at
    `root`: a hit in a Parquet file with a `task_id` column is its row's task's, one in `world/documents.jsonl`
    its line's document's."""
    tasks: dict[str, str] = {}
    documents: dict[str, str] = {}
    other: list[Hit] = []
    ids: dict[str, list] = {}
    lines: list[str] | None = None
    for h in report.hits:
        path = root / h.file
        row, line = _ROW.match(h.where), _LINE.match(h.where)
        if path.suffix == ".parquet" and row is not None:
            if h.file not in ids:
                schema = pq.read_schema(path)
                ids[h.file] = pq.read_table(path, columns=["task_id"]).column("task_id").to_pylist() \
                    if "task_id" in schema.names else []
            column = ids[h.file]
            if int(row.group(1)) < len(column):
                tasks.setdefault(column[int(row.group(1))], h.kind)
                continue
        elif h.file == "world/documents.jsonl" and line is not None:
            if lines is None:
                lines = path.read_text(encoding="utf-8").splitlines()
            n = int(line.group(1)) - 1
            try:
                event_id = json.loads(lines[n]).get("event_id") if 0 <= n < len(lines) else None
            except ValueError:
                event_id = None
            if event_id:
                documents.setdefault(str(event_id), h.kind)
                continue
        other.append(h)
    return tasks, documents, other


# --- withholding what the audit still refuses -----------------------------------------------------------

_DIFF_FILE = re.compile(r"^(?=diff --git )", re.M)
STUB_FIELDS = ("event_id", "dataset", "source", "kind", "native_id", "thread_key", "parent_id", "ts", "actor",
               "medium", "automated", "ingest_run_id")


def withhold_events(dataset: str, rows: list[Event], check, run_id: str = ""
                    ) -> tuple[list[Event], list[Withheld], Counter]:
    """The anonymized events with what the leak audit (`check`, privacy.withhold.Check) still refuses withheld:
    a commit's diff loses the files that hold a hit (`commit_file`); any other hit makes the event a stub
    (`event`: its ids, thread, time, kind and actor, `attrs.withheld` = the reason, no text), so mining sees that
    something was there and builds no task on it, and the world leaves it out. Returns (events, withheld rows,
    records checked by kind)."""
    verdicts = check.rows((e.event_id, {k: v for k, v in e.to_row().items() if k != "diff"}) for e in rows)
    sections = {e.event_id: _DIFF_FILE.split(e.diff) for e in rows if e.diff and e.event_id not in verdicts}
    dirty = check.rows(((eid, i), {"diff": part}) for eid, parts in sections.items() for i, part in enumerate(parts)
                       if part)
    out, withheld = [], []
    checked = Counter({"event": len(rows), "commit_file": sum(len(p) for p in sections.values()), "git": 0})
    for e in rows:
        reason = verdicts.get(e.event_id)
        if reason:
            withheld.append(Withheld(dataset=dataset, stage="anonymize", record_kind="event", record_id=e.event_id,
                                     reason=reason, run_id=run_id))
            out.append(_stub(e, reason, check))
            continue
        parts = sections.get(e.event_id)
        cut = [i for i in range(len(parts or ())) if (e.event_id, i) in dirty]
        if cut:
            withheld += [Withheld(dataset=dataset, stage="anonymize", record_kind="commit_file",
                                  record_id=f"{e.event_id}#{i}", reason=dirty[(e.event_id, i)], run_id=run_id)
                         for i in cut]
            e = e.model_copy(update={"diff": "".join(p for i, p in enumerate(parts) if i not in cut) or None,
                                     "attrs": {**e.attrs, "diff_files_withheld": len(cut)}})
        out.append(e)
    return out, withheld, checked


def _stub(e: Event, reason: str, check) -> Event:
    """What is left of a withheld event: its place and nothing of its text (a field of it the audit still refuses,
    an id made of a name, is replaced by a neutral one)."""
    kept = {f: getattr(e, f) for f in STUB_FIELDS}
    # a commit keeps the issue keys its message named, so its issue knows one of its fixes is gone
    attrs = {"withheld": reason, **({"keys": keys} if e.kind == "commit" and (keys := find_keys(
        f"{e.title or ''}\n{e.body or ''}")) else {})}
    fields = {**{f: kept[f] for f in ("native_id", "thread_key", "actor", "parent_id")}, "attrs": attrs}
    bad = check.rows((f, {f: v}) for f, v in fields.items() if v)
    for f in bad:
        if f == "attrs":
            attrs = {"withheld": reason}
        else:
            kept[f] = None if f in ("actor", "parent_id") else f"withheld-{e.event_id[:16]}"
    return Event(**kept, attrs=attrs)


def _withheld_state(store: Store, dataset: str) -> Path:
    return store.home / "state" / "withheld" / f"{dataset}.json"


def record_withheld(store: Store, dataset: str, stage: str, rows: list[Withheld], checked: dict[str, int]) -> None:
    """Replace this stage's withheld rows for the dataset (keeping the other stages') and what it checked (the
    share's denominator)."""
    kept = [w for w in store.read("withheld", dataset) if w.stage != stage]
    store.replace("withheld", dataset, kept + sorted({(w.record_kind, w.record_id): w for w in rows}.values(),
                                                     key=lambda w: (w.record_kind, w.record_id)))
    f = _withheld_state(store, dataset)
    state = json.loads(f.read_text()) if f.exists() else {}
    state[stage] = dict(checked)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(state, sort_keys=True))


def withheld_summary(store: Store, dataset: str, stages: Iterable[str] | None = None) -> dict:
    """What was withheld (by `stages`, default all): total, share of the records checked, and counts by kind, by
    reason and by stage."""
    rows = store.read("withheld", dataset) if store.count("withheld", dataset) else []
    f = _withheld_state(store, dataset)
    state = json.loads(f.read_text()) if f.exists() else {}
    if stages is not None:
        rows = [w for w in rows if w.stage in stages]
        state = {k: v for k, v in state.items() if k in stages}
    records = sum(n for checked in state.values() for n in checked.values())
    return {"total": len(rows), "records": records, "rate": round(len(rows) / records, 5) if records else 0.0,
            "by_kind": dict(Counter(w.record_kind for w in rows).most_common()),
            "by_reason": dict(Counter(w.reason for w in rows).most_common()),
            "by_stage": dict(Counter(w.stage for w in rows).most_common())}


def withheld_problem(ctx: RunContext, stages: Iterable[str] | None = None) -> str | None:
    """One line saying why the withheld share blocks the dataset (and how to fix it), or None."""
    config, dataset = ctx.config, ctx.dataset
    s = withheld_summary(ctx.store, dataset, stages)
    if s["rate"] <= config.max_withheld_rate:
        return None
    reasons = ", ".join(f"{n} {k}" for k, n in list(s["by_reason"].items())[:4])
    return (f"{s['total']} of {s['records']} records ({s['rate']:.1%}) withheld because the leak audit still found "
            f"personal data in them after anonymization ({reasons}), over max_withheld_rate "
            f"{config.max_withheld_rate:g}: see the withheld table for kinds and records; add reviewed public names "
            f"to `allow`, or raise max_withheld_rate in {dataset}/taskmine.toml")
