"""Asset checks: schema, quarantine rate, leak audit, oracle/null results.

The checks that guard publishing are blocking with ERROR severity: when one fails, the stages after it do
not run, the run fails, and the check's one-line description becomes the run's `taskmine/error` tag.
"""


import warnings

import pyarrow.parquet as pq
from dagster import AssetCheckExecutionContext, AssetCheckResult, AssetCheckSeverity, PreviewWarning, asset_check

from pipelines.assets import (anonymized_events, clusters, datasets, published_dataset, raw_events, validations,
                              work_items)
from pipelines.errors import tag_run
from pipelines.resources import ExportsResource, WarehouseResource


def _verdict(context, passed: bool, why: str, metadata: dict, blocking: bool = True) -> AssetCheckResult:
    """A check result whose description says why in one line; a failed blocking check also tags the run."""
    if not passed and blocking:
        tag_run(context, why)
    return AssetCheckResult(passed=passed, description=why, metadata=metadata,
                            severity=AssetCheckSeverity.ERROR if blocking else AssetCheckSeverity.WARN)

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


@asset_check(asset=raw_events, partitions_def=datasets, blocking=True,
             description="The share of quarantined records stays under the dataset's max_quarantine_rate "
                         "(blocking: an export that is mostly unreadable is not mined or published).")
def quarantine_rate(context: AssetCheckExecutionContext, warehouse: WarehouseResource,
                    exports: ExportsResource) -> AssetCheckResult:
    from taskmine import flow

    store, ds = warehouse.store(), context.partition_key
    config = flow.run_config(store, ds, exports.dataset_dir(ds), context.run.run_id)
    rate, quarantined, total = flow.quarantine_rate(store, ds)
    problem = flow.quarantine_problem(store, ds, config)
    return _verdict(context, problem is None, problem or f"{quarantined} of {total} records quarantined",
                    {"quarantined": quarantined, "records": total, "rate": round(rate, 4),
                     "limit": config.max_quarantine_rate})


@asset_check(asset=anonymized_events, partitions_def=datasets, blocking=True,
             description="What the leak audit still found after anonymization was withheld (left out of the world "
                         "and of every task); the share withheld stays under the dataset's max_withheld_rate "
                         "(blocking: over it, the run stops here).")
def anonymized_leaks(context: AssetCheckExecutionContext, warehouse: WarehouseResource,
                     exports: ExportsResource) -> AssetCheckResult:
    from taskmine import flow

    store, ds = warehouse.store(), context.partition_key
    config = flow.run_config(store, ds, exports.dataset_dir(ds), context.run.run_id)
    s = flow.withheld_summary(store, ds, stages=("anonymize",))
    problem = flow.withheld_problem(store, ds, config, stages=("anonymize",))
    why = problem or ("nothing withheld: the leak audit finds nothing in the anonymized records" if not s["total"]
                      else f"{s['total']} of {s['records']} records withheld ({s['rate']:.2%}; "
                           f"{', '.join(f'{n} {k}' for k, n in list(s['by_reason'].items())[:4])}); the rest goes on")
    return _verdict(context, problem is None, why, {
        "withheld": s["total"], "records": s["records"], "rate": s["rate"], "limit": config.max_withheld_rate,
        "by_kind": ", ".join(f"{k} {n}" for k, n in s["by_kind"].items()) or "none",
        "by_reason": ", ".join(f"{k} {n}" for k, n in s["by_reason"].items()) or "none"})


@asset_check(asset=validations, partitions_def=datasets, blocking=True,
             description="Every task was replayed, without infrastructure errors, and at least one is valid "
                         "(blocking: a dataset with nothing valid publishes nothing and LATEST stays).")
def oracle_and_null(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    from taskmine import flow

    store, ds = warehouse.store(), context.partition_key
    verdicts = flow.verdicts_by_task(store.read("validations", ds), store.read("tasks", ds))
    tasks = store.read("tasks", ds)
    missing = [t.task_id for t in tasks if t.task_id not in verdicts]
    infra = [tid for tid, (_, reason) in verdicts.items() if reason.startswith("infra")]
    valid = sum(1 for t in tasks if verdicts.get(t.task_id, (False,))[0])
    if not tasks:
        why = "no task was built from this dataset (see the funnel and the rejections table); nothing to publish"
    elif missing or infra:
        why = (f"{len(missing)} tasks not replayed, {len(infra)} with infrastructure errors (e.g. "
               f"{verdicts[infra[0]][1][:160] if infra else missing[0][:12]}); fix the sandbox and re-run")
    elif not valid:
        why = f"none of the {len(tasks)} tasks passed validation (see the rejections table); nothing to publish"
    else:
        why = f"{valid} of {len(tasks)} tasks valid"
    return _verdict(context, bool(tasks) and not missing and not infra and valid > 0, why,
                    {"tasks": len(tasks), "valid": valid, "not_replayed": len(missing), "infra_errors": len(infra)})


@asset_check(asset=published_dataset, partitions_def=datasets, blocking=True,
             description="Leak audit: no known real name, no personal data the recognizers or NER find, no secret "
                         "in the published files, and every file as its manifest says.")
def leak_audit(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    from privacy import audit
    from taskmine import flow
    from warehouse.loader import resolve

    store, ds = warehouse.store(), context.partition_key
    root = resolve(store.published_root() / ds)
    hits = audit.audit(root, flow.audit_rules(store, ds), manifest=True).hits
    why = (f"{root.name}: no known identity or secret in the published files" if not hits else
           f"{root.name}: {len(hits)} known identities or secrets in the published files, first in "
           f"{hits[0].file} ({hits[0].where}, {hits[0].kind})")
    return _verdict(context, not hits, why, {
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
    ok = not crossing and not no_canary and not canary_on_train
    why = "no near-duplicate group crosses train/test" if ok else (
        f"{len(crossing)} near-duplicate groups cross train/test, {no_canary} test items lack the canary, "
        f"{canary_on_train} train items carry it")
    return _verdict(context, ok, why, {
        "groups_crossing_splits": len(crossing), "test_without_canary": no_canary,
        "train_with_canary": canary_on_train, "test": sum(1 for r in rows if r.split == "test"), "items": len(rows)})


CHECKS = [events_schema, quarantine_rate, anonymized_leaks, work_item_lineage, splits_leakage_safe, oracle_and_null,
          leak_audit]
