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
from collections.abc import Hashable, Iterable
from pathlib import Path

from privacy.audit import NER_BATCH, Hit, Report, Rules, _digest, value_texts

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
        from privacy.ner import paragraphs

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
        """`task_builders.gitrewrite.Residue`: a blob, a path, or a commit's message."""
        if what == "blob":
            return self.blob(content if isinstance(content, bytes) else content.encode("utf-8"))
        text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
        return self.text(text, "prose" if what == "message" else "text")

    def rows(self, rows: Iterable[tuple[Hashable, dict]]) -> dict[Hashable, str]:
        """key -> the kind of the first hit, for every row (column -> value) the audit would refuse; NER reads the
        rows' prose in batches."""
        out: dict[Hashable, str] = {}
        pending: dict[bytes, str] = {}                  # paragraph digest -> paragraph, waiting for NER
        waiting: dict[bytes, list[Hashable]] = {}       # paragraph digest -> the rows that hold it

        def flush() -> None:
            todo = list(pending.items())
            pending.clear()
            self._read(todo)
            for d, _ in todo:
                if self.verdicts[d]:
                    for key in waiting[d]:
                        out.setdefault(key, self.verdicts[d])
            waiting.clear()

        for key, row in rows:
            for column, value in row.items():
                for _, text, kind in value_texts(column, value):
                    if key not in out:
                        for hit, _ in self.rules.find(text, whole_field=True):
                            out[key] = hit
                            break
                    if kind != "prose":
                        continue
                    known, todo = self._paragraphs(text)
                    if known:
                        out.setdefault(key, known)
                    for d, p in todo:
                        pending.setdefault(d, p)
                        waiting.setdefault(d, []).append(key)
                    if len(pending) >= NER_BATCH:
                        flush()
        if pending:
            flush()
        return out


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
                import pyarrow.parquet as pq

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
