"""A validation stage killed in the middle (kill -9) keeps every task it finished; the re-run does the rest."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from core.config import DatasetConfig
from environments.sandbox import LocalSandbox
from taskmine import flow
from warehouse.store import Store

DIES_AT_TASK = """
import os, signal, sys
from environments.sandbox import LocalSandbox
from taskmine import flow
from warehouse.store import Store

class DiesAtTask(LocalSandbox):
    runs = 0
    def session(self, *args, **kwargs):
        DiesAtTask.runs += 1
        if DiesAtTask.runs > int(sys.argv[2]):   # the sessions of the first tasks (oracle, null, probes)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().session(*args, **kwargs)

flow.run(flow.context(Store(sys.argv[1]), "acme", sandbox=DiesAtTask(), repeats=1), "validations")
"""


class Counting(LocalSandbox):
    def __init__(self):
        super().__init__()
        self.runs = 0

    def session(self, *args, **kwargs):
        self.runs += 1
        return super().session(*args, **kwargs)


@pytest.fixture
def built(tmp_path, sample_company):
    store = Store(tmp_path / "home")
    # families with one baseline each (the counts below); triage alone leaves three tasks at this scale, once the
    # constant probes drop those the commonest values solve
    config = DatasetConfig(ner_model="", families=("ticket_triage", "email_reply", "chat_answer", "resolution_note"))
    ctx = flow.context(store, "acme", sample_company / "acme", config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items", "tasks")
    return store


def test_a_killed_validation_keeps_finished_tasks_and_the_rerun_does_only_the_rest(built):
    store = built
    tasks = store.read("tasks", "acme")
    total = len(tasks)
    assert total >= 6
    # repeats=1: oracle, null, each probe and each valid alternative once
    per = [2 + len(t.reference["probes"]) + len(t.reference.get("alternatives") or []) for t in tasks]
    proc = subprocess.run([sys.executable, "-c", DIES_AT_TASK, str(store.home), str(sum(per[:5]))],
                          capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    kept = {v.task_id for v in store.read("validations", "acme")}
    assert len(kept) == 5   # the five finished tasks survived the kill

    box = Counting()
    res = flow.run(flow.context(store, "acme", sandbox=box, repeats=1), "validations")
    assert res.counts["validated_now"] == total - 5
    # then one baseline run per valid task (none ran before the kill: baselines follow every task's validation)
    assert box.runs == sum(per[5:]) + total and res.counts["baseline_runs_now"] == total
    assert res.counts["valid"] == total and res.counts["runs"] == sum(per) + total

    again = Counting()
    res = flow.run(flow.context(store, "acme", sandbox=again, repeats=1), "validations")
    assert res.counts["validated_now"] == 0 and again.runs == 0


def test_tasks_validated_in_parallel_get_the_verdicts_of_one_at_a_time(built, tmp_path):
    store = built
    tasks = store.read("tasks", "acme")
    ctx = flow.context(store, "acme", config=DatasetConfig(validate_parallel=3), sandbox=LocalSandbox(), repeats=1)
    res = flow.run(ctx, "validations")
    assert res.counts["validated_now"] == len(tasks) and res.counts["valid"] == len(tasks)
    rows = store.read("validations", "acme")
    # every task's runs are stored once, whole (oracle, null, each probe), whichever thread finished it
    runs = [v for v in rows if not v.run_kind.startswith("baseline:")]  # baselines follow, once per valid task
    assert sorted(v.task_id for v in runs) == sorted(
        t.task_id for t in tasks for _ in range(2 + len(t.reference["probes"])
                                                + sum(1 for a in t.reference.get("alternatives") or [] if a["calls"])))
    assert flow.run(ctx.replace(sandbox=Counting()), "validations").counts["validated_now"] == 0


def test_a_task_with_one_run_lost_to_the_infrastructure_is_replayed_whole(built):
    """One null run lost to the infrastructure among a task's dozen runs: the re-run replays that task (before, the
    task counted as done because its other runs were fine, so the gate failed on it forever)."""
    store = built
    flow.run(flow.context(store, "acme", sandbox=LocalSandbox(), repeats=1), "validations")
    rows = store.read("validations", "acme")
    victim = rows[0].task_id
    lost = [v.model_copy(update={"score": None, "checks": [], "error_class": "infra", "message": "no result"})
            if v.task_id == victim and v.run_kind == "null" else v for v in rows]
    store.replace("validations", "acme", lost)

    box = Counting()
    res = flow.run(flow.context(store, "acme", sandbox=box, repeats=1), "validations")
    assert res.counts["validated_now"] == 1
    assert not [v for v in store.read("validations", "acme") if v.error_class in ("infra", "timeout")]
    assert res.counts["infra_errors"] == 0
