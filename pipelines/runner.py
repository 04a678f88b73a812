"""`taskmine run`: execute the same Dagster job the UI materializes, one dataset partition at a time,
in the persistent instance under $TASKMINE_HOME/dagster (so the runs show up in `taskmine ui`).

Each dataset's run holds the dataset's write lock (warehouse.locks) from start to end: a second
`taskmine run` of the same dataset, or a run started in the UI, waits for it instead of writing over it."""

from __future__ import annotations

import json
import sys

STAGE_ORDER = ["raw_events", "identities", "anonymized_events", "links", "work_items", "clusters", "world",
               "tasks", "validations", "published_dataset"]


def run_datasets(names: list[str], repeats: int = 0) -> int:
    from dagster import DagsterInstance


    with DagsterInstance.get() as instance:  # disposed at the end: nothing of it outlives the call
        return _run(instance, names, repeats)


def _run(instance, names: list[str], repeats: int) -> int:
    from pipelines.assets import datasets
    from pipelines.definitions import defs
    from pipelines.errors import ERROR_TAG
    from taskmine import flow
    from warehouse.locks import dataset_lock
    from warehouse.store import Store

    instance.add_dynamic_partitions(datasets.name, [n for n in names
                                                    if not instance.has_dynamic_partition(datasets.name, n)])
    job = defs.resolve_job_def("taskmine_job")
    run_config: dict = {"loggers": {"progress": {}}}
    if repeats:
        run_config["resources"] = {"sandbox": {"config": {"repeats": repeats}}}
    failed = 0
    store = Store()
    for ds in names:
        print(f"dataset {ds}:", flush=True)
        with dataset_lock(store.home, ds, "taskmine run", on_wait=lambda m: print(f"  {m}", flush=True)):
            result = job.execute_in_process(instance=instance, partition_key=ds, raise_on_error=False,
                                            run_config=run_config, tags={"taskmine/source": "cli"})
        counts = flow.funnel(store, ds)
        published = flow.latest_version(store, ds)
        if published:
            manifest = json.loads((store.published_root() / ds / published / "manifest.json").read_text())
            counts["published"] = manifest["tasks"] if result.success else 0
        print(_funnel_table(ds, counts))
        if result.success and published:
            print(f"published: {store.published_root() / ds / published}")
        else:
            failed += 1
            run = instance.get_run_by_id(result.run_id)
            reason = (run.tags.get(ERROR_TAG) if run else None) or "a stage failed (see the lines above)"
            print(f"taskmine: error: {ds}: {reason} (`taskmine ui` -> Runs -> {result.run_id[:8]})",
                  file=sys.stderr)
    return 1 if failed else 0


def _funnel_table(ds: str, counts: dict[str, int]) -> str:
    stages = ["events", "work_items", "candidates", "tasks", "validated", "published"]
    width = max(len(s) for s in stages)
    rows = [f"  {'stage':<{width}}  count", f"  {'-' * width}  -----"]
    rows += [f"  {s:<{width}}  {counts.get(s, 0):>5}" for s in stages]
    return "\n".join(rows)
