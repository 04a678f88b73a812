"""The validations stage and its gate: oracle, null, probe and alternative replays of every task in its sandbox
(graders.replay), then for every valid task what measures its difficulty (retrieval baselines, model rollouts),
stored task by task; the verdicts, the difficulty report and the funnel every later reader uses (publishing, the
card, `taskmine difficulty`, the CLI's run summary).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from core.config import DatasetConfig
from core.stage import CheckResult, Image, Markdown, RunContext, Shown, StageResult, Table, record_rejections
from graders import agent, baselines, difficulty, replay
from warehouse.schemas import Rejection, Task, Validation
from warehouse.store import Store

# --- the stage --------------------------------------------------------------------------------------------

def validations(ctx: RunContext, only: Iterable[str] | None = None) -> StageResult:
    """Oracle and null runs (and every probe) for every task not yet validated in this kind of sandbox; then,
    for every valid task, what measures its difficulty and is still missing: one run of each retrieval baseline
    (`config.baselines`, graders.baselines) and `config.rollouts` model-agent rollouts (graders.agent; only when
    `ctx.llm` has a model). `only`: these tasks alone (tests, a re-validation of a few).

    Each task's runs are kept as soon as its verdict is in (the table's journal, Store.journal_add; the table is
    written once at the end), so a run killed at task 6 of 20 keeps the first five and the re-run replays only
    what is missing. `config.validate_parallel` tasks are validated at
    once (each episode is its own sandbox session; a code-change task's eleven episodes each run its test modules,
    minutes a task, so a machine with cores to spare finishes sooner); verdicts are stored by this thread alone."""
    store, dataset, config, sandbox, llm = ctx.store, ctx.dataset, ctx.config, ctx.sandbox, ctx.llm
    repeats, parallel = config.repeats, config.validate_parallel
    all_tasks = store.read("tasks", dataset)
    current = {t.task_id for t in all_tasks}
    wanted = set(only) if only else None
    store.fold_journal("validations", dataset)    # the finished tasks of a run that was killed
    existing = store.read("validations", dataset)
    # a task is done when it has runs in this kind of sandbox and none of them was an infrastructure error (one
    # lost run among a task's dozen makes the whole task replayed again, not kept with a hole)
    broken = {v.task_id for v in existing if v.error_class in ("infra", "timeout")
              and not v.run_kind.startswith(MEASURE_KINDS)}     # (a baseline's is redone by `measure`)
    done = {v.task_id for v in existing if v.sandbox == sandbox.kind} - broken
    todo = [t for t in all_tasks if t.task_id not in done and (wanted is None or t.task_id in wanted)]
    redo = {t.task_id for t in todo}
    rows = [v for v in existing if v.task_id in current and v.task_id not in redo]
    if len(rows) != len(existing):
        store.replace("validations", dataset, rows)

    def stored(i: int, task: Task, verdict) -> None:
        rows.extend(verdict.validations)
        store.journal_add("validations", dataset, verdict.validations)     # kept the moment its verdict is in
        ctx.say(f"validated {i}/{len(todo)} {task.family} {task.task_id[:10]}: "
                f"{'ok' if verdict.valid else verdict.reason}")

    validate_tasks(todo, store.worlds(dataset), sandbox, repeats, parallel=parallel, llm=llm, on_verdict=stored)
    verdicts = verdicts_by_task(rows, all_tasks)
    measuring = [t for t in all_tasks
                 if verdicts.get(t.task_id, (False,))[0] and (wanted is None or t.task_id in wanted)]
    rows, measured = measure(ctx, rows, measuring)
    store.replace("validations", dataset, rows)                        # the journal's rows, written once
    store.journal("validations", dataset).unlink(missing_ok=True)
    if hasattr(sandbox, "dispatched"):      # a pool of Docker hosts: what it sent where
        ctx.say("dispatched: " + ", ".join(f"{h} {n}" for h, n in sandbox.dispatched().items()))
    # images no current task (of any dataset in this home) uses any more
    # (and environment images no current task names: world["env"]["key"])
    pruned = sandbox.prune({k for ds in store.datasets("tasks") for t in store.iter("tasks", ds)
                            for k in (t.world_hash, (t.world.get("env") or {}).get("key")) if k})
    rejected = [Rejection(dataset=dataset, stage="validated", family=t.family, subject_id=t.task_id,
                          reason=verdicts[t.task_id][1].split(":")[0], detail=verdicts[t.task_id][1])
                for t in all_tasks if t.task_id in verdicts and not verdicts[t.task_id][0]]
    record_rejections(ctx, "validated", rejected)
    valid = sum(1 for t in all_tasks if verdicts.get(t.task_id, (False,))[0])
    report = difficulty_report(store, dataset, config, all_tasks, rows)
    return StageResult({"tasks": len(all_tasks), "validated_now": len(todo), "valid": valid,
                        "rejected": len(rejected), "runs": len(rows), "images_pruned": len(pruned),
                        "infra_errors": sum(1 for v in rows if v.error_class in ("infra", "timeout")),
                        **measured},
                       [{"task": r.subject_id[:12], "reason": r.detail[:100]} for r in rejected[:5]],
                       extra=report, shown={"funnel": Table(funnel_rows(funnel(store, dataset))),
                                            **difficulty_shown(report)})


def validate_tasks(tasks: list[Task], worlds: Path, sandbox, repeats: int, *, parallel: int = 1, llm=None,
                   on_verdict: Callable[[int, Task, replay.Verdict], None] | None = None) -> list[replay.Verdict]:
    """`replay.validate` of every task, `parallel` at once (at least the sandbox's capacity: a pool of Docker
    hosts runs as many tasks as it has slots, environments.pool), each task's episodes on one `sandbox.call` (a
    pool's lease of one host). `on_verdict(i, task, verdict)` runs in this thread, in the order tasks finish."""
    verdicts = []
    for i, (task, verdict) in enumerate(each_task(tasks, lambda box, t: replay.validate(t, worlds, box, repeats,
                                                                                          llm=llm),
                                                  sandbox, parallel), 1):
        verdicts.append(verdict)
        if on_verdict:
            on_verdict(i, task, verdict)
    return verdicts


def each_task(tasks: list[Task], work: Callable, sandbox, parallel: int = 1):
    """(task, `work(box, task)`) for every task, in the order they finish: each on one `sandbox.call`,
    `parallel` at once (at least the sandbox's capacity). One at a time, a task's result is yielded (and stored by
    the caller) before the next task starts."""
    parallel = max(parallel, getattr(sandbox, "capacity", 1))
    if parallel <= 1:
        for task in tasks:
            yield task, sandbox.call(lambda box, t=task: work(box, t))
        return
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        running = {pool.submit(sandbox.call, lambda box, t=task: work(box, t)): task for task in tasks}
        for done_now in as_completed(running):
            yield running[done_now], done_now.result()


MEASURE_KINDS = ("baseline:", "rollout:")


def measure(ctx: RunContext, rows: list[Validation], tasks: list[Task]) -> tuple[list[Validation], dict[str, int]]:
    """The difficulty runs of valid `tasks` still missing in this kind of sandbox (a run that failed on
    infrastructure is redone): every baseline once, `config.rollouts` rollouts with a model. Stored per task."""
    store, dataset, config, sandbox, llm = ctx.store, ctx.dataset, ctx.config, ctx.sandbox, ctx.llm
    def kept(v: Validation) -> bool:
        return v.sandbox == sandbox.kind and v.error_class not in ("infra", "timeout")

    counts = {"baseline_runs_now": 0, "rollouts_now": 0}
    if config.baselines:
        have = Counter(v.task_id for v in rows if v.run_kind.startswith("baseline:") and kept(v))
        # a task misses a baseline when it has fewer runs than its family has baselines (one added later)
        todo = [t for t in tasks if baselines.applicable(t.family)
                and have[t.task_id] < len(baselines.of(t.family))]
        runs = each_task(todo, lambda box, t: replay.baseline_runs(t, store.worlds(dataset), box, llm=llm), sandbox)
        for i, (t, new) in enumerate(runs, 1):
            rows = [v for v in rows if not (v.task_id == t.task_id and v.run_kind.startswith("baseline:"))] + new
            store.journal_add("validations", dataset, new)
            counts["baseline_runs_now"] += len(new)
            ctx.say(f"baseline {i}/{len(todo)} {t.family} {t.task_id[:10]}: "
                    + ", ".join(f"{v.run_kind[9:]} {v.score}" for v in new))
    n = config.rollouts if llm is not None and getattr(llm, "enabled", False) else 0
    if n:
        kind = f"rollout:{llm.config.model}"
        for t in tasks:
            done = {v.attempt for v in rows if v.task_id == t.task_id and v.run_kind == kind and kept(v)}
            for attempt in (a for a in range(n) if a not in done):
                v, _ = sandbox.call(lambda box, t=t, a=attempt: agent.rollout(t, store.worlds(dataset), box, llm,
                                                                              attempt=a))
                rows = [r for r in rows if not (r.task_id == t.task_id and r.run_kind == kind
                                                 and r.attempt == attempt)] + [v]
                store.journal_add("validations", dataset, [v])
                counts["rollouts_now"] += 1
                ctx.say(f"rollout {attempt + 1}/{n} {t.family} {t.task_id[:10]}: {v.score} {v.status}")
    return rows, counts


def difficulty_report(store: Store, dataset: str, config: DatasetConfig, all_tasks: list[Task] | None = None,
                      rows: list[Validation] | None = None, published: set[str] | None = None) -> dict:
    """Difficulty and grader error per family (graders.difficulty.stats) as stats, a table and a PNG plot
    (also written to reports/<dataset>/difficulty.png). `published` defaults to the valid tasks the band keeps."""
    all_tasks = store.read("tasks", dataset) if all_tasks is None else all_tasks
    rows = store.read("validations", dataset) if rows is None else rows
    verdicts = verdicts_by_task(rows, all_tasks)
    valid = {t.task_id for t in all_tasks if verdicts.get(t.task_id, (False,))[0]}
    if published is None:
        kept = retired(all_tasks, rows, config)
        published = valid - set(kept)
    st = difficulty.stats(all_tasks, rows, valid, published, config.band_min, config.band_max)
    res = difficulty.resistance(all_tasks, rows, published,
                                [r for r in store.read("rejections", dataset) if r.stage == "candidates"])
    out = {"difficulty": st, "difficulty_table": difficulty.table(st), "resistance": res,
           "resistance_table": difficulty.resistance_table(res)}
    if st:
        png = difficulty.plot(st, f"{dataset}: difficulty and grader error")
        report = store.home / "reports" / dataset
        report.mkdir(parents=True, exist_ok=True)
        (report / "difficulty.png").write_bytes(png)
        out.update(difficulty_plot=png, difficulty_plot_path=str(report / "difficulty.png"))
    return out


def retired(tasks: list[Task], rows: list[Validation], config: DatasetConfig) -> dict[str, str]:
    """task id -> why its difficulty band keeps it from publishing (rollouts put it outside [band_min, band_max])."""
    by_task: dict[str, list[Validation]] = {}
    for v in rows:
        by_task.setdefault(v.task_id, []).append(v)
    out = {}
    for t in tasks:
        d = difficulty.of(t, by_task.get(t.task_id, []), config.band_min, config.band_max)
        if d.retire:
            out[t.task_id] = d.retire
    return out


def verdicts_by_task(rows: list[Validation], tasks: Iterable[Task] = ()) -> dict[str, tuple[bool, str]]:
    """task id -> (valid, reason) from its stored runs (`tasks` give the probes' thresholds)."""
    limits = {t.task_id: replay.probe_limits(t) for t in tasks}
    by_task: dict[str, list[Validation]] = {}
    for v in rows:
        by_task.setdefault(v.task_id, []).append(v)
    return {tid: replay.judge(vs, limits.get(tid)) for tid, vs in by_task.items()}


def per_task_difficulty(tasks: list[Task], rows: list[Validation], config: DatasetConfig) -> dict[str, dict]:
    """task id -> its published difficulty columns (graders.difficulty)."""
    by_task: dict[str, list[Validation]] = {}
    for v in rows:
        by_task.setdefault(v.task_id, []).append(v)
    return {t.task_id: difficulty.of(t, by_task.get(t.task_id, []), config.band_min, config.band_max).columns()
            for t in tasks}


# --- the funnel and the gate ---------------------------------------------------------------------------------

def funnel(store: Store, dataset: str) -> dict[str, int]:
    all_tasks = store.read("tasks", dataset)
    verdicts = verdicts_by_task(store.read("validations", dataset), all_tasks)
    rej = Counter(r.stage for r in store.read("rejections", dataset))
    return {"events": store.count("anonymized_events", dataset), "work_items": store.count("work_items", dataset),
            "candidates": len(all_tasks) + rej.get("candidates", 0), "tasks": len(all_tasks),
            "validated": sum(1 for t in all_tasks if verdicts.get(t.task_id, (False,))[0])}



FUNNEL_STAGES = ("events", "work_items", "candidates", "tasks", "validated", "published")


def nothing_valid(store: Store, dataset: str) -> str | None:
    """Why the dataset has no valid task, in one line that names the commonest reasons (the rejections of the
    candidates, or the verdicts of the validated tasks), or None when one is valid. What the gate and publish
    say when a dataset gives nothing: the user sees what to change without opening a table."""
    all_tasks = store.read("tasks", dataset)
    verdicts = verdicts_by_task(store.read("validations", dataset), all_tasks)
    if any(verdicts.get(t.task_id, (False,))[0] for t in all_tasks):
        return None
    if all_tasks:
        # a verdict's kind: its words before the first score ("oracle scored", "probe passes: listing_url scored")
        why = Counter(re.split(r"[\d(\[]", verdicts.get(t.task_id, (False, "not replayed"))[1])[0].strip(" :")[:80]
                      for t in all_tasks)
        return (f"none of its {len(all_tasks)} tasks passed validation ("
                + ", ".join(f"{n} {k}" for k, n in why.most_common(3)) + "; see the rejections table)")
    rejected = [r for r in store.read("rejections", dataset) if r.stage == "candidates"]
    if not rejected:
        return "no task was built from it: no work item is a candidate of an enabled family (see the funnel)"
    why = Counter(f"{r.family}: {r.reason}" for r in rejected)
    return (f"no task was built from it: all {len(rejected)} candidates rejected ("
            + ", ".join(f"{n} {k}" for k, n in why.most_common(3)) + "; see the rejections table)")


def funnel_rows(counts: dict[str, int]) -> list[dict[str, str | int]]:
    """The dataset's funnel: each stage's count and the share of the previous stage it kept. Candidates fan out
    (one work item is a candidate of every family that reads its kind; a fixing commit without a ticket is one
    too), so their row says how many per work item instead of a share above 100%."""
    rows, previous = [], None
    for name in FUNNEL_STAGES:
        if name not in counts:
            continue
        n = int(counts[name])
        if name == "candidates":
            kept = f"{n / previous:.2f} per work item" if previous else ""
        else:
            kept = f"{n / previous:.0%}" if previous else ""
        rows.append({"stage": name, "count": n, "kept from previous": kept})
        previous = n
    return rows


def difficulty_shown(report: dict) -> dict[str, Shown]:
    """Per family difficulty and grader error (difficulty_report) as tables and the plot, and the hack-resistance
    table (every attack class: tasks tried, tasks it passed, best score on published tasks)."""
    if not report.get("difficulty_table"):
        return {}
    out: dict[str, Shown] = {"difficulty": Markdown("\n\n".join(difficulty.narrow_tables(report["difficulty_table"])))}
    if report.get("resistance_table"):
        out["hack_resistance"] = Markdown("\n\n".join(difficulty.narrow_tables(report["resistance_table"],
                                                                               ("family", "attack"))))
    if report.get("difficulty_plot_path"):
        out["difficulty_plot"] = Image(Path(report["difficulty_plot_path"]))
    return out


def check_oracle_and_null(ctx: RunContext) -> CheckResult:
    """Gate: every task was replayed, without infrastructure errors, and at least one is valid."""
    store, ds = ctx.store, ctx.dataset
    tasks = store.read("tasks", ds)
    verdicts = verdicts_by_task(store.read("validations", ds), tasks)
    missing = [t.task_id for t in tasks if t.task_id not in verdicts]
    infra = [tid for tid, (_, reason) in verdicts.items() if reason.startswith("infra")]
    valid = sum(1 for t in tasks if verdicts.get(t.task_id, (False,))[0])
    if missing or infra:
        why = (f"{len(missing)} tasks not replayed, {len(infra)} with infrastructure errors (e.g. "
               f"{verdicts[infra[0]][1][:160] if infra else missing[0][:12]}); fix the sandbox and re-run")
    elif not valid:
        why = f"{nothing_valid(store, ds)}; nothing to publish"
    else:
        why = f"{valid} of {len(tasks)} tasks valid"
    return CheckResult(bool(tasks) and not missing and not infra and valid > 0, why,
                       {"tasks": len(tasks), "valid": valid, "not_replayed": len(missing), "infra_errors": len(infra)})
