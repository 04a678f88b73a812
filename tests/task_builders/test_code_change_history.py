"""Where a fixing commit lives in a real project's history: on a pull-request branch merged after the fix
(its ref deleted), or on a remote-tracking branch of a clone that was never merged. No Docker: these are the
git-level decisions the code_change family takes before it runs a test."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

from environments.gitworld import Branches, refs_at, verify_refs
from privacy import gitrewrite
from task_builders.families.code_change import _future_history


def _git(repo: Path, *args: str, day: int | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Dev One", "GIT_AUTHOR_EMAIL": "dev.one@example.com",
           "GIT_COMMITTER_NAME": "Dev One", "GIT_COMMITTER_EMAIL": "dev.one@example.com",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if day is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"2021-03-{day:02d}T10:00:00+00:00"
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _commit(repo: Path, name: str, day: int) -> str:
    (repo / name).write_text(f"{name} {day}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"change {name}", day=day)
    return _git(repo, "rev-parse", "HEAD")


def _at(day: int) -> dt.datetime:
    return dt.datetime(2021, 3, day, 10, 0, 0, tzinfo=dt.UTC)


def test_a_fix_on_a_branch_merged_later_is_a_candidate(tmp_path):
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    _commit(repo, "a", 1)
    _git(repo, "checkout", "-q", "-b", "pr")
    work = _commit(repo, "b", 2)          # the work before the fix, on the pull-request branch
    fix = _commit(repo, "c", 4)
    _git(repo, "checkout", "-q", "main")
    _commit(repo, "d", 3)
    _git(repo, "merge", "-q", "--no-ff", "-m", "Merge pr", "pr", day=5)
    _git(repo, "branch", "-q", "-D", "pr")
    cutoff = _at(4) - dt.timedelta(seconds=1)
    refs = refs_at(repo, cutoff)
    # no branch as it stood at the cutoff reaches the fix's parent: the episode checks it out as its head
    assert verify_refs(repo, refs, needed=[work]) != []
    assert verify_refs(repo, refs, hidden=[fix], needed=[work], head=work) == []
    assert _future_history(repo, {}, work, cutoff) == ""


def test_a_rebased_branch_whose_history_is_dated_after_the_cutoff_is_rejected(tmp_path):
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    _commit(repo, "a", 1)
    _git(repo, "checkout", "-q", "-b", "pr")
    late = _commit(repo, "b", 6)          # committed (rebased) after the fix below says it was made
    _commit(repo, "c", 4)
    _git(repo, "checkout", "-q", "main")
    _git(repo, "branch", "-q", "-D", "pr")
    why = _future_history(repo, {}, late, _at(4) - dt.timedelta(seconds=1))
    assert "1 commits the checkout adds are dated after" in why and late[:12] in why
    # the same parent on a branch as it stood at the cutoff adds nothing: nothing to reject
    branches = {str(repo): Branches({"refs/heads/main": [(late, 0)]}, "refs/heads/main")}
    assert _future_history(repo, branches, late, _at(4)) == ""


def test_the_world_keeps_remote_branches_that_hold_other_commits_under_neutral_names(tmp_path):
    origin = tmp_path / "origin"
    subprocess.run(["git", "init", "-q", "-b", "main", str(origin)], check=True)
    _commit(origin, "a", 1)
    _git(origin, "checkout", "-q", "-b", "jdoe-PROJ-12-fix")      # a login and an issue key in a name
    unmerged = _commit(origin, "b", 2)
    _git(origin, "checkout", "-q", "-b", "merged", "main")
    _git(origin, "checkout", "-q", "main")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
    dst = tmp_path / "world.git"
    result = gitrewrite.rewrite(clone, dst, identity=lambda n, e: (n, e), message=lambda m: m)
    assert unmerged in result.sha_map               # only origin/jdoe-PROJ-12-fix reaches it
    refs = _git(dst, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    assert sorted(r.split()[0] for r in refs) == ["refs/heads/main", "refs/heads/remote-1"]
    assert f"refs/heads/remote-1 {result.sha_map[unmerged]}" in refs
    assert "jdoe" not in _git(dst, "for-each-ref") and "PROJ" not in _git(dst, "for-each-ref")
