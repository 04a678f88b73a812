"""Asset checks: schema, quarantine rate, leak audit, oracle/null results."""


import warnings

import pyarrow.parquet as pq
from dagster import AssetCheckExecutionContext, AssetCheckResult, AssetCheckSeverity, PreviewWarning, asset_check

from pipelines.assets import (anonymized_events, clusters, datasets, published_dataset, raw_events, validations,
                              work_items)
from pipelines.resources import ExportsResource, WarehouseResource

# Partitioned asset checks are a Dagster preview feature; we rely on it knowingly (pinned Dagster version).
warnings.filterwarnings("ignore", category=PreviewWarning)


@asset_check(asset=raw_events, partitions_def=datasets, description="Events and quarantine match their schema.")
def events_schema(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    from warehouse.schemas import Event, Quarantine, arrow_schema

    store = warehouse.store()
    bad = []
    for table, model in (("events", Event), ("quarantine", Quarantine)):
        path = store.partition(table, context.partition_key)
        if path.exists() and not pq.read_schema(path).remove_metadata().equals(arrow_schema(model).remove_metadata()):
            bad.append(table)
    return AssetCheckResult(passed=not bad, metadata={"mismatched_tables": ", ".join(bad) or "none"})


@asset_check(asset=raw_events, partitions_def=datasets,
             description="The share of quarantined records stays under the dataset's max_quarantine_rate.")
def quarantine_rate(context: AssetCheckExecutionContext, warehouse: WarehouseResource,
                    exports: ExportsResource) -> AssetCheckResult:
    from task_builders.config import load_config

    store, ds = warehouse.store(), context.partition_key
    ev, q = store.count("events", ds), store.count("quarantine", ds)
    rate = q / (ev + q) if ev + q else 0.0
    limit = load_config(exports.dataset_dir(ds)).max_quarantine_rate
    return AssetCheckResult(passed=rate <= limit, severity=AssetCheckSeverity.WARN,
                            metadata={"quarantined": q, "events": ev, "rate": round(rate, 4), "limit": limit})


@asset_check(asset=anonymized_events, partitions_def=datasets,
             description="No known real identity string survives in anonymized event text.")
def anonymized_leaks(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    from taskmine import flow
    from warehouse import audit

    store, ds = warehouse.store(), context.partition_key
    hits = audit.scan(store.partition("anonymized_events", ds), flow.anonymizer(store, ds).known_strings())
    return AssetCheckResult(passed=not hits, metadata={
        "hits": len(hits), "where": "; ".join(f"{h.where} ({h.kind})" for h in hits[:10]) or "none"})


@asset_check(asset=validations, partitions_def=datasets,
             description="Every task was replayed; no infrastructure errors; at least one task is valid.")
def oracle_and_null(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    from taskmine import flow

    store, ds = warehouse.store(), context.partition_key
    verdicts = flow.verdicts_by_task(store.read("validations", ds))
    tasks = store.read("tasks", ds)
    missing = [t.task_id for t in tasks if t.task_id not in verdicts]
    infra = [tid for tid, (_, reason) in verdicts.items() if reason.startswith("infra")]
    valid = sum(1 for ok, _ in verdicts.values() if ok)
    return AssetCheckResult(passed=not missing and not infra and (valid > 0 or not tasks),
                            metadata={"tasks": len(tasks), "valid": valid, "not_replayed": len(missing),
                                      "infra_errors": len(infra)})


@asset_check(asset=published_dataset, partitions_def=datasets, blocking=True,
             description="Leak audit: zero known real names or addresses in the published files.")
def leak_audit(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    from taskmine import flow
    from warehouse import audit
    from warehouse.loader import resolve

    store, ds = warehouse.store(), context.partition_key
    root = resolve(store.published_root() / ds)
    hits = audit.scan(root, flow.anonymizer(store, ds).known_strings(), detector=flow.secrets)
    return AssetCheckResult(passed=not hits, metadata={
        "version": root.name, "hits": len(hits),
        "where": "; ".join(f"{h.file}: {h.where} ({h.kind})" for h in hits[:10]) or "none"})


@asset_check(asset=work_items, partitions_def=datasets,
             description="Every work item's lineage names only anonymized events, its request among them.")
def work_item_lineage(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    store, ds = warehouse.store(), context.partition_key
    known = {r[0] for r in store.query("SELECT event_id FROM anonymized_events WHERE dataset = ?", [ds])}
    bad = [i.item_id for i in store.read("work_items", ds)
           if i.request_event_id not in i.lineage or not set(i.lineage) <= known]
    return AssetCheckResult(passed=not bad, metadata={"items_with_bad_lineage": len(bad),
                                                      "examples": ", ".join(bad[:5]) or "none"})


@asset_check(asset=clusters, partitions_def=datasets, blocking=True,
             description="No near-duplicate group crosses train/test; every test item carries the canary.")
def splits_leakage_safe(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    store, ds = warehouse.store(), context.partition_key
    rows = store.read("clusters", ds)
    splits: dict[str, set] = {}
    for r in rows:
        splits.setdefault(r.dup_group, set()).add(r.split)
    crossing = sorted(g for g, s in splits.items() if len(s) > 1)
    no_canary = sum(1 for r in rows if r.split == "test" and not r.canary)
    canary_on_train = sum(1 for r in rows if r.split == "train" and r.canary)
    return AssetCheckResult(passed=not crossing and not no_canary and not canary_on_train, metadata={
        "groups_crossing_splits": len(crossing), "test_without_canary": no_canary,
        "train_with_canary": canary_on_train, "test": sum(1 for r in rows if r.split == "test"), "items": len(rows)})


CHECKS = [events_schema, quarantine_rate, anonymized_leaks, work_item_lineage, splits_leakage_safe, oracle_and_null,
          leak_audit]
