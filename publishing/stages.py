"""The publish stage and its gates: the validated tasks inside their difficulty band written as a new version
(publishing.publish), refused (PublishRefused, LATEST left where it was) when no task is valid or the quarantine
or withheld share is over its limit; and the leak audit of what was published (`check_leak_audit`).
"""

from __future__ import annotations

import duckdb

from core.config import DatasetConfig
from core.stage import CheckResult, FilePath, RunContext, StageResult, Table, record_rejections
from extractors.stages import quarantine_problem
from graders.stages import (
    difficulty_report,
    difficulty_shown,
    funnel,
    funnel_rows,
    nothing_valid,
    per_task_difficulty,
    retired,
    verdicts_by_task,
)
from privacy import audit
from privacy.repos import repo_remotes
from privacy.stages import audit_rules
from privacy.withhold import record_withheld, withheld_problem, withheld_summary
from publishing.loader import resolve
from publishing.publish import Provenance, Published
from publishing.publish import publish as write
from warehouse.locks import dataset_lock
from warehouse.schemas import Rejection, Withheld
from warehouse.store import Store


class PublishRefused(RuntimeError):
    """The run must not publish (no validated task, too much quarantined): LATEST stays where it was."""


def latest_version(store: Store, dataset: str) -> str | None:
    f = store.published_root() / dataset / "LATEST"
    return f.read_text().strip() or None if f.exists() else None


def provenance(store: Store, dataset: str, config: DatasetConfig) -> list[Provenance]:
    """Per source of the dataset's anonymized events: how many, the first and last date, its licence (config)."""
    path = store.partition("anonymized_events", dataset)
    if not path.exists():
        return []
    with duckdb.connect() as con:
        rows = con.execute("select source, count(*), min(ts), max(ts) from read_parquet(?) group by 1 order by 1",
                           [str(path)]).fetchall()
    return [Provenance(src, int(n), first.date().isoformat(), last.date().isoformat(),
                       config.source_licenses.get(src, config.license if config.license != "other" else "unknown"))
            for src, n, first, last in rows]


def publish(ctx: RunContext) -> StageResult:
    """Publish the validated tasks, under the dataset's lock; refuse (PublishRefused) when there is no
    validated task or the quarantine or withheld rate is over its limit, so LATEST keeps pointing at the last good
    one. `extra`: the version written (`published`, publishing.publish.Published) and the funnel (`funnel`)."""
    store, dataset, config = ctx.store, ctx.dataset, ctx.config
    result, counts = _publish(ctx)
    report = difficulty_report(store, dataset, config)   # the published tasks: valid, inside the band
    return StageResult({"version": result.version, "tasks": result.tasks, "new_version": result.created},
                       extra={"published": result, "funnel": counts},
                       shown={"path": FilePath(str(result.path)), "funnel": Table(funnel_rows(counts)),
                              **difficulty_shown(report)})


def _publish(ctx: RunContext) -> tuple[Published, dict[str, int]]:
    store, dataset, config = ctx.store, ctx.dataset, ctx.config
    with dataset_lock(store.home, dataset, "publish"):
        all_tasks = store.read("tasks", dataset)
        vals = store.read("validations", dataset)
        verdicts = verdicts_by_task(vals, all_tasks)
        valid = [t for t in all_tasks if verdicts.get(t.task_id, (False,))[0]]
        latest = latest_version(store, dataset)
        keep = f"nothing published, LATEST stays at {latest}" if latest else "nothing published"
        problem = quarantine_problem(ctx) or withheld_problem(ctx)
        if problem:
            raise PublishRefused(f"{dataset}: {problem}; {keep}")
        if not valid:
            raise PublishRefused(f"{dataset}: {nothing_valid(store, dataset)}; {keep}")
        out_of_band = retired(valid, vals, config)
        record_rejections(ctx, "published", [
            Rejection(dataset=dataset, stage="published", family=t.family, subject_id=t.task_id,
                      reason=out_of_band[t.task_id].split(":")[0], detail=out_of_band[t.task_id])
            for t in valid if t.task_id in out_of_band])
        if len(out_of_band) == len(valid):
            raise PublishRefused(f"{dataset}: every one of its {len(valid)} valid tasks is outside the difficulty "
                                 f"band [{config.band_min:g}, {config.band_max:g}] of its rollouts (see the "
                                 f"rejections table, stage published); {keep}")
        valid = [t for t in valid if t.task_id not in out_of_band]
        measured = per_task_difficulty(valid, vals, config)
        report = difficulty_report(store, dataset, config, all_tasks, vals, {t.task_id for t in valid})
        summary: dict[str, dict] = {}
        for v in vals:
            s = summary.setdefault(v.task_id, {"sandbox": v.sandbox, "oracle": [], "null": []})
            if v.run_kind in ("oracle", "null"):
                s[v.run_kind].append(v.score)
        counts = funnel(store, dataset)
        if out_of_band:
            counts["retired_by_difficulty"] = len(out_of_band)
        counts["published"] = len(valid)
        result = write(valid, store.worlds(dataset), store.published_root(), dataset, funnel=counts,
                       validation=summary, rules=audit_rules(store, dataset), difficulty=measured,
                       stats=report["difficulty"], resistance=report["resistance"],
                       provenance=provenance(store, dataset, config),
                       license=config.license, remotes=repo_remotes(store, dataset),
                       withheld=withheld_summary(store, dataset, stages=("anonymize",)))
        counts["published"] = result.tasks
        if result.withheld:
            counts["withheld_at_publish"] = len(result.withheld)
        record_withheld(store, dataset, "publish", [
            Withheld(dataset=dataset, stage="publish", record_kind="task", record_id=tid, reason=why)
            for tid, why in result.withheld.items()], {"task": len(valid)})
    return result, counts


def check_leak_audit(ctx: RunContext) -> CheckResult:
    """Gate: no known real name, no personal data the recognizers or NER find, no secret in the published files,
    and every file as its manifest says."""
    root = resolve(ctx.store.published_root() / ctx.dataset)
    hits = audit.audit(root, audit_rules(ctx.store, ctx.dataset), manifest=True).hits
    why = (f"{root.name}: no known identity or secret in the published files" if not hits else
           f"{root.name}: {len(hits)} known identities or secrets in the published files, first in "
           f"{hits[0].file} ({hits[0].where}, {hits[0].kind})")
    return CheckResult(not hits, why, {
        "version": root.name, "hits": len(hits),
        "where": "; ".join(f"{h.file}: {h.where} ({h.kind})" for h in hits[:10]) or "none"})
