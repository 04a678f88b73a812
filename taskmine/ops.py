"""Commands a person runs on one thing: replay one task, check one export. No Dagster here."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from environments.backends import get_sandbox
from extractors import detect
from extractors.base import says_where
from graders import replay
from llm import LLM
from warehouse.schemas import Event, Quarantine, Task, to_table
from warehouse.store import Store


class NotFound(LookupError):
    pass


def find_task(store: Store, prefix: str, dataset: str | None = None) -> Task:
    names = [dataset] if dataset else store.datasets("tasks")
    found = [t for ds in names for t in store.iter("tasks", ds) if t.task_id.startswith(prefix)]
    if not found:
        raise NotFound(f"no task id starts with {prefix!r} in {', '.join(names) or 'an empty warehouse'}; "
                       "list them with: taskmine query \"select task_id, family from tasks\"")
    if len(found) > 1:
        raise NotFound(f"{len(found)} tasks start with {prefix!r}; give more characters of the id")
    return found[0]


def replay_task(prefix: str, agent: str, dataset: str | None = None, sandbox_kind: str = "auto",
                timeout_s: float = 120.0) -> int:
    store = Store()
    try:
        task = find_task(store, prefix, dataset)
    except NotFound as exc:
        raise KeyError(str(exc)) from None
    sandbox = get_sandbox(sandbox_kind, home=store.home)
    kind, command = replay.agent_command(task, agent)
    print(f"task {task.task_id} ({task.family}) in {sandbox.kind}: {kind}: {command[:200]}", flush=True)

    llm = LLM.from_env()      # TASKMINE_LLM_MODEL: judge checks and the simulated requester; unset: no model
    seen: list = []
    v = replay.run_once(task, store.worlds(task.dataset), sandbox, kind, command,
                        timeout_s=timeout_s, llm=llm, on_exec=seen.append)
    for r in seen:
        print(agent_output(r.stdout, r.stderr))
    for c in v.checks:
        score = "n/a " if c["score"] is None else f"{c['score']:.2f}"
        print(f"  {c['id']:<12} {score} x{c['weight']:g}  {c['explanation'][:100]}")
    score = "n/a" if v.score is None else f"{v.score:.3f}"
    print(f"agent: {v.status or 'no status'}  ({v.duration_s:.1f}s, sandbox={v.sandbox})")
    print(f"score {score}{'  (' + v.error_class + ')' if v.error_class else ''}"
          f"{'  ' + v.message if v.message else ''}")
    return 0 if v.error_class is None else 1


OUTPUT_LINES = 40   # of each stream: the end of what the agent printed (its last lines say why it stopped)


def agent_output(stdout: str, stderr: str, lines: int = OUTPUT_LINES) -> str:
    """The agent's stdout and stderr for `taskmine replay`: the last `lines` of each, indented, with how many
    lines were left out."""
    out = []
    for name, text in (("stdout", stdout or ""), ("stderr", stderr or "")):
        rows = text.rstrip("\n").splitlines()
        if not rows:
            out.append(f"  {name}: (empty)")
            continue
        cut = len(rows) - lines
        out.append(f"  {name}:" + (f" (last {lines} of {len(rows)} lines)" if cut > 0 else ""))
        out += [f"    | {r}" for r in rows[-lines:]]
    return "\n".join(out)


def check_export(path: Path) -> int:
    """What `taskmine run` would ingest from one dataset folder, or one export file as downloaded (a Slack
    .zip, an .mbox, a Jira JSON), and whether the rows keep the extractor contract (schema-valid, unique
    and stable ids, identity conventions, quarantine says where), without writing anything. Exit 1 when a
    contract check fails."""
    path = path.resolve()
    plan = detect.plan(path)
    base = path.parent if path.is_file() else path
    inputs = {p.relative_to(base).as_posix() if p != base else "." for _, p in plan}
    events: Counter = Counter()
    quarantined: Counter = Counter()
    ids: list[str] = []
    problems: Counter = Counter()
    batch_e: list[Event] = []
    batch_q: list[Quarantine] = []
    for row in detect.ingest(path.name, path, run_id="check"):
        if isinstance(row, Event):
            events[(row.source, row.kind)] += 1
            ids.append(row.event_id)
            batch_e.append(row)
            handles = {p.get("handle") for p in row.attrs.get("people") or [] if isinstance(p, dict)}
            if row.actor and (not row.actor.startswith(f"{row.source}:") or row.actor not in handles):
                problems["actor not '<source>:...' or not among attrs.people"] += 1
        else:
            quarantined[(row.source, row.error_class)] += 1
            batch_q.append(row)
            if not says_where(row, inputs):
                problems["quarantine row about a record without offset or member"] += 1
        if len(batch_e) + len(batch_q) >= 5000:
            problems.update(_schema_problems(to_table, batch_e, batch_q))
            batch_e, batch_q = [], []
    problems.update(_schema_problems(to_table, batch_e, batch_q))
    if len(ids) != len(set(ids)):
        problems["duplicate event ids"] += len(ids) - len(set(ids))
    again = [r.event_id for r in detect.ingest(path.name, path, run_id="check-2") if isinstance(r, Event)]
    if again != ids:
        problems["a second pass gives other ids or another order (not deterministic)"] += 1
    print(f"{path}: {len(plan)} inputs")
    for name, p in plan:
        print(f"  {name:<12} {p.relative_to(base) if p != base else '.'}")
    unclaimed = detect.unclaimed(path) if path.is_dir() else []
    if unclaimed:
        print(f"  not recognised: {len(unclaimed)} files, e.g. {unclaimed[0].relative_to(path)}")
    print(f"\n  {'source':<8} {'kind':<16} {'count':>7}")
    for (src, kind), n in sorted(events.items()):
        print(f"  {src:<8} {kind:<16} {n:>7}")
    for (src, err), n in sorted(quarantined.items()):
        print(f"  {src:<8} {'quarantine:' + err:<16} {n:>7}")
    total_e, total_q = sum(events.values()), sum(quarantined.values())
    print(f"\n  {total_e} events would be ingested, {total_q} records quarantined")
    if problems:
        for what, n in sorted(problems.items()):
            print(f"  contract: FAILED {what} ({n})")
        return 1
    print("  contract: ok (schema-valid rows, unique and stable ids, identity conventions, quarantine says where)")
    return 0


def _schema_problems(to_table, events, quarantined) -> Counter:
    out: Counter = Counter()
    for model, rows in ((Event, events), (Quarantine, quarantined)):
        try:
            to_table(model, rows)
        except Exception as exc:
            out[f"rows do not match the {model.table} schema: {type(exc).__name__}"] += 1
    return out
