"""`taskmine run`: execute the same Dagster job the UI materializes, one run per dataset partition, in the
persistent instance under $TASKMINE_HOME/dagster (so the runs show up in `taskmine ui`). The job's assets, checks
and their order are generated from `taskmine.flow.STAGES`.

Executors (`--executor`):
- `auto` (the default): the runs of different datasets at once, each in its own process (at most `--parallel`,
  default the machine's cores), every step of a run in that process: two datasets use two cores, and a stage's
  models (spaCy, the embedding model) load once per run;
- `multiprocess`: the same, and each step of a run in its own process (Dagster's multiprocess executor, forked
  from a server that imported Dagster and the definitions once): steps that do not depend on each other run at
  once (the world beside links, work items and clusters), at the price of loading a stage's models in every step
  that needs them;
- `in_process`: every step of every dataset in this process, one dataset after the other (debugging);
- `docker`: each step in its own container (dagster-docker's docker_executor; pipelines/distributed.py).

Each dataset's run holds the dataset's write lock (warehouse.locks) from start to end: a second `taskmine run`
of the same dataset, or a run started in the UI, waits for it instead of writing over it. The run's own steps,
in other processes or containers, re-enter it (`locks.share_with_steps`)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from dagster import DagsterInstance, execute_job
from dagster._core.definitions.reconstruct import ReconstructableRepository

from graders.stages import funnel
from pipelines.assets import datasets
from pipelines.definitions import defs
from pipelines.errors import ERROR_TAG
from privacy.withhold import withheld_summary
from publishing.stages import latest_version
from warehouse.locks import dataset_lock, share_with_steps
from warehouse.store import Store

EXECUTORS = ("auto", "multiprocess", "in_process", "docker")


def run_datasets(names: list[str], repeats: int = 0, executor: str = "auto", parallel: int = 0) -> int:
    """Run every dataset of `names`; 0 when each published, 1 otherwise. `parallel`: datasets (and steps of a
    run) at once (0: this machine's cores)."""
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    parallel = parallel or os.cpu_count() or 1
    share_with_steps()
    with DagsterInstance.get() as instance:  # disposed at the end: nothing of it outlives the call
        instance.add_dynamic_partitions(datasets.name, [n for n in names
                                                        if not instance.has_dynamic_partition(datasets.name, n)])
    started = time.time()
    if executor == "in_process" or len(names) == 1 or parallel == 1:   # one after the other, here
        results = [run_one(ds, repeats, executor, parallel, started, prefix="") for ds in names]
    else:
        # one process per dataset (Dagster's instance and a run's executor are not shared between threads)
        with ProcessPoolExecutor(max_workers=min(parallel, len(names)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(run_one, ds, repeats, executor, parallel, started, f"{ds}: ") for ds in names]
            results = [f.result() for f in futures]
    return 1 if any(not ok for ok in results) else 0


def run_config_for(executor: str, repeats: int, parallel: int, started: float, prefix: str,
                   dataset: str = "") -> dict:
    """The run config of one dataset's run: the progress logger (times from the command's start, lines prefixed
    with the dataset when several run at once), the executor's settings and the sandbox's repeats."""
    config: dict = {"loggers": {"progress": {"config": {"started": started, "prefix": prefix}}}}
    if executor == "multiprocess":
        # steps fork from a server that has imported Dagster and the definitions once: a fresh interpreter per
        # step spends seconds importing them (minutes on a loaded machine)
        config["execution"] = {"config": {"multiprocess": {
            "max_concurrent": parallel,
            "start_method": {"forkserver": {"preload_modules": ["dagster", "pipelines.definitions"]}}}}}
    elif executor == "docker":
        # on demand: dagster-docker and the step image's builder only for this executor
        from pipelines.distributed import docker_execution

        config["execution"] = {"config": docker_execution(dataset=dataset)}
    if repeats:
        config["resources"] = {"sandbox": {"config": {"repeats": repeats}}}
    return config


def reconstructable_job(executor: str):
    """The job as a pointer other processes and containers load it by (module and name, no file paths)."""
    module = "pipelines.distributed" if executor == "docker" else "pipelines.definitions"
    name = "taskmine_job_docker" if executor == "docker" else "taskmine_job"
    return ReconstructableRepository.for_module(module, "defs").get_reconstructable_job(name)


def run_one(ds: str, repeats: int, executor: str, parallel: int, started: float, prefix: str) -> bool:
    """One dataset's run under its lock; prints its funnel and where it published (or the one-line reason)."""
    store = Store()
    run_config = run_config_for(executor, repeats, parallel, started, prefix, ds)
    tags = {"taskmine/source": "cli", "taskmine/executor": executor}
    print(f"{prefix}dataset {ds}:" if not prefix else f"{prefix}started ({executor})", flush=True)
    with DagsterInstance.get() as instance, \
            dataset_lock(store.home, ds, "taskmine run", on_wait=lambda m: print(f"  {prefix}{m}", flush=True)):
        if executor in ("auto", "in_process"):
            result = defs.resolve_job_def("taskmine_job").execute_in_process(
                instance=instance, partition_key=ds, raise_on_error=False, run_config=run_config, tags=tags)
        else:
            try:
                result = execute_job(reconstructable_job(executor), instance, run_config=run_config,
                                     tags={**tags, "dagster/partition": ds}, raise_on_error=False)
            finally:
                if executor == "docker":    # docker_executor leaves exited step containers (their logs are in the
                    # run's compute logs); on demand: dagster-docker only for this executor
                    from pipelines.distributed import remove_step_containers

                    remove_step_containers(ds)
        run = instance.get_run_by_id(result.run_id)
    counts = funnel(store, ds)
    published = latest_version(store, ds)
    if published:
        manifest = json.loads((store.published_root() / ds / published / "manifest.json").read_text())
        counts["published"] = manifest["tasks"] if result.success else 0
    lines = [f"dataset {ds}:" if prefix else "", _funnel_table(ds, counts),
             _withheld_line(withheld_summary(store, ds))]
    if result.success and published:
        lines.append(f"published: {store.published_root() / ds / published}")
    print("\n".join(line for line in lines if line), flush=True)
    if not (result.success and published):
        reason = (run.tags.get(ERROR_TAG) if run else None) or "a stage failed (see the lines above)"
        print(f"taskmine: error: {ds}: {reason} (`taskmine ui` -> Runs -> {result.run_id[:8]})", file=sys.stderr)
        return False
    return True


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
