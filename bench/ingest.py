"""`taskmine bench ingest`: events/s of each extractor against the bare parse of the same input.

Baselines: `json.load` of every Jira file (what any reader must at least do), and `git log -p
--numstat` of the same repository read to the end (the bytes the git extractor parses). Each is run
`REPEATS` times; the best time counts (the least disturbed by the machine).
"""

from __future__ import annotations

import json
import resource
import subprocess
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


def bench_ingest(workdir: Path, scale: int) -> int:
    from extractors import detect
    from extractors.base import get_extractor
    from sample.company import write_sample

    exports = workdir / "exports"
    ds_dir = exports / "bench"
    if not ds_dir.exists():
        t0 = time.perf_counter()
        write_sample(exports, seed=1, scale=scale, dataset="bench")
        print(f"sample at scale {scale} written in {time.perf_counter() - t0:.1f}s to {exports}")
    plan = detect.plan(ds_dir)
    rows = []
    for name in sorted({n for n, _ in plan}):
        inputs = [p for n, p in plan if n == name]
        cls = get_extractor(name)

        def extract(cls=cls, inputs=inputs):
            ex = cls("bench", None, "bench", root=ds_dir)
            return sum(1 for p in inputs for r in ex.iter_records(p) if r.__class__.__name__ == "Event")

        t_ex, n_events = _best(extract)
        if cls.source == "git":
            label = "git log -p --numstat"

            def baseline(inputs=inputs):
                total = 0
                for repo in inputs:
                    proc = subprocess.Popen(["git", "-C", str(repo), "log", "--all", "-p", "--numstat"],
                                            stdout=subprocess.PIPE)
                    while chunk := proc.stdout.read(1 << 20):
                        total += len(chunk)
                    proc.wait()
                return total
        else:
            label = "json.load"

            def baseline(inputs=inputs):
                n = 0
                for p in inputs:
                    with open(p, "rb") as f:
                        n += bool(json.load(f))
                return n

        t_base, _ = _best(baseline)
        rows.append((name, n_events, t_ex, n_events / t_ex, label, t_base, t_ex / t_base))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\ningest benchmark, sample scale {scale}, best of {REPEATS}")
    print(f"{'extractor':<10} {'events':>8} {'time s':>8} {'events/s':>10}  "
          f"{'baseline':<22} {'time s':>8} {'ratio':>7}")
    for name, n, t, rate, label, tb, ratio in rows:
        print(f"{name:<10} {n:>8} {t:>8.2f} {rate:>10.0f}  {label:<22} {tb:>8.2f} {ratio:>6.1f}x")
    print(f"peak RSS of this process: {peak_mb:.0f} MB")
    return 0
