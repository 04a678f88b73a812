"""Publish validated tasks as a versioned dataset a lab can load with DuckDB, pyarrow or `load_dataset`.

    published/<dataset>/<version>/
        tasks.parquet           one row per task (prompt, world: cutoff and what it hides, reference, rubric, ...)
        world/documents.jsonl   the company's world: every issue, comment, change, mail and chat message
        world/git/<repo>.bundle the world's git histories (issue keys stripped from messages)
        manifest.json           sha256 of every file, counts per stage, the pipeline version
        README.md               the dataset card

A task is a cutoff into the one world of its dataset (storage grows with the history, not with the number of
tasks); `warehouse.loader` serves a task's world through the same tools the sandbox uses, which enforce the
cutoff. The world files hold the whole history: an agent must reach them only through those tools.

Invariants:
- Byte-identical output for identical input: rows sorted by task_id, no timestamps of the run, the
  version derived from the content (`<pipeline version>-<content hash>`).
- Nothing is published unless the leak audit of the staged folder finds no known identity.
- Staged in a temp folder and renamed into place: a crash never leaves a half-written version.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from privacy import audit
from warehouse.ids import canonical_json, content_hash, sha256_file
from warehouse.schemas import Task

PIPELINE_VERSION = "0.1.0"


class LeakError(RuntimeError):
    def __init__(self, report: audit.Report):
        self.report, self.hits = report, report.hits
        super().__init__(f"leak audit of the files to publish: {report.summary()}")


# The columns SWE-bench tooling reads, filled for code-change tasks (null for the other families):
# FAIL_TO_PASS and PASS_TO_PASS are JSON lists of test ids, as in SWE-bench's own files.
SWE_COLUMNS = [(name, pa.string()) for name in ("instance_id", "repo", "base_commit", "patch", "test_patch",
                                                  "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS", "created_at",
                                                  "version")]


def swe_columns(t: Task) -> dict[str, str | None]:
    """SWE-bench's columns of a code-change task (reference["code"]); every value None for other tasks."""
    code = (t.reference or {}).get("code")
    if not code:
        return {name: None for name, _ in SWE_COLUMNS}
    return {"instance_id": f"{t.dataset}__{code['repo']}-{code['fix_commit'][:12]}", "repo": code["repo"],
            "base_commit": code["base_commit"], "patch": code.get("patch", ""),
            "test_patch": code.get("test_patch", ""),
            "problem_statement": code.get("problem_statement") or t.prompt,
            "FAIL_TO_PASS": json.dumps(code.get("FAIL_TO_PASS") or []),
            "PASS_TO_PASS": json.dumps(code.get("PASS_TO_PASS") or []), "created_at": code.get("created_at"),
            "version": ((t.world or {}).get("env") or {}).get("key")}


# What is measured of each task (graders.difficulty): probe scores (JSON {probe: score}) and how many passed, the
# flaky flag (oracle scores differed across repeats), baseline scores (JSON {baseline: score}) and whether one
# solved it, the model's rollouts, pass@1 and pass@k (null without rollouts), the difficulty band.
DIFFICULTY_COLUMNS = [("probe_scores", pa.string()), ("probes_passed", pa.int64()), ("flaky", pa.bool_()),
                      ("baseline_scores", pa.string()), ("baseline_solved", pa.bool_()), ("rollouts", pa.int64()),
                      ("pass_at_1", pa.float64()), ("pass_at_k", pa.float64()), ("difficulty", pa.string())]
UNMEASURED = {"probe_scores": "{}", "probes_passed": 0, "flaky": False, "baseline_scores": "{}",
              "baseline_solved": False, "rollouts": 0, "pass_at_1": None, "pass_at_k": None, "difficulty": "unmeasured"}

TASK_COLUMNS = pa.schema([
    ("task_id", pa.string()), ("dataset", pa.string()), ("family", pa.string()), ("split", pa.string()),
    ("prompt", pa.string()), ("cutoff", pa.timestamp("us", tz="UTC")), ("world_dir", pa.string()),
    ("world_hash", pa.string()), ("world_manifest", pa.string()), ("reference", pa.string()),
    ("rubric", pa.string()), ("lineage", pa.list_(pa.string())), ("canary", pa.string()),
    ("validation", pa.string()),
    *SWE_COLUMNS,
    *DIFFICULTY_COLUMNS,
])


@dataclass(frozen=True)
class Published:
    path: Path
    version: str
    tasks: int
    created: bool  # False when the same version already existed


def publish(tasks: Iterable[Task], world_root: Path, out_root: Path, dataset: str, *, funnel: dict[str, int],
            validation: dict[str, dict], rules: audit.Rules, difficulty: dict[str, dict] | None = None,
            stats: dict[str, dict] | None = None) -> Published:
    """Stage, leak-audit (`privacy.audit.audit` with the dataset's `rules`), then rename into place.
    `difficulty`: task id -> its DIFFICULTY_COLUMNS (graders.difficulty.Difficulty.columns); `stats`: per family
    difficulty and grader error (graders.difficulty.stats), into the manifest and the card."""
    tasks = sorted(tasks, key=lambda t: t.task_id)
    difficulty, stats = difficulty or {}, stats or {}
    world_key = json.loads((world_root / "world.json").read_text()).get("key") if (world_root / "world.json").exists() \
        else None
    # what was measured is content too: new baselines or rollouts of the same tasks are a new version
    digest = content_hash("publish", PIPELINE_VERSION, world_key, [(t.task_id, t.world_hash) for t in tasks],
                          [difficulty.get(t.task_id) for t in tasks], stats)[:12]
    version = f"{PIPELINE_VERSION}-{digest}"
    final = out_root / dataset / version
    if final.exists() and (final / "manifest.json").exists():
        (out_root / dataset / "LATEST").write_text(version + "\n")   # content went back to an older version
        return Published(final, version, len(tasks), False)
    stage = out_root / dataset / f".staging-{version}-{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    used = {r for t in tasks for r in ((t.world.get("git") or {}).get("repos") or [])}
    _copy_world(world_root, stage / "world", used)
    rows = []
    for t in tasks:
        rows.append({
            "task_id": t.task_id, "dataset": t.dataset, "family": t.family, "split": t.split, "prompt": t.prompt,
            "cutoff": t.cutoff, "world_dir": "world", "world_hash": t.world_hash,
            "world_manifest": canonical_json({k: v for k, v in t.world.items() if k != "view"}),
            "reference": canonical_json(t.reference), "rubric": canonical_json(t.rubric),
            "lineage": t.lineage, "canary": t.canary, "validation": canonical_json(validation.get(t.task_id, {})),
            **swe_columns(t), **(difficulty.get(t.task_id) or UNMEASURED),
        })
    pq.write_table(pa.Table.from_pylist(rows, schema=TASK_COLUMNS), stage / "tasks.parquet", compression="zstd")
    (stage / "README.md").write_text(_card(dataset, version, tasks, funnel, stats), encoding="utf-8")
    report = audit.audit(stage, rules)
    if not report.ok:
        shutil.rmtree(stage)
        raise LeakError(report)
    files = {str(p.relative_to(stage)): sha256_file(p) for p in sorted(stage.rglob("*")) if p.is_file()}
    manifest = {"dataset": dataset, "version": version, "pipeline_version": PIPELINE_VERSION,
                "counts": funnel, "tasks": len(tasks),
                "families": _count(t.family for t in tasks), "splits": _count(t.split for t in tasks),
                "difficulty": _count(str((difficulty.get(t.task_id) or UNMEASURED)["difficulty"]) for t in tasks),
                "grader": stats, "files": files}
    (stage / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if final.exists():
        shutil.rmtree(final)
    os.replace(stage, final)
    (out_root / dataset / "LATEST").write_text(version + "\n")
    return Published(final, version, len(tasks), True)


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def _copy_world(world_root: Path, dst: Path, repos: set[str]) -> None:
    """The world's documents as JSON lines and each repository a task uses as one deterministic bundle."""
    from environments.world import export_documents

    dst.mkdir(parents=True)
    if (world_root / "world.sqlite").exists():
        export_documents(world_root / "world.sqlite", dst / "documents.jsonl")
    for slug in sorted(repos):
        bundle(world_root / "git" / f"{slug}.git", dst / "git" / f"{slug}.bundle")


def bundle(repo: Path, out: Path) -> None:
    """A deterministic single-file copy of every branch of the repository (single-threaded packing)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["git", "-C", str(repo), "-c", "pack.threads=1", "bundle", "create", "-q",
                        str(out.resolve()), "--branches"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"git bundle failed for {repo}: {r.stderr.strip()[:300]}")


def _card(dataset: str, version: str, tasks: list[Task], funnel: dict[str, int], stats: dict | None = None) -> str:
    from graders import difficulty

    fam = _count(t.family for t in tasks)
    lines = [
        f"# {dataset} {version}", "",
        "Tasks mined by taskmine from a company's historical record, each validated in a sandbox: replaying",
        "the real outcome scores >= 0.99 and doing nothing scores <= 0.05, on every repeat.", "",
        "## Load", "", "```python", "from warehouse.loader import load_dataset",
        f"ds = load_dataset('published/{dataset}/{version}')", "```", "",
        "or `duckdb -c \"select family, count(*) from 'tasks.parquet' group by 1\"`.", "",
        "## Contents", "", "| family | tasks |", "|---|---|", *[f"| {k} | {v} |" for k, v in fam.items()], "",
        "## Funnel", "", "| stage | count |", "|---|---|", *[f"| {k} | {v} |" for k, v in funnel.items()], "",
        "## Privacy", "", "People are replaced by consistent pseudonyms; e-mail addresses and phone numbers are",
        "scrubbed; a leak audit found no known identity in any file of this version.", "",
        "## Worlds", "", "Every task is a moment of one company: `world/documents.jsonl` (issues, mail, chat) and",
        "`world/git/<repo>.bundle` hold its whole history, and a task's `world_manifest` says its cutoff, what it",
        "hides and its repositories' refs. Serve a task's world through the company tools, which enforce the",
        "cutoff (`ds.tools(task_id)`, `ds.repositories(task_id, dest)` in `warehouse.loader`, or",
        "`taskmine serve --published DIR --task ID` for an MCP client); never hand the world files to an agent.",
        "Test-split rows carry a canary string: do not train on them.", "",
        "## Difficulty and grader error", "",
        "Columns of `tasks.parquet`: `probe_scores` (JSON: each probe, a cheap or wrong outcome, and its score; every",
        "published task's probes scored under their thresholds), `probes_passed`, `flaky` (the oracle's scores",
        "differed across repeats; such tasks are not published), `baseline_scores` (JSON: retrieval baselines without",
        "a model that copy the nearest earlier work in the world) and `baseline_solved`, `rollouts`, `pass_at_1` and",
        "`pass_at_k` (a model agent's rollouts, k = rollouts; null without), and `difficulty`: `in_band` (the",
        "rollouts' pass rate within the configured band, 2%-70% by default; tasks outside it are retired and not",
        "published), `easy` (no rollouts; a baseline solves it), `unmeasured` (no rollouts, no baseline solves it).",
        "",
        "Per family, over every task built (probes, alternatives) or every valid task (bands, baselines, rollouts):",
        "probes passing estimate the grader's false positives, valid alternative outcomes that fail its false",
        "negatives (n = runs; n=0: not measured).", "",
        difficulty.markdown(difficulty.table(stats or {})), "",
    ]
    return "\n".join(lines)
