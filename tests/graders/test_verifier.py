"""The verifier's pure parts: which tests are FAIL_TO_PASS, PASS_TO_PASS or flaky, and how the fix's files are
written over whatever an agent left (graders.sealed.prepare, the function the sandbox runs)."""

import os

from graders.sealed import prepare
from graders.verifier import CONFIG_NAMES, classify, files_json

P, F, E = "passed", "failed", "error"


def test_classify_fail_to_pass_pass_to_pass_and_flaky():
    before = [{"m.py::a": F, "m.py::b": P, "m.py::c": P, "m.py::d": F, "m.py::e": P},
              {"m.py::a": E, "m.py::b": P, "m.py::c": F, "m.py::d": F, "m.py::e": P},
              {"m.py::a": F, "m.py::b": P, "m.py::c": P, "m.py::d": F, "m.py::e": P}]
    after = [{"m.py::a": P, "m.py::b": P, "m.py::c": P, "m.py::d": F, "m.py::e": F, "m.py::new": P},
             {"m.py::a": P, "m.py::b": P, "m.py::c": P, "m.py::d": F, "m.py::e": F, "m.py::new": P},
             {"m.py::a": P, "m.py::b": P, "m.py::c": P, "m.py::d": P, "m.py::e": F, "m.py::new": P}]
    sets = classify(before, after)
    assert sets.fail_to_pass == ["m.py::a", "m.py::new"]     # error and missing count as not passed
    assert sets.pass_to_pass == ["m.py::b"]
    assert sets.flaky == ["m.py::c", "m.py::d"]               # varies before (c) or after (d)
    assert sets.broken == ["m.py::e"]


def test_a_collection_error_is_never_a_test():
    sets = classify([{"tests/test_m.py": E}], [{"tests/test_m.py::t": P}])
    assert sets.fail_to_pass == ["tests/test_m.py::t"] and "tests/test_m.py" not in sets.pass_to_pass


def unpack(tmp_path, files, prune=()):
    prepare(str(tmp_path / "repo"), files_json(files, {p for p in files if p.endswith(".sh")}), prune)


def test_the_fix_files_replace_whatever_the_agent_left(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "pkg").mkdir()
    (repo / "tests" / "test_a.py").write_text("def test_a(): pass  # edited by the agent\n")
    (repo / "tests" / "conftest.py").write_text("# planted\n")
    (repo / "pkg" / "conftest.py").write_text("# planted deeper\n")
    (repo / "pytest.ini").write_text("[pytest]\naddopts = -p evil\n")
    (repo / "pkg" / "code.py").write_text("x = 1\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, repo / "fixtures")                  # a folder swapped for a link out of the tree
    (repo / "tests" / "test_b.py").mkdir()                    # a folder where the fix has a file
    (repo / "tests" / "test_a.py").chmod(0o444)
    (repo / "tests").chmod(0o555)                             # and everything read-only
    (repo / "pkg" / "__pycache__").mkdir()
    (repo / "pkg" / "__pycache__" / "code.cpython-311.pyc").write_bytes(b"planted")
    (repo / "tests" / "test_c.pyc").write_bytes(b"planted")
    unpack(tmp_path, {"tests/test_a.py": b"def test_a(): assert False\n",
                      "tests/test_b.py": b"def test_b(): pass\n", "fixtures/data.txt": b"42\n",
                      "run.sh": b"#!/bin/sh\n", "pyproject.toml": b"[tool.x]\n", "tests/old.py": None}, CONFIG_NAMES)
    assert (repo / "tests" / "test_a.py").read_text() == "def test_a(): assert False\n"
    assert (repo / "tests" / "test_b.py").read_text() == "def test_b(): pass\n"
    assert not (repo / "fixtures").is_symlink() and (repo / "fixtures" / "data.txt").read_text() == "42\n"
    assert list(elsewhere.iterdir()) == []                    # nothing written through the link
    assert not (repo / "tests" / "conftest.py").exists() and not (repo / "pkg" / "conftest.py").exists()
    assert not (repo / "pytest.ini").exists() and (repo / "pyproject.toml").read_text() == "[tool.x]\n"
    assert (repo / "pkg" / "code.py").read_text() == "x = 1\n"   # the agent's code is what is under test
    assert os.access(repo / "run.sh", os.X_OK)
    assert not (repo / "pkg" / "__pycache__").exists() and not (repo / "tests" / "test_c.pyc").exists()


def test_paths_outside_the_repository_are_never_written(tmp_path):
    (tmp_path / "repo").mkdir()
    unpack(tmp_path, {"../escape.txt": b"x", "/abs.txt": b"x", ".git/hooks/pre-commit": b"x", "ok.txt": b"y"})
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "repo" / ".git").exists()
    assert (tmp_path / "repo" / "ok.txt").read_text() == "y"


def test_a_repository_replaced_by_a_link_is_made_again(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    os.symlink(target, tmp_path / "repo")
    unpack(tmp_path, {"tests/test_a.py": b"x\n"})
    assert not (tmp_path / "repo").is_symlink() and list(target.iterdir()) == []


def test_a_message_of_the_verifier_never_names_its_random_folder():
    """The verifier's folder is named at random per episode (the agent cannot guess it); a runner that dies
    with a traceback naming it must leave the same stored message in every run (issues 20, 21)."""
    from types import SimpleNamespace

    from environments.codeenv import EnvSpec
    from graders.verifier import WORKDIR_SHOWN, Setup, run_tests

    class Session:
        kind = "docker"

        def path_of(self, p):
            return p

        def write_file(self, *a, **k):
            pass

        def exec(self, cmd, **k):
            work = cmd.split()[5].rsplit("/", 1)[0]
            return SimpleNamespace(stdout="", stderr=f'Traceback:\n  File "{work}/sealed.py", line 3\nMemoryError\n',
                                   duration_s=0.1, status_line=lambda: "exit 1")

    runs = [run_tests(Session(), "/repo", EnvSpec("python"), {}, ["tests/test_a.py"], 10, work,
                      Setup((), (), ())) for work in ("/tmp/.taskmine-verify-3e51bafbbf6a9e68",
                                                     "/tmp/.taskmine-verify-0c1d2e3f40516273")]
    assert runs[0].outcomes is None and "MemoryError" in runs[0].error
    assert runs[0].error == runs[1].error and WORKDIR_SHOWN + "/sealed.py" in runs[0].error
