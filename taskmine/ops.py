"""Commands a person runs on one thing: replay one task, check one export. No Dagster here."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from warehouse.schemas import Event, Task
from warehouse.store import Store


class NotFound(LookupError):
    pass


def find_task(store: Store, prefix: str, dataset: str | None = None) -> Task:
    names = [dataset] if dataset else store.datasets("tasks")
    found = [t for ds in names for t in store.iter("tasks", ds) if t.task_id.startswith(prefix)]
    if not found:
        raise NotFound(f"no task id starts with {prefix!r} in {', '.join(names) or 'an empty warehouse'}; "
                       "list them with: duckdb .taskmine/warehouse.duckdb -c 'select task_id, family from tasks'")
    if len(found) > 1:
        raise NotFound(f"{len(found)} tasks start with {prefix!r}; give more characters of the id")
    return found[0]


def replay_task(prefix: str, agent: str, dataset: str | None = None, sandbox_kind: str = "auto",
                timeout_s: float = 120.0) -> int:
    from graders import replay
    from graders.sandbox import get_sandbox

    store = Store()
    try:
        task = find_task(store, prefix, dataset)
    except NotFound as exc:
        raise KeyError(str(exc)) from None
    sandbox = get_sandbox(sandbox_kind)
    kind, command = replay.agent_command(task, agent)
    print(f"task {task.task_id} ({task.family}) in {sandbox.kind}: {kind}: {command[:200]}", flush=True)
    v = replay.run_once(task, store.worlds(task.dataset) / task.world["dir"], sandbox, kind, command,
                        timeout_s=timeout_s)
    for c in v.checks:
        print(f"  {c['id']:<12} {c['score']:.2f} x{c['weight']:g}  {c['explanation'][:100]}")
    score = "n/a" if v.score is None else f"{v.score:.3f}"
    print(f"score {score}  ({v.duration_s:.1f}s, sandbox={v.sandbox}"
          f"{', ' + v.error_class if v.error_class else ''}{', ' + v.message if v.message else ''})")
    return 0 if v.error_class is None else 1


def check_export(path: Path) -> int:
    """What `taskmine run` would ingest from one dataset folder, without writing anything."""
    from extractors import detect

    path = path.resolve()
    plan = detect.plan(path)
    events: Counter = Counter()
    quarantined: Counter = Counter()
    for row in detect.ingest(path.name, path, run_id="check"):
        if isinstance(row, Event):
            events[(row.source, row.kind)] += 1
        else:
            quarantined[(row.source, row.error_class)] += 1
    print(f"{path}: {len(plan)} inputs")
    for name, p in plan:
        print(f"  {name:<12} {p.relative_to(path) if p != path else '.'}")
    unclaimed = detect.unclaimed(path)
    if unclaimed:
        print(f"  not recognised: {len(unclaimed)} files, e.g. {unclaimed[0].relative_to(path)}")
    print(f"\n  {'source':<8} {'kind':<16} {'count':>7}")
    for (src, kind), n in sorted(events.items()):
        print(f"  {src:<8} {kind:<16} {n:>7}")
    for (src, err), n in sorted(quarantined.items()):
        print(f"  {src:<8} {'quarantine:' + err:<16} {n:>7}")
    total_e, total_q = sum(events.values()), sum(quarantined.values())
    print(f"\n  {total_e} events would be ingested, {total_q} records quarantined")
    return 0
