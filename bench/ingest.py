"""`taskmine bench ingest`: events/s of each extractor against the bare parse of the same input, and
peak memory as the input grows.

Baselines (the least any reader of the same bytes must do):
- git: `git log --all -p --numstat` read to the end;
- Jira, GitHub, Slack JSON: `json.load` of every input file (for a Slack export, every JSON file in it);
- mbox: Python's `mailbox.mbox` iterating every message (it parses headers);
- maildir: `mailbox.Maildir` likewise; .eml: `email.message_from_binary_file`.
Each is run `REPEATS` times; the best time counts (the least disturbed by the machine).

Memory: each extractor runs alone in a fresh process on the sample at `scale` and at `10 * scale`
(`--memory`); the peak of what Python allocated while extracting (tracemalloc, imports excluded) is
reported for both, so a flat line means it streams.
"""

from __future__ import annotations

import email
import json
import mailbox
import os
import subprocess
import sys
import time
from pathlib import Path

REPEATS = 3


def _best(fn) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        n = fn()
        best = min(best, time.perf_counter() - t0)
    return best, n


def _files(p: Path, suffix: str = "") -> list[Path]:
    return [p] if p.is_file() else sorted(x for x in p.rglob(f"*{suffix}") if x.is_file() and ".git" not in x.parts)


def baseline(source: str, name: str, inputs: list[Path]) -> tuple[str, callable]:
    if source == "git":
        def run():
            total = 0
            for repo in inputs:
                proc = subprocess.Popen(["git", "-C", str(repo), "log", "--all", "-p", "--numstat"],
                                        stdout=subprocess.PIPE)
                while chunk := proc.stdout.read(1 << 20):
                    total += len(chunk)
                proc.wait()
            return total
        return "git log -p --numstat", run
    if name == "mbox":
        return "mailbox.mbox", lambda: sum(1 for p in inputs for _ in mailbox.mbox(str(p), create=False))
    if name == "maildir":
        return "mailbox.Maildir", lambda: sum(1 for p in inputs for _ in mailbox.Maildir(str(p), create=False))
    if name == "eml":
        def run():
            n = 0
            for p in inputs:
                with open(p, "rb") as f:
                    n += bool(email.message_from_binary_file(f))
            return n
        return "email.message_from_file", run

    def run():
        n = 0
        for p in inputs:
            for f in _files(p, ".json"):
                with open(f, "rb") as fh:
                    n += bool(json.load(fh))
        return n
    return "json.load", run


def _extract(name: str, root: Path, inputs: list[Path]) -> int:
    from extractors.base import get_extractor

    ex = get_extractor(name)("bench", None, "bench", root=root)
    return sum(1 for p in inputs for r in ex.iter_records(p) if r.__class__.__name__ == "Event")


def _write(workdir: Path, scale: int) -> Path:
    from sample.company import write_sample

    ds_dir = workdir / f"scale{scale}" / "bench"
    if not ds_dir.exists():
        t0 = time.perf_counter()
        write_sample(ds_dir.parent, seed=1, scale=scale, dataset="bench")
        print(f"sample at scale {scale} written in {time.perf_counter() - t0:.1f}s to {ds_dir}", flush=True)
    return ds_dir


def bench_ingest(workdir: Path, scale: int, memory: bool = False) -> int:
    from extractors import detect
    from extractors.base import get_extractor

    ds_dir = _write(workdir, scale)
    plan = detect.plan(ds_dir)
    rows = []
    for name in sorted({n for n, _ in plan}):
        inputs = [p for n, p in plan if n == name]
        t_ex, n_events = _best(lambda name=name, inputs=inputs: _extract(name, ds_dir, inputs))
        label, base = baseline(get_extractor(name).source, name, inputs)
        t_base, _ = _best(base)
        rows.append((name, n_events, t_ex, n_events / t_ex if t_ex else 0, label, t_base,
                     t_ex / t_base if t_base else float("nan")))
    print(f"\ningest benchmark, sample scale {scale}, best of {REPEATS}")
    head = ("extractor", "events", "time s", "events/s", "baseline", "time s", "slower")
    print(f"{head[0]:<12} {head[1]:>8} {head[2]:>8} {head[3]:>10}  {head[4]:<24} {head[5]:>8} {head[6]:>7}")
    for name, n, t, rate, label, tb, ratio in rows:
        print(f"{name:<12} {n:>8} {t:>8.2f} {rate:>10.0f}  {label:<24} {tb:>8.3f} {ratio:>6.1f}x")
    if memory:
        big = _write(workdir, scale * 10)
        print(f"\npeak memory allocated while extracting (tracemalloc), each extractor alone in a fresh "
              f"process, scale {scale} vs {scale * 10}")
        print(f"{'extractor':<12} {'events':>8} {'peak MB':>8}   {'events':>8} {'peak MB':>8}  growth")
        for name in sorted({n for n, _ in plan}):
            small = _measure(name, ds_dir)
            large = _measure(name, big)
            print(f"{name:<12} {small[0]:>8} {small[1]:>8.0f}   {large[0]:>8} {large[1]:>8.0f}  "
                  f"{large[1] / small[1]:.2f}x for {large[0] / max(small[0], 1):.0f}x the events")
    return 0


def _measure(name: str, ds_dir: Path) -> tuple[int, float]:
    """(events, peak MB of Python allocations while extracting) of one extractor, in a fresh interpreter."""
    code = ("import sys, tracemalloc; from pathlib import Path; from extractors import detect; "
            "from extractors.base import registry; from bench.ingest import _extract; registry(); "
            "root = Path(sys.argv[2]); inputs = [p for k, p in detect.plan(root) if k == sys.argv[1]]; "
            "tracemalloc.start(); n = _extract(sys.argv[1], root, inputs); "
            "print(n, tracemalloc.get_traced_memory()[1] / 2**20)")
    out = subprocess.run([sys.executable, "-c", code, name, str(ds_dir)], capture_output=True, text=True,
                         env=os.environ, check=True).stdout.split()
    return int(out[0]), float(out[1])

