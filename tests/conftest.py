"""Fixtures shared by every test package.

`docker_sandbox` is the one way tests get a real Docker sandbox: it skips when no daemon answers, except
on CI (TASKMINE_REQUIRE_DOCKER=1) where a missing daemon is a failure, so Docker tests can never pass by
being silently skipped. It builds (or reuses) the base image once per session, and removes the task images
it built at the end.
"""

from __future__ import annotations

import os
import re

import pytest


@pytest.fixture(scope="session")
def docker_sandbox():
    from environments.docker_cli import daemon_answers
    from environments.sandbox import DockerSandbox

    if not daemon_answers(timeout=5):
        message = "no Docker daemon answers (start one with scripts/ci-docker.sh)"
        if os.environ.get("TASKMINE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"{message}, and TASKMINE_REQUIRE_DOCKER=1 requires it")
        pytest.skip(message)
    import uuid

    from environments.images import prune_task_images

    label = f"pytest-{uuid.uuid4().hex[:12]}"
    sandbox = DockerSandbox(image_labels={"taskmine.home": label})
    _ = sandbox.base_image  # build or reuse the base image once, outside any single test's timing
    yield sandbox
    prune_task_images(label, set())  # the task images this test session built, and nothing else


@pytest.fixture(scope="session")
def second_docker_host(docker_sandbox):
    """A second Docker daemon on this machine, for the sandbox pool: a private dockerd (bench.dockerd: its own
    data root, exec root, pid file and socket, no bridge) with the base image loaded into it by `docker save |
    docker load`; stopped and deleted, with every container and image in it, at the end of the session. It needs
    root: without it (or without dockerd) the test fails under TASKMINE_REQUIRE_DOCKER=1 and skips otherwise."""
    from bench.dockerd import private_daemon
    from environments.docker_cli import SandboxError, copy_image

    daemon = private_daemon()
    try:
        url = daemon.__enter__()
    except SandboxError as exc:
        if os.environ.get("TASKMINE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"{exc}, and TASKMINE_REQUIRE_DOCKER=1 requires a second daemon")
        pytest.skip(str(exc))
    try:
        copy_image(docker_sandbox.base_image, None, url)
        yield url
    finally:
        daemon.__exit__(None, None, None)


@pytest.fixture(scope="session")
def sample_company(tmp_path_factory):
    """The sample company at scale 1 (seed 0), written once per session; read-only for tests."""
    from sample.company import write_sample

    out = tmp_path_factory.mktemp("sample") / "exports"
    write_sample(out, seed=0, scale=1, dataset="acme")
    return out


@pytest.fixture
def taskmine_env(tmp_path, monkeypatch):
    """A private TASKMINE_HOME and DAGSTER_HOME for one test."""
    home = tmp_path / "home"
    monkeypatch.setenv("TASKMINE_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    (tmp_path / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home


@pytest.fixture
def llm_standin():
    """A stand-in for a hosted LLM: a real OpenAI-compatible server on 127.0.0.1 (random port), scripted per
    test; `llm_standin.config(tmp_path)` is an LLMConfig pointed at it. How to script it: tests/llm/standin.py."""
    import sys
    from pathlib import Path

    here = str(Path(__file__).resolve().parent / "llm")
    if here not in sys.path:
        sys.path.insert(0, here)
    from standin import StandIn

    server = StandIn()
    yield server
    server.close()


# The test files that take longest, measured (`--durations`), started first when the suite runs over several workers
# (pyproject: `--dist loadfile --no-loadscope-reorder`): with the end-to-end module last, one worker would run it
# alone after the others had finished everything else.
LONGEST_FIRST = ("tests/test_end_to_end.py", "tests/test_cli.py", "tests/task_builders/test_code_change.py",
                 "tests/graders/test_validation_resume.py", "tests/pipelines/test_distributed.py",
                 "tests/test_withheld.py", "tests/environments/test_pool.py", "tests/task_builders/test_salt.py",
                 "tests/publishing/test_published_layout.py", "tests/graders/test_difficulty.py")


def pytest_collection_modifyitems(config, items):
    rank = {path: k for k, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))   # stable: the rest keep order


_TEST_MODULE = re.compile(r"(^|\.)(test_\w+|conftest)$|^tests\.")


@pytest.fixture(autouse=True)
def _plug_ins_registered_by_a_test_leave_with_it():
    """A test that registers a check/family/... of its own (a decorator in its body) takes it away again, so the
    registries the next test sees hold the project's plug-ins and nothing a test module left behind."""
    from core.registry import REGISTRIES

    before = {kind: set(reg._items) for kind, reg in REGISTRIES.items()}
    yield
    for kind, reg in REGISTRIES.items():
        for name in set(reg._items) - before.get(kind, set()):
            if _TEST_MODULE.search(getattr(reg._items[name].obj, "__module__", "") or ""):
                del reg._items[name]
