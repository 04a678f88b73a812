"""A fix resolves to the copy the rewrite keeps.

On a real Jira + git export 111 of 508 fixing commits were rejected as "fixing commit not in the rewritten
history": the commit naming the key was a pull request's own commit, reachable only from a ref the rewrite drops
(`refs/pull/<n>/head`), while its cherry-pick reached main through the merged pull request. The rewrite now
finds that copy (same `git patch-id`) and the tasks use it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from task_builders import gitrewrite
from task_builders.config import DatasetConfig
from taskmine import flow
from warehouse.store import Store

ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
       "GIT_AUTHOR_NAME": "Merge Bot", "GIT_AUTHOR_EMAIL": "bot@example.org",
       "GIT_COMMITTER_NAME": "Merge Bot", "GIT_COMMITTER_EMAIL": "bot@example.org"}


def _git(repo: Path, *args: str, **env: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**ENV, **env}).stdout.strip()


def _merge_through_pull_request(repo: Path, key: str) -> tuple[str, str]:
    """Make the commit that names `key` a pull request's own commit (only `refs/pull/3/head` reaches it) whose
    cherry-pick was merged into main; the commits after it are replayed on top. Returns (original, copy)."""
    original = _git(repo, "log", "main", "-E", f"--grep={key}\\b", "--format=%H", "-n", "1")
    later = _git(repo, "rev-list", "--reverse", f"{original}..main").split()
    assert later and not any(" " in _git(repo, "log", "-1", "--format=%P", c) for c in later)
    _git(repo, "update-ref", "refs/pull/3/head", original)
    _git(repo, "checkout", "-q", "-b", "pr-3", f"{original}^")
    when = _git(repo, "log", "-1", "--format=%ct", original)
    _git(repo, "cherry-pick", original, GIT_COMMITTER_DATE=f"@{int(when) + 3600} +0000")
    copy = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "-B", "main", f"{original}^")
    _git(repo, "merge", "-q", "--no-ff", "pr-3", "-m", "Merge pull request #3 from a fork",
         GIT_COMMITTER_DATE=f"@{int(when) + 7200} +0000", GIT_AUTHOR_DATE=f"@{int(when) + 7200} +0000")
    for c in later:   # the rest of main, replayed with its own dates
        _git(repo, "cherry-pick", c, GIT_COMMITTER_DATE=_git(repo, "log", "-1", "--format=%cI", c))
    _git(repo, "branch", "-q", "-D", "pr-3")
    assert _git(repo, "branch", "--contains", original) == ""        # no branch holds the original
    assert copy in _git(repo, "rev-list", "main").split()
    return original, copy


def test_a_fix_only_a_dropped_ref_reaches_resolves_to_its_copy_on_main(tmp_path, sample_company):
    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    dataset = exports / "acme"
    original, copy = _merge_through_pull_request(dataset / "repo", "CORE-10")
    store = Store(tmp_path / "home")
    config = DatasetConfig(ner_model="", families=("commit_link",))

    flow.prepare(store, "acme", dataset, config)
    flow.work_items(store, "acme", config)
    flow.tasks(store, "acme", config)

    index = json.loads(flow.repos_index(store, "acme").read_text())["repo"]
    assert original not in index["sha_map"] and index["equivalent"] == {original: copy}
    item = next(i for i in store.read("work_items", "acme") if i.kind == "issue" and i.thread_key == "CORE-10")
    assert set(item.attrs["fix_shas"]) == {original, copy}      # both name the key
    rejected = [r for r in store.read("rejections", "acme") if r.subject_id == "CORE-10"]
    assert not rejected, rejected
    from task_builders import world

    repos = world.load(store, "acme")
    task = next(t for t in store.read("tasks", "acme") if t.family == "commit_link" and t.item_id == item.item_id)
    assert task.reference["fix_shas"] == [repos["repo"]["sha_map"][copy]]


def test_equivalents_match_by_patch_id_and_leave_other_commits_alone(tmp_path):
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "a.txt").write_text("one\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "start")
    _git(repo, "checkout", "-q", "-b", "topic")
    (repo / "a.txt").write_text("one\ntwo\n")
    _git(repo, "commit", "-q", "-am", "add two")
    picked = _git(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("one\ntwo\nthree\n")
    _git(repo, "commit", "-q", "-am", "add three")
    lonely = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "cherry-pick", picked, GIT_COMMITTER_DATE="@1900000000 +0000")
    (repo / "b.txt").write_text("other\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "unrelated")
    kept = _git(repo, "rev-list", "main").split()
    found = gitrewrite.equivalents(repo, [picked, lonely], kept)
    assert found == {picked: _git(repo, "rev-parse", "main^")}
