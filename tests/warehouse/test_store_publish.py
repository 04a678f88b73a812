import datetime as dt
import subprocess

import duckdb
import pyarrow.parquet as pq
import pytest

from privacy.audit import Rules, audit
from publishing.loader import DatasetError, load_dataset
from publishing.publish import LeakError, publish
from warehouse.schemas import Event, Task, arrow_schema, duckdb_ddl
from warehouse.store import Store

T0 = dt.datetime(2021, 3, 1, tzinfo=dt.UTC)


def ev(i, run="r1", body="b"):
    return Event(event_id=f"e{i:03d}", dataset="d", source="jira", kind="comment", native_id=str(i), ts=T0,
                 body=body, ingest_run_id=run)


def test_schema_is_derived_once():
    s = arrow_schema(Event)
    assert s.field("ts").type.tz == "UTC" and s.field("attrs").type == "string"
    assert '"ts" TIMESTAMPTZ NOT NULL' in duckdb_ddl(Event)


def test_naive_timestamps_are_rejected():
    with pytest.raises(ValueError, match="no zone"):
        Event(event_id="x", dataset="d", source="s", kind="k", native_id="n", ts=dt.datetime(2021, 1, 1))


def test_merge_is_idempotent_and_byte_stable(tmp_path):
    store = Store(tmp_path)
    assert store.merge("events", "d", [ev(1), ev(2)]).added == 2
    before = store.partition("events", "d").read_bytes()
    stats = store.merge("events", "d", [ev(2, run="r2"), ev(1, run="r2")])
    assert (stats.added, stats.changed, stats.total) == (0, 0, 2)
    assert store.partition("events", "d").read_bytes() == before
    assert store.merge("events", "d", [ev(1, body="edited")]).changed == 1
    assert store.partition("events", "d").is_relative_to(tmp_path / "private")


def test_a_content_digest_leaves_the_run_ids_out(tmp_path):
    """Two runs of one input write files that differ in every row's run id (ingest_run_id): a content key over a
    table (the world's, and through it every task id) must not see that; a change of content it must."""
    a, b = Store(tmp_path / "a"), Store(tmp_path / "b")
    a.replace("anonymized_events", "d", [ev(1, run="run-a"), ev(2, run="run-a")])
    b.replace("anonymized_events", "d", [ev(2, run="run-b"), ev(1, run="run-b")])
    assert a.partition("anonymized_events", "d").read_bytes() != b.partition("anonymized_events", "d").read_bytes()
    assert a.content_digest("anonymized_events", "d") == b.content_digest("anonymized_events", "d")
    b.replace("anonymized_events", "d", [ev(1, run="run-b"), ev(2, run="run-b", body="edited")])
    assert a.content_digest("anonymized_events", "d") != b.content_digest("anonymized_events", "d")
    assert Store(tmp_path / "c").content_digest("events", "d") == Store(tmp_path / "e").content_digest("events", "d")


def test_duckdb_catalog_sees_every_table(tmp_path):
    store = Store(tmp_path)
    store.merge("events", "d", [ev(1)])
    store.merge("events", "e", [ev(2)])
    assert store.query("select count(*) from events") == [(2,)]
    assert store.query("select count(*) from tasks") == [(0,)]
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("select count(*) from events").fetchone() == (2,)


def _task(tmp_path, i, text="Fix the cache"):
    from environments.world import build_world

    world = tmp_path / "worlds" / "d"
    world.mkdir(parents=True, exist_ok=True)
    build_world([ev(i, body=text)], world / "world.sqlite", f"k{i}")
    return Task(task_id=f"t{i}", dataset="d", family="ticket_triage", item_id=f"i{i}", prompt=text, cutoff=T0,
                world={"cutoff": T0.isoformat()}, world_hash=f"h{i}", reference={"actions": []},
                rubric={"checks": []}, lineage=["e1"])


def test_publish_is_deterministic_and_loadable(tmp_path):
    tasks = [_task(tmp_path, 2), _task(tmp_path, 1)]
    kw = dict(funnel={"events": 3}, validation={}, rules=Rules(["Maria Lopez"]))
    a = publish(tasks, tmp_path / "worlds" / "d", tmp_path / "pub", "d", **kw)
    first = {p: (a.path / p).read_bytes() for p in ("tasks/ticket_triage/test.parquet", "grading/test.parquet",
                                                      "trajectories/test.parquet", "README.md", "manifest.json")}
    b = publish(list(reversed(tasks)), tmp_path / "worlds" / "d", tmp_path / "pub", "d", **kw)
    assert b.path == a.path and not b.created
    ds = load_dataset(tmp_path / "pub" / "d")
    assert [t["task_id"] for t in ds.tasks()] == ["t1", "t2"]
    assert (a.path / "world" / "documents.jsonl").read_text().count("\n") == 1  # one world for every task
    assert pq.read_table(a.path / "tasks" / "ticket_triage" / "test.parquet").num_rows == 2
    assert not (a.path / "tasks" / "ticket_triage" / "train.parquet").exists()    # no task, no split file
    assert {p: (a.path / p).read_bytes() for p in first} == first
    (a.path / "world" / "documents.jsonl").write_text("{}")
    with pytest.raises(DatasetError, match="sha256"):
        load_dataset(a.path)


def test_publish_refuses_a_leak(tmp_path):
    tasks = [_task(tmp_path, 1, text="Ask Maria Lopez about it")]
    with pytest.raises(LeakError) as err:
        publish(tasks, tmp_path / "worlds" / "d", tmp_path / "pub", "d", funnel={}, validation={},
                rules=Rules(["Maria Lopez"]))
    assert "Maria Lopez" not in str(err.value) and err.value.hits
    assert not list((tmp_path / "pub" / "d").glob("*/manifest.json"))


def test_audit_reads_git_history(tmp_path):
    repo = tmp_path / "w" / "repo"
    repo.mkdir(parents=True)
    env = {"GIT_AUTHOR_NAME": "Maria Lopez", "GIT_AUTHOR_EMAIL": "m@x.example", "GIT_COMMITTER_NAME": "Bot",
           "GIT_COMMITTER_EMAIL": "b@x.example", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("hello\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "x"], check=True, env=env)
    hits = audit(tmp_path / "w", Rules(["Maria Lopez"], patterns=False)).hits
    assert hits and hits[0].file == "repo" and hits[0].kind == "name"
    assert audit(tmp_path / "w", Rules(["Someone Else"], patterns=False)).hits == []
    # the authors' addresses are personal data no list names: the pattern recognizers find them
    assert {h.kind for h in audit(tmp_path / "w", Rules(["Someone Else"])).hits} == {"email"}


def test_audit_finds_secrets_no_list_names(tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "config.py").write_text('GITHUB = "ghp_' + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + '"\n')
    report = audit(tmp_path / "w", Rules([]))
    assert [h.kind for h in report.hits] == ["secret:github_token"] and "ghp_" not in report.summary()
    (tmp_path / "w" / "config.py").write_text('GITHUB = "[SECRET:GITHUB_TOKEN]"\n')
    assert audit(tmp_path / "w", Rules([])).ok
