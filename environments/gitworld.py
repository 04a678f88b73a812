"""Git repositories of a world: every task sees a repository exactly as it stood at its cutoff, and the
storage of all of them grows with the history, not with the number of tasks.

Mechanism: the world's repository (the anonymized history, issue keys stripped from messages) is cut into a
*chain of packs*. For the sorted distinct cutoffs T1 < T2 < ... of a dataset's tasks, pack i holds the
objects reachable at Ti and not at T(i-1) (`git pack-objects --revs`, never thin), so the objects at Ti are
exactly packs 1..i. A task's *view* is a folder of hard links to those packs plus the refs at its cutoff: a
few inodes, no copied bytes. The sandbox mounts the view read-only at /world/git and the agent's writable
repository under its home borrows the objects through `objects/info/alternates`, so creating it copies
nothing either (`git checkout` writes the work tree only).

Why not the alternatives: a full clone per task (what this replaced) cost 66 MB a task on a 4,400-commit
repository; one shared object store filtered by a tool would leave the future objects readable on disk;
one image layer per cutoff is limited to ~125 layers and needs a build per task.

Invariants:
- The objects at a cutoff are those reachable from the refs as they stood then: for each branch, the first
  commit on its first-parent line dated (committer date) at or before the cutoff, and everything it
  reaches. Nothing else is in the view: no other pack, no reflog, no unreachable object; `verify_view`
  checks this instead of assuming it, and checks that the commits a task hides are not reachable.
- A chain is rebuilt only when the repository or the set of cutoffs changes (content key in chain.json).
- Views are content-addressed by (repository key, packs, refs, head): tasks at one moment share one view.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from warehouse.ids import content_hash

UTC = dt.UTC


class GitWorldError(RuntimeError):
    pass


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    r = subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", *args], capture_output=True, input=input,
                       env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"})
    if r.returncode != 0:
        raise GitWorldError(f"git {' '.join(args[:3])} failed in {repo.name}: "
                            f"{r.stderr.decode(errors='replace').strip()[:300]}")
    return r.stdout.decode("utf-8", "replace")


def _epoch(ts: dt.datetime) -> int:
    return int(ts.astimezone(UTC).timestamp())


@dataclass
class Branches:
    """Each branch's first-parent line, newest first, as (commit, committer epoch): `tips(t)` per cutoff."""

    lines: dict[str, list[tuple[str, int]]]
    head: str | None  # the branch HEAD names

    @classmethod
    def read(cls, repo: Path) -> Branches:
        lines = {}
        for ref in git(repo, "for-each-ref", "--format=%(refname)", "refs/heads").split():
            out = git(repo, "rev-list", "--first-parent", "--format=%ct", ref)
            shas, epochs = out.split("\n")[0::2], out.split("\n")[1::2]
            lines[ref] = [(s.split()[1], int(e)) for s, e in zip(shas, epochs) if s.startswith("commit ")]
        head = subprocess.run(["git", "-C", str(repo), "symbolic-ref", "-q", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or None
        return cls(lines, head)

    def tips(self, t: int) -> dict[str, str]:
        """ref -> the commit it pointed at, at epoch `t` (branches with nothing yet are absent)."""
        out = {}
        for ref, line in self.lines.items():
            tip = next((sha for sha, ct in line if ct <= t), None)
            if tip:
                out[ref] = tip
        return out


class RepoChain:
    """The pack chain of one repository of a world (see the module docstring), at `root`."""

    def __init__(self, root: Path, name: str):
        self.root, self.name = Path(root), name
        self.packs = self.root / "packs"
        self.state_file = self.root / "chain.json"

    def state(self) -> dict:
        return json.loads(self.state_file.read_text()) if self.state_file.exists() else {}

    def build(self, repo: Path, cutoffs: list[dt.datetime]) -> dict:
        """Cut `repo` into packs at `cutoffs`; returns the chain state {key, steps: [{t, refs, packs}]}."""
        branches = Branches.read(repo)
        epochs = sorted({_epoch(c) for c in cutoffs})
        heads = sorted(f"{r} {line[0][0]}" for r, line in branches.lines.items() if line)
        key = content_hash("chain/1", heads, epochs)
        state = self.state()
        if state.get("key") == key and all((self.packs / p).exists() for s in state["steps"] for p in s["packs"]):
            return state
        if self.root.exists():
            shutil.rmtree(self.root)
        self.packs.mkdir(parents=True)
        steps, packs, prev = [], [], set()
        for t in epochs:
            refs = branches.tips(t)
            tips = set(refs.values())
            if tips - prev:
                stdin = "".join(f"{s}\n" for s in sorted(tips)) + "".join(f"^{s}\n" for s in sorted(prev))
                name = git(repo, "pack-objects", "--revs", "-q", str(self.packs / "pack"), input=stdin.encode()).strip()
                if name:
                    packs.append(f"pack-{name}")
                prev |= tips
            steps.append({"t": t, "refs": refs, "packs": list(packs)})
        state = {"key": key, "repo": str(repo), "head": branches.head, "steps": steps}
        self.state_file.write_text(json.dumps(state, sort_keys=True))
        return state

    def step(self, cutoff: dt.datetime) -> dict:
        """The chain's step for `cutoff` (the last one at or before it); GitWorldError if the chain lacks it."""
        steps = self.state().get("steps") or []
        i = bisect.bisect_right([s["t"] for s in steps], _epoch(cutoff)) - 1
        if i < 0 or steps[i]["t"] != _epoch(cutoff):
            raise GitWorldError(f"{self.name}: the chain has no step at {cutoff.isoformat()}; rebuild it with "
                                "this cutoff")
        return steps[i]

    def bytes(self) -> int:
        return sum(p.stat().st_size for p in self.packs.glob("*") if p.is_file())


def make_view(views: Path, repos: dict[str, tuple[RepoChain, dict, str | None]]) -> tuple[str, Path]:
    """A view folder holding, per repository, hard links to its packs and its refs and HEAD:
    `repos` maps name -> (chain, step, head) where head is a commit to check out (None: the branch HEAD).
    Returns (view id, folder); an existing view with the same content is reused."""
    spec = {name: {"packs": step["packs"], "refs": step["refs"], "head": head, "chain": chain.state().get("key")}
            for name, (chain, step, head) in sorted(repos.items())}
    vid = content_hash("view/1", spec)[:24]
    folder = views / vid
    if (folder / "view.json").exists():
        return vid, folder
    tmp = views / f".{vid}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    for name, (chain, step, head) in repos.items():
        pack_dir = tmp / name / "objects" / "pack"
        pack_dir.mkdir(parents=True)
        for p in step["packs"]:
            for ext in (".pack", ".idx"):
                src = chain.packs / f"{p}{ext}"
                try:
                    os.link(src, pack_dir / src.name)
                except OSError:  # another filesystem: a copy (still correct, no longer free)
                    shutil.copy2(src, pack_dir / src.name)
        branch = chain.state().get("head") if chain.state().get("head") in step["refs"] else None
        (tmp / name / "refs").write_text("".join(f"{sha} {ref}\n" for ref, sha in sorted(step["refs"].items())))
        (tmp / name / "HEAD").write_text(f"{head}\n" if head else f"ref: {branch or sorted(step['refs'])[0]}\n")
    (tmp / "view.json").write_text(json.dumps(spec, sort_keys=True, indent=1))
    views.mkdir(parents=True, exist_ok=True)
    try:
        tmp.rename(folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return vid, folder


# The agent's repositories, made from a view at the start of a session (runs as the agent, in its home).
SETUP_SCRIPT = r"""
set -eu
view="$1"; home="$2"
for dir in "$view"/*/; do
    name=$(basename "$dir")
    [ -f "$dir/refs" ] || continue
    repo="$home/$name"
    git init -q "$repo"
    echo "$dir/objects" > "$repo/.git/objects/info/alternates"
    while read -r sha ref; do git -C "$repo" update-ref "$ref" "$sha"; done < "$dir/refs"
    head=$(cat "$dir/HEAD")
    case "$head" in
        ref:*) git -C "$repo" symbolic-ref HEAD "${head#ref: }" ;;
        *) git -C "$repo" update-ref --no-deref HEAD "$head" ;;
    esac
    git -C "$repo" config core.logAllRefUpdates false
    git -C "$repo" reset -q --hard
done
"""


def verify_view(folder: Path, hidden_commits: list[str] = (), needed_commits: list[str] = ()) -> list[str]:
    """Problems of a view: objects not reachable from its refs, a hidden commit reachable, a needed commit
    (the answer the agent must find) not reachable. Asks git through a throw-away repository over the view's
    packs; [] is clean."""
    import tempfile

    problems = []
    for repo_dir in sorted(p for p in folder.iterdir() if (p / "refs").is_file()):
        refs = [line.split() for line in (repo_dir / "refs").read_text().splitlines() if line.strip()]
        with tempfile.TemporaryDirectory(prefix="taskmine-verify-") as tmp:
            probe = Path(tmp) / "probe.git"
            subprocess.run(["git", "init", "-q", "--bare", str(probe)], check=True)
            (probe / "objects" / "info" / "alternates").write_text(str((repo_dir / "objects").resolve()) + "\n")
            for sha, ref in refs:
                git(probe, "update-ref", ref, sha)
            head = (repo_dir / "HEAD").read_text().strip()
            tips = [sha for sha, _ in refs] + ([] if head.startswith("ref:") else [head])
            reachable = set(git(probe, "rev-list", "--objects", *tips).split("\n")) if tips else set()
            reachable = {line.split()[0] for line in reachable if line}
            stored = {line for line in git(probe, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
                      .split() if line}
            extra = stored - reachable
            if extra:
                problems.append(f"{repo_dir.name}: {len(extra)} objects not reachable from the view's refs")
            for sha in hidden_commits:
                if sha in reachable:
                    problems.append(f"{repo_dir.name}: hidden commit {sha[:12]} is reachable")
            for sha in needed_commits:
                if sha not in reachable:
                    problems.append(f"{repo_dir.name}: commit {sha[:12]} is not reachable at the cutoff")
    return problems
