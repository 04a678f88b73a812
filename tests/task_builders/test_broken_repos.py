"""One unreadable repository never sinks its dataset.

A real Slack + git export whose repository missed one blob stopped at the anonymize stage (git fast-export
could not read it): thousands of good events, 0 tasks. A repository that cannot be rewritten whole is now
quarantined with git's reason, the tasks that need it are rejected with that reason, and every other
source goes on to tasks. Git never tries to fetch a partial clone's missing objects from its remote.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from taskmine import flow
from task_builders.config import DatasetConfig
from warehouse.store import Store


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _partial_clone(dataset: Path, tmp: Path) -> None:
    """`git clone --filter=blob:none`: only HEAD's blobs are present; the promisor remote then disappears."""
    full = tmp / "full.git"
    shutil.move(dataset / "repo", full)
    _git(full, "config", "uploadpack.allowFilter", "true")
    subprocess.run(["git", "clone", "-q", "--filter=blob:none", f"file://{full}", str(dataset / "repo")], check=True)
    shutil.rmtree(full)


def _corrupt_one_blob(dataset: Path, tmp: Path) -> None:
    """Unpack every object loose, then overwrite one blob that is not in HEAD's tree with junk."""
    repo = dataset / "repo"
    packs = list((repo / ".git" / "objects" / "pack").glob("*.pack"))
    for pack in packs:
        moved = tmp / pack.name
        shutil.move(pack, moved)
        pack.with_suffix(".idx").unlink()
        with open(moved, "rb") as packed:
            subprocess.run(["git", "-C", str(repo), "unpack-objects", "-q"], stdin=packed, check=True)
    in_head = set(_git(repo, "ls-tree", "-r", "--format=%(objectname)", "HEAD").split())
    blobs = [line.split()[0] for line in _git(repo, "rev-list", "--objects", "--all").splitlines()
             if len(line.split()) == 2 and _git(repo, "cat-file", "-t", line.split()[0]).strip() == "blob"]
    victim = next(b for b in blobs if b not in in_head)
    path = repo / ".git" / "objects" / victim[:2] / victim[2:]
    path.chmod(0o644)
    path.write_bytes(b"\x78\x9c not zlib at all")


@pytest.mark.parametrize("damage", [_partial_clone, _corrupt_one_blob], ids=["partial-clone", "corrupt-blob"])
def test_an_unreadable_repository_is_quarantined_and_the_rest_becomes_tasks(tmp_path, sample_company, damage):
    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    dataset = exports / "acme"
    damage(dataset, tmp_path)
    store = Store(tmp_path / "home")
    config = DatasetConfig(ner_model="")

    flow.prepare(store, "acme", dataset, config)
    flow.work_items(store, "acme", config)
    result = flow.tasks(store, "acme", config)

    rows = [q for q in store.read("quarantine", "acme") if q.error_class == "git_unreadable"]
    assert len(rows) == 1 and rows[0].file == "repo" and rows[0].source == "git"
    assert rows[0].message.startswith("git fast-export failed on repo: ")   # git's own words for the object
    events = Counter(e.source for e in store.read("anonymized_events", "acme"))
    assert events["jira"] and events["email"] and events["slack"] and events["git"]   # nothing else was lost
    families = Counter(t.family for t in store.read("tasks", "acme"))
    assert families["ticket_triage"] > 0 and families["commit_link"] == 0, result.counts
    reasons = Counter(r.reason for r in store.read("rejections", "acme") if r.family == "commit_link")
    assert reasons["repository could not be rewritten"] >= 1, reasons


def test_the_quarantine_row_goes_when_the_repository_is_repaired(tmp_path, sample_company):
    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    dataset = exports / "acme"
    good = tmp_path / "good-repo"
    shutil.copytree(dataset / "repo", good, symlinks=True)
    _partial_clone(dataset, tmp_path)
    store = Store(tmp_path / "home")
    config = DatasetConfig(ner_model="")
    flow.prepare(store, "acme", dataset, config)
    assert any(q.error_class == "git_unreadable" for q in store.read("quarantine", "acme"))
    shutil.rmtree(dataset / "repo")
    shutil.copytree(good, dataset / "repo", symlinks=True)
    flow.prepare(store, "acme", dataset, config)
    assert not any(q.error_class == "git_unreadable" for q in store.read("quarantine", "acme"))
    assert flow.repos_index(store, "acme").read_text().count('"sha_map"') == 1
