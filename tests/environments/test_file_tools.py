"""The file tools (read_file, write_file, list_files) beside git and shell: served over MCP in the task's sandbox
session, as the agent; paths confined to the home and /tmp; a world cut at its cutoff shows issues as they stood."""

from __future__ import annotations

import json
import os

import pytest
from tiny_company import CUTOFF, make_repo

from environments import actions as A
from environments.episode import Episode
from environments.gitworld import refs_at
from environments.sandbox import LocalSandbox
from environments.world import World, cut_documents, import_documents


def _world(tmp_path, tiny_world) -> tuple:
    worlds = tmp_path / "worlds"
    worlds.mkdir()
    os.link(tiny_world.path, worlds / "world.sqlite")
    make_repo(tmp_path / "src")
    (worlds / "world.json").write_text(json.dumps({"repos": {"repo": {"path": str(tmp_path / "src"), "slug": "repo"}}}))
    return worlds, {"cutoff": CUTOFF.isoformat(), "git": {"repos": ["repo"], "refs": {"repo": refs_at(tmp_path / "src",
                                                                                                       CUTOFF)}}}


@pytest.mark.parametrize("path", ["/etc/passwd", "../../etc/passwd", "/home/agent/../../etc/shadow", "/world/x"])
def test_file_paths_stay_in_the_home_and_tmp(path):
    with pytest.raises(ValueError, match="outside your home"):
        A.parse_call("read_file", {"path": path})
    assert A.parse_call("write_file", {"path": "repo/a.py", "content": "x"}).path == "/home/agent/repo/a.py"
    assert A.parse_call("list_files", {"path": "/tmp/x/../y"}).path == "/tmp/y"


@pytest.mark.parametrize("kind", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_the_file_tools_read_write_and_list_the_repository(kind, tmp_path, tiny_world, request):
    box = LocalSandbox() if kind == "local" else request.getfixturevalue("docker_sandbox")
    worlds, world = _world(tmp_path, tiny_world)
    with Episode(worlds, world, box) as ep:
        t = ep.tools
        assert {"read_file", "write_file", "list_files", "git", "shell"} <= t.available
        listing = t.call("list_files", {"path": "repo"})
        assert not listing.error and "a.py" in listing.text and ".git" not in listing.text
        before = t.call("read_file", {"path": "repo/a.py"})
        assert not before.error and before.data["lines"] >= 1
        w = t.call("write_file", {"path": "repo/pkg/new.py", "content": "x = 1\ny = 2\n"})
        assert not w.error, w.text
        assert t.call("read_file", {"path": "~/repo/pkg/new.py", "start": 2, "end": 2}).text == "y = 2\n"
        assert "pkg/new.py" in t.call("list_files", {"path": "repo", "recursive": True}).text
        assert "pkg/" in t.call("git", {"args": ["status", "--porcelain"]}).text
        assert t.call("read_file", {"path": "repo/missing.py"}).error
        assert t.call("list_files", {"path": "nothing-here"}).error
        assert t.actions == []          # files are no company actions: nothing in the log
    without = Episode(worlds, {"cutoff": CUTOFF.isoformat()}, LocalSandbox())
    with without as ep:
        assert "git" not in ep.tools.available       # no repository, no git


def test_a_cut_world_holds_nothing_after_its_cutoff_and_issues_as_they_stood(tmp_path, tiny_world):
    full = tiny_world.at(CUTOFF)
    n = cut_documents(tiny_world.path, CUTOFF, (), tmp_path / "cut.jsonl")
    cut = World(import_documents(tmp_path / "cut.jsonl", tmp_path / "cut" / "world.sqlite"))
    assert n == len((tmp_path / "cut.jsonl").read_text().splitlines()) > 0
    later = World(tiny_world.path).at(CUTOFF.replace(year=2030))
    # everything the full world holds after the cutoff is absent from the cut one, even read at any time
    cut_texts = dict(cut.at(CUTOFF.replace(year=2030)).texts())
    assert set(cut_texts) == {k for k, _ in full.texts()}
    assert set(cut_texts) < {k for k, _ in later.texts()}
    for key in full.issue_keys():
        assert cut.at(CUTOFF).issue(key)["fields"] == full.issue(key)["fields"]
        assert cut.at(CUTOFF).issue(key)["summary"] == full.issue(key)["summary"]
