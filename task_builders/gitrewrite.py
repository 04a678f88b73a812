"""Rewrite a git history through `git fast-export | <filter> | git fast-import`.

Follows the fast-import stream format (git-fast-import(1)): commands `blob`, `commit`, `reset`,
`tag`, `feature`, `option`, `progress`, `done`, each with `data <n>` payloads of exactly n bytes.

Invariants:
- Every commit keeps its parents, dates and tree shape, except the files left out below; only identities,
  messages and (optionally) blob contents change, so a SHA map old -> new is returned for every commit written.
- Tags are dropped (they may carry names and are not history the tasks need); signatures stripped.
- Branches are the local branches (names kept) and the remote-tracking branches that hold commits no local
  branch reaches (a clone's bundle keeps its project's other branches as `refs/remotes/origin/*`: unmerged
  pull requests, rebased work). Those become local branches with neutral names (`refs/heads/remote-<n>`,
  numbered in name order): a branch name can carry a login or an issue key, and the world's tasks need the
  commits, not the names. Without them a commit the extractor read (it reads every ref) had no world SHA.
  Any other ref (tags, `refs/pull/*`) is not rewritten: `equivalents` finds, for a commit only such a ref
  reaches, the copy of it a rewritten branch holds (a cherry-pick, a rebased pull request).
- Deterministic: the same input repository and mapping functions give the same new SHAs.
- Git runs with `extractors.git.safe_env()` and reads the source through an overlay: a temporary bare
  repository whose objects are the source's (`objects/info/alternates`) and whose refs are the branches
  rewritten. The source is never written, and a partial clone's missing objects are plain missing objects
  there (its promisor remote is never asked; git does not die on them).
- What git cannot read is left out, never fatal, and reported (`Unreadable`: object, type, reason, a path):
  - a blob that is missing (a partial clone's never-fetched blob) or corrupt (bad zlib data, a pack entry that
    does not inflate) is an absent file in every commit that had it: where a commit wrote it, the rewrite
    deletes the path instead, so the file is absent until a later commit writes a readable version;
  - a commit or tree that is missing or corrupt cannot be diffed through (git has no partial tree): the commit
    whose object or tree cannot be read is left out, its children become root commits carrying their whole
    tree (a shallow boundary in the overlay, as a shallow clone's first commits are), and a branch whose tip
    is such a commit is dropped (`dropped_refs`). History reachable only through it is lost. This is looked
    for (every commit and tree read once) only when fast-export fails on the source as it is.
  `absent` says, per original commit, which paths it lacks and why ("unreadable" or "withheld"); `touched`, per
  original commit, how many of the files it changes are absent before or after it (its diff in the rewrite is
  not the real one: code tasks on it are rejected).
- With `residue` (the leak audit's check of one text, `privacy.withhold`), a blob, a path or a message that
  still holds something the audit refuses after `blob`/`message` ran is withheld the same way: the file absent
  where it was written, the message replaced by a neutral line (`Withheld`, by kind, object and the kind of
  what was found; never the text).
- A repository with no readable branch fails with `GitRewriteError`, which the caller quarantines.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from extractors.git import safe_env

IdentityMap = Callable[[str, str], tuple[str, str]]
TextMap = Callable[[str], str]
BlobMap = Callable[[bytes], bytes]
# (what: "blob" | "path" | "message", content) -> the kind of the first thing the leak audit refuses there, or None
Residue = Callable[[str, bytes | str], str | None]

_PERSON = re.compile(rb"^(author|committer|tagger) (.*?) <(.*?)> (\d+ [+-]\d{4})$")
BLOB_MARKS = 1_000_000_000     # blob marks the filter allocates start here (fast-export numbers commits from 1)
GITLINK = b"160000"            # a submodule's commit: no blob to read
WITHHELD_MESSAGE = "(commit message withheld: it held personal data after anonymization)\n"
UNREADABLE, WITHHELD = "unreadable", "withheld"


class GitRewriteError(RuntimeError):
    pass


@dataclass(frozen=True)
class Unreadable:
    """An object of the source git could not read (see the module docstring)."""

    object: str
    type: str            # blob, tree, commit
    reason: str          # missing, corrupt; for a commit also "its tree is unreadable"
    path: str = ""       # a path it had (blobs)
    commits: int = 0     # commits that wrote it (blobs) or that were left out because of it (trees, commits)


@dataclass(frozen=True)
class Withheld:
    """A blob, path or message the rewrite left out because the leak audit still refused something in it."""

    kind: str            # git_blob, git_path, git_message
    id: str              # the source blob or commit (a path: the sha1 of its bytes)
    reason: str          # the kind of the audit's first hit (email, name, secret:url_password, person, ...)


@dataclass(frozen=True)
class RewriteResult:
    sha_map: dict[str, str]     # original commit SHA -> rewritten SHA
    head: str | None            # rewritten SHA of the source HEAD
    unreadable: tuple[Unreadable, ...] = ()
    withheld: tuple[Withheld, ...] = ()
    absent: dict[str, dict[str, str]] = field(default_factory=dict)   # original commit -> {path: why}
    touched: dict[str, dict[str, int]] = field(default_factory=dict)  # original commit -> {why: files it changes
    #                                                                   whose content before or after is absent}
    dropped_refs: tuple[str, ...] = ()
    checked: int = 0            # blobs, paths and messages `residue` read


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


def _git(repo: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", *args], capture_output=True,
                          input=input, text=True, env=safe_env())


def rewrite(src: Path, dst: Path, *, identity: IdentityMap, message: TextMap,
            blob: BlobMap | None = None, residue: Residue | None = None) -> RewriteResult:
    """Write a bare repository at `dst` holding `src`'s history (all branches) rewritten."""
    if dst.exists():
        raise GitRewriteError(f"{dst} exists; remove it first")
    refnames = _branch_names(src)
    if not refnames:
        raise GitRewriteError(f"{src.name}: no branch to rewrite")
    with tempfile.TemporaryDirectory(prefix="taskmine-rewrite-") as tmp:
        overlay = _overlay(src, Path(tmp) / "overlay.git", refnames)
        grafts: set[str] = set()
        bad: dict[str, Unreadable] = {}
        dropped: list[str] = []
        try:
            run = _Run(overlay, identity, message, blob, residue, refnames)
            run.run(dst, Path(tmp))
        except _ExportFailed as exc:
            # a commit or tree git cannot read: find them all, cut the history around them, and try once more
            shutil.rmtree(dst, ignore_errors=True)
            tips = _tips(overlay)
            bad, left_out, grafts = _inspect(overlay, src, tips.values())
            dropped = sorted(r for r, sha in tips.items() if sha in left_out)
            keep = {r: n for r, n in refnames.items() if r not in dropped}
            if not keep:
                raise GitRewriteError(f"git fast-export failed on {src.name}: {exc}; no branch has a readable tip "
                                      f"({len(bad)} objects missing or corrupt)") from None
            _set_refs(overlay, {r: tips[r] for r in keep}, grafts)
            run = _Run(overlay, identity, message, blob, residue, keep)
            try:
                run.run(dst, Path(tmp))
            except _ExportFailed as again:
                missing = missing_objects(src)
                more = f"; {missing} objects are missing (a partial clone?)" if missing else ""
                raise GitRewriteError(f"git fast-export failed on {src.name}: {again}{more}") from None
    head = _git(src, "rev-parse", "--verify", "-q", "HEAD").stdout.strip()
    head_branch = _git(src, "symbolic-ref", "-q", "HEAD").stdout.strip()
    if head_branch and head_branch in run.refnames:
        subprocess.run(["git", "-C", str(dst), "symbolic-ref", "HEAD", run.refnames[head_branch]], check=True)
    unreadable = sorted({**bad, **run.unreadable()}.values(), key=lambda u: (u.type, u.object))
    return RewriteResult(run.sha_map, run.sha_map.get(head), tuple(unreadable), tuple(run.withheld),
                         run.absent, run.touched, tuple(dropped), run.checked)


def head(src: Path) -> str:
    """The source repository's HEAD commit; GitRewriteError when it has none git can read."""
    r = _git(src, "rev-parse", "--verify", "-q", "HEAD")
    if r.returncode != 0 or not r.stdout.strip():
        raise GitRewriteError(f"{src.name}: no readable HEAD commit ({r.stderr.strip()[:200] or 'empty repository'})")
    return r.stdout.strip()


def _branch_names(src: Path) -> dict[str, str]:
    """Source ref -> world ref: every local branch as it is, and each remote-tracking branch (but `*/HEAD`)
    that holds a commit no local branch reaches, as `refs/heads/remote-<n>` (see the module docstring)."""
    def run(*args: str) -> str:
        r = _git(src, *args)
        if r.returncode != 0:
            raise GitRewriteError(f"git {args[0]} failed on {src.name}: {r.stderr.strip()[:300]}")
        return r.stdout

    local = run("for-each-ref", "--format=%(refname)", "refs/heads").split()
    remote = [r for r in run("for-each-ref", "--format=%(refname)", "refs/remotes").split()
              if not r.endswith("/HEAD")]
    names = {r: r for r in local}
    n = 0
    for ref in sorted(remote):
        held = _git(src, "rev-list", "-n", "1", "--stdin", input="\n".join([ref, *(f"^{r}" for r in local)]) + "\n")
        if held.returncode != 0 or held.stdout.strip():   # a history git cannot walk: kept, the rewrite cuts it
            n += 1
            names[ref] = f"refs/heads/remote-{n}"
    return names


def object_store(src: Path) -> str:
    """A cheap fingerprint of what the repository's object store holds (its packs by name, its loose objects by
    count and size, its promisor and shallow state): it changes when missing objects arrive."""
    objects = _objects_dir(src)
    packs = sorted(p.name for p in (objects / "pack").glob("*.pack")) if (objects / "pack").is_dir() else []
    loose = _git(src, "count-objects").stdout.strip()
    shallow = (objects.parent / "shallow").read_text() if (objects.parent / "shallow").is_file() else ""
    return hashlib.sha256("\n".join([*packs, loose, shallow]).encode()).hexdigest()


def missing_objects(src: Path) -> int:
    """How many objects reachable from the branches git cannot find (0 when it cannot tell)."""
    r = subprocess.run(["git", "-C", str(src), "-c", "safe.directory=*", "rev-list", "--objects", "--branches",
                        "--remotes", "--missing=print"], capture_output=True, env=safe_env())
    return sum(1 for line in r.stdout.splitlines() if line.startswith(b"?"))


# --- the overlay: the source's objects, our refs ---------------------------------------------------------

def _objects_dir(src: Path) -> Path:
    r = _git(src, "rev-parse", "--git-path", "objects")
    if r.returncode != 0:
        raise GitRewriteError(f"{src.name}: not a git repository ({r.stderr.strip()[:200]})")
    path = Path(r.stdout.strip())
    return (path if path.is_absolute() else src / path).resolve()


def _overlay(src: Path, dest: Path, refnames: dict[str, str]) -> Path:
    """A bare repository borrowing `src`'s objects, holding `refnames`' refs at their source commits (and the
    source's shallow boundary): what fast-export and cat-file read (see the module docstring)."""
    subprocess.run(["git", "init", "-q", "--bare", str(dest)], check=True, capture_output=True, env=safe_env())
    objects = _objects_dir(src)
    (dest / "objects" / "info" / "alternates").write_text(f"{objects}\n")
    r = _git(src, "for-each-ref", "--format=%(objectname) %(refname)", *refnames)
    tips = {ref: sha for sha, ref in (line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)}
    shallow = objects.parent / "shallow"
    _set_refs(dest, tips, set(shallow.read_text().split()) if shallow.is_file() else set())
    return dest


def _set_refs(repo: Path, tips: dict[str, str], shallow: Iterable[str]) -> None:
    """Write the refs as packed-refs (no object is read, so a ref to an unreadable commit can be written) and the
    shallow boundary."""
    for loose in (repo / "refs").rglob("*"):
        if loose.is_file():
            loose.unlink()
    lines = ["# pack-refs with: peeled fully-peeled sorted"] + [f"{sha} {ref}" for ref, sha in sorted(tips.items())]
    (repo / "packed-refs").write_text("\n".join(lines) + "\n")
    grafts = sorted(set(shallow))
    if grafts:
        (repo / "shallow").write_text("".join(f"{c}\n" for c in grafts))
    elif (repo / "shallow").exists():
        (repo / "shallow").unlink()


def _tips(repo: Path) -> dict[str, str]:
    lines = (repo / "packed-refs").read_text().splitlines()
    return {ref: sha for sha, ref in (ln.split(" ", 1) for ln in lines if ln and not ln.startswith(("#", "^")))}


class _Objects:
    """Objects read one at a time through `git cat-file --batch`, restarted when git dies on a corrupt object.
    A missing object is answered "missing"; one whose loose file exists but cannot be read, or whose reading
    killed git, is corrupt."""

    def __init__(self, repo: Path, source_objects: Path):
        self.repo, self.source_objects = repo, source_objects
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(["git", "-C", str(self.repo), "-c", "safe.directory=*", "cat-file",
                                          "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env=safe_env())
        return self.proc

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def read(self, sha: str) -> tuple[bytes | None, str, str]:
        """(content, type, "") or (None, "", "missing" | "corrupt")."""
        p = self._start()
        try:
            p.stdin.write(sha.encode() + b"\n")
            p.stdin.flush()
            header = p.stdout.readline()
        except (BrokenPipeError, OSError):
            header = b""
        parts = header.split()
        if len(parts) == 3 and parts[1] != b"missing":
            size = int(parts[2])
            data = p.stdout.read(size + 1)
            if len(data) == size + 1:
                return data[:size], parts[1].decode(), ""
        if len(parts) == 2 and parts[1] == b"missing":
            loose = self.source_objects / sha[:2] / sha[2:]
            return None, "", "corrupt" if loose.exists() else "missing"
        self.close()   # git died on it: a packed object that does not inflate
        return None, "", "corrupt"


def _inspect(overlay: Path, src: Path, tips: Iterable[str]) -> tuple[dict[str, Unreadable], set[str], set[str]]:
    """Every commit reachable from `tips` and every tree of theirs read once: (bad objects, commits left out
    because their object or tree cannot be read, readable commits whose parent is left out: the grafts)."""
    objects = _Objects(overlay, _objects_dir(src))
    bad: dict[str, Unreadable] = {}
    commits: dict[str, tuple[str, list[str]] | None] = {}
    tree_ok: dict[str, bool] = {}

    def tree(sha: str) -> bool:
        if sha in tree_ok:
            return tree_ok[sha]
        data, typ, reason = objects.read(sha)
        if data is None or typ != "tree":
            bad[sha] = Unreadable(sha, "tree", reason or "corrupt")
            tree_ok[sha] = False
            return False
        ok, pos, width = True, 0, len(sha) // 2
        while pos < len(data):
            sp, nul = data.find(b" ", pos), data.find(b"\0", pos)
            if sp < 0 or nul < 0:
                ok = False
                break
            mode, oid = data[pos:sp], data[nul + 1:nul + 1 + width].hex()
            pos = nul + 1 + width
            if mode in (b"40000", b"040000") and not tree(oid):
                ok = False
        tree_ok[sha] = ok
        return ok

    try:
        stack = list(dict.fromkeys(tips))
        while stack:
            c = stack.pop()
            if c in commits:
                continue
            data, typ, reason = objects.read(c)
            if data is None or typ != "commit":
                commits[c] = None
                bad[c] = Unreadable(c, "commit", reason or "corrupt")
                continue
            head = data.split(b"\n\n", 1)[0].decode("utf-8", "replace").splitlines()
            root = next((ln[5:].strip() for ln in head if ln.startswith("tree ")), "")
            parents = [ln[7:].strip() for ln in head if ln.startswith("parent ")]
            commits[c] = (root, parents)
            stack.extend(parents)
        left_out = {c for c, v in commits.items() if v is None or not tree(v[0])}
    finally:
        objects.close()
    grafts = {c for c, v in commits.items() if v is not None and c not in left_out and set(v[1]) & left_out}
    for c in left_out:   # every commit left out is listed: its own object, or its tree, could not be read
        bad[c] = Unreadable(c, "commit", bad[c].reason if c in bad else "its tree is unreadable", commits=1)
    return bad, left_out, grafts


# --- the filter --------------------------------------------------------------------------------------------

class _ExportFailed(Exception):
    pass


class _Run:
    """One fast-export | filter | fast-import pass over the overlay."""

    def __init__(self, overlay: Path, identity: IdentityMap, message: TextMap, blob: BlobMap | None,
                 residue: Residue | None, refnames: dict[str, str]):
        self.overlay, self.identity, self.message, self.blob_fn, self.residue = overlay, identity, message, blob, \
            residue
        self.refnames = refnames
        self.blobs: dict[bytes, bytes | tuple[str, str]] = {}     # source blob (sha or mark) -> mark or (why, kind)
        self.next_mark = BLOB_MARKS
        self.original: dict[str, str] = {}                        # commit mark -> original SHA
        self.absent_of: dict[bytes, dict[bytes, str]] = {}        # commit mark -> {path: why}
        self.absent: dict[str, dict[str, str]] = {}               # original SHA -> {path: why}
        self.bad_blobs: dict[str, Unreadable] = {}
        self.bad_commits: Counter = Counter()
        self.withheld: list[Withheld] = []
        self.checked = 0
        self.sha_map: dict[str, str] = {}
        self.objects: _Objects | None = None
        self._decoded: dict[int, dict[str, str]] = {}
        self.touched: dict[str, dict[str, int]] = {}              # original SHA -> {why: files it changes}

    def unreadable(self) -> dict[str, Unreadable]:
        return {sha: Unreadable(u.object, u.type, u.reason, u.path, self.bad_commits[sha])
                for sha, u in self.bad_blobs.items()}

    def run(self, dst: Path, tmp: Path) -> None:
        read_blobs = self.blob_fn is not None or self.residue is not None
        dst.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "--bare", str(dst)], check=True, capture_output=True)
        subprocess.run(["git", "-C", str(dst), "config", "core.logAllRefUpdates", "false"], check=True)
        if read_blobs:
            self.objects = _Objects(self.overlay, Path((self.overlay / "objects" / "info" / "alternates")
                                                       .read_text().strip()))
        export = subprocess.Popen(
            ["git", "-C", str(self.overlay), "-c", "safe.directory=*", "fast-export", *sorted(self.refnames),
             "--signed-tags=strip", "--tag-of-filtered-object=drop", "--reencode=yes", "--show-original-ids",
             *(["--no-data"] if read_blobs else [])],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=safe_env())
        marks = tmp / "marks"
        imp = subprocess.Popen(["git", "-C", str(dst), "fast-import", "--quiet", "--force", f"--export-marks={marks}"],
                               stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            self._filter(export.stdout, imp.stdin)
        except BaseException:
            for proc in (export, imp):   # nothing of this pass may outlive it (its temp folder is removed next)
                proc.kill()
                proc.wait()
            raise
        finally:
            imp.stdin.close()
            export.stdout.close()
            if self.objects is not None:
                self.objects.close()
        err_imp = imp.stderr.read().decode(errors="replace")
        err_exp = export.stderr.read().decode(errors="replace")
        if export.wait() != 0:
            imp.wait()
            lines = [ln.strip() for ln in err_exp.splitlines() if ln.strip()]
            fatal = [ln for ln in lines if ln.startswith(("fatal", "error"))]
            raise _ExportFailed((fatal or lines or ["no error output"])[-1][:300])   # git's last word names it
        if imp.wait() != 0:
            raise GitRewriteError(f"git fast-import failed: {err_imp.strip()[:300]}")
        new_of_mark = dict(line.split() for line in marks.read_text().splitlines() if line.strip())
        self.sha_map = {old: new_of_mark[mark] for mark, old in self.original.items() if mark in new_of_mark}

    # -- the stream ------------------------------------------------------------------------------------------

    def _filter(self, inp: BinaryIO, out: BinaryIO) -> None:
        while True:
            line = inp.readline()
            if not line:
                return
            stripped = line.rstrip(b"\n")
            if stripped.startswith(b"commit "):
                self._commit(stripped, inp, out)
            elif stripped == b"blob":
                self._blob(inp, out)
            elif stripped.startswith(b"reset "):
                out.write(self._ref_line(stripped))
            elif stripped.startswith(b"original-oid "):
                continue
            else:
                out.write(line)

    def _ref_line(self, stripped: bytes) -> bytes:
        verb, ref = stripped.split(b" ", 1)
        new = self.refnames.get(ref.decode("utf-8", "replace"))
        return verb + b" " + (new.encode() if new is not None else ref) + b"\n"

    def _blob(self, inp: BinaryIO, out: BinaryIO) -> None:
        """A `blob` command of a data-carrying export: mapped and checked; a withheld one is not written (the
        commits that name its mark delete the path instead)."""
        mark, line = None, inp.readline().rstrip(b"\n")
        while not line.startswith(b"data "):
            if line.startswith(b"mark "):
                mark = line[5:]
            line = inp.readline().rstrip(b"\n")
        payload = _read_data(inp, line)
        nxt = inp.read(1)
        if nxt and nxt != b"\n":   # no LF after the data: the next command starts here
            raise GitRewriteError("unexpected data after a blob")
        state = self._checked_blob(payload, mark.decode() if mark else "")
        if mark is not None:
            self.blobs[mark] = mark if state is None else state
        if state is None:
            out.write(b"blob\n" + (b"mark " + mark + b"\n" if mark else b"") + _data(self._mapped))

    def _checked_blob(self, data: bytes, name: str) -> tuple[str, str] | None:
        """Map a blob's content (kept in self._mapped); (WITHHELD, kind) when the audit still refuses it."""
        if self.blob_fn is not None:
            data = self.blob_fn(data)
        self._mapped = data
        if self.residue is not None:
            self.checked += 1
            hit = self.residue("blob", data)
            if hit:
                self.withheld.append(Withheld("git_blob", name, hit))
                return WITHHELD, hit
        return None

    def _source_blob(self, ref: bytes, path: bytes, out: BinaryIO) -> bytes | tuple[str, str]:
        """The mark a commit's file gets (the blob written first when new), or (why, kind) when it is absent."""
        state = self.blobs.get(ref)
        if state is not None:
            return state
        if ref.startswith(b":"):
            return ref                    # a mark of a blob command already written
        sha = ref.decode()
        data, _, reason = self.objects.read(sha) if self.objects is not None else (None, "", "missing")
        if data is None:
            self.bad_blobs[sha] = Unreadable(sha, "blob", reason, _unquote(path))
            state = (UNREADABLE, reason)
        else:
            state = self._checked_blob(data, sha)
            if state is None:
                mark = b":%d" % self.next_mark
                self.next_mark += 1
                out.write(b"blob\nmark " + mark + b"\n" + _data(self._mapped))
                state = mark
        self.blobs[ref] = state
        return state

    def _commit(self, first: bytes, inp: BinaryIO, out: BinaryIO) -> None:
        """Read one commit command whole, write the blobs it needs, then the commit rewritten."""
        head = [self._ref_line(first)]
        tail: list[bytes] = []
        changes: list[bytes] = []
        mark = orig = parent = None
        seen_data = False
        while True:
            line = inp.readline()
            if not line:
                break
            s = line.rstrip(b"\n")
            if not s:
                break                                   # a commit ends with an empty line
            if s.startswith(b"mark :"):
                mark = s[5:]
                head.append(line)
            elif s.startswith(b"original-oid "):
                orig = s.split()[1].decode()
            elif s.startswith(b"data "):
                text = self.message(_read_data(inp, s).decode("utf-8", "replace"))
                if self.residue is not None:
                    self.checked += 1
                    hit = self.residue("message", text)
                    if hit:
                        self.withheld.append(Withheld("git_message", orig or "", hit))
                        text = WITHHELD_MESSAGE
                head.append(_data(text.encode("utf-8")))       # the LF after a data payload is optional
                seen_data = True
            elif s.startswith(b"from "):
                parent = s[5:]
                tail.append(line)
            elif s.startswith(b"merge "):
                tail.append(line)
            elif s.startswith((b"M ", b"D ")):
                changes.append(s)
            elif (m := _PERSON.match(s)) is not None:
                name, email = self.identity(m.group(2).decode("utf-8", "replace"),
                                            m.group(3).decode("utf-8", "replace"))
                head.append(b"%s %s <%s> %s\n" % (m.group(1), _clean(name), _clean(email), m.group(4)))
            else:
                (tail if seen_data else head).append(line)
        if mark and orig:
            self.original[mark.decode()] = orig
        absent = self.absent_of.get(parent, {}) if parent else {}
        copied = False
        lines: list[bytes] = []
        touched: Counter = Counter()    # why -> files this commit changes that are absent before or after it
        for s in changes:
            if s.startswith(b"D "):
                path = s[2:]
                if path in absent:
                    touched[absent[path]] += 1
                    if not copied:
                        absent, copied = dict(absent), True
                    del absent[path]
                lines.append(s + b"\n")
                continue
            _, mode, ref, path = s.split(b" ", 3)
            state = ref if mode == GITLINK else self._source_blob(ref, path, out)
            if isinstance(state, bytes) and self.residue is not None and mode != GITLINK:
                hit = self._path_hit(path)
                if hit:
                    state = (WITHHELD, hit)
            if isinstance(state, tuple):
                touched[state[0]] += 1
                if not copied:
                    absent, copied = dict(absent), True
                absent[path] = state[0]
                if state[0] == UNREADABLE:
                    self.bad_commits[ref.decode()] += 1
                lines.append(b"D " + path + b"\n")
            else:
                if path in absent:
                    touched[absent[path]] += 1   # its earlier version could not be read or was withheld
                    if not copied:
                        absent, copied = dict(absent), True
                    del absent[path]
                lines.append(b"M " + mode + b" " + state + b" " + path + b"\n")
        if mark:
            self.absent_of[mark] = absent
        if touched and orig:
            self.touched[orig] = dict(touched)
        if absent and orig:   # one dict per distinct set: commits that change none of its paths share it
            key = id(absent)
            if key not in self._decoded:
                self._decoded[key] = {_unquote(p): why for p, why in absent.items()}
            self.absent[orig] = self._decoded[key]
        out.write(b"".join(head) + b"".join(tail) + b"".join(lines) + b"\n")

    def _path_hit(self, path: bytes) -> str | None:
        key = b"path:" + path
        state = self.blobs.get(key)
        if state is None:
            self.checked += 1
            hit = self.residue("path", _unquote(path))
            if hit:
                self.withheld.append(Withheld("git_path", hashlib.sha1(path).hexdigest(), hit))
            state = self.blobs[key] = (WITHHELD, hit) if hit else b""
        return state[1] if isinstance(state, tuple) else None


_ESCAPE = re.compile(rb"\\([0-7]{3}|.)")
_SIMPLE = {b"n": b"\n", b"t": b"\t", b'"': b'"', b"\\": b"\\", b"a": b"\a", b"b": b"\b", b"f": b"\f",
           b"r": b"\r", b"v": b"\v"}


def _unquote(path: bytes) -> str:
    """A path as fast-export prints it (C-quoted when it holds special characters) -> the path."""
    if path.startswith(b'"') and path.endswith(b'"'):
        path = _ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]) if len(m.group(1)) == 3
                           else _SIMPLE.get(m.group(1), m.group(1)), path[1:-1])
    return path.decode("utf-8", "replace")


def _clean(value: str) -> bytes:
    return value.replace("<", "").replace(">", "").replace("\n", " ").strip().encode("utf-8")


# --- copies of commits the rewrite drops -------------------------------------------------------------------

def equivalents(src: Path, dropped: Iterable[str], kept: Iterable[str]) -> dict[str, str]:
    """Commit (reached only by a ref the rewrite drops) -> a commit of the rewritten branches that makes the same
    change (same `git patch-id --stable`): a cherry-pick, a rebased pull request, a squash of one commit.

    Candidates are found cheaply first (a copy keeps its author and author date); a commit without such a
    candidate is compared with every kept commit committed at or after it was authored. Of several copies the
    earliest committed wins. A commit git cannot diff (a missing blob) has no equivalent."""
    dropped = sorted(set(dropped))
    kept_set = set(kept)
    if not dropped or not kept_set:
        return {}
    info = _commit_info(src, [*dropped, *sorted(kept_set)])
    by_author: dict[tuple[str, str], list[str]] = {}
    for sha in kept_set:
        if sha in info and not info[sha][2]:
            by_author.setdefault(info[sha][0], []).append(sha)
    ids = _patch_ids(src, [d for d in dropped if d in info and not info[d][2]])
    wanted: dict[str, list[str]] = {d: by_author.get(info[d][0], []) for d in ids}
    kept_ids = _patch_ids(src, sorted({k for ks in wanted.values() for k in ks}))
    out: dict[str, str] = {}
    for d, pid in ids.items():
        same = [k for k in wanted[d] if kept_ids.get(k) == pid]
        if same:
            out[d] = min(same, key=lambda k: (info[k][1], k))
    rest = {d: pid for d, pid in ids.items() if d not in out}
    if rest:
        since = min(int(info[d][0][1]) for d in rest)
        later = [k for k in kept_set if k in info and not info[k][2] and info[k][1] >= since and k not in kept_ids]
        kept_ids.update(_patch_ids(src, sorted(later)))
        by_id: dict[str, list[str]] = {}
        for k, pid in kept_ids.items():
            by_id.setdefault(pid, []).append(k)
        for d, pid in rest.items():
            if by_id.get(pid):
                out[d] = min(by_id[pid], key=lambda k: (info[k][1], k))
    return out


def _commit_info(src: Path, shas: list[str]) -> dict[str, tuple[tuple[str, str], int, bool]]:
    """sha -> ((author ident, author epoch), committer epoch, is a merge)."""
    r = subprocess.run(["git", "-C", str(src), "-c", "safe.directory=*", "log", "--no-walk=unsorted", "--stdin",
                        "--format=%H%x00%an <%ae>%x00%at%x00%ct%x00%P"], input="\n".join(shas) + "\n",
                       capture_output=True, text=True, env=safe_env())
    if r.returncode != 0 and len(shas) > 1:   # a commit git cannot read stopped the batch: the others one by one
        return {k: v for sha in shas for k, v in _commit_info(src, [sha]).items()}
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split("\0")
        if len(parts) == 5:
            out[parts[0]] = ((parts[1], parts[2]), int(parts[3] or 0), len(parts[4].split()) > 1)
    return out


def _patch_ids(src: Path, shas: list[str]) -> dict[str, str]:
    """sha -> its stable patch id (commits git cannot diff, and empty changes, have none)."""
    if not shas:
        return {}
    env = safe_env()
    with tempfile.TemporaryFile() as patches:
        log = subprocess.run(["git", "-C", str(src), "-c", "safe.directory=*", "log", "--no-walk=unsorted", "--stdin",
                              "-p", "--no-color", "--no-ext-diff", "--format=commit %H"],
                             input=("\n".join(shas) + "\n").encode(), stdout=patches, stderr=subprocess.DEVNULL,
                             env=env)
        if log.returncode != 0:   # a commit git cannot diff stopped the batch (its patch may be cut short): one by one
            return {k: v for sha in shas for k, v in (_patch_ids(src, [sha]) if len(shas) > 1 else {}).items()}
        patches.seek(0)
        r = subprocess.run(["git", "-C", str(src), "-c", "safe.directory=*", "patch-id", "--stable"], stdin=patches,
                           capture_output=True, text=True, env=env)
    return {commit: pid for pid, commit in (line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)}

