"""Rewrite a git history through `git fast-export | <filter> | git fast-import`.

Follows the fast-import stream format (git-fast-import(1)): commands `blob`, `commit`, `reset`,
`tag`, `feature`, `option`, `progress`, `done`, each with `data <n>` payloads of exactly n bytes.

Invariants:
- Every commit keeps its tree shape, parents and dates; only identities, messages and (optionally)
  blob contents change, so a SHA map old -> new is returned for every commit.
- Tags are dropped (they may carry names and are not history the tasks need); signatures stripped.
- Branches are the local branches (names kept) and the remote-tracking branches that hold commits no local
  branch reaches (a clone's bundle keeps its project's other branches as `refs/remotes/origin/*`: unmerged
  pull requests, rebased work). Those become local branches with neutral names (`refs/heads/remote-<n>`,
  numbered in name order): a branch name can carry a login or an issue key, and the world's tasks need the
  commits, not the names. Without them a commit the extractor read (it reads every ref) had no world SHA.
- Deterministic: the same input repository and mapping functions give the same new SHAs.
- Git runs on the source with `extractors.git.safe_env()`: a partial clone's missing objects are never
  fetched from its promisor remote; a repository that cannot be read whole fails with `GitRewriteError`
  (its first line of git's error and the number of missing objects), which the caller quarantines.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from extractors.git import safe_env

IdentityMap = Callable[[str, str], tuple[str, str]]
TextMap = Callable[[str], str]
BlobMap = Callable[[bytes], bytes]

_PERSON = re.compile(rb"^(author|committer|tagger) (.*?) <(.*?)> (\d+ [+-]\d{4})$")


class GitRewriteError(RuntimeError):
    pass


@dataclass(frozen=True)
class RewriteResult:
    sha_map: dict[str, str]     # original commit SHA -> rewritten SHA
    head: str | None            # rewritten SHA of the source HEAD


def _read_data(stream: BinaryIO, header: bytes) -> bytes:
    if not header.startswith(b"data "):
        raise GitRewriteError(f"expected data, got {header[:40]!r}")
    spec = header[5:].strip()
    if spec.startswith(b"<<"):
        raise GitRewriteError("delimited data is not produced by fast-export")
    n = int(spec)
    data = stream.read(n)
    if len(data) != n:
        raise GitRewriteError("truncated fast-export stream")
    return data


def _data(payload: bytes) -> bytes:
    return b"data %d\n" % len(payload) + payload + b"\n"


def rewrite(src: Path, dst: Path, *, identity: IdentityMap, message: TextMap,
            blob: BlobMap | None = None) -> RewriteResult:
    """Write a bare repository at `dst` holding `src`'s history (all branches) rewritten."""
    if dst.exists():
        raise GitRewriteError(f"{dst} exists; remove it first")
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "--bare", str(dst)], check=True)
    subprocess.run(["git", "-C", str(dst), "config", "core.logAllRefUpdates", "false"], check=True)
    refnames = _branch_names(src)
    export = subprocess.Popen(
        ["git", "-C", str(src), "-c", "safe.directory=*", "fast-export", *(sorted(refnames) or ["--branches"]),
         "--signed-tags=strip",
         "--tag-of-filtered-object=drop", "--reencode=yes", "--show-original-ids"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=safe_env())
    with tempfile.TemporaryDirectory() as tmp:
        marks = Path(tmp) / "marks"
        imp = subprocess.Popen(
            ["git", "-C", str(dst), "fast-import", "--quiet", "--force", f"--export-marks={marks}"],
            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        original: dict[str, str] = {}
        try:
            _filter(export.stdout, imp.stdin, identity, message, blob, original, refnames)
        finally:
            imp.stdin.close()
            export.stdout.close()
        err_imp = imp.stderr.read().decode(errors="replace")
        err_exp = export.stderr.read().decode(errors="replace")
        if export.wait() != 0:
            lines = [ln.strip() for ln in err_exp.splitlines() if ln.strip()]
            fatal = [ln for ln in lines if ln.startswith(("fatal", "error"))]
            first = (fatal or lines or ["no error output"])[-1]   # git's last word names the object
            missing = missing_objects(src)
            more = f"; {missing} objects are missing (a partial clone?)" if missing else ""
            raise GitRewriteError(f"git fast-export failed on {src.name}: {first[:300]}{more}")
        if imp.wait() != 0:
            raise GitRewriteError(f"git fast-import failed: {err_imp.strip()[:300]}")
        new_of_mark = dict(line.split() for line in marks.read_text().splitlines() if line.strip())
    sha_map = {old: new_of_mark[mark] for mark, old in original.items() if mark in new_of_mark}
    head = subprocess.run(["git", "-C", str(src), "-c", "safe.directory=*", "rev-parse", "--verify", "-q", "HEAD"],
                          capture_output=True, text=True, env=safe_env()).stdout.strip()
    head_branch = subprocess.run(["git", "-C", str(src), "-c", "safe.directory=*", "symbolic-ref", "-q", "HEAD"],
                                 capture_output=True, text=True, env=safe_env()).stdout.strip()
    if head_branch:
        subprocess.run(["git", "-C", str(dst), "symbolic-ref", "HEAD", head_branch], check=True)
    return RewriteResult(sha_map, sha_map.get(head))


def head(src: Path) -> str:
    """The source repository's HEAD commit; GitRewriteError when it has none git can read."""
    r = subprocess.run(["git", "-C", str(src), "-c", "safe.directory=*", "rev-parse", "--verify", "-q", "HEAD"],
                       capture_output=True, text=True, env=safe_env())
    if r.returncode != 0 or not r.stdout.strip():
        raise GitRewriteError(f"{src.name}: no readable HEAD commit ({r.stderr.strip()[:200] or 'empty repository'})")
    return r.stdout.strip()


def _branch_names(src: Path) -> dict[str, str]:
    """Source ref -> world ref: every local branch as it is, and each remote-tracking branch (but `*/HEAD`)
    that holds a commit no local branch reaches, as `refs/heads/remote-<n>` (see the module docstring)."""
    def run(*args: str, input: str | None = None) -> str:
        r = subprocess.run(["git", "-C", str(src), "-c", "safe.directory=*", *args], capture_output=True, text=True,
                           input=input, env=safe_env())
        if r.returncode != 0:
            raise GitRewriteError(f"git {args[0]} failed on {src.name}: {r.stderr.strip()[:300]}")
        return r.stdout

    local = run("for-each-ref", "--format=%(refname)", "refs/heads").split()
    remote = [r for r in run("for-each-ref", "--format=%(refname)", "refs/remotes").split()
              if not r.endswith("/HEAD")]
    names = {r: r for r in local}
    n = 0
    for ref in sorted(remote):
        if run("rev-list", "-n", "1", "--stdin", input="\n".join([ref, *(f"^{r}" for r in local)]) + "\n").strip():
            n += 1
            names[ref] = f"refs/heads/remote-{n}"
    return names


def missing_objects(src: Path) -> int:
    """How many objects reachable from the branches git cannot find (0 when it cannot tell)."""
    r = subprocess.run(["git", "-C", str(src), "-c", "safe.directory=*", "rev-list", "--objects", "--branches",
                        "--remotes", "--missing=print"], capture_output=True, env=safe_env())
    return sum(1 for line in r.stdout.splitlines() if line.startswith(b"?"))


def _filter(inp: BinaryIO, out: BinaryIO, identity: IdentityMap, message: TextMap,
            blob: BlobMap | None, original: dict[str, str], refnames: dict[str, str] | None = None) -> None:
    mark = None
    in_commit = False
    while True:
        line = inp.readline()
        if not line:
            return
        stripped = line.rstrip(b"\n")
        if stripped.startswith(b"data "):
            payload = _read_data(inp, stripped)
            if in_commit:
                payload = message(payload.decode("utf-8", "replace")).encode("utf-8")
                in_commit = False
            elif blob is not None:
                payload = blob(payload)
            out.write(_data(payload))
            nxt = inp.read(1)  # optional LF after data
            if nxt and nxt != b"\n":
                line = nxt + inp.readline()
                stripped = line.rstrip(b"\n")
            else:
                continue
        if stripped.startswith((b"commit ", b"reset ")) and refnames:
            verb, ref = stripped.split(b" ", 1)
            new = refnames.get(ref.decode("utf-8", "replace"))
            if new is not None:
                line = verb + b" " + new.encode() + b"\n"
        if stripped.startswith(b"commit "):
            in_commit = True
            mark = None
        elif stripped.startswith(b"blob"):
            in_commit = False
        elif stripped.startswith(b"mark :"):
            mark = stripped[5:].decode()
        elif stripped.startswith(b"original-oid ") and in_commit and mark:
            original[mark] = stripped.split()[1].decode()
            continue  # fast-import accepts it, but it would only carry the old SHA along
        elif stripped.startswith(b"original-oid "):
            continue
        m = _PERSON.match(stripped)
        if m:
            name, email = identity(m.group(2).decode("utf-8", "replace"), m.group(3).decode("utf-8", "replace"))
            line = b"%s %s <%s> %s\n" % (m.group(1), _clean(name), _clean(email), m.group(4))
        out.write(line)


def _clean(value: str) -> bytes:
    return value.replace("<", "").replace(">", "").replace("\n", " ").strip().encode("utf-8")
