"""The sealed runner (graders.sealed, graders.sealed_child): a verdict the repository's code cannot produce.

Run directly on a small repository (the runner as the sandbox runs it: `python3 -I -S -B sealed.py payload repo`)
and, at the end, a whole code task in the local sandbox with every verifier probe (the Docker run of the same
probes is tests/task_builders/test_code_change.py). Every attack is a probe of task_builders.verifier_probes:
the same commands validation replays on every published code task.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from environments import codeenv
from graders import sealed
from task_builders import verifier_probes

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
OPS = "def add(a, b):\n    return a + b\n\n\ndef mean(values):\n    return sum(values) / len(values)\n"
FIXED = OPS.replace("    return sum(values) / len(values)",
                    "    if not values:\n        return 0.0\n    return sum(values) / len(values)")
TESTS = '''import unittest

import pytest

from calc.ops import add, mean


class TestOps(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mean_of_nothing_is_zero(self):
        self.assertEqual(mean([]), 0.0)

    def test_subtests(self):
        for v in ([1], [2, 4]):
            with self.subTest(v=v):
                self.assertEqual(mean(v), v[0] if len(v) == 1 else 3)


def test_plain_mean_empty():
    assert mean([]) == 0.0


@pytest.mark.parametrize("xs,want", [([1, 2], 1.5), ([], 0.0)])
def test_param(xs, want):
    assert mean(xs) == want
'''
F2P = ["tests/test_ops.py::TestOps::test_mean_of_nothing_is_zero", "tests/test_ops.py::test_plain_mean_empty",
       "tests/test_ops.py::test_param[xs1-0.0]"]
P2P = ["tests/test_ops.py::TestOps::test_add", "tests/test_ops.py::TestOps::test_subtests",
       "tests/test_ops.py::test_param[xs0-1.5]"]
PYPROJECT = b'[project]\nname = "calc"\nversion = "0.1"\n'


@pytest.fixture(scope="module")
def env_root(tmp_path_factory):
    return codeenv.install(codeenv.EnvSpec("python"), tmp_path_factory.mktemp("envs"))


def make_repo(home: Path, ops: str = OPS) -> Path:
    repo = home / "calc"
    if repo.exists():
        shutil.rmtree(repo)
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(ops)
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "test_ops.py").write_text("# the tests as they were before the fix\n")
    (repo / "pyproject.toml").write_bytes(PYPROJECT)
    return repo


def run_sealed(tmp: Path, repo: Path, env_root: Path, *, tests: str = TESTS, base: list[str] | None = None,
               modules=("tests/test_ops.py",), extra_files: dict | None = None) -> dict:
    work = tmp / f"work-{os.urandom(4).hex()}"
    work.mkdir()
    for name in ("sealed.py", "sealed_child.py"):
        shutil.copy(Path(sealed.__file__).with_name(name), work / name)
    files = {"tests/test_ops.py": tests.encode(), "tests/__init__.py": b"", "pyproject.toml": PYPROJECT,
             **(extra_files or {})}
    payload = {"files": {p: {"b64": base64.b64encode(b).decode(), "exec": False} for p, b in files.items()},
               "prune": ["conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"],
               "modules": list(modules), "site_dirs": [str(env_root / "site"), str(env_root / "runner")],
               "runner_names": codeenv.runner_top_level(), "test_files": sorted(files), "timeout_s": 120,
               "per_test_s": 20, "memory": codeenv.TEST_MEMORY_BYTES, "python": PYTHON,
               "base": base if base is not None else ["calc/", "calc/__init__.py", "calc/ops.py", "tests/",
                                                      "tests/__init__.py", "tests/test_ops.py", "pyproject.toml"]}
    (work / "payload.json").write_text(json.dumps(payload))
    proc = subprocess.run([PYTHON, "-I", "-S", "-B", str(work / "sealed.py"), str(work / "payload.json"), str(repo)],
                          capture_output=True, text=True, timeout=300, env={"PATH": os.environ["PATH"],
                                                                           "HOME": str(repo.parent)})
    data = (work / "result.json").read_bytes()
    assert proc.stdout.strip() == f"{sealed.MARK} {__import__('hashlib').sha256(data).hexdigest()}", proc.stderr
    return json.loads(data)


def passed(result: dict, ids: list[str]) -> list[str]:
    return [t for t in ids if result["outcomes"].get(t) == "passed"]


def test_the_fix_passes_and_the_bug_fails(tmp_path, env_root):
    fixed = run_sealed(tmp_path, make_repo(tmp_path, FIXED), env_root)
    assert passed(fixed, F2P + P2P) == F2P + P2P and fixed["notes"] == [], fixed
    buggy = run_sealed(tmp_path, make_repo(tmp_path), env_root)
    assert passed(buggy, F2P) == [] and passed(buggy, P2P) == P2P
    assert "ZeroDivisionError" in buggy["messages"][F2P[0]]


ATTACKS = dict(verifier_probes.probes("calc", ["calc/ops.py"], F2P + P2P))


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attack_on_the_verifier_passes_no_failing_test(name, tmp_path, env_root):
    """Each verifier probe, in the agent's phase on the unfixed repository: no FAIL_TO_PASS test passes (on
    main's verifier, the report patches, the plug-in, the shadows, the compiled files and the report tampering
    each passed all of them, and the exits were grader errors)."""
    repo = make_repo(tmp_path)
    r = subprocess.run(["bash", "-c", ATTACKS[name]], capture_output=True, text=True, timeout=120,
                       env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    result = run_sealed(tmp_path, repo, env_root)
    assert passed(result, F2P) == [], (name, result)


def test_a_tampering_test_fails_alone_and_the_module_goes_on(tmp_path, env_root):
    """Walking gc, opening the process's memory through a link, starting a process, setting a trace function,
    loading ctypes from the repository's code: each ends its process with a signed `tamper` record; the runner
    fails that test and runs the rest in a fresh process."""
    repo = make_repo(tmp_path, FIXED)
    os.symlink("/proc/self/mem", repo / "calc" / "data.bin")
    tests = TESTS + '''

def test_gc():
    import gc
    gc.get_objects()


def test_memory_through_a_link():
    open("calc/data.bin", "rb")


def test_process():
    import subprocess
    subprocess.run(["true"])


def test_trace():
    import sys
    sys.settrace(lambda *a: None)


def test_ctypes():
    import ctypes
    ctypes.string_at(id(ctypes), 8)


def test_after_them_all():
    assert mean([2]) == 2
'''
    result = run_sealed(tmp_path, repo, env_root, tests=tests)
    out, msg = result["outcomes"], result["messages"]
    assert passed(result, F2P + P2P + ["tests/test_ops.py::test_after_them_all"]) == \
        F2P + P2P + ["tests/test_ops.py::test_after_them_all"]
    for name, why in (("test_gc", "gc.get_objects"), ("test_memory_through_a_link", "memory"),
                      ("test_process", "subprocess.Popen"), ("test_trace", "sys.settrace"),
                      ("test_ctypes", "import ctypes")):
        assert out[f"tests/test_ops.py::{name}"] == "failed" and why in msg[f"tests/test_ops.py::{name}"], name


@pytest.mark.parametrize("swap,rebind,why", [
    (True, False, "sys._getframe from the repository's code"),
    (False, True, "no longer binds its mean")])
def test_swapping_a_test_function_or_rebinding_what_a_test_module_imported_passes_nothing(
        swap, rebind, why, tmp_path, env_root):
    """The repository's code, run by the first test, gives a later test another genuine test of the same name
    (another class's, found through the frames: the repository's code may not hold a frame), or rebinds the name a
    test module imported to a function that returns what the tests want (the test module's bindings changed)."""
    attack = OPS + f'''

import sys as _sys


def _attack():
    if {rebind}:
        _sys.modules["tests.test_ops"].mean = lambda values: 0.0
        return
    f = _sys._getframe()
    while f is not None:
        item = f.f_locals.get("item")
        if item is not None and hasattr(item, "session"):
            break
        f = f.f_back
    if f is None:
        return
    items = item.session.items
    donor = next(i for i in items if i.nodeid.endswith("TestA::test_x"))
    for i in items:
        if {swap} and i.nodeid.endswith("TestB::test_x"):
            i.obj = getattr(donor.obj, "__wrapped__", donor.obj)


_add = add


def add(a, b):
    _attack()
    return _add(a, b)
'''
    tests = """import unittest

from calc.ops import add, mean


class TestA(unittest.TestCase):
    def test_x(self):
        self.assertEqual(add(1, 1), 2)


class TestB(unittest.TestCase):
    def test_x(self):
        self.assertEqual(mean([]), 0.0)


def test_rebound():
    assert mean([]) == 0.0
"""
    result = run_sealed(tmp_path, make_repo(tmp_path, attack), env_root, tests=tests)
    assert result["outcomes"]["tests/test_ops.py::TestB::test_x"] != "passed"
    assert result["outcomes"]["tests/test_ops.py::test_rebound"] != "passed", result
    assert any(why in m for m in result["messages"].values()), result["messages"]


def test_a_shadowing_file_counts_only_when_it_was_there_at_the_base_commit(tmp_path, env_root):
    repo = make_repo(tmp_path, FIXED)
    (repo / "colorsys.py").write_text("MARK = 'the repository'\n")
    tests = "def test_which():\n    import colorsys\n    assert getattr(colorsys, 'MARK', None) == 'the repository'\n"
    pinned = run_sealed(tmp_path, repo, env_root, tests=tests)
    assert pinned["outcomes"] == {"tests/test_ops.py::test_which": "failed"}     # the standard library's
    kept = run_sealed(tmp_path, repo, env_root, tests=tests,
                      base=["colorsys.py", "calc/", "calc/__init__.py", "calc/ops.py", "tests/", "tests/test_ops.py"])
    assert kept["outcomes"] == {"tests/test_ops.py::test_which": "passed"}       # the project's own backport


def test_a_stream_is_trusted_only_as_far_as_it_is_signed():
    import hashlib
    import hmac

    key = os.urandom(32)

    def line(seq, *fields, k=key):
        text = repr((seq, *fields)).encode()
        return text + b"\t" + hmac.new(k, text, hashlib.sha256).hexdigest().encode()
    good = sealed.Stream(key, [line(0, "begin", "t"), line(1, "done", "t")])
    assert good.records == [("begin", "t"), ("done", "t")] and not good.broken
    assert "signature" in sealed.Stream(key, [line(0, "begin", "t"), line(1, "end", "0", k=b"x")]).broken
    assert "sequence" in sealed.Stream(key, [line(0, "begin", "t"), line(0, "begin", "t")]).broken
    assert sealed.junit_id("t.py::A::B::test_x[a::b]") == "t.py::A.B::test_x[a::b]"
    assert sealed.judge([("setup", "passed", False, ""), ("call", "passed", False, ""),
                         ("teardown", "passed", False, "")], ["raised"])[0] == "failed"
    assert sealed.judge([("setup", "passed", False, ""), ("call", "passed", True, ""),
                         ("teardown", "passed", False, "")], ["ok"])[0] == "skipped"


# --- a whole task in the local sandbox --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_task(tmp_path_factory):
    from core.config import DatasetConfig
    from environments.sandbox import LocalSandbox
    from taskmine import flow
    from tests.task_builders.test_code_change import DS, write_repo
    from warehouse.store import Store

    root = tmp_path_factory.mktemp("local-code")
    write_repo(root / "exports")
    # the repository's deliberately flaky test counts its runs in /tmp/flaky-counter: in a container that file
    # starts absent; here it is the host's and outlives the session, so which runs fail would depend on what ran
    # before. Start it as a container does.
    Path("/tmp/flaky-counter").unlink(missing_ok=True)
    store = Store(root / "home")
    config = DatasetConfig(ner_model="", families=("code_change",))
    ctx = flow.context(store, DS, root / "exports" / DS, config=config, run_id="t")
    flow.prepare(ctx)
    flow.run(ctx, "work_items")
    flow.run(flow.context(store, DS), "world")
    flow.run(flow.context(store, DS, config=config, sandbox=LocalSandbox()), "tasks")
    # the fix of the empty mean (the repository's one real fix; test_code_change holds that nothing else is a task)
    (task,) = [t for t in store.read("tasks", DS)
               if any("test_mean_of_nothing_is_zero" in n for n in t.reference["code"]["FAIL_TO_PASS"])]
    return task, store.worlds(DS)


def test_every_verifier_probe_scores_zero_in_the_local_sandbox(local_task):
    from environments.sandbox import LocalSandbox
    from graders import replay

    task, worlds = local_task
    verdict = replay.validate(task, worlds, LocalSandbox(), repeats=1)
    scores = {v.run_kind: v.score for v in verdict.validations}
    assert verdict.valid, verdict.reason
    assert scores["oracle"] == 1.0 and scores["null"] == 0.0
    names = {k[6:] for k in scores if k.startswith("probe:")}
    assert set(dict(verifier_probes.probes("x", ["a.py"], ["t.py::t"]))) <= names
    assert all(s == 0.0 for k, s in scores.items() if k.startswith("probe:")), scores


EQUAL_TO_ANYTHING = OPS + '''

class _Any:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__


_mean = mean


def mean(values):
    return _Any()
'''

MOCK_ANY = OPS + '''

import unittest.mock


def mean(values):
    return unittest.mock.ANY
'''

SOURCE_LINE = OPS + '''

import ast, linecache, sys

_mean = mean


def _peek():
    f = sys._getframe(2)
    src = linecache.getline(f.f_globals["__file__"], f.f_lineno).strip()
    node = ast.parse(src.removeprefix("assert ")).body[0].value
    if isinstance(node, ast.Compare):
        return eval(compile(ast.Expression(node.comparators[0]), "x", "eval"), f.f_globals, f.f_locals)
    return eval(compile(ast.Expression(node.args[1]), "x", "eval"), f.f_globals, f.f_locals)


def mean(values):
    try:
        return _mean(values)
    except ZeroDivisionError:
        return _peek()
'''

CONSTANTS = OPS + '''

import sys

_mean = mean


def mean(values):
    try:
        return _mean(values)
    except ZeroDivisionError:
        f = sys._getframe(1)
        return next(c for c in f.f_code.co_consts if isinstance(c, float))
'''

FRAME_LOCALS = OPS + '''

import sys

_mean = mean


def mean(values):
    try:
        return _mean(values)
    except ZeroDivisionError:
        f = sys._getframe(0).f_back
        loc = f.f_locals
        return loc.get("want", loc.get("expected", 0.0 if "want" in str(loc) else None))
'''


@pytest.mark.parametrize("name,ops", [("equal_to_anything", EQUAL_TO_ANYTHING), ("mock_any", MOCK_ANY),
                                      ("source_line", SOURCE_LINE), ("constants", CONSTANTS),
                                      ("frame_locals", FRAME_LOCALS)])
def test_an_answer_equal_to_anything_or_read_from_the_test_passes_nothing(name, ops, tmp_path, env_root):
    """The code under test returns an object equal to anything (its own class, mock.ANY), or reads what the test
    expects from the test at run time (the caller's source line through linecache, its code's constants, its
    frame's locals): on main's runner each passed failing tests; now the equality fails and holding a frame or
    reading a test file from the repository's code is tampering."""
    result = run_sealed(tmp_path, make_repo(tmp_path, ops), env_root)
    assert passed(result, F2P) == [], (name, result)
    assert passed(result, ["tests/test_ops.py::TestOps::test_add"]) == ["tests/test_ops.py::TestOps::test_add"] or \
        name in ("equal_to_anything", "mock_any")


def test_equality_and_the_tests_own_frames_still_work_for_honest_code(tmp_path, env_root):
    """What the new checks must not refuse: the fixed code, namedtuples and logging from the repository's code,
    pytest.approx, and a test reading its own frame and file."""
    ops = FIXED + '''

import collections
import logging

Point = collections.namedtuple("Point", "x y")


def noisy():
    logging.getLogger("calc").warning("careful")
    return Point(1, 2)
'''
    tests = TESTS + '''

def test_honest_extras():
    import inspect
    import sys
    from calc.ops import noisy
    assert noisy() == (1, 2) and noisy() != (2, 1)
    assert mean([1, 2]) == pytest.approx(1.5)
    assert sys._getframe().f_code.co_name == "test_honest_extras"
    assert "test_honest_extras" in open(inspect.getsourcefile(sys._getframe().f_code)).read()
'''
    result = run_sealed(tmp_path, make_repo(tmp_path, ops), env_root, tests=tests)
    ids = F2P + P2P + ["tests/test_ops.py::test_honest_extras"]
    assert passed(result, ids) == ids, result


REAL_BUNDLE = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "real" / "git-more-itertools" / \
    "more-itertools.bundle"


@pytest.mark.real
@pytest.mark.skipif(not REAL_BUNDLE.exists(), reason=f"the real more-itertools history is not at {REAL_BUNDLE}")
def test_a_real_repository_whose_code_module_holds_doctests_runs_clean(tmp_path, env_root):
    """more-itertools as its code tasks run it: tests/test_more.py, with more_itertools/more.py a test file too
    (its doctests). The runner's equality rewrite and test-reading checks refused every test of it on the first try
    (a test module that no longer compiled, and the package importing its own module read as "the repository's
    code read a test file"): none of 145 candidates had a FAIL_TO_PASS test."""
    repo = tmp_path / "more-itertools"
    subprocess.run(["git", "clone", "-q", str(REAL_BUNDLE), str(repo)], check=True, capture_output=True)
    files = sorted(subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True, text=True,
                                  check=True).stdout.split())
    work = tmp_path / "work"
    work.mkdir()
    for name in ("sealed.py", "sealed_child.py"):
        shutil.copy(Path(sealed.__file__).with_name(name), work / name)
    payload = {"files": {}, "prune": ["conftest.py", "pytest.ini", "tox.ini", "setup.cfg"],
               "modules": ["tests/test_more.py"], "site_dirs": [str(env_root / "site"), str(env_root / "runner")],
               "runner_names": codeenv.runner_top_level(),
               "test_files": ["more_itertools/more.py", "tests/test_more.py"],
               "timeout_s": 600, "per_test_s": 20, "memory": codeenv.TEST_MEMORY_BYTES, "python": PYTHON,
               "base": files + sorted({f.rsplit("/", 1)[0] + "/" for f in files if "/" in f})}
    (work / "payload.json").write_text(json.dumps(payload))
    proc = subprocess.run([PYTHON, "-I", "-S", "-B", str(work / "sealed.py"), str(work / "payload.json"), str(repo)],
                          capture_output=True, text=True, timeout=900, env={"PATH": os.environ["PATH"],
                                                                           "HOME": str(tmp_path)})
    result = json.loads((work / "result.json").read_bytes())
    outcomes = result["outcomes"]
    assert len(outcomes) > 300, (proc.stderr[-2000:], result.get("notes"))
    bad = {t: result["messages"].get(t, "")[:200] for t, o in outcomes.items() if o != "passed"}
    assert not any("tampering" in m or "line range" in m for m in bad.values()), bad
    assert len(bad) < 0.02 * len(outcomes), bad
