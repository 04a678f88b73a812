"""`taskmine bench scale`: what each stage costs as the company grows, and what a whole company would cost.

For each `--scale` the sample company (sample.company, seed 1 as the other benches; its people, Jira issues,
commits, mails and Slack messages all grow linearly with the scale, in one repository) is written and run
through the pipeline's stages in the CLI's order, one after the other in this process, into a warehouse of its
own. Per stage it records:

- seconds (wall clock);
- CPU seconds of this process (every thread) and of its finished children (git, the `docker` CLI clients of
  every `docker run`/`docker exec`: `getrusage(RUSAGE_CHILDREN)`);
- container CPU seconds, apart: what the sandbox containers the stage started (those whose `taskmine.owner`
  label is this process) used, from their cgroup's CPU accounting, sampled every SAMPLE_S (the last moments
  of a container's life and a container shorter than SAMPLE_S are missed, so this is a lower bound); "n/a" where
  no cgroup can be read;
- peak memory: the high-water RSS of the process tree (this process's own VmHWM, reset per stage through
  /proc/self/clear_refs, and the sum of the RSS of it and every descendant sampled every SAMPLE_S; containers'
  memory is not in it);
- items per second, where an item is the stage's input unit (events up to the world, work items for the tasks
  stage, tasks validated, tasks published).

Caps (validation of a code task takes minutes; the bench would otherwise measure little else):
- the tasks stage runs twice: `tasks` with every family but code_change, then `tasks+code` with code_change
  too, measuring at most `code_candidates` candidates; the difference is the code candidates' cost, per
  candidate;
- validations replay a fixed sample of at most `validate_per_family` tasks per family (the first task ids of
  each family) and the cost per task of each family is scaled to every task.

From the scales, per stage: the growth exponent (the slope of log seconds over log items; 1 is linear, over
GROWTH_FLAG is flagged) and a linear cost model (a fixed part and a cost per item, least squares). The
extrapolation (`extrapolate`) takes the per-unit costs to a target company and prints its assumptions.

The measuring (`run_scale`) and the arithmetic (`fit_growth`, `fit_linear`, `extrapolate`) are apart, so the
arithmetic is unit-tested without running anything. The stages come from `pipeline_stages`, the one seam
between the bench and the pipeline: a list of (stage name, callable) in the CLI's run order.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.config import DatasetConfig, load_config
from environments.backends import get_sandbox
from environments.sandbox import owner_tag
from graders import stages as validation
from graders.stages import verdicts_by_task
from publishing.stages import latest_version
from sample.company import write_sample
from taskmine import flow
from warehouse.store import Store

DATASET = "bench"
SAMPLE_S = 0.2
GROWTH_FLAG = 1.2

# The company the extrapolation is for (issue 21): messages are e-mails and chat messages, tickets are issues
# as filed (with their comments and field changes at the sample's rate per ticket), commits are commits.
TARGET = {"messages": 500_000, "tickets": 50_000, "commits": 20_000}

# code_change rejections that come from measuring a candidate's tests in the sandbox (task_builders/families/
# code_change.py); the others are decided from the history alone, before any is measured
MEASURED_REASONS = ("no FAIL_TO_PASS test", "the tests could not be run", "repository could not be read at the fix",
                    "the fix is too large to replay as one command", "the problem statement repeats a line of the fix")

# Which unit a family's tasks grow with (its requests come from them); a family not named grows with events.
FAMILY_UNIT = {"ticket_triage": "tickets", "resolution_note": "tickets", "commit_link": "commits",
               "code_change": "commits", "email_reply": "messages", "chat_answer": "messages"}


# --- the seam: the pipeline's stages ----------------------------------------------------------------------

@dataclass
class BenchRun:
    """What every stage callable gets: one scale's warehouse, dataset, config and sandbox."""
    store: object
    dataset: str
    dataset_dir: Path
    config: object
    sandbox: object
    validate_only: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Stage:
    name: str          # the pipeline's stage name (taskmine.flow.ORDER), "+code" for the capped variant
    run: Callable[[BenchRun], object]
    unit: str          # what its items are: "events", "work_items", "code_candidates", "tasks_validated", "tasks"


def pipeline_stages() -> list[Stage]:
    """The pipeline's stages in the CLI's run order, each a callable on a BenchRun: generated from the stage table
    (taskmine.flow.STAGES), with the tasks stage twice (without code_change, then with its capped candidates) and
    validation narrowed to the sampled tasks. tests/bench/test_scale.py holds the names to the table's."""

    def ctx(r: BenchRun, config: DatasetConfig | None = None):
        return flow.context(r.store, r.dataset, r.dataset_dir, config=config or r.config, run_id="bench",
                            sandbox=r.sandbox)

    def no_code(r: BenchRun) -> DatasetConfig:
        enabled = [f for f in r.config.enabled() if f != "code_change"]
        return DatasetConfig(**{**r.config.model_dump(), "families": tuple(enabled)})

    def body(stage):
        return lambda r: stage.run(ctx(r))

    out: list[Stage] = []
    for stage in flow.STAGES:
        unit = STAGE_UNIT.get(stage.name, "events")
        if stage.name == "tasks":
            out.append(Stage("tasks", lambda r, s=stage: s.run(ctx(r, no_code(r))), unit))
            out.append(Stage("tasks+code", body(stage), unit))
        elif stage.name == "validations":
            out.append(Stage("validations", lambda r: validation.validations(ctx(r), only=r.validate_only), unit))
        else:
            out.append(Stage(stage.name, body(stage), unit))
    return out


# What a stage's items are (its items/s column): a stage not named counts events.
STAGE_UNIT = {"clusters": "work_items", "tasks": "work_items", "validations": "tasks_validated",
              "published_dataset": "tasks"}


def stage_names(stages: list[Stage]) -> list[str]:
    """The pipeline stage names the list covers, in order (the capped variants folded into their stage)."""
    out: list[str] = []
    for s in stages:
        base = s.name.split("+")[0]
        if base not in out:
            out.append(base)
    return out


# --- measuring one stage ----------------------------------------------------------------------------------

@dataclass
class Cost:
    seconds: float = 0.0
    cpu_self: float = 0.0
    cpu_children: float = 0.0
    cpu_containers: float | None = None   # None: not measured (no readable cgroup)
    peak_rss: int = 0                      # bytes, the process tree's high-water mark

    @property
    def cpu(self) -> float:
        return self.cpu_self + self.cpu_children + (self.cpu_containers or 0.0)


def _proc_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry))
    out, todo = [root], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _hwm() -> int:
    """This process's VmHWM (peak RSS since the last reset), in bytes."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_hwm() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")      # Linux >= 4.0: reset the peak RSS (VmHWM) to the current RSS
    except OSError:
        pass


CGROUP_ROOTS = ("/sys/fs/cgroup/cpuacct/docker", "/sys/fs/cgroup/cpu,cpuacct/docker", "/sys/fs/cgroup/docker",
                "/sys/fs/cgroup/system.slice")


def _container_cpu(folder: Path) -> float | None:
    """CPU seconds a container's cgroup accounted so far (cgroup v1 cpuacct.usage, or v2 cpu.stat)."""
    try:
        if (folder / "cpuacct.usage").exists():
            return int((folder / "cpuacct.usage").read_text()) / 1e9
        for line in (folder / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec"):
                return int(line.split()[1]) / 1e6
    except (OSError, ValueError):
        return None
    return None


class Sampler:
    """A thread that samples, every SAMPLE_S: the RSS of the process tree (keeping the highest sum) and the CPU of
    the sandbox containers labelled `taskmine.owner=<owner>` (keeping each container's last reading)."""

    def __init__(self, owner: str | None):
        self.owner = owner
        self.peak = 0
        self.containers: dict[str, float] = {}
        self._ours: dict[str, bool] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)
        self.roots = [Path(r) for r in CGROUP_ROOTS if Path(r).is_dir()] if owner else []

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def container_cpu(self) -> float | None:
        return sum(self.containers.values()) if self.roots else None

    def _is_ours(self, cid: str) -> bool:
        if cid not in self._ours:
            try:   # the daemon's own record, readable as root: no `docker` process (its CPU would count as ours)
                labels = json.loads(Path(f"/var/lib/docker/containers/{cid}/config.v2.json").read_text())
                self._ours[cid] = (labels.get("Config") or {}).get("Labels", {}).get("taskmine.owner") == self.owner
                return self._ours[cid]
            except (OSError, ValueError, AttributeError):
                pass
            proc = subprocess.run(["docker", "inspect", "--format", '{{index .Config.Labels "taskmine.owner"}}', cid],
                                  capture_output=True, text=True, timeout=30)
            self._ours[cid] = proc.returncode == 0 and proc.stdout.strip() == self.owner
        return self._ours[cid]

    def _sample(self) -> None:
        self.peak = max(self.peak, sum(_rss(p) for p in _proc_tree(os.getpid())))
        for root in self.roots:
            for d in root.iterdir():
                name = d.name.removeprefix("docker-").removesuffix(".scope")
                if d.is_dir() and len(name) == 64 and all(c in "0123456789abcdef" for c in name):
                    cpu = _container_cpu(d)
                    if cpu is not None and self._is_ours(name):
                        self.containers[name] = max(self.containers.get(name, 0.0), cpu)

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            try:
                self._sample()
            except OSError:
                continue


def measure(fn: Callable[[], object], owner: str | None = None) -> tuple[object, Cost]:
    """Run `fn` once and say what it cost (see the module docstring for what each number covers)."""
    _reset_hwm()
    s0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with Sampler(owner) as sampler:
        result = fn()
    seconds = time.perf_counter() - t0
    s1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cost = Cost(seconds=seconds, cpu_self=(s1.ru_utime + s1.ru_stime) - (s0.ru_utime + s0.ru_stime),
                cpu_children=(c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime),
                cpu_containers=sampler.container_cpu, peak_rss=max(sampler.peak, _hwm()))
    return result, cost


# --- one scale ---------------------------------------------------------------------------------------------

@dataclass
class StageCost:
    stage: str
    unit: str
    items: int
    cost: Cost


@dataclass
class ScaleRun:
    scale: int
    units: dict[str, int]               # messages, tickets, commits, events at this scale
    stages: list[StageCost]
    tasks_by_family: dict[str, int]     # tasks built per family (code_change: of the candidates measured)
    validated_by_family: dict[str, int]
    code_candidates: int                # code_change candidates there were (measured or over the cap)
    code_measured: int
    published: int = 0
    # content digests (Store.content_digest: rows without run ids) of the tables chunking must not change, so two
    # runs of one scale with other `workers`/`chunk_events` are compared by their JSON files
    digests: dict[str, str] = field(default_factory=dict)
    settings: dict[str, int] = field(default_factory=dict)   # workers, chunk_events of the run


def units_of(events) -> dict[str, int]:
    """messages (mail and chat), tickets (issues as filed), commits, and every event, of a dataset's events."""
    n = Counter()
    for e in events:
        n["events"] += 1
        if e.medium in ("mail", "chat"):
            n["messages"] += 1
        elif e.kind == "issue_created":
            n["tickets"] += 1
        elif e.kind == "commit":
            n["commits"] += 1
    return {k: n.get(k, 0) for k in ("messages", "tickets", "commits", "events")}


def validation_sample(tasks, per_family: int) -> list[str]:
    """The fixed sample of tasks the bench validates: the first `per_family` task ids of each family."""
    by: dict[str, list[str]] = {}
    for t in sorted(tasks, key=lambda t: t.task_id):
        by.setdefault(t.family, []).append(t.task_id)
    return [tid for ids in by.values() for tid in ids[:per_family]]


def run_scale(scale: int, work: Path, stages: list[Stage], *, code_candidates: int, validate_per_family: int,
              sandbox_kind: str = "auto", progress: Callable[[str], None] = print,
              settings: dict[str, int] | None = None) -> ScaleRun:

    exports = work / f"exports-{scale}"
    if exports.exists():
        shutil.rmtree(exports)
    write_sample(exports, seed=1, scale=scale, dataset=DATASET)
    ds_dir = exports / DATASET
    home = work / f"home-{scale}"
    if home.exists():
        shutil.rmtree(home)
    store = Store(home)
    config = DatasetConfig(**{**load_config(ds_dir).model_dump(), "code_max_candidates": code_candidates,
                              **(settings or {})})
    sandbox = get_sandbox(sandbox_kind, home=store.home)
    label = owner_tag() if sandbox.kind == "docker" else None
    run = BenchRun(store, DATASET, ds_dir, config, sandbox)
    out: list[StageCost] = []
    for stage in stages:
        if stage.unit == "tasks_validated":   # once per family, on its fixed sample: a cost per task per family
            sample = validation_sample(store.read("tasks", DATASET), validate_per_family)
            family = {t.task_id: t.family for t in store.read("tasks", DATASET)}
            for fam in sorted({family[t] for t in sample}):
                run.validate_only = [t for t in sample if family[t] == fam]
                _, cost = measure(lambda s=stage: s.run(run), label)
                out.append(StageCost(f"{stage.name}:{fam}", stage.unit, len(run.validate_only), cost))
                progress(_line(scale, out[-1]))
                save_run(summary(store, scale, out), work / f"scale-{scale}.partial.json")
            continue
        if stage.name == "published_dataset" and not validate_per_family:
            progress(f"  scale {scale}: published_dataset skipped: no task validated (--validate-per-family 0)")
            continue
        _, cost = measure(lambda s=stage: s.run(run), label)
        out.append(StageCost(stage.name, stage.unit, _items(store, stage.unit), cost))
        progress(_line(scale, out[-1]))
        save_run(summary(store, scale, out), work / f"scale-{scale}.partial.json")   # a stopped bench keeps these
    return dataclasses.replace(summary(store, scale, out),
                               settings={"workers": config.workers, "chunk_events": config.chunk_events})


DIGESTED = ("anonymized_events", "work_items", "clusters", "tasks")


def summary(store, scale: int, stages: list[StageCost]) -> ScaleRun:
    """The scale's numbers: the stages measured so far and what the warehouse holds (units, tasks, candidates)."""
    tasks = store.read("tasks", DATASET)
    fam = {t.task_id: t.family for t in tasks}
    validated = {v.task_id for v in store.read("validations", DATASET)}
    reasons = Counter(r.reason for r in store.read("rejections", DATASET) if r.stage == "candidates"
                      and r.family == "code_change")
    # measured: run in the sandbox (a task, or rejected by what the measuring found); over the cap: would have been
    measured = sum(1 for t in tasks if t.family == "code_change") + sum(reasons[r] for r in MEASURED_REASONS)
    code_cands = measured + reasons["over code_max_candidates"]
    version = latest_version(store, DATASET)
    published = json.loads((store.published_root() / DATASET / version / "manifest.json").read_text())["tasks"] \
        if version else 0
    digests = {t: store.content_digest(t, DATASET) for t in DIGESTED}
    return ScaleRun(scale=scale, units=units_of(store.iter("events", DATASET)), stages=list(stages),
                    digests=digests,
                    tasks_by_family=dict(Counter(t.family for t in tasks)),
                    validated_by_family=dict(Counter(fam[t] for t in validated if t in fam)),
                    code_candidates=code_cands, code_measured=measured, published=published)


def _line(scale: int, s: StageCost) -> str:
    c = s.cost
    cont = "" if c.cpu_containers is None else f" + containers {c.cpu_containers:6.1f}s"
    return (f"  scale {scale}: {s.stage:<26} {c.seconds:7.1f}s  cpu {c.cpu_self + c.cpu_children:7.1f}s{cont}  "
            f"peak {c.peak_rss / 2**20:6.0f} MiB  ({s.items} {s.unit})")


def _items(store, unit: str) -> int:
    """The stage's items, counted after it ran."""
    if unit in ("events", "work_items"):
        return sum(1 for _ in store.iter(unit, DATASET))
    if unit == "tasks":
        return sum(1 for ok, _ in verdicts_by_task(store.read("validations", DATASET),
                                                         store.read("tasks", DATASET)).values() if ok)
    return 0


# --- the arithmetic ------------------------------------------------------------------------------------------

def fit_growth(points: list[tuple[float, float]]) -> float | None:
    """The growth exponent k of seconds ~ items^k: the least-squares slope of log(seconds) on log(items).
    None with fewer than two distinct positive sizes."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def fit_linear(points: list[tuple[float, float]]) -> tuple[float, float]:
    """seconds = fixed + per_item * items, least squares, both parts kept >= 0 (a negative fixed part means the
    line goes through the origin; a negative slope means no cost per item was seen). One point: all per item."""
    pts = [(float(x), float(y)) for x, y in points if x > 0]
    if not pts:
        return 0.0, 0.0
    if len({x for x, _ in pts}) < 2:
        return 0.0, sum(y for _, y in pts) / sum(x for x, _ in pts)
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    fixed = my - slope * mx
    if slope < 0:
        return my, 0.0
    if fixed < 0:
        return 0.0, sum(x * y for x, y in pts) / sum(x * x for x, _ in pts)
    return fixed, slope


@dataclass(frozen=True)
class Machine:
    """What the extrapolation assumes of the machines it counts."""
    cores: int = 16
    deadline_hours: float = 24.0
    efficiency: float = 0.8     # of a machine's cores kept busy by the stages that run in chunks


# Stages whose work is independent per chunk of the dataset (records, work items, tasks): what Dagster can
# spread over processes and machines once the stages run in chunks (issue 21 item 1). The rest is global:
# identity resolution and pseudonym assignment, cross-source links, clustering, the world's index, publish.
PARALLEL_STAGES = ("raw_events", "anonymized_events", "tasks", "tasks+code", "validations")


@dataclass
class StageEstimate:
    stage: str
    units: float           # the stage's items at the target
    seconds: float         # wall on one core (CPU of the stage, the process's and the containers')
    model: str             # how it was extrapolated


@dataclass
class Estimate:
    stages: list[StageEstimate]
    cpu_seconds: float
    serial_seconds: float
    parallel_fraction: float
    one_machine_hours: float
    machines: int
    wall_hours: float
    assumptions: list[str]


def target_items(run: ScaleRun, target: dict[str, int]) -> dict[str, float]:
    """The items each unit kind has at the target, from the largest scale's mix: events (messages 1:1, a ticket
    with its comments and changes, a commit), work items, tasks per family, code candidates."""
    u = run.units
    ratio = {k: target[k] / u[k] for k in target if u.get(k)}
    other = u["events"] - sum(u.get(k, 0) for k in target)      # ticket comments, field changes, ...
    per_ticket = other / u["tickets"] if u.get("tickets") else 0.0
    events = sum(target.values()) + per_ticket * target.get("tickets", 0)
    grow = events / u["events"] if u["events"] else 0.0
    tasks = {f: n * ratio.get(FAMILY_UNIT.get(f, ""), grow) for f, n in run.tasks_by_family.items()}
    if run.code_measured:   # code_change tasks come from the candidates measured, not all of them
        tasks["code_change"] = (run.tasks_by_family.get("code_change", 0) / run.code_measured
                                * run.code_candidates * ratio.get("commits", grow))
    work_items = next((s.items for s in run.stages if s.unit == "work_items"), 0)
    return {"events": events, "work_items": work_items * grow, "code_candidates": run.code_candidates *
            ratio.get("commits", grow), **{f"tasks:{f}": n for f, n in tasks.items()},
            "tasks": sum(tasks.values())}


def extrapolate(runs: list[ScaleRun], target: dict[str, int] = TARGET, machine: Machine = Machine()) -> Estimate:
    """Per stage, its cost at the target from the per-item costs measured over the scales.

    CPU seconds (process, children and containers) are extrapolated, not wall seconds: on a shared machine wall
    time counts other people's work. A stage that grows linearly (exponent <= GROWTH_FLAG) costs its fixed part
    plus its cost per item times the target's items; a stage that grows faster is extrapolated with its power
    law from the largest scale. Validation and code candidates are per task / per candidate, from the capped
    samples."""
    runs = sorted(runs, key=lambda r: r.scale)
    last = runs[-1]
    want = target_items(last, target)
    out: list[StageEstimate] = []
    for name in stage_order(runs):
        if name.startswith("validations:"):
            continue
        pts = [(s.items, s.cost.cpu) for r in runs for s in r.stages if s.stage == name]
        unit = next(s.unit for r in runs for s in r.stages if s.stage == name)
        if name == "tasks+code":
            # the code candidates' part: tasks+code minus tasks, per candidate measured
            per = []
            for r in runs:
                by = {s.stage: s.cost.cpu for s in r.stages}
                if r.code_measured and "tasks" in by and name in by:
                    per.append(max(by[name] - by["tasks"], 0.0) / r.code_measured)
            each = sum(per) / len(per) if per else 0.0
            out.append(StageEstimate(name, want["code_candidates"], each * want["code_candidates"],
                                     f"{each:.1f}s per code candidate measured"))
            continue
        key = {"events": "events", "work_items": "work_items", "tasks": "tasks"}.get(unit, "events")
        slope = fit_growth(pts)
        fixed, per = fit_linear(pts)
        big = max(pts, key=lambda p: p[0]) if pts else (0, 0)
        if slope is not None and slope > GROWTH_FLAG and big[0]:
            seconds = big[1] * (want[key] / big[0]) ** slope
            model = f"power law, exponent {slope:.2f}"
        else:
            seconds = fixed + per * want[key]
            model = f"{fixed:.1f}s + {per * 1000:.2f}ms per {key.removesuffix('s')}"
        out.append(StageEstimate(name, want[key], seconds, model))
    seconds, parts = 0.0, []
    for key, n in sorted(want.items()):
        if key.startswith("tasks:"):
            fam = key.split(":", 1)[1]
            each = per_task(runs, fam)
            seconds += (each or 0.0) * n
            parts.append(f"{fam} {each:.1f}s" if each is not None else f"{fam} not measured")
    out.insert(next((i for i, s in enumerate(out) if s.stage == "published_dataset"), len(out)),
               StageEstimate("validations", want["tasks"], seconds, "per task: " + ", ".join(parts)))
    # `tasks+code` already holds the code part only; the non-code tasks stage is `tasks`
    total = sum(s.seconds for s in out)
    serial = sum(s.seconds for s in out if s.stage not in PARALLEL_STAGES)
    p = 1 - serial / total if total else 0.0
    per_machine = machine.cores * machine.efficiency
    deadline = machine.deadline_hours * 3600
    # Amdahl: wall = serial + parallel / (machines * per_machine); the machines that meet the deadline
    if serial >= deadline:
        machines = 0   # no number of machines meets it: the global stages alone take longer
    else:
        machines = max(1, math.ceil((total - serial) / (per_machine * (deadline - serial))))
    wall = serial + (total - serial) / (max(machines, 1) * per_machine)
    u = last.units
    assumptions = [
        f"target: {target['messages']:,} messages (mail + chat), {target['tickets']:,} tickets, "
        f"{target['commits']:,} commits = {want['events']:,.0f} events at the sample's "
        f"{(u['events'] - u['messages'] - u['tickets'] - u['commits']) / max(u['tickets'], 1):.1f} comments and "
        f"changes per ticket",
        "per-unit costs: CPU seconds (process + children + sandbox containers) per item, fitted over the scales; "
        "an event costs the same whatever its source (the sample's mix; the target's is more mail-heavy)",
        "tasks per unit: the largest scale's tasks per family over its unit ("
        + ", ".join(f"{f}: {unit}" for f, unit in FAMILY_UNIT.items()) + "); "
        f"code candidates grow with commits ({last.code_candidates} of {u['commits']} commits at scale {last.scale})",
        "validation: every task validated once (oracle and null x repeats, every probe), at the per-task cost of "
        "the family measured on the capped sample; no model rollouts",
        f"parallel: {', '.join(PARALLEL_STAGES)} run in chunks on every core of every machine "
        f"({machine.efficiency:.0%} of {machine.cores} cores kept busy); the other stages run on one core, once "
        f"(global: identities, links, clusters, world, publish)",
        f"machines: the fewest that finish within {machine.deadline_hours:g} h (Amdahl, parallel fraction "
        f"{p:.3f})",
    ]
    return Estimate(out, total, serial, p, total / 3600, machines, wall / 3600, assumptions)


def stage_order(runs: list[ScaleRun]) -> list[str]:
    """Every stage measured at any scale, in run order (a stopped scale has only its first stages)."""
    names: list[str] = []
    for r in sorted(runs, key=lambda r: -len(r.stages)):
        for s in r.stages:
            if s.stage not in names:
                names.append(s.stage)
    return names


def per_task(runs: list[ScaleRun], family: str) -> float | None:
    """CPU seconds to validate one task of `family` (its runs: oracle and null x repeats, every probe, the
    baselines), the mean over the scales of its validation stage's cost per task; None when none was validated."""
    costs = [s.cost.cpu / s.items for r in runs for s in r.stages if s.stage == f"validations:{family}" and s.items]
    return sum(costs) / len(costs) if costs else None


# --- printing ----------------------------------------------------------------------------------------------

def table(runs: list[ScaleRun]) -> list[str]:
    """The per stage table: one row per stage and scale, then the fitted growth."""
    runs = sorted(runs, key=lambda r: r.scale)
    head = (f"{'stage':<26} {'scale':>5} {'items':>7} {'seconds':>8} {'cpu s':>8} {'cont s':>7} "
            f"{'peak MiB':>8} {'items/s':>8}")
    rows = [head, "-" * len(head)]
    for name in stage_order(runs):
        for r in runs:
            s = next((x for x in r.stages if x.stage == name), None)
            if s is None:
                continue
            c = s.cost
            cont = "n/a" if c.cpu_containers is None else f"{c.cpu_containers:.1f}"
            rate = f"{s.items / c.seconds:.1f}" if c.seconds and s.items else "-"
            rows.append(f"{name:<26} {r.scale:>5} {s.items:>7} {c.seconds:>8.1f} {c.cpu_self + c.cpu_children:>8.1f} "
                        f"{cont:>7} {c.peak_rss / 2**20:>8.0f} {rate:>8}")
    rows += ["", f"{'stage':<26} {'growth (wall)':>13} {'growth (cpu)':>12}  verdict"]
    for name in stage_order(runs):
        wall = fit_growth([(s.items, s.cost.seconds) for r in runs for s in r.stages if s.stage == name])
        cpu = fit_growth([(s.items, s.cost.cpu) for r in runs for s in r.stages if s.stage == name])
        fixed_items = name.startswith("validations:") or len({s.items for r in runs for s in r.stages
                                                              if s.stage == name}) < 2
        verdict = ("fixed sample (capped)" if fixed_items else
                   "tasks + the capped code candidates" if name == "tasks+code" else
                   "-" if cpu is None else "WORSE THAN LINEAR" if cpu > GROWTH_FLAG else
                   "linear" if cpu >= 0.8 else "sublinear (fixed costs dominate)")
        rows.append(f"{name:<26} {_f(wall):>13} {_f(cpu):>12}  {verdict}")
    return rows


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def estimate_lines(est: Estimate) -> list[str]:
    rows = [f"{'stage':<18} {'items':>11} {'cpu hours':>10}  model"]
    for s in est.stages:
        rows.append(f"{s.stage:<18} {s.units:>11,.0f} {s.seconds / 3600:>10.1f}  {s.model}")
    rows.append(f"{'total':<18} {'':>11} {est.cpu_seconds / 3600:>10.1f}  "
                f"(global, one core: {est.serial_seconds / 3600:.1f} h; parallel fraction {est.parallel_fraction:.3f})")
    return rows


def save_run(run: ScaleRun, path: Path) -> None:
    path.write_text(json.dumps(dataclasses.asdict(run), indent=1, sort_keys=True))


def load_run(path: Path) -> ScaleRun:
    d = json.loads(path.read_text())
    d["stages"] = [StageCost(s["stage"], s["unit"], s["items"], Cost(**s["cost"])) for s in d["stages"]]
    return ScaleRun(**d)


def bench_scale(scales: list[int], out: str | None = None, *, code_candidates: int = 2, validate_per_family: int = 2,
                sandbox: str = "auto", cores: int = 16, deadline_hours: float = 24.0, reuse: bool = False,
                settings: dict[str, int] | None = None) -> int:
    """Run the scales (each one's numbers saved as <out>/scale-<n>.json; with `reuse`, a scale whose file is there
    is read instead of run, so a long scale can be run apart and printed with the others)."""
    if not scales or any(s < 1 for s in scales):
        raise ValueError("--scale must be 1 or more, e.g. --scale 1 --scale 5 --scale 10")
    scales = sorted(set(scales))
    work = Path(out) if out else Path(tempfile.mkdtemp(prefix="taskmine-bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    stages = pipeline_stages()
    print(f"bench scale: scales {scales}, work folder {work}; code_change: at most {code_candidates} candidates "
          f"measured per scale; validation: at most {validate_per_family} tasks per family per scale", flush=True)
    runs = []
    try:
        for s in scales:
            saved = work / f"scale-{s}.json"
            partial = work / f"scale-{s}.partial.json"
            if reuse and (saved.exists() or partial.exists()):
                runs.append(load_run(saved if saved.exists() else partial))
                print(f"  scale {s}: read {saved if saved.exists() else partial}"
                      f"{'' if saved.exists() else ' (stopped before its last stage)'}", flush=True)
                continue
            runs.append(run_scale(s, work, stages, code_candidates=code_candidates,
                                  validate_per_family=validate_per_family, sandbox_kind=sandbox,
                                  progress=lambda m: print(m, flush=True), settings=settings))
            save_run(runs[-1], saved)
            partial.unlink(missing_ok=True)
            for folder in (f"exports-{s}", f"home-{s}"):    # the numbers are kept; the warehouse is not
                shutil.rmtree(work / folder, ignore_errors=True)
        _print(runs, Machine(cores=cores, deadline_hours=deadline_hours))
    finally:
        if not out:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _print(runs: list[ScaleRun], machine: Machine) -> None:
    print("\nper stage (cpu s: this process and its children; cont s: sandbox containers, sampled; peak: RSS "
          "high-water of the process tree)")
    for line in table(runs):
        print("  " + line)
    for r in runs:
        print(f"  scale {r.scale}: {r.units}; tasks {r.tasks_by_family}; validated {r.validated_by_family}; "
              f"code candidates {r.code_measured} measured of {r.code_candidates}; published {r.published}")
        if r.digests:
            print(f"  scale {r.scale}: {r.settings}; content digests "
                  + ", ".join(f"{t} {d[:12]}" for t, d in r.digests.items()))
    est = extrapolate(runs, TARGET, machine)
    print(f"\nextrapolated to {TARGET['messages']:,} messages + {TARGET['tickets']:,} tickets + "
          f"{TARGET['commits']:,} commits (from scales {[r.scale for r in runs]}):")
    for line in estimate_lines(est):
        print("  " + line)
    one_machine = est.serial_seconds + (est.cpu_seconds - est.serial_seconds) / (machine.cores * machine.efficiency)
    print(f"  one machine of {machine.cores} cores: {one_machine / 3600:.1f} h; "
          f"on one core: {est.one_machine_hours:.1f} h")
    if est.machines:
        print(f"  within {machine.deadline_hours:g} h: {est.machines} machine(s) of {machine.cores} cores "
              f"({est.wall_hours:.1f} h)")
    else:
        print(f"  within {machine.deadline_hours:g} h: not possible: the global stages alone take "
              f"{est.serial_seconds / 3600:.1f} h")
    print("  assumptions:")
    for a in est.assumptions:
        print(f"  - {a}")
    print(flush=True)


