"""The consumer side: load a published dataset in one call, verifying it against its manifest.

    from publishing.loader import load_dataset
    ds = load_dataset(".taskmine/published/acme")       # the LATEST version
    for task in ds.tasks(split="train"):                # the agent view: nothing in it is an answer
        tools = ds.tools(task["task_id"])               # the company's tools at the task's cutoff
        print(task["prompt"], tools.call("jira_search", {"query": "timeout"}).text)
        ds.repositories(task["task_id"], "/tmp/work")   # its repositories exactly as they stood then
        print(ds.grade(task["task_id"], tools.actions).score)   # a tool task graded in one call

The grader side is asked for by name: `ds.grading(task_id)` (reference, rubric, probes, hidden events, requester
script, SWE-bench's test sets), `ds.world(task_id)` (the full world manifest an environment server needs),
`ds.trajectory(task_id)` (the oracle's chat), `ds.swebench(split)` (code tasks as SWE-bench instances). A code
task's rollout is graded by its tests: `ds.verify(task_id, patch)`.

Invariant: with `verify=True` (the default) every file's sha256 must match the manifest, and no file
may exist that the manifest does not list; a mismatch is an error naming the file.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from environments import actions as A
from environments import codeenv
from environments.backends import get_sandbox
from environments.tools import Persona, ToolServer
from environments.world import World, import_documents
from graders import replay, verifier
from graders.rubric import Context, grade
from graders.trajectory import _checkout
from warehouse.ids import sha256_file
from warehouse.schemas import Task

_JSON_COLUMNS = ("world_manifest", "reference", "rubric", "validation", "requester")


class DatasetError(ValueError):
    pass


def _rows(table: pa.Table) -> list[dict]:
    out = []
    for row in table.to_pylist():
        for c in _JSON_COLUMNS:
            if c in row and isinstance(row[c], str):
                row[c] = json.loads(row[c])
        out.append(row)
    return out


def _read(root: Path, pattern: str) -> pa.Table | None:
    files = sorted(root.glob(pattern))
    if not files:
        return None
    return pa.concat_tables([pq.read_table(f) for f in files]).sort_by("task_id")


@dataclass
class PublishedDataset:
    path: Path
    manifest: dict
    table: pa.Table                       # the agent view: every task (easy ones included), one row each
    grading_table: pa.Table | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def version(self) -> str:
        return self.manifest["version"]

    # -- the agent view ----------------------------------------------------------------------------------------

    def tasks(self, split: str | None = None, family: str | None = None, easy: bool | None = None) -> list[dict]:
        """Agent-view rows (prompt, tools, cutoff, world pointer, instance metadata), JSON columns parsed;
        `easy=False` leaves out the tasks a no-model baseline solves (as the card's default configs do)."""
        return [r for r in _rows(self.table)
                if not ((split and r["split"] != split) or (family and r["family"] != family)
                        or (easy is not None and bool(r.get("easy")) != easy))]

    def task(self, task_id: str) -> dict:
        found = [t for t in self.tasks() if t["task_id"].startswith(task_id)]
        if len(found) != 1:
            raise DatasetError(f"{len(found)} tasks match {task_id!r} in {self.path}")
        return found[0]

    # -- the grader view ---------------------------------------------------------------------------------------

    def grading(self, task_id: str) -> dict:
        """The task's grader-only row: reference, rubric, validation, hidden events, requester script, lineage and,
        for a code task, SWE-bench's patch, test_patch, FAIL_TO_PASS, PASS_TO_PASS and eval_script."""
        tid = self.task(task_id)["task_id"]
        if "grading" not in self._cache:
            self._cache["grading"] = {r["task_id"]: r for r in _rows(self.grading_table)} \
                if self.grading_table is not None else {}
        if tid not in self._cache["grading"]:
            raise DatasetError(f"{self.path}: no grading row for {tid}")
        return self._cache["grading"][tid]

    def world(self, task_id: str) -> dict:
        """The task's whole world manifest, as an environment server needs it: the agent view's plus the events
        its tools withhold and its requester's script."""
        task, g = self.task(task_id), self.grading(task_id)
        world = dict(task["world_manifest"])
        world["hidden"] = list(g.get("hidden") or [])
        if g.get("requester"):
            world["requester"] = {**(world.get("requester") or {}), **g["requester"]}
        return world

    def as_task(self, task_id: str):
        """The task as the pipeline's `warehouse.schemas.Task` (agent and grader views joined): what graders,
        replays and exporters take."""
        t, g = self.task(task_id), self.grading(task_id)
        return Task(task_id=t["task_id"], dataset=t["dataset"], family=t["family"], item_id=t["task_id"],
                    prompt=t["prompt"], cutoff=t["cutoff"], world=self.world(task_id), world_hash=t["world_hash"],
                    reference=g["reference"], rubric=g["rubric"], lineage=list(g.get("lineage") or []),
                    split=t["split"], canary=t.get("canary") or "")

    def trajectory(self, task_id: str) -> dict:
        """The task's oracle trajectory: {"messages": OpenAI chat messages with tool calls, "tools": function
        definitions, "steps", "source"}."""
        tid = self.task(task_id)["task_id"]
        table = _read(self.path, "trajectories/*.parquet")
        rows = [r for r in (table.to_pylist() if table is not None else []) if r["task_id"] == tid]
        if not rows:
            raise DatasetError(f"{self.path}: no trajectory for {tid}")
        r = rows[0]
        msgs = [{k: v for k, v in m.items() if v is not None} for m in r["messages"]]
        return {"messages": msgs, "tools": json.loads(r["tools"]), "steps": r["steps"], "source": r["source"]}

    def swebench(self, split: str | None = None) -> list[dict]:
        """The code tasks as SWE-bench instances (what `swebench.harness.utils.make_test_spec` takes)."""
        table = _read(self.path, "swebench/*.parquet")
        rows = table.to_pylist() if table is not None else []
        return [r for r in rows if not split or r["split"] == split]

    def swebench_image(self, task_id: str, sandbox=None, cache: Path | str | None = None) -> str:
        """Build the SWE-bench instance image of a code task (its `image` column) on this machine's Docker: the
        task's environment image (dependencies and the test runner, environments.codeenv) with the repository at
        the base commit in /testbed, from the published bundle. No registry holds it: SWE-bench's harness finds
        it locally and runs `run_instance` against it. Returns the image name."""
        inst = next((r for r in self.swebench() if r["task_id"] == self.task(task_id)["task_id"]), None)
        if inst is None:
            raise DatasetError(f"{task_id}: not a code task (no SWE-bench instance)")
        env = self.task(task_id)["world_manifest"].get("env") or {}
        sandbox = sandbox or get_sandbox("docker")
        cache = Path(cache) if cache else self.path.parent / f".env-cache-{self.version}"
        base = codeenv.prepare(sandbox, codeenv.EnvSpec.from_json(env), cache) or sandbox.base_image
        repo = self.grading(task_id)["reference"]["code"]["repo"]
        with tempfile.TemporaryDirectory(prefix="taskmine-swe-") as tmp:
            _checkout(self.path / "world" / "git", repo, inst["base_commit"], Path(tmp) / "testbed")
            subprocess.run(["git", "-C", str(Path(tmp) / "testbed"), "remote", "remove", "origin"],
                           capture_output=True)
            (Path(tmp) / "Dockerfile").write_text(
                f"FROM {base}\nCOPY testbed /testbed\nUSER root\nWORKDIR /testbed\n"
                "ENV HOME=/root\nRUN git config --global --add safe.directory /testbed\n")
            r = subprocess.run(["docker", "build", "-q", "--label", f"taskmine.swe={inst['instance_id']}", "-t",
                                inst["image"], tmp], capture_output=True, text=True, timeout=1800)
            if r.returncode != 0:
                raise DatasetError(f"docker build of {inst['image']} failed: {r.stderr.strip()[-300:]}")
        return inst["image"]

    # -- serving and grading -----------------------------------------------------------------------------------

    def world_file(self, cache: Path | str | None = None) -> Path:
        """The world's documents as a searchable world file, built once in `cache` (default: a folder beside
        the published version, since the version itself is verified against its manifest)."""
        cache = Path(cache) if cache else self.path.parent / f".world-cache-{self.version}"
        return import_documents(self.path / "world" / "documents.jsonl", cache / "world.sqlite")

    def view(self, task_id: str, cache: Path | str | None = None):
        """The world as the task's tools show it: nothing after its cutoff, none of its hidden events."""
        world = self.world(task_id)
        return World(self.world_file(cache)).at(dt.datetime.fromisoformat(world["cutoff"]), world.get("hidden") or ())

    def tools(self, task_id: str, cache: Path | str | None = None):
        """A `ToolServer` for the task: the company's read and write tools at its cutoff, the action log in
        `.actions` (in-process; no sandbox, no shell)."""
        world = self.world(task_id)
        persona = Persona(**world["persona"]) if world.get("persona") else None
        return ToolServer(self.view(task_id, cache), persona=persona,
                          tools=set(world["tools"]) if world.get("tools") is not None else None)

    def worlds_dir(self, cache: Path | str | None = None) -> Path:
        """The published world as the pipeline's world folder (world.sqlite, world.json, git/<repo>.git), built
        once in `cache`: what an episode (environments.episode) and the code verifier run on."""
        cache = Path(cache) if cache else self.path.parent / f".world-cache-{self.version}"
        self.world_file(cache)
        repos = {}
        for bundle in sorted((self.path / "world" / "git").glob("*.bundle")):
            dest = cache / "git" / f"{bundle.stem}.git"
            if not dest.exists():
                tmp = dest.with_name(dest.name + ".tmp")
                subprocess.run(["git", "clone", "-q", "--bare", str(bundle.resolve()), str(tmp)], check=True,
                               capture_output=True)
                tmp.rename(dest)
            repos[bundle.stem] = {"path": str(dest), "slug": bundle.stem}
        (cache / "world.json").write_text(json.dumps({"key": self.version, "repos": repos}, sort_keys=True))
        return cache

    def verify(self, task_id: str, patch: str, sandbox=None, cache: Path | str | None = None, timeout_s: float = 300):
        """Grade a code task's rollout in one call: `patch` (a unified diff of the agent's change to the repository)
        applied in an episode of the task, then its verifier phase (graders.verifier: the fix's tests restored
        and run by the sealed runner, FAIL_TO_PASS and PASS_TO_PASS from its signed records). Returns the
        `warehouse.schemas.Validation` (score, checks with explanations, error_class for infrastructure)."""
        task = self.as_task(task_id)
        code = (task.reference or {}).get("code")
        if not code:
            raise DatasetError(f"{task_id}: not a code task; grade its tool calls with ds.grade(task_id, actions)")
        sandbox = sandbox or get_sandbox("auto")
        command = verifier.apply_command(code["repo"], patch) if patch.strip() else "true"
        return replay.run_once(task, self.worlds_dir(cache), sandbox, "rollout:lab", command, timeout_s=timeout_s)

    def grade(self, task_id: str, actions, cache: Path | str | None = None):
        """Grade a rollout of a tool task in one call: `actions` is the action log of the task's tool server
        (`ds.tools(task_id).actions`) or a list of tool calls ({"tool": name, ...arguments}), replayed through a
        fresh tool server first. Returns `graders.rubric.Grade` (score, points, per-check explanations). Judge
        checks are not run (no model here) and are left out of the score. A code task is graded by running its
        tests: `ds.verify(task_id, patch)`."""
        g = self.grading(task_id)
        if (g["reference"] or {}).get("code"):
            raise DatasetError(f"{task_id}: a code task is graded by running its tests (the verifier): "
                               "ds.verify(task_id, patch), or the swebench harness on ds.swebench()")
        if hasattr(actions, "actions") and not isinstance(actions, list):     # a ToolServer
            actions = actions.actions
        actions = list(actions)
        if actions and not isinstance(actions[0], A.Logged):
            server = self.tools(task_id, cache)
            for a in actions:
                call = A.CALL.validate_python(a) if isinstance(a, dict) else a
                server.call(call.name(), call.arguments())
            actions = server.actions
        return grade(g["rubric"], actions, Context(view=self.view(task_id, cache)))

    def repositories(self, task_id: str, dest: Path | str) -> list[Path]:
        """The task's repositories under `dest`, exactly as they stood at its cutoff: the published bundle,
        only the task's refs, every object they do not reach removed, the task's head checked out."""
        world = self.task(task_id)["world_manifest"]
        git = world.get("git") or {}
        out = []
        for repo, refs in (git.get("refs") or {}).items():
            target = Path(dest) / repo
            run = lambda *a, cwd=target: subprocess.run(["git", *a], cwd=cwd, check=True, capture_output=True)  # noqa: E731
            target.mkdir(parents=True)
            run("init", "-q")
            run("fetch", "-q", "--no-tags", str((self.path / "world" / "git" / f"{repo}.bundle").resolve()),
                "+refs/heads/*:refs/bundle/*")
            for ref, sha in refs.items():
                run("update-ref", ref, sha)
            for ref in subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/bundle"], cwd=target,
                                      capture_output=True, text=True, check=True).stdout.split():
                run("update-ref", "-d", ref)
            head = (git.get("heads") or {}).get(repo)
            branch = next(iter(sorted(refs)), None)
            if head:
                run("update-ref", "--no-deref", "HEAD", head)
            elif branch:
                run("symbolic-ref", "HEAD", branch)
            run("reflog", "expire", "--expire=now", "--all")
            run("gc", "-q", "--prune=now")
            run("reset", "-q", "--hard")
            out.append(target)
        return out


def resolve(path: Path | str) -> Path:
    path = Path(path)
    if (path / "manifest.json").exists():
        return path
    latest = path / "LATEST"
    if latest.exists():
        return path / latest.read_text().strip()
    raise DatasetError(f"{path}: no manifest.json and no LATEST file; point at published/<dataset>[/<version>]")


def load_dataset(path: Path | str, verify: bool = True) -> PublishedDataset:
    root = resolve(path)
    manifest = json.loads((root / "manifest.json").read_text())
    if verify:
        listed = manifest["files"]
        present = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} - {"manifest.json"}
        if present - set(listed):
            raise DatasetError(f"{root}: files not in the manifest: {sorted(present - set(listed))[:3]}")
        for rel, digest in listed.items():
            p = root / rel
            if not p.exists():
                raise DatasetError(f"{root}: {rel} is missing")
            if sha256_file(p) != digest:
                raise DatasetError(f"{root}: {rel} does not match its sha256 in manifest.json")
    tasks = _read(root, "tasks/*/*.parquet")
    if tasks is None:
        raise DatasetError(f"{root}: no tasks/<family>/<split>.parquet (a version published before taskmine 0.2 "
                           "kept everything in tasks.parquet: publish it again)")
    return PublishedDataset(root, manifest, tasks, _read(root, "grading/*.parquet"))
