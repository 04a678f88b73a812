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
        print(_withheld_line(flow.withheld_summary(store, ds)))
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


def _withheld_line(w: dict) -> str:
    """What was withheld because the leak audit still found something in it after anonymization."""
    if not w["total"]:
        return f"  withheld: none of {w['records']} records"
    reasons = ", ".join(f"{n} {k}" for k, n in w["by_reason"].items())
    kinds = ", ".join(f"{n} {k}" for k, n in w["by_kind"].items())
    return f"  withheld: {w['total']} of {w['records']} records ({w['rate']:.2%}): {kinds}; reasons: {reasons}"


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc; children first reached breadth-first)."""
    import os

    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(0), []):
            out.append(c)
            todo.append(c)
    return out


def run_forwarding_signals(cmd: list[str], grace_s: float = 20.0) -> int:
    """Run `cmd` (`dagster dev`) as a child and stop it with everything it started when we are told to stop.

    `dagster dev` shuts down cleanly on SIGINT but not on SIGTERM, and its webserver, daemon and code servers
    outlive it; a service manager stops us with SIGTERM. So on SIGTERM, SIGINT or SIGHUP: note every process
    below the child, send the child SIGINT, wait `grace_s`, then SIGTERM (and after 5 s SIGKILL) whatever of
    them is left. Returns the child's exit status (128 + the signal when we were stopped)."""
    import os
    import signal
    import subprocess
    import time

    proc = subprocess.Popen(cmd, start_new_session=True)
    stop: list[int] = []

    def on_signal(signum, _frame) -> None:
        stop.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        while proc.poll() is None and not stop:
            time.sleep(0.2)
        if not stop:
            return proc.returncode
        tree = _descendants(proc.pid)
        try:
            proc.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and (proc.poll() is None or _alive(tree)):
            time.sleep(0.2)
        for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            left = [p for p in [proc.pid, *tree] if (p == proc.pid and proc.poll() is None) or
                    (p != proc.pid and _alive([p]))]
            if not left:
                break
            for p in left:
                try:
                    os.kill(p, sig)
                except ProcessLookupError:
                    pass
            end = time.monotonic() + wait_s
            while time.monotonic() < end and (proc.poll() is None or _alive(tree)):
                time.sleep(0.1)
        proc.wait(timeout=5)
        return 128 + stop[0]
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _alive(pids: list[int]) -> bool:
    """Is any of `pids` still a live (not zombie) process?"""
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            return True
    return False
