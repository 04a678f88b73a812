"""Compare what two runs of one export published: the output must be a function of the input and the salt.

Run the same export twice, in two fresh homes, with one salt and two hash seeds, then compare:

    uv run taskmine sample --out /tmp/ex
    TASKMINE_HOME=/tmp/h1 TASKMINE_SALT=s PYTHONHASHSEED=1 uv run taskmine run --exports /tmp/ex
    TASKMINE_HOME=/tmp/h2 TASKMINE_SALT=s PYTHONHASHSEED=2 uv run taskmine run --exports /tmp/ex
    uv run python scripts/same_output.py /tmp/h1 /tmp/h2 --dataset acme

It prints, per published table, the task ids found in one run only (by family) and the fields that differ on
shared ids; the manifest's differing paths; the validations' differing fields. Exit status 1 when anything
differs but what describes the run itself (ALLOWED: a validation's duration and image id). docs/architecture.md
("Stages are idempotent") says what keeps the output so; tests/task_builders/test_salt.py guards the stages up to
tasks.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

# what describes the run itself, in no id and no published file: how long a replay took, and the id of the image it
# ran in (a code task's environment image is built in each warehouse, and its id changes with the build's times)
ALLOWED = {("validations", "duration_s"), ("validations", "image_digest")}


def _version(home: Path, dataset: str) -> Path:
    root = home / "published" / dataset
    return root / (root / "LATEST").read_text().strip()


def _rows(version: Path, table: str) -> dict[str, dict]:
    files = sorted(version.glob(f"{table}/**/*.parquet"))
    return {r["task_id"]: r for f in files for r in pq.read_table(f).to_pylist()}


def _paths(a, b, at: str = ""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from _paths(a.get(k), b.get(k), f"{at}.{k}")
    elif a != b:
        yield at


def compare(home_a: Path, home_b: Path, dataset: str) -> list[str]:
    """Lines describing every difference outside ALLOWED (empty: the same output)."""
    problems: list[str] = []
    va, vb = _version(home_a, dataset), _version(home_b, dataset)
    print(f"published versions: {va.name} | {vb.name}")
    if va.name != vb.name:
        problems.append(f"versions differ: {va.name} vs {vb.name}")
    for table in ("tasks", "grading", "trajectories", "swebench"):
        ra, rb = _rows(va, table), _rows(vb, table)
        only_a, only_b = set(ra) - set(rb), set(rb) - set(ra)
        families = Counter(r.get("family", "?") for r in ra.values())
        fields = Counter(k for i in set(ra) & set(rb) for k in ra[i] if ra[i][k] != rb[i].get(k))
        print(f"[{table}] {len(ra)} | {len(rb)} rows, per family {dict(sorted(families.items()))}; ids in one run "
              f"only: {len(only_a)} | {len(only_b)} "
              f"{dict(Counter(ra[i].get('family', '?') for i in only_a))}; fields differing on shared ids: "
              f"{dict(fields)}")
        if only_a or only_b or fields:
            problems.append(f"{table}: {len(only_a) + len(only_b)} ids in one run only, fields {dict(fields)}")
    ma, mb = (json.loads((v / "manifest.json").read_text()) for v in (va, vb))
    paths = list(_paths(ma, mb))
    print(f"[manifest] differing paths: {len(paths)} {paths[:20]}")
    if paths:
        problems.append(f"manifest: {paths[:10]}")
    vals = []
    for home in (home_a, home_b):
        path = home / "tables" / "validations" / f"{dataset}.parquet"
        vals.append({(r["task_id"], r["run_kind"], r["attempt"]): r for r in pq.read_table(path).to_pylist()})
    fields = Counter(f for k in set(vals[0]) & set(vals[1]) for f in vals[0][k] if vals[0][k][f] != vals[1][k][f])
    one = len(set(vals[0]) ^ set(vals[1]))
    kinds = Counter(k[1].split(":")[0] for k in vals[0])
    print(f"[validations] {len(vals[0])} | {len(vals[1])} rows {dict(sorted(kinds.items()))}; in one run only: "
          f"{one}; fields differing: {dict(fields)}")
    scores = sum(1 for k in set(vals[0]) & set(vals[1]) if vals[0][k]["score"] != vals[1][k]["score"])
    print(f"[validations] scores differing on shared runs: {scores}")
    bad = {f: n for f, n in fields.items() if ("validations", f) not in ALLOWED}
    if one or bad:
        problems.append(f"validations: {one} runs in one only, fields {bad}")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("home_a", type=Path)
    p.add_argument("home_b", type=Path)
    p.add_argument("--dataset", default="acme")
    args = p.parse_args(argv)
    problems = compare(args.home_a, args.home_b, args.dataset)
    print("same output" if not problems else "DIFFERENT:\n  " + "\n  ".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
