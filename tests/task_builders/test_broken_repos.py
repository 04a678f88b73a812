"""A broken repository keeps what can be read.

Two real exports lost their whole git repository (and every task that needed it) for 13 and for a few missing
objects: a repository with one unreadable object was quarantined whole. Now every missing or corrupt object is a
quarantine row of its own (file, object id, reason), the rest of the history is rewritten (a missing blob is an
absent file in the commits that had it), and only the code tasks whose fix touches an unreadable object are
rejected, with that reason. Git never tries to fetch a partial clone's missing objects from its remote.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from task_builders import gitrewrite
from task_builders.config import DatasetConfig
from task_builders.families import UNREADABLE_FIX
from taskmine import flow
from warehouse.store import Store


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _branch_commits(repo: Path) -> set[str]:
    return set(_git(repo, "rev-list", "--branches", "--remotes").split())


def _partial_clone(dataset: Path, tmp: Path) -> str:
    """`git clone --filter=blob:none` of the repository served with uploadpack.allowFilter: only HEAD's blobs are
    fetched; the promisor remote then disappears."""
    full = tmp / "full.git"
    shutil.move(dataset / "repo", full)
    _git(full, "config", "uploadpack.allowFilter", "true")
    subprocess.run(["git", "-c", "uploadpack.allowFilter=true", "clone", "-q", "--no-local", "--filter=blob:none",
                    f"file://{full}", str(dataset / "repo")], check=True, capture_output=True)
    shutil.rmtree(full)
    return ""


def _fixing_blob(repo: Path) -> str:
    """A blob a commit naming an issue key wrote that HEAD's tree no longer holds (so only history needs it)."""
    in_head = set(_git(repo, "ls-tree", "-r", "--format=%(objectname)", "HEAD").split())
    for sha in _git(repo, "log", "--all", "--no-merges", "-E", "--grep=[A-Z]+-[0-9]+", "--format=%H").split():
        for entry in _git(repo, "diff-tree", "-r", "--no-commit-id", sha).splitlines():
            new = entry.split()[3]
            if entry.split()[4] == "M" and new not in in_head:
                return new
    raise AssertionError("the sample has no fixing commit that wrote a blob HEAD no longer holds")


def _corrupt_loose_blob(dataset: Path, tmp: Path) -> str:
    """Unpack every object loose, then overwrite a blob a fixing commit wrote with junk."""
    repo = dataset / "repo"
    for pack in list((repo / ".git" / "objects" / "pack").glob("*.pack")):
        moved = tmp / pack.name
        shutil.move(pack, moved)
        pack.with_suffix(".idx").unlink()
        with open(moved, "rb") as packed:
            subprocess.run(["git", "-C", str(repo), "unpack-objects", "-q"], stdin=packed, check=True)
    victim = _fixing_blob(repo)
    path = repo / ".git" / "objects" / victim[:2] / victim[2:]
    path.chmod(0o644)
    path.write_bytes(b"\x78\x9c not zlib at all")
    return victim


def _corrupt_packed_blob(dataset: Path, tmp: Path) -> str:
    """Repack everything into one pack without deltas, then flip bytes inside one blob's compressed data."""
    repo = dataset / "repo"
    _git(repo, "repack", "-a", "-d", "-q", "--depth=0", "--window=0")
    victim = _fixing_blob(repo)
    (idx,) = (repo / ".git" / "objects" / "pack").glob("*.idx")
    rows = [line.split() for line in _git(repo, "verify-pack", "-v", str(idx)).splitlines()]
    sha, kind, size, packed, offset = next(r for r in rows if r and r[0] == victim)[:5]
    pack = idx.with_suffix(".pack")
    pack.chmod(0o644)
    data = bytearray(pack.read_bytes())
    start = int(offset) + int(packed) // 2        # past the entry's header, inside its zlib stream
    for i in range(start, min(start + 4, int(offset) + int(packed))):
        data[i] ^= 0xFF
    pack.write_bytes(bytes(data))
    return victim


@pytest.mark.parametrize("damage", [_partial_clone, _corrupt_loose_blob, _corrupt_packed_blob],
                         ids=["partial-clone", "corrupt-loose-blob", "corrupt-packed-blob"])
def test_a_repository_with_unreadable_objects_keeps_its_readable_history(tmp_path, sample_company, damage):
    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    dataset = exports / "acme"
    commits = _branch_commits(dataset / "repo")
    victim = damage(dataset, tmp_path)
    store = Store(tmp_path / "home")
    config = DatasetConfig(ner_model="")

    flow.prepare(store, "acme", dataset, config)
    flow.work_items(store, "acme", config)
    flow.tasks(store, "acme", config)

    quarantine = store.read("quarantine", "acme")
    assert not [q for q in quarantine if q.error_class == "git_unreadable"]     # the repository is not lost
    objects = [q for q in quarantine if q.error_class.startswith("git_object_")]
    assert objects and all(q.file == "repo" and q.source == "git" and len(q.member or "") == 40 for q in objects)
    if victim:   # exactly the damaged object, as corrupt
        assert [(q.member, q.error_class) for q in objects] == [(victim, "git_object_corrupt")]
    else:        # a partial clone: the never-fetched blobs, as missing
        assert {q.error_class for q in objects} == {"git_object_missing"}
        assert len(objects) == gitrewrite.missing_objects(dataset / "repo") > 10
    # every commit is rewritten: only files are absent
    index = flow.repos_index(store, "acme").read_text()
    import json

    rewritten = json.loads(index)["repo"]
    assert set(rewritten["sha_map"]) == commits
    # the tasks that need an unreadable object say so; the other sources, and fixes that need none, go on
    families = Counter(t.family for t in store.read("tasks", "acme"))
    assert families["ticket_triage"] > 0 and families["email_reply"] > 0
    reasons = Counter(r.reason for r in store.read("rejections", "acme") if r.family == "commit_link")
    assert reasons[UNREADABLE_FIX] >= 1, reasons
    assert reasons["repository could not be rewritten"] == 0
    if victim:
        assert families["commit_link"] > 0, families


def test_a_missing_commit_cuts_the_history_there_and_keeps_the_rest(tmp_path):
    """A commit git cannot read (its object gone) is left out: its child starts the rewritten history with its
    whole tree, the commits after it keep their changes, and the quarantine lists it."""
    repo = tmp_path / "src"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    shas = []
    for i in range(4):
        (repo / f"f{i}.txt").write_text(f"version {i}\n")
        _git(repo, "add", ".")
        _git(repo, "-c", "user.name=A", "-c", "user.email=a@example.org", "commit", "-q", "-m", f"c{i}")
        shas.append(_git(repo, "rev-parse", "HEAD").strip())
    obj = repo / ".git" / "objects" / shas[1][:2] / shas[1][2:]
    obj.unlink()
    result = gitrewrite.rewrite(repo, tmp_path / "out.git", identity=lambda n, e: (n, e), message=lambda m: m,
                                blob=lambda b: b)
    assert set(result.sha_map) == {shas[2], shas[3]}
    assert [(u.object, u.type, u.reason) for u in result.unreadable] == [(shas[1], "commit", "missing")]
    out = tmp_path / "out.git"
    assert _git(out, "rev-list", "--count", "main").strip() == "2"
    assert sorted(_git(out, "ls-tree", "--name-only", result.sha_map[shas[2]]).split()) == \
        ["f0.txt", "f1.txt", "f2.txt"]


def test_the_quarantine_rows_go_when_the_repository_is_repaired(tmp_path, sample_company):
    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    dataset = exports / "acme"
    good = tmp_path / "good-repo"
    shutil.copytree(dataset / "repo", good, symlinks=True)
    _partial_clone(dataset, tmp_path)
    store = Store(tmp_path / "home")
    config = DatasetConfig(ner_model="")
    flow.prepare(store, "acme", dataset, config)
    assert any(q.error_class.startswith("git_object_") for q in store.read("quarantine", "acme"))
    shutil.rmtree(dataset / "repo")
    shutil.copytree(good, dataset / "repo", symlinks=True)
    flow.prepare(store, "acme", dataset, config)
    assert not [q for q in store.read("quarantine", "acme") if q.error_class.startswith(("git_object_", "git_unr"))]
    assert flow.repos_index(store, "acme").read_text().count('"sha_map"') == 1


def test_a_partial_clone_alone_passes_the_quarantine_gate(tmp_path):
    """A partial clone's commits are read from their messages, people and files; only their patches are missing.
    A dataset of one partial clone is not "mostly unreadable": each commit is an event, rewritten, and the gate
    passes (it counted every commit without a patch as an unreadable record)."""
    full = tmp_path / "full"
    subprocess.run(["git", "init", "-q", "-b", "main", str(full)], check=True)
    for i in range(8):
        (full / "notes.txt").write_text(f"revision {i}\n")
        _git(full, "add", ".")
        _git(full, "-c", "user.name=A", "-c", "user.email=a@example.org", "commit", "-q", "-m", f"revision {i}")
    dataset = tmp_path / "exports" / "code"
    dataset.mkdir(parents=True)
    _git(full, "config", "uploadpack.allowFilter", "true")
    subprocess.run(["git", "clone", "-q", "--no-local", "--filter=blob:none", f"file://{full}", str(dataset / "repo")],
                   check=True, capture_output=True)
    shutil.rmtree(full)
    store = Store(tmp_path / "home")
    config = DatasetConfig(ner_model="")
    flow.prepare(store, "code", dataset, config)
    assert store.count("events", "code") == 8
    assert [q.error_class for q in store.read("quarantine", "code")].count("git_diff_unreadable") == 8
    assert flow.quarantine_problem(store, "code", config) is None, flow.quarantine_rate(store, "code")
    import json

    assert len(json.loads(flow.repos_index(store, "code").read_text())["repo"]["sha_map"]) == 8
