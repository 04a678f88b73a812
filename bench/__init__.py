"""Benchmarks (`taskmine bench ...`). Speed goals live here, never in timed tests.

Every number is measured in the same process, on the same input, against a named baseline, and
printed as a table with the ratio.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.anonymize import bench_anonymize
from bench.code import bench_code
from bench.embed import bench_embed
from bench.ingest import bench_ingest
from bench.pool import FAMILIES, bench_pool
from bench.privacy import bench_privacy
from bench.worlds import bench_worlds


def run(what: str, scale: int = 50, out: str | None = None, memory: bool = False, real: str | None = None,
        show: bool = False, input: str = "sample", exports: str | None = None, dataset: str | None = None,
        limit: int = 0, families: str | None = None, repeats: int = 1, slots: int = 1,
        second: str | None = None) -> int:
    if what == "ingest":
        if out:
            return bench_ingest(Path(out), scale, memory)
        with tempfile.TemporaryDirectory(prefix="taskmine-bench-") as tmp:
            return bench_ingest(Path(tmp), scale, memory)
    if what == "anonymize":
        return bench_anonymize(scale, out, memory, input=input, real=real)
    if what == "embed":
        return bench_embed(scale, out)
    if what == "worlds":
        return bench_worlds(scale if scale != 50 else 5, out)
    if what == "privacy":
        return bench_privacy(real, show)
    if what == "code":
        return bench_code(scale, out, exports, dataset, limit)
    if what == "pool":
        chosen = tuple(f.strip() for f in families.split(",") if f.strip()) if families else FAMILIES
        return bench_pool(dataset, chosen, repeats=repeats, slots=slots, second=second, limit=limit)
    raise ValueError(f"unknown benchmark {what!r}; choose: ingest, anonymize, embed, worlds, privacy, code, pool")
