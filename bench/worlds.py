"""`taskmine bench worlds`: the company world (one world per dataset, a task is a cutoff into it) against the
full copy per task it replaced, same inputs, same run.

Inputs: the sample company at scale 1 and at `--scale` (its real tasks: triage and commit link), and the
largest real git history in ../shared/data/real (more-itertools, a bundle) with one cutoff per commit that
touches its tests (a stand-in for code-change tasks, which have one cutoff each). The search latency is taken
on the real export in ../shared with the most documents.

Measured per input:
- world bytes: the world file (documents + full-text index) and the world repositories (one optimized pack
  each), plus what each task stores (its world column: cutoff, refs, hidden ids); against the baseline: one
  checked-out clone per task cut at its cutoff (what the commit-link family built before the world existed),
  whose bytes are summed over the tasks;
- build time: the world stage (plus the tasks stage on the sample) against cloning every task's copy;
- container start to first tool call (median of `STARTS` tasks, Docker when a daemon answers, else the local
  sandbox): an episode (tool server, view packed on the host, session, repositories made) until `company` has
  answered a search; against the baseline: building the task's image with its copy at /world, starting a
  container and running `git log -1` in it;
- search p95: `QUERIES` searches of random words of the export's own documents, through the tool server in
  process and (`CLI_QUERIES` of them) through the `company` CLI over the socket.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.config import DatasetConfig
from environments.episode import Episode
from environments.gitworld import Branches, refs_at
from environments.images import build_task_image
from environments.backends import get_sandbox
from environments.tools import ToolServer, ToolSocket
from environments.world import World
from sample.company import write_sample
from task_builders import world as worldbuild
from task_builders.stages import disk_bytes
from taskmine import flow
from warehouse.store import Store

STARTS = 5
QUERIES = 300
CLI_QUERIES = 40
REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "real"


def _copy_at(repo: Path, commit: str, dest: Path) -> None:
    """The baseline: a fresh repository holding `commit` and its ancestors, checked out, gc'd (the former
    commit-link world)."""
    dest.mkdir(parents=True)
    run = lambda *a: subprocess.run(["git", "-C", str(dest), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    run("fetch", "-q", "--no-tags", "--no-write-fetch-head", "--update-head-ok", str(repo), f"{commit}:refs/heads/main")
    run("reset", "-q", "--hard", "main")
    run("gc", "-q", "--prune=now")


def _prepare(home: Path, dataset: str, export: Path, with_tasks: bool) -> dict:
    store = Store(home)
    config = DatasetConfig(ner_model="")
    ctx = flow.context(store, dataset, export, config=config, run_id="bench")
    flow.prepare(ctx)
    started = time.perf_counter()
    flow.run(ctx, "world")
    world_s = time.perf_counter() - started
    if with_tasks:
        flow.run(ctx, "work_items")
        started = time.perf_counter()
        flow.run(ctx, "tasks")
        world_s += time.perf_counter() - started
    return {"store": store, "world_s": world_s}


def _cutoff_tasks(store, dataset: str) -> list[dict]:
    """(cutoff, repo slug, refs) per task: the real tasks, else one per commit of the main line touching tests."""
    tasks = [t for t in store.read("tasks", dataset) if t.world.get("git")]
    if tasks:
        return [{"cutoff": t.cutoff, "world": t.world, "repo": t.world["git"]["repos"][0],
                 "head": next(iter(t.world["git"]["refs"][t.world["git"]["repos"][0]].values()))} for t in tasks]
    repos = worldbuild.load(store, dataset)
    out = []
    for info in repos.values():
        path, slug = Path(info["path"]), info["slug"]
        branches = Branches.read(path)
        log = subprocess.run(["git", "-C", str(path), "log", "--first-parent", "--format=%H %ct", "--", "tests",
                              "test"], capture_output=True, text=True).stdout.split("\n")
        for line in log:
            if not line.strip():
                continue
            sha, ct = line.split()
            cutoff = dt.datetime.fromtimestamp(int(ct), dt.UTC)
            refs = refs_at(path, cutoff, branches)
            out.append({"cutoff": cutoff, "repo": slug, "head": sha,
                        "world": {"cutoff": cutoff.isoformat(), "hidden": [],
                                  "git": {"repos": [slug], "refs": {slug: refs}, "heads": {slug: sha}}}})
    return out


def _measure(name: str, store, dataset: str, world_s: float, sandbox) -> dict:
    root = store.worlds(dataset)
    tasks = _cutoff_tasks(store, dataset)
    repos = {r["slug"]: Path(r["path"]) for r in worldbuild.load(store, dataset).values()}
    world_files = disk_bytes(root / "world.sqlite") + sum(disk_bytes(p) for p in repos.values())
    per_task = [len(json.dumps(t["world"], default=str)) for t in tasks]
    sources = disk_bytes(store.partition("anonymized_events", dataset)) + disk_bytes(root / "repos")
    with tempfile.TemporaryDirectory(prefix="taskmine-bench-copies-") as tmp:
        started = time.perf_counter()
        copies = []
        for i, t in enumerate(tasks):
            dest = Path(tmp) / f"t{i}"
            _copy_at(repos[t["repo"]], t["head"], dest)
            copies.append(dest)
        copy_s = time.perf_counter() - started
        copy_bytes = sum(disk_bytes(c) for c in copies)
        starts, base_starts = [], []
        sample = random.Random(0).sample(range(len(tasks)), min(STARTS, len(tasks)))
        for i in sample:
            t = tasks[i]
            started = time.perf_counter()
            with Episode(root, t["world"], sandbox) as ep:
                r = ep.exec("company jira search release >/dev/null 2>&1; company slack channels >/dev/null 2>&1; "
                            f"git -C ~/{t['repo']} log -1 --format=%H")
                assert r.exit_code == 0, r.stderr
                starts.append(time.perf_counter() - started)
            started = time.perf_counter()
            if sandbox.kind == "docker":
                world = Path(tmp) / f"w{i}"
                world.mkdir()
                shutil.copytree(copies[i], world / "repo", symlinks=True)
                tag, _ = build_task_image(sandbox.base_image, world, labels={"taskmine.home": "bench-worlds"})
                _run_image(sandbox, tag)
                base_starts.append(time.perf_counter() - started)
                subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    n = len(tasks)
    return {"input": name, "tasks": n, "world_bytes": world_files + sum(per_task), "source_bytes": sources,
            "world_bytes_shared": world_files, "per_task_bytes": round(sum(per_task) / n) if n else 0,
            "copy_bytes": copy_bytes, "world_build_s": round(world_s, 2), "copy_build_s": round(copy_s, 2),
            "start_s": round(statistics.median(starts), 3) if starts else None,
            "copy_start_s": round(statistics.median(base_starts), 3) if base_starts else None,
            "sandbox": sandbox.kind}


def _run_image(sandbox, tag: str) -> None:
    """The baseline's start: a container of the task's own image, first command `git log -1` on its copy."""
    session = sandbox.session(None, image=tag, deadline_s=120)
    try:
        r = session.exec("git -C /world/repo log -1 --format=%H")
        assert r.exit_code == 0, r.stderr
    finally:
        session.close()


def _search(export: Path, home: Path) -> dict:
    """p50/p95 of searches on the export with the most documents, in process and through the CLI."""
    info = _prepare(home, "search", export, with_tasks=False)
    world = World(info["store"].worlds("search") / "world.sqlite")
    view = world.at(dt.datetime(2100, 1, 1, tzinfo=dt.UTC))
    docs = [(r["cls"], r["body"]) for r in world.rows("SELECT * FROM docs")]
    words = [w for _, b in docs for w in (b or "").split() if w.isalpha() and len(w) > 3]
    rng = random.Random(0)
    tool = {"issue": "jira_search", "comment": "jira_search", "mail": "mail_search", "chat": "slack_search"}
    classes = sorted({c for c, _ in docs if c in tool})
    server = ToolServer(view)
    times = []
    for _ in range(QUERIES):
        q = " ".join(rng.sample(words, 2))
        started = time.perf_counter()
        server.call(tool[rng.choice(classes)], {"query": q})
        times.append(time.perf_counter() - started)
    cli = []
    folder = Path(tempfile.mkdtemp(prefix="tm-bench-"))
    with ToolSocket(server, folder) as sock:
        env = {**os.environ, "TASKMINE_TOOLS": str(sock.path)}
        tool_py = Path(__file__).resolve().parents[1] / "environments" / "company_tool.py"
        for _ in range(CLI_QUERIES):
            q = rng.choice(words)
            group = tool[rng.choice(classes)].split("_")[0]
            started = time.perf_counter()
            subprocess.run([sys.executable, str(tool_py), group if group != "slack" else "slack", "search", q],
                           capture_output=True, env=env)
            cli.append(time.perf_counter() - started)
    shutil.rmtree(folder, ignore_errors=True)
    q = statistics.quantiles
    return {"export": export.name, "documents": len(docs), "queries": QUERIES,
            "p50_ms": round(statistics.median(times) * 1000, 2), "p95_ms": round(q(times, n=20)[18] * 1000, 2),
            "cli_p95_ms": round(q(cli, n=20)[18] * 1000, 1)}


def bench_worlds(scale: int = 5, out: str | None = None) -> int:
    work = Path(out) if out else Path(tempfile.mkdtemp(prefix="taskmine-bench-worlds-"))
    sandbox = get_sandbox("auto", home=work / "home")
    rows = []
    for label, sc in (("sample scale 1", 1), (f"sample scale {scale}", scale)):
        exports = work / f"sample-{sc}"
        write_sample(exports, seed=1, scale=sc, dataset="acme")
        info = _prepare(work / f"home-{sc}", "acme", exports / "acme", with_tasks=True)
        rows.append(_measure(label, info["store"], "acme", info["world_s"], sandbox))
        print(f"  measured {label}", flush=True)
    searched = None
    if REAL.is_dir():
        git_real = REAL / "git-more-itertools"
        if git_real.exists():
            info = _prepare(work / "home-real-git", "mi", git_real, with_tasks=False)
            rows.append(_measure("real: more-itertools", info["store"], "mi", info["world_s"], sandbox))
            print("  measured more-itertools", flush=True)
        sizes = {p: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in REAL.iterdir()
                 if p.is_dir() and p.name != "git-more-itertools"}
        biggest = max(sizes, key=sizes.get)
        searched = _search(biggest, work / "home-search")
    head = ("input", "tasks", "sources MB", "world MB", "world/sources", "per task B", "copies MB", "copies/world",
            "build s", "copies s", "start s", "copy start s")
    print("\n  " + "  ".join(head))
    for r in rows:
        ratio = r["copy_bytes"] / r["world_bytes"] if r["world_bytes"] else 0
        print("  " + "  ".join(str(x) for x in (
            r["input"], r["tasks"], round(r["source_bytes"] / 1e6, 2), round(r["world_bytes"] / 1e6, 2),
            f"{r['world_bytes'] / max(r['source_bytes'], 1):.2f}", r["per_task_bytes"],
            round(r["copy_bytes"] / 1e6, 2), f"{ratio:.1f}x", r["world_build_s"], r["copy_build_s"],
            r["start_s"], r["copy_start_s"])))
    if searched:
        print(f"\n  search on {searched['export']} ({searched['documents']} documents, {searched['queries']} "
              f"queries): p50 {searched['p50_ms']} ms, p95 {searched['p95_ms']} ms in the tool server; "
              f"p95 {searched['cli_p95_ms']} ms through the company CLI")
    print(json.dumps({"bench": "worlds", "sandbox": sandbox.kind, "rows": rows, "search": searched}))
    if not out:
        shutil.rmtree(work, ignore_errors=True)
    return 0
