"""Publish validated tasks as a versioned dataset a lab can load with `datasets`, DuckDB, pyarrow or `load_dataset`.

    published/<dataset>/<version>/
        README.md                         the dataset card, with Hugging Face YAML: configs, splits, licence
        tasks/<family>/<split>.parquet    the agent view: prompt, tools, cutoff, world pointer, instance metadata
        tasks/easy/<split>.parquet        ... of the tasks a no-model baseline solves (config `easy`, not default)
        grading/<split>.parquet           the grader view: reference, rubric, probes, hidden events, requester
                                          script, SWE-bench's patch, test patch, test sets and eval script
        trajectories/<split>.parquet      each task's oracle trajectory as OpenAI tool-calling chat messages
        swebench/<split>.parquet          code tasks as SWE-bench instances (answers included: grader side)
        world/documents.jsonl             the company's world: every issue, comment, change, mail and chat message
        world/git/<repo>.bundle           the world's git histories (issue keys stripped from messages)
        manifest.json                     sha256 of every file, counts per stage, provenance, the pipeline version

Splits are `train` and `test`; a split file exists only when a task falls in it (the `datasets` package refuses an
empty split), and the card's configs name only the files that exist.

A task is a cutoff into the one world of its dataset (storage grows with the history, not with the number of
tasks); `warehouse.loader` serves a task's world through the same tools the sandbox uses, which enforce the
cutoff. The world files hold the whole history: an agent must reach them only through those tools.

Invariants:
- Byte-identical output for identical input: rows sorted by task_id, no timestamps of the run, the
  version derived from the content (`<pipeline version>-<content hash>`).
- Nothing is published unless the leak audit of the staged folder finds no known identity.
- The agent view holds no answer: nothing of a task's reference, rubric, probes, hidden tests or events, or its
  requester's script is in `tasks/` (tests/warehouse/test_published_layout.py checks every reference string).
- Staged in a temp folder and renamed into place: a crash never leaves a half-written version.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from privacy import audit
from warehouse import card, swe
from warehouse.ids import canonical_json, content_hash, sha256_file
from warehouse.schemas import Task

PIPELINE_VERSION = "0.2.0"   # 0.2: agent and grader views apart, HF configs, trajectories


class LeakError(RuntimeError):
    def __init__(self, report: audit.Report):
        self.report, self.hits = report, report.hits
        super().__init__(f"leak audit of the files to publish: {report.summary()}")


# What is measured of each task (graders.difficulty): probe scores (JSON {probe: score}) and how many passed, the
# flaky flag (oracle scores differed across repeats), baseline scores (JSON {baseline: score}) and whether one
# solved it, the model's rollouts, pass@1 and pass@k (null without rollouts), the difficulty band.
DIFFICULTY_COLUMNS = [("flaky", pa.bool_()),
                      ("baseline_scores", pa.string()), ("baseline_solved", pa.bool_()), ("rollouts", pa.int64()),
                      ("pass_at_1", pa.float64()), ("pass_at_k", pa.float64()), ("difficulty", pa.string())]
# ... and what the probes scored, in the grader view only (a policy must not read where the grader is weakest):
# every probe's score (JSON {probe: score}), how many reached their threshold, and the best one with its score
PROBE_COLUMNS = [("probe_scores", pa.string()), ("probes_passed", pa.int64()), ("best_probe", pa.string()),
                 ("best_probe_score", pa.float64())]
UNMEASURED = {"probe_scores": "{}", "probes_passed": 0, "best_probe": None, "best_probe_score": None, "flaky": False,
              "baseline_scores": "{}", "baseline_solved": False, "rollouts": 0, "pass_at_1": None, "pass_at_k": None,
              "difficulty": "unmeasured"}
_PROBE_NAMES = {name for name, _ in PROBE_COLUMNS}

# The agent view (`tasks/`): what a policy may see. Nothing here is an answer: no reference, rubric, probe, hidden
# test, test set, patch, hidden event id or requester script (tests/warehouse/test_published_layout.py greps it).
TASK_COLUMNS = pa.schema([
    ("task_id", pa.string()), ("dataset", pa.string()), ("family", pa.string()), ("split", pa.string()),
    ("easy", pa.bool_()), ("prompt", pa.string()), ("cutoff", pa.timestamp("us", tz="UTC")),
    ("tools", pa.list_(pa.string())), ("world_dir", pa.string()), ("world_hash", pa.string()),
    ("world_manifest", pa.string()), ("canary", pa.string()),
    *[(name, pa.string()) for name in swe.AGENT],
    *DIFFICULTY_COLUMNS,
])
# The grader view (`grading/`): everything a grader, an environment server or a reviewer needs and an agent must
# never see. `hidden`: the world events the task's tools withhold; `requester`: the simulated requester's script.
GRADING_COLUMNS = pa.schema([
    ("task_id", pa.string()), ("dataset", pa.string()), ("family", pa.string()), ("split", pa.string()),
    ("reference", pa.string()), ("rubric", pa.string()), ("validation", pa.string()),
    ("hidden", pa.list_(pa.string())), ("requester", pa.string()), ("lineage", pa.list_(pa.string())),
    ("canary", pa.string()),
    *[(name, pa.string()) for name in ("instance_id", *swe.GRADER)],
    *PROBE_COLUMNS,
])
_CALL = pa.struct([("id", pa.string()), ("type", pa.string()),
                   ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))])
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(_CALL)),
                     ("tool_call_id", pa.string()), ("name", pa.string())])
# Oracle trajectories (`trajectories/`), OpenAI tool-calling chat messages; `tools` is the JSON list of function
# definitions (a string: the tools' parameter schemas differ, one Arrow struct cannot hold them all).
TRAJECTORY_COLUMNS = pa.schema([
    ("task_id", pa.string()), ("dataset", pa.string()), ("family", pa.string()), ("split", pa.string()),
    ("messages", pa.list_(MESSAGE)), ("tools", pa.string()), ("steps", pa.int64()), ("source", pa.string()),
    ("canary", pa.string()),
])
# SWE-bench instances of the code tasks (`swebench/`): the harness's own columns, answers included (grader side).
SWEBENCH_COLUMNS = pa.schema([("task_id", pa.string()), ("split", pa.string()),
                              *[(name, pa.string()) for name in ("instance_id", *swe.AGENT[1:], *swe.GRADER)]])
SPLITS = ("train", "test")
REQUESTER_PUBLIC = ("name", "address", "handle", "medium", "target", "thread")   # the rest is the grader's script


@dataclass(frozen=True)
class Published:
    path: Path
    version: str
    tasks: int
    created: bool  # False when the same version already existed
    withheld: dict[str, str] = field(default_factory=dict)   # task id -> why publishing withheld it


@dataclass(frozen=True)
class Provenance:
    """One source of the dataset, for the card: the connector's source name, events, first and last date, licence."""

    source: str
    events: int
    first: str
    last: str
    license: str = "unknown"


def is_easy(measured: dict) -> bool:
    """A task the no-model baselines solve (graders.difficulty): left out of the default configs."""
    return bool(measured.get("baseline_solved")) or measured.get("difficulty") == "easy"


def agent_world(world: dict) -> dict:
    """The task's world manifest as an agent may see it: cutoff, persona, tools, repository refs, environment, who
    the requester is; never the hidden events or the requester's script (the real reply, later messages)."""
    out = {k: v for k, v in world.items() if k not in ("view", "hidden", "requester")}
    if world.get("requester"):
        out["requester"] = {k: world["requester"].get(k) for k in REQUESTER_PUBLIC if k in world["requester"]}
    return out


def task_tools(world: dict) -> list[str]:
    """The tools an episode of the task offers (environments.tools.ToolServer.available in a sandbox session)."""
    from environments import actions as A

    if world.get("tools") is not None:
        return sorted(world["tools"])
    names = {n for n, t in A.TOOLS.items() if t.kind != "shell"} | {"shell"}
    if (world.get("git") or {}).get("repos"):
        names.add("git")
    return sorted(names)


WITHHOLD_ROUNDS = 4   # audits of a staged version: each withholds the tasks and documents the last one found


def publish(tasks: Iterable[Task], world_root: Path, out_root: Path, dataset: str, *, funnel: dict[str, int],
            validation: dict[str, dict], rules: audit.Rules, difficulty: dict[str, dict] | None = None,
            stats: dict[str, dict] | None = None, provenance: list[Provenance] | None = None,
            license: str = "other", remotes: dict[str, str | None] | None = None,
            withheld: dict | None = None, resistance: dict[str, dict] | None = None) -> Published:
    """Stage, leak-audit (`privacy.audit.audit` with the dataset's `rules`), then rename into place.
    `difficulty`: task id -> its DIFFICULTY_COLUMNS (graders.difficulty.Difficulty.columns); `stats`: per family
    difficulty and grader error (graders.difficulty.stats), into the manifest and the card; `provenance`: the
    dataset's sources for the card; `license`: the dataset's licence (an SPDX id, or "other"); `remotes`: world
    repository slug -> its public remote (SWE-bench's owner/name); `withheld`: what earlier stages withheld
    (taskmine.flow.withheld_summary), counted in the manifest and the card; `resistance`: per family the
    hack-resistance table (graders.difficulty.resistance), into the manifest and the card.

    A hit of the audit in a task's row withholds that task, one in a world document that document and every
    task whose lineage or hidden events name it (privacy.withhold.attribute); the version is staged and audited
    again without them (`Published.withheld`). A hit anywhere else (a repository bundle, the card) refuses the
    whole version (LeakError), as does a version every task of which is withheld."""
    from privacy.withhold import attribute

    tasks = sorted(tasks, key=lambda t: t.task_id)
    difficulty, stats, remotes, withheld = difficulty or {}, stats or {}, remotes or {}, withheld or {}
    resistance = resistance or {}
    world_key = json.loads((world_root / "world.json").read_text()).get("key") if (world_root / "world.json").exists() \
        else None
    # what was measured is content too: new baselines or rollouts of the same tasks are a new version
    digest = content_hash("publish", PIPELINE_VERSION, world_key, [(t.task_id, t.world_hash) for t in tasks],
                          [difficulty.get(t.task_id) for t in tasks], stats, resistance,
                          [p.__dict__ for p in provenance or []], license, sorted(remotes.items()),
                          withheld or None)[:12]
    version = f"{PIPELINE_VERSION}-{digest}"
    final = out_root / dataset / version
    if final.exists() and (final / "manifest.json").exists():
        (out_root / dataset / "LATEST").write_text(version + "\n")   # content went back to an older version
        manifest = json.loads((final / "manifest.json").read_text())
        return Published(final, version, manifest.get("tasks", len(tasks)), False,
                         dict((manifest.get("withheld") or {}).get("published", {})))
    out_tasks: dict[str, str] = {}      # task id -> why it was withheld here
    out_docs: dict[str, str] = {}       # world document (event id) -> why
    report = None
    for _ in range(WITHHOLD_ROUNDS):
        live = [t for t in tasks if t.task_id not in out_tasks]
        if not live:
            break
        summary = _with_publish(withheld, out_tasks, out_docs, len(tasks))
        stage = _stage(live, world_root, out_root, dataset, version, funnel=funnel, validation=validation,
                       difficulty=difficulty, stats=stats, provenance=provenance, license=license, remotes=remotes,
                       withheld=summary, resistance=resistance, drop_documents=set(out_docs))
        report = audit.audit(stage, rules, limit=1000)
        if report.ok:
            break
        found, docs, other = attribute(report, stage)
        shutil.rmtree(stage)
        if other or not (set(found) - set(out_tasks) or set(docs) - set(out_docs)):
            raise LeakError(report)
        out_docs.update(docs)
        for t in live:
            cited = set(t.lineage) | set(t.world.get("hidden") or ())
            if t.task_id in found:
                out_tasks[t.task_id] = found[t.task_id]
            elif cited & set(out_docs):
                out_tasks[t.task_id] = "cites a withheld document"
    if report is None or not report.ok:   # every task withheld, or hits left after every round
        raise LeakError(report or audit.Report(out_root / dataset))
    manifest = json.loads((stage / "manifest.json").read_text())
    if final.exists():
        shutil.rmtree(final)
    os.replace(stage, final)
    (out_root / dataset / "LATEST").write_text(version + "\n")
    return Published(final, version, manifest["tasks"], True, out_tasks)


def _with_publish(withheld: dict, tasks: dict[str, str], docs: dict[str, str], considered: int) -> dict:
    """The earlier stages' withheld summary with what publishing withholds added (tasks and documents)."""
    out = {"total": 0, "records": 0, "rate": 0.0, "by_kind": {}, "by_reason": {}, **withheld}
    out = {**out, "by_kind": dict(out["by_kind"]), "by_reason": dict(out["by_reason"])}
    for kind, rows in (("task", tasks), ("document", docs)):
        for reason in rows.values():
            out["by_kind"][kind] = out["by_kind"].get(kind, 0) + 1
            out["by_reason"][reason] = out["by_reason"].get(reason, 0) + 1
    out["total"] += len(tasks) + len(docs)
    out["records"] += considered
    out["rate"] = round(out["total"] / out["records"], 5) if out["records"] else 0.0
    out["published"] = dict(sorted(tasks.items()))
    return out


def _stage(tasks: list[Task], world_root: Path, out_root: Path, dataset: str, version: str, *,
           funnel: dict[str, int], validation: dict[str, dict], difficulty: dict[str, dict], stats: dict,
           provenance: list[Provenance] | None, license: str, remotes: dict[str, str | None], withheld: dict,
           resistance: dict, drop_documents: set[str]) -> Path:
    """Every file of the version in a staging folder (manifest last); returns the folder."""
    stage = out_root / dataset / f".staging-{version}-{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    if "published" in funnel:
        funnel = {**funnel, "published": len(tasks)}
    used = {r for t in tasks for r in ((t.world.get("git") or {}).get("repos") or [])}
    _copy_world(world_root, stage / "world", used, drop_documents)
    measured = {t.task_id: difficulty.get(t.task_id) or UNMEASURED for t in tasks}
    swe_rows = _swe(tasks, world_root, dataset, remotes)
    agent, grading, trajectories, instances = [], [], [], []
    for t in tasks:
        code_cols = swe_rows.get(t.task_id) or swe.columns(dataset, None, t.world)
        agent.append({
            "task_id": t.task_id, "dataset": t.dataset, "family": t.family, "split": t.split,
            "easy": is_easy(measured[t.task_id]), "prompt": t.prompt, "cutoff": t.cutoff,
            "tools": task_tools(t.world), "world_dir": "world", "world_hash": t.world_hash,
            "world_manifest": canonical_json(agent_world(t.world)), "canary": t.canary,
            **{k: code_cols[k] for k in swe.AGENT},
            **{k: v for k, v in measured[t.task_id].items() if k not in _PROBE_NAMES}})
        requester = t.world.get("requester") or {}
        grading.append({
            "task_id": t.task_id, "dataset": t.dataset, "family": t.family, "split": t.split,
            "reference": canonical_json(t.reference), "rubric": canonical_json(t.rubric),
            "validation": canonical_json(validation.get(t.task_id, {})), "hidden": list(t.world.get("hidden") or []),
            "requester": canonical_json({k: v for k, v in requester.items() if k not in REQUESTER_PUBLIC})
            if requester else None, "lineage": t.lineage, "canary": t.canary,
            **{k: code_cols[k] for k in ("instance_id", *swe.GRADER)},
            **{k: measured[t.task_id].get(k, UNMEASURED[k]) for k in _PROBE_NAMES}})
        if t.task_id in swe_rows:
            instances.append({"task_id": t.task_id, "split": t.split,
                              **{k: code_cols[k] for k in SWEBENCH_COLUMNS.names if k not in ("task_id", "split")}})
        trajectories.append(_trajectory(t, world_root))
    files: list[tuple[str, pa.Schema, list[dict]]] = []
    families = sorted({t.family for t in tasks})
    for split in SPLITS:
        for fam in families:
            files.append((f"tasks/{fam}/{split}.parquet", TASK_COLUMNS,
                          [r for r in agent if r["family"] == fam and r["split"] == split and not r["easy"]]))
        files.append((f"tasks/easy/{split}.parquet", TASK_COLUMNS,
                      [r for r in agent if r["split"] == split and r["easy"]]))
        files.append((f"grading/{split}.parquet", GRADING_COLUMNS, [r for r in grading if r["split"] == split]))
        files.append((f"trajectories/{split}.parquet", TRAJECTORY_COLUMNS,
                      [r for r in trajectories if r["split"] == split]))
        if instances:
            files.append((f"swebench/{split}.parquet", SWEBENCH_COLUMNS, [r for r in instances if r["split"] == split]))
    for rel, schema, rows in files:
        if rows:          # a split file exists only when a task falls in it (card.configs)
            write_parquet(stage / rel, schema, rows)
    counts = {fam: {split: sum(1 for r in agent if r["family"] == fam and r["split"] == split) for split in SPLITS}
              for fam in families}
    easy = {split: sum(1 for r in agent if r["split"] == split and r["easy"]) for split in SPLITS}
    (stage / "README.md").write_text(card.render(
        dataset=dataset, version=version, files={rel for rel, _, rows in files if rows}, families=families,
        counts=counts, easy=easy, funnel=funnel,
        stats=stats, provenance=provenance or [], license=license, canary=next((t.canary for t in tasks if t.canary),
                                                                                ""),
        swebench=bool(instances), withheld=withheld, resistance=resistance), encoding="utf-8")
    files_sha = {str(p.relative_to(stage)): sha256_file(p) for p in sorted(stage.rglob("*")) if p.is_file()}
    manifest = {"dataset": dataset, "version": version, "pipeline_version": PIPELINE_VERSION,
                "counts": funnel, "tasks": len(tasks), "license": license,
                "families": _count(t.family for t in tasks), "splits": _count(t.split for t in tasks),
                "easy": sum(easy.values()),
                "difficulty": _count(str(measured[t.task_id]["difficulty"]) for t in tasks),
                "grader": stats, "hack_resistance": resistance, "provenance": [p.__dict__ for p in provenance or []],
                "withheld": withheld,
                "layout": {"tasks": "tasks/<family>/<split>.parquet (easy tasks: tasks/easy/<split>.parquet)",
                           "grading": "grading/<split>.parquet", "trajectories": "trajectories/<split>.parquet",
                           **({"swebench": "swebench/<split>.parquet"} if instances else {})},
                "files": files_sha}
    (stage / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return stage


def write_parquet(path: Path, schema: pa.Schema, rows: list[dict]) -> None:
    """One Parquet file; an empty one has the schema and no row group (a 0-row group is a read error in
    `datasets`: its batch size is the first group's row count)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if rows:
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="zstd")
    else:
        pq.ParquetWriter(path, schema, compression="zstd").close()


def _swe(tasks: list[Task], world_root: Path, dataset: str, remotes: dict[str, str | None]) -> dict[str, dict]:
    """task id -> SWE-bench columns (warehouse.swe) of every code task; `environment_setup_commit` is the earliest
    base commit of its version."""
    from environments.world import World

    code = [t for t in tasks if (t.reference or {}).get("code")]
    if not code:
        return {}
    wf = world_root / "world.sqlite"
    world = World(wf) if wf.exists() else None
    rows = {}
    for t in code:
        c = t.reference["code"]
        repo = world_root / "git" / f"{c['repo']}.git"
        declared = swe.declared_version(repo, c["base_commit"]) if repo.exists() else "0"
        view = world.at(t.cutoff, t.world.get("hidden") or ()) if world else None
        rows[t.task_id] = swe.columns(dataset, c, t.world, task_id=t.task_id, remote=remotes.get(c["repo"]),
                                      declared=declared,
                                      hints_text=swe.hints(view, c.get("tickets") or []), prompt=t.prompt)
    first: dict[str, tuple[str, str]] = {}
    for _tid, r in sorted(rows.items(), key=lambda kv: (kv[1]["created_at"] or "", kv[0])):
        first.setdefault(r["version"], (r["created_at"] or "", r["base_commit"]))
    for r in rows.values():
        r["environment_setup_commit"] = first[r["version"]][1]
    return rows


def _trajectory(t: Task, world_root: Path) -> dict:
    from graders import trajectory

    wf = world_root / "world.sqlite"
    traj = trajectory.oracle(t, wf if wf.exists() else None, world_root / "git")
    return {"task_id": t.task_id, "dataset": t.dataset, "family": t.family, "split": t.split,
            "messages": [{"role": m["role"], "content": m.get("content"), "tool_calls": m.get("tool_calls"),
                          "tool_call_id": m.get("tool_call_id"), "name": m.get("name")} for m in traj["messages"]],
            "tools": json.dumps(traj["tools"], sort_keys=True), "steps": traj["steps"], "source": traj["source"],
            "canary": t.canary}


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def _copy_world(world_root: Path, dst: Path, repos: set[str], drop: set[str] = frozenset()) -> None:
    """The world's documents as JSON lines (but those in `drop`, by event id) and each repository a task uses as
    one deterministic bundle."""
    from environments.world import export_documents

    dst.mkdir(parents=True)
    if (world_root / "world.sqlite").exists():
        export_documents(world_root / "world.sqlite", dst / "documents.jsonl")
        if drop:
            docs = dst / "documents.jsonl"
            lines = docs.read_text(encoding="utf-8").splitlines(keepends=True)
            docs.write_text("".join(ln for ln in lines if json.loads(ln).get("event_id") not in drop),
                            encoding="utf-8")
    for slug in sorted(repos):
        bundle(world_root / "git" / f"{slug}.git", dst / "git" / f"{slug}.bundle")


def bundle(repo: Path, out: Path) -> None:
    """A deterministic single-file copy of every branch of the repository (single-threaded packing)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["git", "-C", str(repo), "-c", "pack.threads=1", "bundle", "create", "-q",
                        str(out.resolve()), "--branches"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"git bundle failed for {repo}: {r.stderr.strip()[:300]}")
