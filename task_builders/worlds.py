"""World slices on disk: the files an agent sees, their manifest, and git workspaces cut at a moment.

Invariants:
- A world is a folder. Its manifest maps every file outside `repo/.git` to its sha256; a git
  workspace is identified by its HEAD commit (its content is fully determined by it), so the world
  hash is stable even though `.git` internals (index timestamps) are not.
- `cut_repository` creates a repository holding exactly the objects reachable from one commit: no
  other branch, no tag, no reflog, no remote, no FETCH_HEAD; `verify_cutoff` checks this instead of
  assuming it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
from pathlib import Path

from warehouse.ids import content_hash, sha256_file


class WorldError(RuntimeError):
    pass


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, input=input)
    if r.returncode != 0:
        raise WorldError(f"git {' '.join(args[:3])} failed in {repo}: {r.stderr.decode(errors='replace')[:300]}")
    return r.stdout.decode("utf-8", "replace")


def write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def manifest(world: Path) -> dict:
    """{"files": {relpath: sha256}, "repo": {"head": sha} | None} for the world folder."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(world):
        rel = Path(dirpath).relative_to(world)
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for f in sorted(filenames):
            files[str(rel / f)] = sha256_file(Path(dirpath) / f)
    repo = None
    if (world / "repo" / ".git").exists():
        repo = {"path": "repo", "head": git(world / "repo", "rev-parse", "HEAD").strip()}
    return {"files": dict(sorted(files.items())), "repo": repo}


def world_hash(m: dict) -> str:
    return content_hash("world", m)


def cut_repository(source: Path, commit: str, dest: Path) -> None:
    """A fresh repository at `dest` whose only history is `commit` and its ancestors, checked out."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "config", "core.logAllRefUpdates", "false")
    git(dest, "fetch", "-q", "--no-tags", "--no-write-fetch-head", "--update-head-ok", str(source),
        f"{commit}:refs/heads/main")
    git(dest, "reset", "-q", "--hard", "main")
    gd = dest / ".git"
    for name in ("logs", "hooks", "FETCH_HEAD", "ORIG_HEAD", "description", "COMMIT_EDITMSG"):
        p = gd / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    git(dest, "gc", "-q", "--prune=now")


def verify_cutoff(repo: Path, cutoff: dt.datetime) -> list[str]:
    """Every way `repo` holds something from after `cutoff` (or not from its one branch); [] is clean."""
    problems = []
    refs = [r for r in git(repo, "for-each-ref", "--format=%(refname)").split() if r]
    if refs != ["refs/heads/main"]:
        problems.append(f"refs other than refs/heads/main: {refs}")
    if (repo / ".git" / "logs").exists() and any((repo / ".git" / "logs").rglob("*")):
        problems.append("reflog present")
    for extra in ("FETCH_HEAD", "ORIG_HEAD"):
        if (repo / ".git" / extra).exists():
            problems.append(f"{extra} present")
    limit = int(cutoff.timestamp())
    for line in git(repo, "log", "--all", "--format=%H %ct %at").splitlines():
        sha, ct, at = line.split()
        if int(ct) > limit or int(at) > limit:
            problems.append(f"commit {sha[:12]} is dated after the cutoff")
    reachable = {line.split()[0] for line in git(repo, "rev-list", "--objects", "--all").splitlines() if line}
    stored = {line.split()[0] for line in
              git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").splitlines() if line}
    if stored - reachable:
        problems.append(f"{len(stored - reachable)} objects not reachable from main")
    if git(repo, "remote").strip():
        problems.append("a remote is configured")
    return problems
