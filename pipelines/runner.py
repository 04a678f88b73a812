"""`taskmine run`: execute the same Dagster job the UI materializes, one dataset partition at a time,
in the persistent instance under $TASKMINE_HOME/dagster (so the runs show up in `taskmine ui`)."""

from __future__ import annotations

import logging
import sys
import time

STAGE_ORDER = ["raw_events", "identities", "anonymized_events", "work_items", "tasks", "validations",
               "published_dataset"]


class _Progress(logging.Handler):
    """Prints one short line per finished stage and per validated task, instead of Dagster's debug log."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.t0 = time.perf_counter()

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        msg = meta.get("orig_message") or record.getMessage()
        event = meta.get("dagster_event")
        kind = getattr(event, "event_type_value", "")
        if kind == "ASSET_MATERIALIZATION":
            mat = event.event_specific_data.materialization
            key = mat.asset_key.to_user_string()
            shown = {k: getattr(v, "value", v) for k, v in mat.metadata.items()
                     if k not in ("preview", "funnel", "dataset_dir", "path")}
            line = ", ".join(f"{k}={v}" for k, v in list(shown.items())[:6])
            print(f"  [{time.perf_counter() - self.t0:6.1f}s] {key:<18} {line}", flush=True)
        elif kind == "STEP_FAILURE":
            print(f"  [{time.perf_counter() - self.t0:6.1f}s] FAILED {meta.get('step_key')}: "
                  f"{event.event_specific_data.error.message.strip().splitlines()[-1][:300]}", flush=True)
        elif kind == "ASSET_CHECK_EVALUATION":
            ev = event.event_specific_data
            status = "ok" if ev.passed else ("WARN" if ev.severity.value == "WARN" else "FAILED")
            print(f"  [{time.perf_counter() - self.t0:6.1f}s] check {ev.check_name:<16} {status}", flush=True)
        elif not kind and msg.startswith("validated "):
            print(f"  [{time.perf_counter() - self.t0:6.1f}s]   {msg}", flush=True)


def run_datasets(names: list[str], repeats: int = 0) -> int:
    from dagster import DagsterInstance

    from pipelines.assets import datasets
    from pipelines.definitions import defs
    from taskmine import flow
    from warehouse.store import Store

    instance = DagsterInstance.get()
    instance.add_dynamic_partitions(datasets.name, [n for n in names
                                                    if not instance.has_dynamic_partition(datasets.name, n)])
    job = defs.resolve_job_def("taskmine_job")
    handler = _Progress()
    dagster_logger = logging.getLogger("dagster")
    dagster_logger.addHandler(handler)
    for h in list(dagster_logger.handlers):
        if h is not handler:
            h.setLevel(logging.CRITICAL)
    run_config = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    if repeats:
        run_config["resources"] = {"sandbox": {"config": {"repeats": repeats}}}
    failed = 0
    store = Store()
    for ds in names:
        print(f"dataset {ds}:", flush=True)
        result = job.execute_in_process(instance=instance, partition_key=ds, raise_on_error=False,
                                        run_config=run_config, tags={"taskmine/source": "cli"})
        counts = flow.funnel(store, ds)
        latest = store.published_root() / ds / "LATEST"
        published = latest.read_text().strip() if latest.exists() else None
        if published:
            import json

            manifest = json.loads((store.published_root() / ds / published / "manifest.json").read_text())
            counts["published"] = manifest["tasks"]
        print(_funnel_table(ds, counts))
        if result.success and published:
            print(f"published: {store.published_root() / ds / published}")
        else:
            failed += 1
            print(f"taskmine: error: the run of {ds} did not finish (see the lines above, or "
                  f"`taskmine ui` -> Runs -> {result.run_id[:8]})", file=sys.stderr)
    return 1 if failed else 0


def _funnel_table(ds: str, counts: dict[str, int]) -> str:
    stages = ["events", "work_items", "candidates", "tasks", "validated", "published"]
    width = max(len(s) for s in stages)
    rows = [f"  {'stage':<{width}}  count", f"  {'-' * width}  -----"]
    rows += [f"  {s:<{width}}  {counts.get(s, 0):>5}" for s in stages]
    return "\n".join(rows)
