"""The consumer side: load a published dataset in one call, verifying it against its manifest.

    from warehouse.loader import load_dataset
    ds = load_dataset(".taskmine/published/acme")       # the LATEST version
    for task in ds.tasks(split="train"):
        tools = ds.tools(task["task_id"])               # the company's tools at the task's cutoff
        print(task["prompt"], tools.call("jira_search", {"query": "timeout"}).text)
        ds.repositories(task["task_id"], "/tmp/work")   # its repositories exactly as they stood then

Invariant: with `verify=True` (the default) every file's sha256 must match the manifest, and no file
may exist that the manifest does not list; a mismatch is an error naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.ids import sha256_file

_JSON_COLUMNS = ("world_manifest", "reference", "rubric", "validation")


class DatasetError(ValueError):
    pass


@dataclass
class PublishedDataset:
    path: Path
    manifest: dict
    table: pa.Table

    @property
    def version(self) -> str:
        return self.manifest["version"]

    def tasks(self, split: str | None = None, family: str | None = None) -> list[dict]:
        out = []
        for row in self.table.to_pylist():
            if (split and row["split"] != split) or (family and row["family"] != family):
                continue
            for c in _JSON_COLUMNS:
                row[c] = json.loads(row[c])
            out.append(row)
        return out

    def task(self, task_id: str) -> dict:
        found = [t for t in self.tasks() if t["task_id"].startswith(task_id)]
        if len(found) != 1:
            raise DatasetError(f"{len(found)} tasks match {task_id!r} in {self.path}")
        return found[0]

    def world_file(self, cache: Path | str | None = None) -> Path:
        """The world's documents as a searchable world file, built once in `cache` (default: a folder beside
        the published version, since the version itself is verified against its manifest)."""
        from environments.world import import_documents

        cache = Path(cache) if cache else self.path.parent / f".world-cache-{self.version}"
        return import_documents(self.path / "world" / "documents.jsonl", cache / "world.sqlite")

    def tools(self, task_id: str, cache: Path | str | None = None):
        """A `ToolServer` for the task: the company's read and write tools at its cutoff, the action log in
        `.actions` (in-process; no sandbox, no shell)."""
        import datetime as dt

        from environments.tools import Persona, ToolServer
        from environments.world import World

        world = self.task(task_id)["world_manifest"]
        view = World(self.world_file(cache)).at(dt.datetime.fromisoformat(world["cutoff"]), world.get("hidden") or ())
        persona = Persona(**world["persona"]) if world.get("persona") else None
        return ToolServer(view, persona=persona, tools=set(world["tools"]) if world.get("tools") is not None else None)

    def repositories(self, task_id: str, dest: Path | str) -> list[Path]:
        """The task's repositories under `dest`, exactly as they stood at its cutoff: the published bundle,
        only the task's refs, every object they do not reach removed, the task's head checked out."""
        import subprocess

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
    return PublishedDataset(root, manifest, pq.read_table(root / "tasks.parquet"))
