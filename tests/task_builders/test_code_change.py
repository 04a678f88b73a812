"""Code-change tasks end to end on a small repository written here: candidates, the test sets measured in
Docker (with a deliberately flaky test), the agent's view without future objects or the hidden tests, the
verifier phase, oracle/null/probes, and hostile agents."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from core.config import DatasetConfig
from environments.episode import Episode
from environments.gitworld import pack_view, verify_view
from graders import replay, verifier
from taskmine import flow
from warehouse.store import Store

pytestmark = pytest.mark.docker

DS = "codeds"
OPS_BUGGY = '''"""Small numeric helpers."""


def add(a, b):
    return a + b


def mean(values):
    return sum(values) / len(values)
'''
OPS_FIXED = OPS_BUGGY.replace("    return sum(values) / len(values)",
                              "    if not values:\n        return 0.0\n    return sum(values) / len(values)")
TESTS_BEFORE = '''import os
import unittest

from calc.ops import add, mean


class TestOps(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_flaky(self):
        path = "/tmp/flaky-counter"
        n = int(open(path).read()) + 1 if os.path.exists(path) else 1
        open(path, "w").write(str(n))
        self.assertNotEqual(n % 3, 0)      # runs alternate before/after the fix: each phase sees a failure
'''
TESTS_AFTER = TESTS_BEFORE + '''
    def test_mean_of_nothing_is_zero(self):
        self.assertEqual(mean([]), 0.0)

    def test_mean_values(self):
        self.assertEqual(mean([1, 2, 3]), 2)
'''
HIDDEN_NAME = "test_mean_of_nothing_is_zero"
INIT = "calc/__init__.py"
VERIFIER_PROBES = ("report_patch", "report_patch_unittest", "report_plugin", "stdlib_shadow_root",
                   "stdlib_shadow_package", "exit_at_import", "sys_exit_at_import", "startup_hooks", "pyc_planting",
                   "report_tamper", "equal_to_anything", "test_peeking", "runner_introspection")


def _commit(repo: Path, files: dict[str, str], message: str, day: int) -> None:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "Dev One", "GIT_AUTHOR_EMAIL": "dev.one@example.com",
           "GIT_COMMITTER_NAME": "Dev One", "GIT_COMMITTER_EMAIL": "dev.one@example.com",
           "GIT_AUTHOR_DATE": f"2021-03-{day:02d}T10:00:00+00:00",
           "GIT_COMMITTER_DATE": f"2021-03-{day:02d}T10:00:00+00:00"}
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", message], check=True, env=env)


def write_repo(root: Path) -> Path:
    repo = root / DS / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    _commit(repo, {"pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n\n[tool.pytest.ini_options]\n'
                                     'testpaths = ["tests"]\n',
                   "calc/__init__.py": "", "calc/ops.py": OPS_BUGGY, "tests/__init__.py": "",
                   "tests/test_ops.py": TESTS_BEFORE}, "Start the calc package", 1)
    _commit(repo, {"calc/ops.py": OPS_FIXED, "tests/test_ops.py": TESTS_AFTER},
            "Fix #7: mean of an empty list", 3)
    # a "fix" whose test already passes before it: no FAIL_TO_PASS test
    _commit(repo, {"calc/ops.py": OPS_FIXED.replace("Small numeric", "Tiny numeric"),
                   "tests/test_ops.py": TESTS_AFTER + "\n    def test_add_more(self):\n"
                                                      "        self.assertEqual(add(1, 1), 2)\n"},
            "Fix docstring wording and cover add", 5)
    _commit(repo, {"README.md": "calc\n"}, "Add a readme", 7)
    return repo


@pytest.fixture(scope="module")
def built(tmp_path_factory, docker_sandbox):
    root = tmp_path_factory.mktemp("code")
    write_repo(root / "exports")
    store = Store(root / "home")
    config = DatasetConfig(ner_model="", families=("code_change",))
    ctx = flow.context(store, DS, root / "exports" / DS, config=config, run_id="t")
    flow.prepare(ctx)
    flow.run(ctx, "work_items")
    flow.run(flow.context(store, DS), "world")
    flow.run(flow.context(store, DS, config=config, sandbox=docker_sandbox), "tasks")
    tasks = store.read("tasks", DS)
    yield {"store": store, "tasks": tasks, "sandbox": docker_sandbox, "worlds": store.worlds(DS),
           "rejections": [r for r in store.read("rejections", DS) if r.stage == "candidates"]}
    from environments.codeenv import prune_env_images

    prune_env_images(docker_sandbox.image_labels["taskmine.home"], set())


def the_task(built):
    (task,) = built["tasks"]
    return task


def test_candidates_to_tasks_with_reasons(built):
    task = the_task(built)
    code = task.reference["code"]
    assert code["FAIL_TO_PASS"] == [f"tests/test_ops.py::TestOps::{HIDDEN_NAME}"]
    # the deliberately flaky test alternates between runs: it is in neither list
    assert code["flaky"] == ["tests/test_ops.py::TestOps::test_flaky"]
    assert code["PASS_TO_PASS"] == ["tests/test_ops.py::TestOps::test_add",
                                    "tests/test_ops.py::TestOps::test_mean_values"]
    assert code["statement_source"] == "template" and HIDDEN_NAME in task.prompt
    assert "if not values" not in task.prompt           # nothing of the patch
    reasons = {r.reason for r in built["rejections"]}
    assert "no FAIL_TO_PASS test" in reasons             # the docstring "fix" whose test passed before
    assert task.world["env"]["ecosystem"] == "python" and task.world["env"]["requirements"] == []
    assert task.reference["actions"] == [] and {p["name"] for p in task.reference["probes"]} == {
        "delete_tests", "edit_tests", "tests_pass", "runner_config", "runner_shadow", "hardcoded_returns",
        *VERIFIER_PROBES}


def test_no_future_object_and_no_hidden_test_in_the_agent_phase(built, tmp_path):
    task = the_task(built)
    code = task.reference["code"]
    git = task.world["git"]
    repo_dir = built["worlds"] / "git" / f"{code['repo']}.git"
    view = pack_view(tmp_path / "view", {code["repo"]: (repo_dir, git["refs"][code["repo"]],
                                                       git["heads"].get(code["repo"]))})
    later = subprocess.run(["git", "-C", str(built["worlds"] / "git" / f"{code['repo']}.git"), "rev-list", "--all"],
                           capture_output=True, text=True, check=True).stdout.split()
    newer = later[:later.index(code["fix_commit"]) + 1]       # the fix and everything after it
    assert len(newer) == 3
    assert verify_view(view, newer, [code["base_commit"]]) == []
    spec = verifier.spec_of(task)
    image = verifier.environment(spec, built["sandbox"], built["worlds"])
    with Episode(built["worlds"], task.world, built["sandbox"], image=image) as ep:
        repo = f"~/{code['repo']}"
        head = ep.exec(f"git -C {repo} rev-parse HEAD").stdout.strip()
        assert head == code["base_commit"]
        listed = ep.exec(f"git -C {repo} rev-list --all; git -C {repo} fsck --unreachable --no-reflogs 2>&1").stdout
        assert not any(sha in listed for sha in newer)
        for sha in newer:
            assert ep.exec(f"git -C {repo} cat-file -e {sha}").exit_code != 0
        # an agent that greps the whole file system for the hidden test finds nothing
        found = ep.exec(f"grep -rl {HIDDEN_NAME} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; "
                        f"git -C {repo} log --all -p | grep -c {HIDDEN_NAME}")
        assert found.stdout.split() == ["0"]


def test_oracle_one_null_zero_every_probe_zero(built):
    task = the_task(built)
    verdict = replay.validate(task, built["worlds"], built["sandbox"], repeats=3)
    assert verdict.valid, verdict.reason
    scores = {}
    for v in verdict.validations:
        scores.setdefault(v.run_kind, []).append(v.score)
    assert scores["oracle"] == [1.0, 1.0, 1.0] and scores["null"] == [0.0, 0.0, 0.0]
    probes = {k: s for k, s in scores.items() if k.startswith("probe:")}
    assert len(probes) == 6 + len(VERIFIER_PROBES) and all(s == [0.0] for s in probes.values()), probes


def test_the_verifier_kills_leftovers_and_restores_tests_and_config(built):
    task = the_task(built)
    slug = task.reference["code"]["repo"]
    # fixes nothing, leaves a process that keeps rewriting the tests, and plants a pass-everything conftest
    vandal = (f"cd ~/{slug} && printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef "
              "pytest_runtest_makereport(item, call):\\n    o = yield\\n    o.get_result().outcome = \"passed\"\\n' "
              "> conftest.py && (setsid sh -c 'while true; do echo \"def test_x(): pass\" > tests/test_ops.py; "
              "sleep 0.05; done' >/dev/null 2>&1 &) ; sleep 0.3")
    v = replay.run_once(task, built["worlds"], built["sandbox"], "agent", vandal)
    assert v.score == 0.0 and v.error_class is None, v.message
    # the real fix plus vandalised tests still passes: the verifier's copy of the tests is what runs
    fix = replay.oracle_command(task) + " && : > tests/test_ops.py && rm -f tests/__init__.py"
    v = replay.run_once(task, built["worlds"], built["sandbox"], "agent", fix)
    assert v.score == 1.0, v.checks


def test_half_a_fix_scores_the_fraction(built):
    task = the_task(built)
    slug = task.reference["code"]["repo"]
    # fixes the empty list, breaks a test that passed
    cmd = (f"cd ~/{slug} && python3 - <<'EOF'\nimport re\np = 'calc/ops.py'\ns = open(p).read()\n"
           "s = s.replace('return sum(values) / len(values)', 'return 0.0 if not values else 99')\n"
           "open(p, 'w').write(s)\nEOF")
    v = replay.run_once(task, built["worlds"], built["sandbox"], "agent", cmd)
    assert {c["id"]: c["score"] for c in v.checks} == {"resolved": 0.0, "fraction": 0.5}


def test_a_run_without_a_report_is_infra_only_when_the_oracle_has_none(built):
    task = the_task(built)
    # the verifier itself is broken (a dataset command writing broken XML): the oracle has no report either
    env = {**task.world["env"], "test_command": "echo '<testsuite><testcase' > $TASKMINE_JUNIT"}
    broken = task.model_copy(update={"world": {**task.world, "env": env}})
    v = replay.run_once(broken, built["worlds"], built["sandbox"], "agent", "true")
    assert v.score is None and v.error_class == "infra" and "well-formed" in v.message
    # the agent's code kills the runner: no report, but the oracle's run has one, so the agent scores 0
    slug = task.reference["code"]["repo"]
    code = "import os, signal, sys\nif '_pytest' in sys.modules:\n    os.kill(os.getppid(), signal.SIGKILL)\n"
    kill = f"cd ~/{slug} && python3 -c {shlex.quote(f'open({INIT!r}, {chr(39)}a{chr(39)}).write({code!r})')}"
    v = replay.run_once(task, built["worlds"], built["sandbox"], "agent", kill)
    assert v.score == 0.0 and v.error_class is None and "no test report" in json.dumps(v.checks), v


def test_prune_keeps_the_environments_current_tasks_name(built, tmp_path):
    from environments import codeenv
    from environments.docker_cli import image_id

    sandbox, task = built["sandbox"], the_task(built)
    labels = {"taskmine.home": sandbox.image_labels["taskmine.home"]}
    other = codeenv.EnvSpec("python", manifest={"why": "another dependency state"})      # no task names it
    tag, _, built_now = codeenv.ensure_image(other, sandbox.base_image, tmp_path / "envs", labels)
    assert built_now
    mine = codeenv.EnvSpec.from_json(task.world["env"])
    mine_tag, _, again = codeenv.ensure_image(mine, sandbox.base_image, built["worlds"] / "envs", labels)
    assert not again                                  # built once for every task that shares it
    removed = sandbox.prune({task.world_hash, task.world["env"]["key"]})
    assert tag in removed and image_id(tag) is None
    assert image_id(mine_tag) is not None


def test_the_sealed_verifier_runs_on_a_daemon_that_cannot_see_our_files(built, second_docker_host):
    """A remote Docker host (files="copy", tests/environments/test_pool.py): the environment image is built on
    that daemon, the git view copied in and the tool socket relayed; the oracle still scores 1.0 and the null 0
    through the sealed runner, and nothing of this machine is mounted into the container."""
    from environments.docker_cli import image_id
    from environments.sandbox import DockerSandbox

    task = the_task(built)
    remote = DockerSandbox(host=second_docker_host, files="copy", image_labels=built["sandbox"].image_labels)
    oracle = replay.run_once(task, built["worlds"], remote, "oracle", replay.oracle_command(task))
    assert (oracle.sandbox, oracle.error_class, oracle.score) == ("docker", None, 1.0), oracle.message
    assert image_id(oracle.image_digest or "", host=second_docker_host) is not None
    null = replay.run_once(task, built["worlds"], remote, "null", replay.NULL_COMMAND)
    assert (null.error_class, null.score) == (None, 0.0), null.message
