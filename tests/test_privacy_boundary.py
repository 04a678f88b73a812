"""Every stage after `anonymize` reads only anonymized events: with the raw tables gone, links, work
items, tasks, validation and publishing still run and give the same results."""

import shutil

from core.config import DatasetConfig
from taskmine import flow
from warehouse.store import Store


def test_downstream_stages_never_read_raw_events(tmp_path, sample_company):
    from environments.sandbox import LocalSandbox

    store = Store(tmp_path / "home")
    ds, src = "acme", sample_company / "acme"
    flow.prepare(store, ds, src, DatasetConfig(ner_model=""), run_id="r1")
    flow.work_items(store, ds)
    flow.tasks(store, ds, DatasetConfig())
    before = {t: store.read_arrow(t, ds) for t in ("links", "work_items", "tasks")}

    raw = store.table_dir("events")
    shutil.move(raw, tmp_path / "raw-elsewhere")  # the raw events are gone from the warehouse
    assert not raw.exists()
    flow.links(store, ds)
    flow.work_items(store, ds)
    flow.tasks(store, ds, DatasetConfig())
    for table, data in before.items():
        assert store.read_arrow(table, ds).equals(data), table
    flow.validations(store, ds, LocalSandbox(), repeats=1)
    published, counts = flow.publish(store, ds)
    assert counts["published"] == published.tasks > 0
