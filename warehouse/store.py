"""The warehouse: one Parquet file per (table, dataset), attached in one DuckDB catalog.

Layout under `$TASKMINE_HOME` (default `./.taskmine`):

    private/tables/<table>/<dataset>.parquet   raw events, quarantine, identities (real names)
    private/vault/<dataset>.json               person -> pseudonym, salt (never published)
    tables/<table>/<dataset>.parquet           anonymized_events, work_items, tasks, validations, ...
    worlds/<dataset>/...                       world slices and rewritten repositories
    published/<dataset>/<version>/             what labs load
    warehouse.duckdb                           views over every Parquet file above

Invariants:
- Writes are validated against the table's Arrow schema (derived from `warehouse.schemas`).
- A partition is replaced atomically (write to a temp file, then rename): a crash mid-write leaves
  the previous version intact.
- Rows are sorted by the table's key before writing, so unchanged content gives byte-identical files;
  `merge` keeps an existing row when only its run id differs, so a re-run adds nothing.
- The Arrow path (`write_arrow`, `append_arrow`) writes the same files as the record path (same schema,
  same order by key, same Parquet settings) without one pydantic model per row: for bulk tables such as
  embeddings. `append_arrow` adds only new keys and leaves the file untouched when there are none.
- `content_digest` hashes a partition's content without its run ids (`schemas.RUN_FIELDS`): a content key over a
  table (the world's) never hashes the Parquet file's bytes, which carry the run id of every row.
- A long stage keeps each finished unit's rows in the partition's journal (`journal_add`: append-only JSON lines,
  fsynced) and writes the partition once at its end (`fold_journal`): a kill keeps every finished unit, and n
  units cost O(n) rows written, not O(n^2). `iter`/`read`/`count` see the journal over the partition.
- Nothing here knows any source format.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from warehouse.ids import canonical_json
from warehouse.schemas import RUN_FIELDS, TABLES, Record, arrow_schema, conform, duckdb_ddl, to_table

PRIVATE_TABLES = {"events", "quarantine", "identities"}
# Anonymized events share the Event schema but live in the public area under their own name.
VIEW_MODELS = {"anonymized_events": "events"}


def default_home() -> Path:
    return Path(os.environ.get("TASKMINE_HOME") or ".taskmine").resolve()


@dataclass(frozen=True)
class MergeStats:
    added: int
    changed: int
    total: int


class Store:
    """Read and write warehouse tables. Cheap to construct; holds no open handles."""

    def __init__(self, home: Path | str | None = None):
        self.home = Path(home).resolve() if home else default_home()

    # -- paths ------------------------------------------------------------------------------------
    @property
    def private(self) -> Path:
        return self.home / "private"

    def table_dir(self, table: str) -> Path:
        base = self.private if table in PRIVATE_TABLES else self.home
        return base / "tables" / table

    def partition(self, table: str, dataset: str) -> Path:
        return self.table_dir(table) / f"{dataset}.parquet"

    def worlds(self, dataset: str) -> Path:
        return self.home / "worlds" / dataset

    def published_root(self) -> Path:
        return self.home / "published"

    @staticmethod
    def model(table: str) -> type[Record]:
        return TABLES[VIEW_MODELS.get(table, table)]

    # -- writes -----------------------------------------------------------------------------------
    def replace(self, table: str, dataset: str, records: Iterable[Record]) -> int:
        """Replace the dataset's partition of `table` with `records` (deduplicated by key)."""
        model = self.model(table)
        rows = {_key(model, r): r for r in records}
        self._write(table, dataset, [rows[k] for k in sorted(rows)])
        return len(rows)

    def replace_sorted(self, table: str, dataset: str, records: Iterable[Record], row_group: int = 8192) -> int:
        """`replace` for records that come already in key order, one key each (a stage that writes what it reads
        from a table of the same key, chunk by chunk): streamed into the file a row group at a time, so memory
        holds one row group and not the table. The file's bytes depend on the records only (row groups of
        `row_group` rows, whatever chunks the caller had): what hashes the file (`world_key`) sees the same file
        for the same rows. A key out of order or repeated is a ValueError (the caller's bug: use `replace`)."""
        model = self.model(table)
        schema = arrow_schema(model)
        path = self.partition(table, dataset)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        last: tuple | None = None
        rows: list[dict] = []
        n = 0
        try:
            with pq.ParquetWriter(tmp, schema, compression="zstd", write_statistics=True) as writer:
                for r in records:
                    if not isinstance(r, model):
                        raise TypeError(f"{type(r).__name__} written to table {model.table}")
                    k = _key(model, r)
                    if last is not None and k <= last:
                        raise ValueError(f"table {table}: key {k} after {last}: replace_sorted needs ascending, "
                                         "unique keys (use replace)")
                    last = k
                    rows.append(r.to_row())
                    n += 1
                    if len(rows) >= row_group:
                        writer.write_table(pa.Table.from_pylist(rows, schema=schema))
                        rows = []
                if rows or not n:
                    writer.write_table(pa.Table.from_pylist(rows, schema=schema))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return n

    def merge(self, table: str, dataset: str, records: Iterable[Record]) -> MergeStats:
        """Upsert by key: new content wins, but a row equal but for its run id is kept as it was."""
        model = self.model(table)
        existing = {_key(model, r): r for r in self.read(table, dataset)}
        merged = dict(existing)
        added = changed = 0
        for r in records:
            k = _key(model, r)
            old = existing.get(k)
            if old is None:
                added += k not in merged
                merged[k] = r
            elif _stable(old) != _stable(r):
                changed += merged[k] is old
                merged[k] = r
        if added or changed or not self.partition(table, dataset).exists():
            self._write(table, dataset, [merged[k] for k in sorted(merged)])
        return MergeStats(added, changed, len(merged))

    def write_arrow(self, table: str, dataset: str, data: pa.Table) -> int:
        """`replace` for an Arrow table: validated (`schemas.conform`), deduplicated by key (the last row of a
        key wins), sorted by key; returns the number of rows written."""
        model = self.model(table)
        data = _sorted_unique(model, conform(model, data))
        self._write_table(table, dataset, data)
        return data.num_rows

    def append_arrow(self, table: str, dataset: str, data: pa.Table) -> MergeStats:
        """Add the rows whose key is not in the partition yet; a stored key keeps its row (for tables whose
        key is a hash of the content). Nothing new and the file exists: the file is not touched."""
        model = self.model(table)
        data = conform(model, data)
        existing = self.read_arrow(table, dataset)
        if existing.num_rows and data.num_rows:
            have = pc.is_in(_key_column(model, data), value_set=_key_column(model, existing))
            data = data.filter(pc.invert(have))
        data = _sorted_unique(model, data)
        if data.num_rows or not self.partition(table, dataset).exists():
            merged = pa.concat_tables([conform(model, existing), data]) if existing.num_rows else data
            self._write_table(table, dataset, _sorted_unique(model, merged))
        return MergeStats(data.num_rows, 0, existing.num_rows + data.num_rows)

    # -- journals: rows kept one unit of work at a time, folded into the partition once ------------------
    def journal(self, table: str, dataset: str) -> Path:
        """The append-only file beside a partition that a long stage adds each finished unit's rows to (JSON
        lines, written and fsynced per `journal_add`): rewriting the whole partition after every unit made a
        stage of n units write O(n^2) rows. Readers (`iter`, `read`, `count`) see the journal's rows over the
        partition's (the last row of a key wins); `fold_journal` writes them into the partition."""
        return self.partition(table, dataset).with_suffix(".journal.jsonl")

    def journal_add(self, table: str, dataset: str, records: Iterable[Record]) -> None:
        lines = "".join(r.model_dump_json() + "\n" for r in records)
        if not lines:
            return
        path = self.journal(table, dataset)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())

    def _journal_rows(self, table: str, dataset: str) -> list[Record]:
        path = self.journal(table, dataset)
        if not path.exists():
            return []
        model, out = self.model(table), []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(model.model_validate_json(line))
            except ValueError:      # the line a kill cut short: its unit is not finished, so it is redone
                continue
        return out

    def fold_journal(self, table: str, dataset: str) -> int:
        """Write the journal's rows into the partition (a key's journal row replaces its stored one) and remove
        the journal; returns the rows folded (0: no journal)."""
        path = self.journal(table, dataset)
        if not path.exists():
            return 0
        added = self._journal_rows(table, dataset)
        self.replace(table, dataset, self.read(table, dataset))     # read() already lays the journal over
        path.unlink()
        return len(added)

    def _write(self, table: str, dataset: str, records: list[Record]) -> None:
        self._write_table(table, dataset, to_table(self.model(table), records))

    def _write_table(self, table: str, dataset: str, data: pa.Table) -> None:
        path = self.partition(table, dataset)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        pq.write_table(data, tmp, compression="zstd", write_statistics=True)
        os.replace(tmp, path)

    # -- reads ------------------------------------------------------------------------------------
    def read_arrow(self, table: str, dataset: str) -> pa.Table:
        path = self.partition(table, dataset)
        if not path.exists():
            return arrow_schema(self.model(table)).empty_table()
        return pq.read_table(path)

    def read(self, table: str, dataset: str) -> list[Record]:
        return list(self.iter(table, dataset))

    def iter(self, table: str, dataset: str, batch_size: int = 2048) -> Iterator[Record]:
        path = self.partition(table, dataset)
        model = self.model(table)
        journal = self._journal_rows(table, dataset)
        if journal:     # a stage is running or was killed: its finished units' rows over the stored ones, by key
            rows = {_key(model, r): r for r in self._iter_partition(path, model, batch_size)}
            rows.update((_key(model, r), r) for r in journal)
            yield from (rows[k] for k in sorted(rows))
            return
        yield from self._iter_partition(path, model, batch_size)

    @staticmethod
    def _iter_partition(path: Path, model: type[Record], batch_size: int) -> Iterator[Record]:
        if not path.exists():
            return
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
            for row in batch.to_pylist():
                yield model.from_row(row)

    def content_digest(self, table: str, dataset: str, batch_size: int = 2048) -> str:
        """sha256 of the partition's rows in their stored order (by key), each as canonical JSON without the run
        ids (`schemas.RUN_FIELDS`): what a content key over a table hashes, so that two runs of the same input
        give the same key (the file's bytes differ in every row's run id). An absent partition: the empty digest."""
        h = hashlib.sha256()
        path = self.partition(table, dataset)
        if path.exists():
            f = pq.ParquetFile(path)
            columns = [c for c in f.schema_arrow.names if c not in RUN_FIELDS]
            for batch in f.iter_batches(batch_size=batch_size, columns=columns):
                for row in batch.to_pylist():
                    h.update(canonical_json(row).encode("utf-8", "surrogatepass") + b"\n")
        return h.hexdigest()

    def count(self, table: str, dataset: str) -> int:
        if self.journal(table, dataset).exists():
            return sum(1 for _ in self.iter(table, dataset))
        path = self.partition(table, dataset)
        return pq.ParquetFile(path).metadata.num_rows if path.exists() else 0

    def datasets(self, table: str) -> list[str]:
        d = self.table_dir(table)
        return sorted(p.stem for p in d.glob("*.parquet")) if d.exists() else []

    # -- DuckDB -----------------------------------------------------------------------------------
    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection on `warehouse.duckdb` with one view per table over its Parquet files.

        The catalog file holds only views, so it is rebuilt on every connect and is never stale."""
        self.home.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(self.home / "warehouse.duckdb"))
        for table in [*TABLES, *VIEW_MODELS]:
            d = self.table_dir(table)
            files = sorted(str(p) for p in d.glob("*.parquet")) if d.exists() else []
            kind = con.execute("SELECT table_type FROM information_schema.tables WHERE table_name = ?",
                               [table]).fetchone()
            if kind:
                con.execute(f'DROP {"VIEW" if kind[0] == "VIEW" else "TABLE"} "{table}"')
            if files:
                listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
                con.execute(f'CREATE VIEW "{table}" AS SELECT * FROM read_parquet([{listing}])')
            else:
                model = self.model(table)
                con.execute(duckdb_ddl(model).replace(f'"{model.table}"', f'"{table}"', 1))
        return con

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        with self.connect() as con:
            return con.execute(sql, params or []).fetchall()


def _key_column(model: type[Record], data: pa.Table) -> pa.Array:
    """The key of every row as one string column (`_key`'s str() of each part, joined by NUL)."""
    parts = [pc.cast(data.column(k), pa.string()).combine_chunks() for k in model.key]
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "\0")


def _sorted_unique(model: type[Record], data: pa.Table) -> pa.Table:
    """One row per key (the last one), ordered by key as `_write` orders records; one chunk."""
    keys = _key_column(model, data)
    if pc.count_distinct(keys).as_py() == len(keys):
        order = pc.sort_indices(keys)  # UTF-8 byte order == the code-point order of Python's sorted()
    else:
        last = {k: i for i, k in enumerate(keys.to_pylist())}
        order = pa.array([last[k] for k in sorted(last)], pa.int64())
    return data.take(order).combine_chunks()


def _key(model: type[Record], r: Record) -> tuple:
    return tuple(str(getattr(r, k)) for k in model.key)


def _stable(r: Record) -> dict:
    return {k: v for k, v in r.to_row().items() if k not in RUN_FIELDS}
