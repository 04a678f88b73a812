"""The Arrow write path: validated like records, the same bytes as the record path, insert-only appends that
leave the file alone when nothing is new, and list<float32> columns that DuckDB reads as FLOAT[]."""

import pyarrow as pa
import pytest

from warehouse.schemas import Embedding, arrow_schema, duckdb_ddl
from warehouse.store import Store


def table(keys, scale=1.0):
    return pa.table({"content_hash": keys, "model": ["m"] * len(keys),
                     "vector": [[scale * i, 0.5, -1.0] for i in range(len(keys))]})


def test_list_float_is_a_native_float32_list():
    assert arrow_schema(Embedding).field("vector").type == pa.list_(pa.float32())
    assert '"vector" FLOAT[] NOT NULL' in duckdb_ddl(Embedding)
    assert Embedding(content_hash="h", model="m", vector=[1.0]).to_row()["vector"] == [1.0]


def test_arrow_and_record_paths_write_the_same_bytes(tmp_path):
    store = Store(tmp_path)
    data = table(["c", "a", "b"])
    store.replace("embeddings", "r", [Embedding(**row) for row in data.to_pylist()])
    assert store.write_arrow("embeddings", "w", data) == 3
    assert store.partition("embeddings", "r").read_bytes() == store.partition("embeddings", "w").read_bytes()
    assert [r.content_hash for r in store.read("embeddings", "w")] == ["a", "b", "c"]


def test_append_adds_new_keys_only_and_leaves_an_unchanged_file_alone(tmp_path):
    store = Store(tmp_path)
    assert store.append_arrow("embeddings", "d", table(["b", "a"])).added == 2
    path = store.partition("embeddings", "d")
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    stats = store.append_arrow("embeddings", "d", table(["a", "b"], scale=9.0))  # stored keys keep their rows
    assert (stats.added, stats.total) == (0, 2)
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    stats = store.append_arrow("embeddings", "d", table(["c", "a", "c"]))
    assert (stats.added, stats.total) == (1, 3)
    assert [r.content_hash for r in store.read("embeddings", "d")] == ["a", "b", "c"]
    assert store.read("embeddings", "d")[0].vector == [1.0, 0.5, -1.0]  # "a" as first appended, not scale 9
    assert store.query("select count(*), max(len(vector)) from embeddings") == [(3, 3)]


def test_arrow_writes_are_validated(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(TypeError, match="missing model"):
        store.write_arrow("embeddings", "d", table(["a"]).drop_columns(["model"]))
    with pytest.raises(TypeError, match="unknown extra"):
        store.write_arrow("embeddings", "d", table(["a"]).append_column("extra", pa.array([1])))
    with pytest.raises(ValueError, match="nulls in non-nullable column content_hash"):
        store.write_arrow("embeddings", "d", table([None]))
    with pytest.raises(TypeError):
        store.write_arrow("embeddings", "d", table(["a"]).set_column(2, "vector", pa.array(["x"])))
    assert not store.partition("embeddings", "d").exists()


def test_two_families_rejecting_one_item_for_one_reason_keep_both_rows(tmp_path):
    """An issue's triage and its commit link can both fail a probe: the funnel must count both (the key holds
    the family; without it one row replaced the other and the e2e funnel lost a commit_link candidate)."""
    from warehouse.schemas import Rejection
    from warehouse.store import Store

    store = Store(tmp_path)
    rows = [Rejection(dataset="d", stage="candidates", family=f, subject_id="CORE-1",
                      reason="a probe passes the rubric") for f in ("ticket_triage", "commit_link")]
    store.replace("rejections", "d", rows)
    assert sorted(r.family for r in store.read("rejections", "d")) == ["commit_link", "ticket_triage"]


def test_a_sorted_stream_is_written_a_row_group_at_a_time_with_bytes_of_its_rows_only(tmp_path):
    """`replace_sorted` (the anonymize stage's chunked write): the rows `replace` would store, and the same file
    whatever batches the caller had (world keys hash the file); keys out of order are refused, the old file kept."""
    store = Store(tmp_path)
    rows = [Embedding(content_hash=f"{i:04d}", model="m", vector=[float(i)]) for i in range(50)]
    assert store.replace_sorted("embeddings", "a", iter(rows), row_group=8) == 50
    assert store.replace_sorted("embeddings", "b", (r for r in rows), row_group=8) == 50
    assert store.read("embeddings", "a") == rows
    assert store.partition("embeddings", "a").read_bytes() == store.partition("embeddings", "b").read_bytes()
    before = store.partition("embeddings", "a").read_bytes()
    with pytest.raises(ValueError, match="ascending"):
        store.replace_sorted("embeddings", "a", [rows[1], rows[0]])
    assert store.partition("embeddings", "a").read_bytes() == before
    assert not list(store.partition("embeddings", "a").parent.glob("*.tmp-*"))
