"""`taskmine bench pool`: validation over one Docker daemon against the same validation over two (environments.pool).

Input: the tasks already built in a warehouse (`taskmine --home H run` first), of the families asked for
(default code_change, email_reply, chat_answer), at most `--limit` of them (0: all). They are validated again
(oracle and null `--repeats` times, every probe once: `replay.validate`), nothing is stored, in three
configurations, one after the other:

1. one daemon:   this machine's daemon (DOCKER_HOST or the default socket), `--slots` sessions at once;
2. two daemons:  that daemon and a second one (`--second URL`, else a private dockerd this bench starts and
                 removes: bench.dockerd; root only), `--slots` each;
3. control:      the first daemon alone with twice the slots: the same concurrency as (2) on one daemon, so the
                 table tells what the second daemon adds from what more concurrency adds.

Before the clock starts every host gets the base image and every code environment the tasks name (built on the
first, copied to the second by save | load), so the configurations time validation, not image builds.
Printed: wall seconds per configuration, the ratio to one daemon, the load average (1 min) before and after each
(this machine is shared: a ratio means little when the load moved), where the pool sent the tasks, and whether
every configuration reached the same verdicts (valid or not, oracle and null scores).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from bench.dockerd import private_daemon
from environments.docker_cli import using
from environments.pool import HostSpec, SandboxPool
from environments.sandbox import home_label
from graders import verifier
from graders.stages import validate_tasks
from warehouse.store import Store

FAMILIES = ("code_change", "email_reply", "chat_answer")


def _default_host() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _summary(verdicts) -> dict[str, tuple]:
    """task -> (valid, oracle scores, null scores): what must not depend on where a task ran."""
    return {v.task_id: (v.valid, tuple(sorted(str(r.score) for r in v.validations if r.run_kind == "oracle")),
                        tuple(sorted(str(r.score) for r in v.validations if r.run_kind == "null")))
            for v in verdicts}


def _warm(pool, tasks, worlds: Path) -> float:
    """The base image and every code environment of `tasks` on every host of `pool`; seconds it took."""
    t0 = time.perf_counter()
    first, *others = pool.live()
    with using(first.url):
        pool._seed(first)
        tags = {verifier.environment(spec, first.sandbox, worlds)
                for t in tasks if (spec := verifier.spec_of(t)) is not None}
    for m in others:
        with using(m.url):
            pool._seed(m)
            for tag in tags - {None}:
                pool._ensure_image(m, tag)
    return time.perf_counter() - t0


def bench_pool(dataset: str | None, families: tuple[str, ...] = FAMILIES, repeats: int = 1, slots: int = 1,
               second: str | None = None, limit: int = 0) -> int:
    store = Store()
    names = [dataset] if dataset else store.datasets("tasks")
    tasks = [t for ds in names for t in store.read("tasks", ds) if t.family in families]
    if limit:
        tasks = tasks[:limit]
    if not tasks:
        raise ValueError(f"no {', '.join(families)} task in {store.home}; build them first: "
                         f"taskmine --home {store.home} run --exports ... --dataset ...")
    if len({t.dataset for t in tasks}) > 1:
        raise ValueError(f"tasks of several datasets in {store.home}; name one with --dataset")
    worlds = store.worlds(tasks[0].dataset)
    labels = {"taskmine.home": home_label(store.home)}
    first = _default_host()
    per_family = {f: sum(t.family == f for t in tasks) for f in families}
    print(f"tasks: {len(tasks)} ({', '.join(f'{f} {n}' for f, n in per_family.items() if n)}), repeats {repeats}, "
          f"{os.cpu_count()} cores", flush=True)
    with contextlib.ExitStack() as stack:
        if second is None:
            second = stack.enter_context(private_daemon())
            print(f"second daemon: a private dockerd at {second}", flush=True)
        configs = [("one daemon", [HostSpec(first, slots)]),
                   ("two daemons", [HostSpec(first, slots), HostSpec(second, slots)]),
                   ("control: one daemon, 2x slots", [HostSpec(first, 2 * slots)])]
        warm = SandboxPool([HostSpec(first, slots), HostSpec(second, slots)], image_labels=labels)
        print(f"warm-up (base image and code environments on both daemons): {_warm(warm, tasks, worlds):.0f}s",
              flush=True)
        rows, summaries = [], []
        for name, hosts in configs:
            pool = SandboxPool(hosts, image_labels=labels)
            load0 = os.getloadavg()[0]
            t0 = time.perf_counter()
            verdicts = validate_tasks(tasks, worlds, pool, repeats, parallel=1)
            wall = time.perf_counter() - t0
            load1 = os.getloadavg()[0]
            summaries.append(_summary(verdicts))
            valid = sum(v.valid for v in verdicts)
            sent = ", ".join(f"{'second' if h == second else 'first'} {n}" for h, n in pool.dispatched().items())
            rows.append((name, pool.capacity, wall, load0, load1, valid, sent))
            print(f"  {name}: {wall:.0f}s, {valid}/{len(tasks)} valid, load {load0:.1f} -> {load1:.1f}", flush=True)
    base = rows[0][2]
    print(f"\n{'configuration':<32} {'slots':>5} {'wall s':>8} {'vs one':>7} {'load 1m':>13} {'valid':>6}  sent")
    for name, cap, wall, l0, l1, valid, sent in rows:
        print(f"{name:<32} {cap:>5} {wall:>8.1f} {wall / base:>7.2f} {f'{l0:.1f} -> {l1:.1f}':>13} "
              f"{valid:>6}  {sent}")
    same = all(s == summaries[0] for s in summaries[1:])
    print(f"\nsame verdicts and oracle/null scores in every configuration: {'yes' if same else 'NO'}")
    if not same:
        for task_id in summaries[0]:
            seen = [s.get(task_id) for s in summaries]
            if any(x != seen[0] for x in seen):
                print(f"  {task_id[:12]}: " + " | ".join(str(x) for x in seen))
    return 0 if same else 1
