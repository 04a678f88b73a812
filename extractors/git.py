"""git repositories -> one `commit` event per commit.

Format followed: the output of `git log` (git >= 2.20) with `-z`, a custom `--format`, `--raw` and `-p`
(git-log(1) "PRETTY FORMATS" and "RAW OUTPUT FORMAT": with -z an entry is
`:<mode> <mode> <sha> <sha> <status>\0<path>\0`, `<old>\0<new>\0` for a rename or copy). Each commit is
printed as `\0\0\x1eTMC\x1f<fields separated by \0\x1f, the raw message last>\0`, then `\n` + raw entries +
`\0` + the patch, one `diff --git` section per raw entry, in the same order. NUL cannot occur in a commit
message, a name, a path or a text patch (git shows files with NUL as binary), and two NULs in a row only
end the raw entries (before `diff --git`), so `\0\0\x1eTMC\x1f` delimits commits and `\0\x1f` the fields:
a path, a name or a message may hold any other bytes, `\x1eTMC\x1f` and \x1f included.

Invariants:
- One `git log` process per repository, read incrementally; memory is bounded by one commit's
  header plus `max_diff_bytes` + 16 MB of patch (the part beyond `max_diff_bytes` only serves to count
  lines). Paths and statuses come from `--raw` (exact, unquoted); added/deleted line counts are
  counted in the patch itself, as `--numstat` would (which would make git compute every diff twice);
  they are null for binary files and for files beyond the 16 MB.
- Commits of every branch, tag and remote ref (`--all` without notes and stash). Merge commits get no
  patch and no files (git's default for merges): their changes are already in the commits they merge.
- The repository's own config cannot run programs or reach the network: external diff drivers and
  textconv are off, the global/system config is ignored, every transport is disallowed (a partial
  clone's missing blobs fail instead of being fetched).
- A commit git cannot show (a missing or corrupt object) becomes a `Quarantine` row and the other
  commits are still read: after a failed pass, the commits not yet seen are shown one by one. A commit
  whose patch cannot be made (a blob missing, as in a partial clone) still becomes an event from its
  message, people and file list (`attrs.diff_unavailable`), and its patch is quarantined
  (`git_diff_unreadable`): the message and the people are what links and identities need.
- Text is UTF-8 (`i18n.logOutputEncoding`); a message or path that is not valid UTF-8 is decoded with
  U+FFFD replacements and flagged `attrs.encoding_error`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import ClassVar

from extractors.base import Extractor, ExtractorConfig, Row, register_extractor

SEP = b"\0\0\x1eTMC\x1f"
FIELD_SEP = b"\0\x1f"
# sha, parents, author name/email/date, committer name/email/date/epoch, refs, raw message.
FIELDS = ("%H", "%P", "%an", "%ae", "%aI", "%cn", "%ce", "%cI", "%ct", "%D", "%B")
FORMAT = "%x00%x00%x1eTMC%x1f" + "%x00%x1f".join(FIELDS)
REVS = ["--exclude=refs/notes/*", "--exclude=refs/stash", "--all"]
COUNT_SLACK = 16 * 1024 * 1024  # patch bytes read past the cap, only to count added/deleted lines
CHUNK = 1 << 20
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class GitConfig(ExtractorConfig):
    max_diff_bytes: int = 1024 * 1024


class GitError(Exception):
    """git refused to read the repository or a commit; the message is git's first error line."""


BUNDLE_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")


def is_bundle(path: Path) -> bool:
    """A git bundle file (`git bundle create`), recognised by its signature line, not its name."""
    try:
        with open(path, "rb") as f:
            return f.read(16) in BUNDLE_SIGNATURES
    except OSError:
        return False


def bundle_cache() -> Path:
    """Where bundles are unpacked: $TASKMINE_HOME/cache/bundles (read at call time)."""
    return Path(os.environ.get("TASKMINE_HOME") or ".taskmine").resolve() / "cache" / "bundles"


def unbundle(bundle: Path, cache: Path | None = None) -> Path:
    """A bare repository holding every ref of `bundle`, unpacked once per bundle content into `cache` (default
    `bundle_cache()`) and reused; raises GitError with git's reason when the bundle cannot be read."""
    h = hashlib.sha256()
    with open(bundle, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    dest = (cache or bundle_cache()) / f"{h.hexdigest()[:24]}.git"
    if (dest / "HEAD").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unbundle-", dir=dest.parent))
    env = {**safe_env(), "GIT_ALLOW_PROTOCOL": "file"}  # a bundle is read as a local file, nothing else
    try:
        for args in (["init", "-q", "--bare", str(tmp)],
                     ["-C", str(tmp), "fetch", "-q", "--no-write-fetch-head", str(bundle.resolve()),
                      "+refs/*:refs/*"]):
            r = subprocess.run(["git", "-c", "safe.directory=*", *args], capture_output=True, env=env)
            if r.returncode:
                raise GitError(f"{bundle.name}: {_first_line(r.stderr) or 'git could not read the bundle'}")
        listed = subprocess.run(["git", "bundle", "list-heads", str(bundle.resolve())], capture_output=True,
                                env=safe_env()).stdout.decode("utf-8", "replace")
        heads = [ln.split(" ", 1) for ln in listed.splitlines() if " " in ln]
        head_sha = next((sha for sha, ref in heads if ref == "HEAD"), None)
        branches = [(sha, ref) for sha, ref in heads if ref.startswith("refs/heads/")]
        branch = next((ref for sha, ref in branches if sha == head_sha), branches[0][1] if branches else None)
        if branch:  # the bundle's HEAD, so `git log HEAD` means what it meant where the bundle was made
            subprocess.run(["git", "-C", str(tmp), "symbolic-ref", "HEAD", branch], capture_output=True,
                           env=safe_env())
        try:
            tmp.rename(dest)
        except OSError:  # another process unpacked the same bundle meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def repository(path: Path) -> Path:
    """The repository to read for an input `detect` found: the folder itself, or a bundle's unpacked copy."""
    return unbundle(path) if path.is_file() and is_bundle(path) else path


def git_dir(path: Path) -> Path | None:
    """The git directory of the repository at `path` (a work tree or a bare repository), else None."""
    dot = path / ".git"
    if dot.exists():
        return dot
    if (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir():
        return path
    return None


def _git(gdir: Path, *args: str) -> list[str]:
    # safe.directory: an export is often owned by another user than the one ingesting it.
    return ["git", "--no-pager", f"--git-dir={gdir}", "-c", "safe.directory=*",
            "-c", "i18n.logOutputEncoding=UTF-8", "-c", "log.showSignature=false", "-c", "log.mailmap=false",
            "-c", "diff.relative=false", *args]


def safe_env() -> dict[str, str]:
    """The environment for git on a user's repository: no user/system config, no prompts, and no transport
    at all (GIT_ALLOW_PROTOCOL=none), so a partial clone never fetches its missing objects from the network."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_ALLOW_PROTOCOL="none",
               GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def _records(stream, limit: int) -> Iterator[tuple[bytes, int]]:
    """Split git's output at SEP: (the record's first `limit` bytes, its full length) per commit.
    The last record is yielded only by the caller's check of the exit status (see `_log`)."""
    buf, searched, dropped = bytearray(), 0, 0
    while chunk := stream.read(CHUNK):
        buf += chunk
        while (i := buf.find(SEP, searched)) >= 0:
            if i or dropped:
                yield bytes(buf[:min(i, limit)]), i + dropped
            del buf[:i + len(SEP)]
            searched = dropped = 0
        if len(buf) > limit + len(SEP):  # an oversized record: keep its head and the last bytes only
            cut = len(buf) - len(SEP) + 1
            dropped += cut - limit
            del buf[limit:cut]
        searched = max(len(buf) - len(SEP) + 1, 0)
    if buf or dropped:
        yield bytes(buf[:limit]), len(buf) + dropped


def _decode(raw: bytes) -> tuple[str, bool]:
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), True


def _ts(iso: str, epoch: str) -> dt.datetime | None:
    """The committer date with its zone; from the epoch in UTC when git printed a date Python rejects."""
    try:
        ts = dt.datetime.fromisoformat(iso)
        if ts.tzinfo is not None:
            return ts
    except ValueError:
        pass
    try:
        return dt.datetime.fromtimestamp(int(epoch), dt.UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _raw_entries(rest: bytes) -> tuple[list[tuple[str, bytes, bytes | None]], int]:
    """Parse the -z raw block at the start of `rest`: ([(status, path, old path)], where the patch starts)."""
    entries, pos = [], 1 if rest[:1] == b"\n" else 0
    while rest[pos:pos + 1] == b":":
        end = rest.find(b"\0", pos)
        meta = rest[pos + 1:end].split(b" ")
        status = meta[4][:1].decode("ascii", "replace") if len(meta) > 4 and end >= 0 else "?"
        paths, p = [], end + 1
        for _ in range(2 if status in ("R", "C") else 1):
            q = rest.find(b"\0", p)
            if end < 0 or q < 0:
                return entries, len(rest)  # cut off: the record was larger than the read limit
            paths.append(rest[p:q])
            p = q + 1
        entries.append((status, paths[-1], paths[0] if len(paths) == 2 else None))
        pos = p
    return entries, pos + (rest[pos:pos + 1] == b"\0")


def _line_counts(patch: bytes, n: int, complete: bool) -> list[tuple[int | None, int | None]]:
    """(added, deleted) of each of the `n` `diff --git` sections of `patch`, counted like --numstat:
    lines starting with + or - after the section's first hunk header; (None, None) for a binary file,
    or a section cut off by the read limit. Every count is None if the sections do not match the entries."""
    sections = (b"\n" + patch).split(b"\ndiff --git ")[1:]
    if len(sections) != n and (complete or len(sections) > n):
        return [(None, None)] * n
    out = []
    for i, section in enumerate(sections):
        hunk = section.find(b"\n@@ ")
        head = section if hunk < 0 else section[:hunk]
        binary = b"\nBinary files " in head or b"\nGIT binary patch" in head
        if binary or (not complete and i == len(sections) - 1):
            out.append((None, None))
        elif hunk < 0:
            out.append((0, 0))
        else:
            body = section[hunk + 1:]
            out.append((body.count(b"\n+"), body.count(b"\n-")))
    return out + [(None, None)] * (n - len(out))


@register_extractor("git")
class GitExtractor(Extractor):
    """Commits of a git repository (work tree or bare) -> one `commit` event each, with its patch."""

    handle_value = "email"   # an author is an e-mail address (see author_handle)
    source: ClassVar[str] = "git"
    medium: ClassVar[str] = "code"
    patterns: ClassVar[tuple[str, ...]] = ()
    label: ClassVar[str] = "git repository"
    expects: ClassVar[str] = "git repositories (folders with .git, or bare, or git bundle files)"
    Config: ClassVar[type[ExtractorConfig]] = GitConfig

    @classmethod
    def detect(cls, root: Path) -> list[Path]:
        """Every repository under `root` (root included), and every git bundle file (`*.bundle`, checked by its
        signature); a work tree is searched for nested ones."""
        if root.is_file():
            return [root] if is_bundle(root) else []
        found = []
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            kind = git_dir(here)
            if kind is not None:
                found.append(here)
            found += [here / f for f in filenames if f.endswith(".bundle") and is_bundle(here / f)]
            dirnames[:] = [] if kind == here else sorted(d for d in dirnames if d != ".git")
        return sorted(found)

    def iter_records(self, path: Path) -> Iterator[Row]:
        name = self.rel(path)
        repo = path.resolve().name if name == "." else name
        if path.is_file() and is_bundle(path):
            repo = repo.removesuffix(".bundle")
            try:
                path = unbundle(path)
            except (GitError, OSError) as exc:
                yield self.quarantine(file=name, error_class="git_error", message=f"bundle unreadable: {exc}")
                return
        gdir = git_dir(path) if path.is_dir() else None
        if gdir is None:
            yield self.quarantine(file=name, error_class="not_a_repository",
                                  message=f"{name} is not a git repository (no .git folder, not bare)")
            return
        seen: set[str] = set()
        try:
            with closing(self._log(gdir, *REVS)) as commits:  # closing: stops git if we are stopped
                for commit in commits:
                    seen.add(commit["sha"])
                    yield self._event(commit, name, repo)
            return
        except GitError as e:
            failure = str(e)
        # The pass stopped at a commit git could not show: list every commit, show the rest one by one.
        # rev-list stops too at a commit whose own object is unreadable (its ancestors cannot be found
        # from there); the commits it listed before that are still shown.
        listed = subprocess.run(_git(gdir, "rev-list", *REVS), capture_output=True, env=safe_env())
        if listed.returncode:
            yield self.quarantine(file=name, error_class="git_error", message=f"git log failed: {failure}; "
                                  f"git rev-list failed: {_first_line(listed.stderr)}")
        for sha in listed.stdout.decode("ascii", "replace").split():
            if sha in seen:
                continue
            try:
                with closing(self._log(gdir, "-1", sha)) as commits:
                    for commit in commits:
                        yield self._event(commit, name, repo)
                continue
            except GitError as e:
                failure = str(e)
            try:  # without the patch (and rename detection, which reads blobs too)
                with closing(self._log(gdir, "-1", sha, patch=False)) as commits:
                    for commit in commits:
                        yield self._event(commit, name, repo, diff_unavailable=True)
                yield self.quarantine(file=name, member=sha, error_class="git_diff_unreadable",
                                      message=f"the patch of {sha[:12]} cannot be made: {failure}")
            except GitError as e:
                yield self.quarantine(file=name, member=sha, error_class="git_error", message=str(e))

    def _log(self, gdir: Path, *revs: str, patch: bool = True) -> Iterator[dict]:
        """Parsed commits of one streaming `git log`; raises GitError (after the complete ones) on failure."""
        cap = self.config.max_diff_bytes
        diff = ["-p", "-M", "--unified=3"] if patch else ["--no-renames"]   # (--unified implies -p)
        cmd = _git(gdir, "log", "-z", f"--format={FORMAT}", "--raw", *diff, "--no-ext-diff",
                   "--no-textconv", "--no-color", "--root", *revs, "--")
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                    env=safe_env())
            try:
                pending = None
                for raw, size in _records(proc.stdout, cap + COUNT_SLACK):
                    if pending is not None:
                        yield _parse(*pending, cap)
                    pending = (raw, size)  # complete only once the next one starts or git exits 0
                if proc.wait() != 0:
                    err.seek(0)
                    raise GitError(_first_line(err.read()) or f"git exited with status {proc.returncode}")
                if pending is not None:
                    yield _parse(*pending, cap)
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.stdout.close()
                proc.wait()

    def _event(self, c: dict, name: str, repo: str, diff_unavailable: bool = False) -> Row:
        if not _SHA.fullmatch(c["sha"]) or c["ts"] is None:
            return self.quarantine(file=name, member=c["sha"][:64], error_class="bad_record",
                                   message="git printed a commit without a SHA or a readable committer date",
                                   excerpt=repr(c)[:512])
        people = [{"handle": author_handle(c[role]["email"], c[role]["name"]), "display_name": c[role]["name"],
                   "email": c[role]["email"] or None, "username": None, "role": role}
                  for role in ("author", "committer")]
        paths = (p for f in c["files"] for p in (f.get("old_path"), f["path"]) if p)
        artifacts = list(dict.fromkeys([c["sha"], *paths]))
        attrs = {"sha": c["sha"], "parents": c["parents"], "merge": len(c["parents"]) > 1,
                 "author": c["author"], "committer": c["committer"], "files": c["files"], "refs": c["refs"],
                 "repo": repo, "diff_truncated": c["diff_truncated"], "people": people}
        if c["encoding_error"]:
            attrs["encoding_error"] = True
        if diff_unavailable:
            attrs["diff_unavailable"] = True
        return self.event(kind="commit", native_id=c["sha"], ts=c["ts"], actor=people[0]["handle"],
                          actor_name=c["author"]["name"], title=c["subject"], body=c["message"],
                          attrs=attrs, artifacts=artifacts, diff=c["diff"], provenance={"file": name})


def _parse(raw: bytes, size: int, cap: int) -> dict:
    *header, last = (raw.split(FIELD_SEP, len(FIELDS) - 1) + [b""] * len(FIELDS))[:len(FIELDS)]
    message, _, rest = last.partition(b"\0")
    decoded = [_decode(field) for field in (*header, message)]
    sha, parents, an, ae, ad, cn, ce, cd, ct, refs, message = (text for text, _ in decoded)
    bad = any(replaced for _, replaced in decoded)
    entries, start = _raw_entries(rest)
    patch, complete = rest[start:], size == len(raw)
    files = []
    for (status, path, old), (added, deleted) in zip(entries, _line_counts(patch, len(entries), complete),
                                                     strict=True):
        (path, b1), (old, b2) = _decode(path), _decode(old) if old is not None else (None, False)
        bad = bad or b1 or b2
        files.append({"path": path, "status": status, "added": added, "deleted": deleted,
                      **({"old_path": old} if old is not None else {})})
    message = message.rstrip("\n")
    subject = " ".join(message.split("\n\n", 1)[0].split())  # git's %s: the first paragraph, one line
    return {
        "sha": sha, "parents": parents.split(), "ts": _ts(cd, ct),
        "author": {"name": an, "email": ae, "date": ad}, "committer": {"name": cn, "email": ce, "date": cd},
        "refs": [r for r in refs.split(", ") if r], "subject": subject, "message": message,
        "files": files, "encoding_error": bad,
        "diff": patch[:cap].decode("utf-8", "replace") if patch else None,
        "diff_truncated": len(patch) > cap or not complete,
    }


def author_handle(email: str, name: str) -> str:
    """CONTEXT.md: "git:<e-mail, lower-cased>", or "git:name:<Name>" when the e-mail is empty."""
    return f"git:{email.strip().lower()}" if email.strip() else f"git:name:{name}"


def _first_line(data: bytes) -> str:
    lines = [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return next((ln for ln in lines if ln.startswith(("fatal", "error"))), lines[0] if lines else "")
