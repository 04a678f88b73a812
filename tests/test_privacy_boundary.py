"""Every stage after `anonymize` reads only anonymized events: with the raw tables gone, links, work
items, tasks, validation and publishing still run and give the same results."""

import shutil

from core.config import DatasetConfig
from graders.stages import validations
from taskmine import flow
from warehouse.store import Store


def test_downstream_stages_never_read_raw_events(tmp_path, sample_company):
    from environments.sandbox import LocalSandbox

    store = Store(tmp_path / "home")
    ds, src = "acme", sample_company / "acme"
    ctx = flow.context(store, ds, src, config=DatasetConfig(ner_model=""), run_id="r1")
    flow.prepare(ctx)
    flow.run(flow.context(store, ds), "work_items")
    flow.run(flow.context(store, ds, config=DatasetConfig()), "tasks")
    before = {t: store.read_arrow(t, ds) for t in ("links", "work_items", "tasks")}

    raw = store.table_dir("events")
    shutil.move(raw, tmp_path / "raw-elsewhere")  # the raw events are gone from the warehouse
    assert not raw.exists()
    flow.run(flow.context(store, ds), "links")
    flow.run(flow.context(store, ds), "work_items")
    flow.run(flow.context(store, ds, config=DatasetConfig()), "tasks")
    for table, data in before.items():
        assert store.read_arrow(table, ds).equals(data), table
    # validation and publishing without the raw events: one task of each family is enough to show it (each code
    # task's replays take a minute; the others do not read differently)
    firsts = {t.family: t.task_id for t in reversed(store.read("tasks", ds))}
    validations(flow.context(store, ds, sandbox=LocalSandbox(), repeats=1), only=firsts.values())
    res = flow.run(flow.context(store, ds), "published_dataset")
    published, counts = res.extra["published"], res.extra["funnel"]
    assert counts["published"] == published.tasks > 0 and len(firsts) >= 5
