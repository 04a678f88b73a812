"""`taskmine bench code`: what code-change tasks cost on this machine.

Input: the sample company at `--scale` (seed 1, as the other benches), or one dataset of `--exports` (`--dataset`,
e.g. a folder holding the more-itertools bundle), run through the pipeline's own stages (`taskmine.flow`, NER
off: it does not change what is timed here) into a warehouse under the work folder, with only the
`code_change` family enabled and at most `--limit` candidates measured (0: all). Docker is required.

Measured, in this order:
1. the tasks stage (building every candidate's environment and measuring its test sets: the parent with the
   fix's test files, then the whole fix, 3 runs each): seconds per candidate measured;
2. environments, for each distinct one the tasks name: cold (its image and its installed files removed:
   the host install from the registry, uv's download cache kept, and the image build), rebuilt (image
   removed, installed files kept: what a pruned image costs), reused (the image exists: what every other
   task that shares it pays);
3. the validations stage (oracle x3, null x3, every probe once, each an episode with the verifier phase):
   seconds per task;
4. tasks per hour = valid tasks / (tasks stage + validations) on this machine, one task at a time;
5. bytes: the base image, each environment image's own layers (shared by every task naming it) and what a
   task adds on its own (`world["git"]`: the refs and the head it names in the world's repositories); the
   pack an episode writes of what they reach is measured for the first task (it lives as long as the episode).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from core.config import DatasetConfig, load_config
from environments import codeenv
from environments.docker_cli import docker, image_id
from environments.gitworld import pack_view
from environments.backends import get_sandbox
from sample.company import write_sample
from taskmine import flow
from warehouse.store import Store

DATASET = "bench"


def bench_code(scale: int = 1, out: str | None = None, exports: str | None = None, dataset: str | None = None,
               limit: int = 0) -> int:
    if out:
        return _bench(Path(out), scale, exports, dataset, limit)
    with tempfile.TemporaryDirectory(prefix="taskmine-bench-") as tmp:
        return _bench(Path(tmp), scale, exports, dataset, limit)


def _inodes(path: Path) -> dict[tuple[int, int], int]:
    """(device, inode) -> size of every file under `path` (hard links once)."""
    out = {}
    for p in path.rglob("*") if path.exists() else ():
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            out[(st.st_dev, st.st_ino)] = st.st_size
    return out


def _episode_pack_bytes(worlds: Path, task, work: Path) -> int:
    """Bytes of the view an episode of `task` writes (gitworld.pack_view: a pack and its index per repository)."""
    git = task.world.get("git") or {}
    folder = work / "pack-view"
    shutil.rmtree(folder, ignore_errors=True)
    pack_view(folder, {s: (worlds / "git" / f"{s}.git", git["refs"].get(s) or {}, (git.get("heads") or {}).get(s))
                       for s in git.get("repos") or []})
    size = sum(_inodes(folder).values())
    shutil.rmtree(folder, ignore_errors=True)
    return size


def _bench(work: Path, scale: int, exports: str | None, dataset: str | None, limit: int) -> int:
    work.mkdir(parents=True, exist_ok=True)
    if exports:
        ds_dir = Path(exports) / (dataset or "")
        if not dataset or not ds_dir.is_dir():
            raise ValueError(f"--exports {exports} needs --dataset naming one of its folders")
        name = dataset
    else:
        write_sample(work / "exports", seed=1, scale=scale, dataset=DATASET)
        ds_dir, name = work / "exports" / DATASET, DATASET
    base = load_config(ds_dir)
    tables = {**base.family_tables, "code_change": {**base.family_tables.get("code_change", {}),
                                                    "max_candidates": limit}}
    config = DatasetConfig(**{**base.model_dump(), "ner_model": "", "families": ("code_change",),
                              "family_tables": tables})
    store = Store(work / "home")
    sandbox = get_sandbox("docker", home=store.home)
    print(f"input: {ds_dir} ({'limit ' + str(limit) if limit else 'every'} candidate), sandbox docker", flush=True)

    t0 = time.perf_counter()
    ctx = flow.context(store, name, ds_dir, config=config, run_id="bench", sandbox=sandbox)
    flow.prepare(ctx)
    flow.run(ctx, "work_items", "world")
    prep_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    res = flow.run(ctx, "tasks")
    tasks_s = time.perf_counter() - t0
    tasks = [t for t in store.read("tasks", name) if t.family == "code_change"]
    rejections = [r for r in store.read("rejections", name) if r.stage == "candidates" and r.family == "code_change"]
    measured = len(tasks) + sum(1 for r in rejections if r.reason in ("no FAIL_TO_PASS test",
                                                                      "the tests could not be run"))
    reasons = Counter(r.reason for r in rejections if r.reason != "over code_max_candidates")

    # environments: cold, rebuilt from the installed files, reused
    specs = {}
    for t in tasks:
        env = (t.world or {}).get("env")
        if env:
            specs.setdefault(env["key"], env)
    use = Counter((t.world.get("env") or {}).get("key") for t in tasks)
    labels = {"taskmine.home": sandbox.image_labels["taskmine.home"]}
    env_rows = []
    for key, env in specs.items():
        spec = codeenv.EnvSpec.from_json(env)
        tag = spec.tag(image_id(sandbox.base_image) or "", labels)
        docker("rmi", "-f", tag, check=False, timeout=120)
        cache = store.worlds(name) / "envs"
        shutil.rmtree(codeenv.env_root(spec, cache), ignore_errors=True)
        t0 = time.perf_counter()
        codeenv.ensure_image(spec, sandbox.base_image, cache, labels)
        cold = time.perf_counter() - t0
        docker("rmi", "-f", tag, check=False, timeout=120)
        t0 = time.perf_counter()
        codeenv.ensure_image(spec, sandbox.base_image, cache, labels)
        rebuilt = time.perf_counter() - t0
        t0 = time.perf_counter()
        codeenv.ensure_image(spec, sandbox.base_image, cache, labels)
        reused = time.perf_counter() - t0
        layer = codeenv.image_bytes(tag) - codeenv.image_bytes(sandbox.base_image)
        env_rows.append((key[:12], len(spec.requirements), use[key], cold, rebuilt, reused, layer))

    t0 = time.perf_counter()
    val = flow.run(ctx, "validations")
    val_s = time.perf_counter() - t0
    valid = int(val.counts.get("valid", 0))

    base_bytes = codeenv.image_bytes(sandbox.base_image)
    # what a task stores of its git world: its refs and its checkout's head (world["git"], in its task row)
    refs_bytes = sum(len(json.dumps(t.world.get("git") or {})) for t in tasks)
    repo_bytes = sum(_inodes(store.worlds(name) / "git").values())
    pack_bytes = _episode_pack_bytes(store.worlds(name), tasks[0], work) if tasks else 0

    print(f"\nprepare (ingest, anonymize, links, work items, world): {prep_s:.1f}s")
    print(f"tasks stage: {res.counts.get('code_change_candidates', 0)} candidates, {measured} measured, "
          f"{len(tasks)} tasks in {tasks_s:.1f}s = {tasks_s / max(measured, 1):.1f}s per candidate measured")
    for reason, n in reasons.most_common():
        print(f"  rejected: {reason}: {n}")
    print("\nenvironments (cold: host install + image build; rebuilt: image only; reused: the image exists)")
    print(f"  {'env':<12} {'reqs':>4} {'tasks':>5} {'cold s':>8} {'rebuilt s':>9} {'reused s':>8} {'layer MB':>9}")
    for key, nreq, ntasks, cold, rebuilt, reused, layer in env_rows:
        print(f"  {key:<12} {nreq:>4} {ntasks:>5} {cold:>8.2f} {rebuilt:>9.2f} {reused:>8.3f} {layer / 1e6:>9.2f}")
    print(f"\nvalidations: {len(tasks)} tasks, {valid} valid, {val_s:.1f}s = {val_s / max(len(tasks), 1):.1f}s per "
          f"task (oracle x{config.repeats}, null x{config.repeats}, 5 probes; an episode each)")
    total = tasks_s + val_s
    print(f"throughput: {valid} valid tasks in {total:.0f}s = {3600 * valid / total if total else 0:.0f} tasks per "
          f"hour on this machine (one at a time)")
    shared = base_bytes + sum(r[-1] for r in env_rows)
    print(f"\nbytes: base image {base_bytes / 1e6:.1f} MB + {len(env_rows)} environment layers "
          f"{sum(r[-1] for r in env_rows) / 1e6:.2f} MB, shared by {len(tasks)} tasks "
          f"({shared / max(len(tasks), 1) / 1e6:.2f} MB per task if split)")
    print(f"  per task: no image of its own; {refs_bytes / max(len(tasks), 1) / 1e3:.1f} kB of refs and head into the "
          f"world's repositories ({repo_bytes / 1e3:.0f} kB, shared by all); each episode packs what they reach "
          f"({pack_bytes / 1e3:.0f} kB for the first task, deleted with the episode)")
    return 0 if valid else 1
