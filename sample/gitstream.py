"""Build a git repository in one `git fast-import` run.

Format followed: git-fast-import(1) ("commit", "mark", "author"/"committer" with raw `<epoch> <+hhmm>`
dates, exact-byte-count "data", "from", "merge", "M 100644 inline", "D", "done").

Invariants:
- Commit SHAs depend only on the stream (names, e-mails, dates, zones, messages, trees, parents), so the
  same plan gives the same SHAs on every machine; user and system git config are ignored.
- Side-branch refs are deleted after the import (their commits stay reachable through the merges), the
  repository is non-bare with `main` checked out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class GitCommit:
    mark: int
    ref: str
    author: tuple[str, str, int, str]  # name, e-mail, epoch seconds, "+hhmm"
    committer: tuple[str, str, int, str]
    message: str
    parent: int | None
    merge: int | None = None
    files: dict[str, str | None] = field(default_factory=dict)  # path -> content; None deletes the file


def _data(text: str) -> bytes:
    raw = text.encode("utf-8")
    return b"data %d\n%s\n" % (len(raw), raw)


def fast_import_stream(commits: list[GitCommit]) -> bytes:
    out = []
    for c in commits:
        out.append(f"commit {c.ref}\nmark :{c.mark}\n".encode())
        for role, (name, email, ts, tz) in (("author", c.author), ("committer", c.committer)):
            out.append(f"{role} {name} <{email}> {ts} {tz}\n".encode())
        out.append(_data(c.message))
        if c.parent is not None:
            out.append(f"from :{c.parent}\n".encode())
        if c.merge is not None:
            out.append(f"merge :{c.merge}\n".encode())
        for path in sorted(c.files):
            content = c.files[path]
            out.append(f"D {path}\n".encode() if content is None
                       else f"M 100644 inline {path}\n".encode() + _data(content))
        out.append(b"\n")
    out.append(b"done\n")
    return b"".join(out)


def git_env() -> dict[str, str]:
    """Environment that makes git ignore the user's and the system's configuration."""
    return {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}


def build_repo(repo: Path, commits: list[GitCommit]) -> dict[int, str]:
    """Create `repo` from `commits` (parents before children); return mark -> commit SHA."""
    if shutil.which("git") is None:
        raise RuntimeError("git is not on PATH; install git to generate the sample repository")
    env = git_env()

    def git(*args: str, stdin: bytes | None = None) -> None:
        proc = subprocess.run(["git", "-C", str(repo), *args], input=stdin, env=env, capture_output=True,
                              check=False)
        if proc.returncode:
            raise RuntimeError(f"git {args[0]} failed: {proc.stderr.decode(errors='replace').strip()}")

    repo.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "-b", "main")
    marks = repo / ".git" / "taskmine-marks"
    git("fast-import", "--quiet", "--done", f"--export-marks={marks}", stdin=fast_import_stream(commits))
    for ref in sorted({c.ref for c in commits if c.ref != "refs/heads/main"}):
        git("update-ref", "-d", ref)
    git("reset", "-q", "--hard", "main")
    shas = {}
    for line in marks.read_text().splitlines():
        mark, sha = line.split()
        shas[int(mark[1:])] = sha
    marks.unlink()
    return shas
