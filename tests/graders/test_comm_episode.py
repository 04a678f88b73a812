"""One episode per communication family in Docker: the oracle, replayed through the `company` CLI in the
task's container, scores 1.0, doing nothing 0; a question to the requester through the CLI is answered in the
thread ("No further information." without a model) and is no answer of its own."""

from __future__ import annotations

import pytest

from core.config import DatasetConfig
from graders import replay
from taskmine import flow
from warehouse.store import Store

pytestmark = [pytest.mark.docker, pytest.mark.slow]
FAMILIES = ("email_reply", "chat_answer", "resolution_note")


@pytest.fixture(scope="module")
def tasks(sample_company, tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("episode") / "home")
    config = DatasetConfig(ner_model="", families=FAMILIES)
    ctx = flow.context(store, "acme", sample_company / "acme", config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items")
    flow.run(flow.context(store, "acme"), "world")
    flow.run(flow.context(store, "acme", config=config), "tasks")
    by_family = {}
    for t in store.read("tasks", "acme"):
        by_family.setdefault(t.family, t)
    return store, by_family


@pytest.mark.parametrize("family", FAMILIES)
def test_the_oracle_scores_one_through_the_company_cli_in_docker(docker_sandbox, tasks, family):
    store, by_family = tasks
    task = by_family[family]
    worlds = store.worlds("acme")
    oracle = replay.run_once(task, worlds, docker_sandbox, "oracle", replay.oracle_command(task))
    assert (oracle.sandbox, oracle.error_class, oracle.score) == ("docker", None, 1.0), oracle.message
    assert "graded deterministic" in oracle.message
    null = replay.run_once(task, worlds, docker_sandbox, "null", replay.NULL_COMMAND)
    assert null.score == 0.0


def test_a_question_to_the_requester_is_answered_in_the_thread(docker_sandbox, tasks):
    from environments.episode import Episode

    store, by_family = tasks
    task = by_family["email_reply"]
    mid = task.reference["request"]
    with Episode(store.worlds("acme"), task.world, docker_sandbox) as ep:
        asked = ep.exec(f"company mail reply {mid} --body 'Which version are you on?'")
        read = ep.exec(f"company mail read {mid}")
        actions = ep.actions
    assert asked.exit_code == 0 and "answered:\nNo further information." in asked.stdout
    assert task.world["requester"]["name"] in read.stdout
    assert [a.action.name() for a in actions] == ["mail_reply"]
