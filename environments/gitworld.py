"""Git repositories of a world: every task sees a repository exactly as it stood at its cutoff, and the
storage of all of them together is one copy of the history.

Mechanism: a world repository is stored once, repacked into one delta-compressed pack (task_builders.world).
A task records only its refs at the cutoff (a few SHAs). When an episode starts, `pack_view` runs
`git pack-objects --revs` on the host for exactly the objects those refs reach (reusing the stored deltas, so
it copies bytes rather than compressing them) and writes the pack *with its index* into the episode's own
folder, which the sandbox mounts read-only at /world/git; the agent's writable repository under its home
borrows the objects through `objects/info/alternates`, so creating it copies nothing (`git checkout` writes the
work tree only). The folder is deleted with the episode.

Why this and not the alternatives (measured on the more-itertools history, 2,553 commits, one optimized pack
of 1.6 MB): a full clone per task costs the whole history per task (66 MB a task on a 4,400-commit
repository); a chain of incremental packs shared by hard links (one pack per distinct cutoff) was tried
first: views were instant, but self-contained packs compress poorly in small steps — 5.6 MB for 60 cutoffs
and 15.6 MB for 341 (3.4x and 9.6x one pack), so storage grew with the number of tasks after all; one
shared object store filtered by a tool would leave the future objects readable on disk; one image layer per
cutoff is limited to ~125 layers and needs a build per task. Packing a view costs ~0.1 s here (`taskmine
bench worlds` measures it) and nothing stays on disk.

Invariants:
- The objects at a cutoff are those reachable from the refs as they stood then: for each branch, the first
  commit on its first-parent line dated (committer date) at or before the cutoff, and everything it
  reaches (`refs_at`). A view holds nothing else: no other ref, no reflog, no unreachable object
  (`pack-objects --revs` writes only what the tips reach; `verify_view` checks it instead of assuming it).
- `verify_refs` proves what a task hides (a fixing commit) is unreachable from its refs, and what it needs
  (the commit the agent must find) is reachable.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

UTC = dt.UTC


class GitWorldError(RuntimeError):
    pass


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    r = subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", *args], capture_output=True, input=input,
                       env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"})
    if r.returncode != 0:
        raise GitWorldError(f"git {' '.join(args[:3])} failed in {Path(repo).name}: "
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


def refs_at(repo: Path, cutoff: dt.datetime, branches: Branches | None = None) -> dict[str, str]:
    """The refs of `repo` as they stood at `cutoff` (see the module docstring)."""
    return (branches or Branches.read(repo)).tips(_epoch(cutoff))


def head_branch(repo: Path, refs: dict[str, str], branches: Branches | None = None) -> str | None:
    """The branch HEAD should name in a view with `refs`: the repository's own HEAD branch when it existed."""
    head = (branches or Branches.read(repo)).head
    return head if head in refs else (sorted(refs)[0] if refs else None)


def verify_refs(repo: Path, refs: dict[str, str], hidden: list[str] = (), needed: list[str] = (),
                head: str | None = None) -> list[str]:
    """Problems of a view's refs: a hidden commit reachable, a needed commit not reachable ([] is clean)."""
    tips = sorted({*refs.values(), *([head] if head else [])})
    problems = []

    def reachable(sha: str) -> bool:
        return any(subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", sha, tip],
                                  capture_output=True).returncode == 0 for tip in tips)

    for sha in hidden:
        if reachable(sha):
            problems.append(f"{Path(repo).name}: hidden commit {sha[:12]} is reachable at the cutoff")
    for sha in needed:
        if not reachable(sha):
            problems.append(f"{Path(repo).name}: commit {sha[:12]} is not reachable at the cutoff")
    return problems


def pack_view(folder: Path, repos: dict[str, tuple[Path, dict[str, str], str | None]]) -> Path:
    """Write a view into `folder`: per repository (slug -> (world repository, refs, head commit or None)), one
    pack with its index holding exactly what the refs and head reach, the refs and HEAD. Returns `folder`."""
    for slug, (repo, refs, head) in sorted(repos.items()):
        pack_dir = folder / slug / "objects" / "pack"
        pack_dir.mkdir(parents=True)
        tips = sorted({*refs.values(), *([head] if head else [])})
        if tips:
            git(repo, "pack-objects", "--revs", "-q", "--delta-base-offset", str(pack_dir / "pack"),
                input="".join(f"{t}\n" for t in tips).encode())
        (folder / slug / "refs").write_text("".join(f"{sha} {ref}\n" for ref, sha in sorted(refs.items())))
        branch = head_branch(repo, refs)
        (folder / slug / "HEAD").write_text(f"{head}\n" if head else f"ref: {branch}\n" if branch else "")
    return folder


# The agent's repositories, made from a view at the start of a session (runs as the agent, in its home).
SETUP_SCRIPT = r"""
set -eu
view="$1"; home="$2"
for dir in "$view"/*/; do
    name=$(basename "$dir")
    [ -f "$dir/refs" ] || continue
    repo="$home/$name"
    git init -q "$repo"
    echo "${dir%/}/objects" > "$repo/.git/objects/info/alternates"
    while read -r sha ref; do git -C "$repo" update-ref "$ref" "$sha"; done < "$dir/refs"
    head=$(cat "$dir/HEAD")
    case "$head" in
        ref:*) git -C "$repo" symbolic-ref HEAD "${head#ref: }" ;;
        "") ;;
        *) git -C "$repo" update-ref --no-deref HEAD "$head" ;;
    esac
    git -C "$repo" config core.logAllRefUpdates false
    git -C "$repo" reset -q --hard
done
"""


def verify_view(folder: Path, hidden_commits: list[str] = (), needed_commits: list[str] = ()) -> list[str]:
    """Problems of a written view: objects not reachable from its refs, a hidden commit present, a needed
    commit absent. Asks git through a throw-away repository over the view's packs; [] is clean."""
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
            tips = [sha for sha, _ in refs] + ([] if head.startswith("ref:") or not head else [head])
            listed = git(probe, "rev-list", "--objects", *tips).split("\n") if tips else []
            reachable = {line.split()[0] for line in listed if line}
            stored = {line for line in git(probe, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
                      .split() if line}
            extra = stored - reachable
            if extra:
                problems.append(f"{repo_dir.name}: {len(extra)} objects not reachable from the view's refs")
            problems += [f"{repo_dir.name}: hidden commit {s[:12]} is in the view" for s in hidden_commits
                         if s in stored]
            problems += [f"{repo_dir.name}: commit {s[:12]} is not in the view" for s in needed_commits
                         if s not in reachable]
    return problems


def optimize(repo: Path) -> None:
    """Repack a repository into one delta-compressed pack (what git fast-import writes is barely compressed:
    the more-itertools history goes from 32 MB to 1.6 MB), so views can reuse its deltas."""
    git(repo, "repack", "-a", "-d", "-f", "-q", "--window=50", "--depth=50")
    git(repo, "prune-packed")
    shutil.rmtree(Path(repo) / "logs", ignore_errors=True)
