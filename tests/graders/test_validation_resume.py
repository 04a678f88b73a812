"""A validation stage killed in the middle (kill -9) keeps every task it finished; the re-run does the rest."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from environments.sandbox import LocalSandbox
from taskmine import flow
from task_builders.config import DatasetConfig
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

flow.validations(Store(sys.argv[1]), "acme", DiesAtTask(), repeats=1)
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
    flow.prepare(store, "acme", sample_company / "acme", config)
    flow.work_items(store, "acme", config)
    flow.tasks(store, "acme", config)
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
    res = flow.validations(store, "acme", box, repeats=1)
    assert res.counts["validated_now"] == total - 5
    # then one baseline run per valid task (none ran before the kill: baselines follow every task's validation)
    assert box.runs == sum(per[5:]) + total and res.counts["baseline_runs_now"] == total
    assert res.counts["valid"] == total and res.counts["runs"] == sum(per) + total

    again = Counting()
    assert flow.validations(store, "acme", again, repeats=1).counts["validated_now"] == 0 and again.runs == 0


def test_tasks_validated_in_parallel_get_the_verdicts_of_one_at_a_time(built, tmp_path):
    store = built
    tasks = store.read("tasks", "acme")
    res = flow.validations(store, "acme", LocalSandbox(), repeats=1, parallel=3)
    assert res.counts["validated_now"] == len(tasks) and res.counts["valid"] == len(tasks)
    rows = store.read("validations", "acme")
    # every task's runs are stored once, whole (oracle, null, each probe), whichever thread finished it
    runs = [v for v in rows if not v.run_kind.startswith("baseline:")]  # baselines follow, once per valid task
    assert sorted(v.task_id for v in runs) == sorted(
        t.task_id for t in tasks for _ in range(2 + len(t.reference["probes"])
                                                + sum(1 for a in t.reference.get("alternatives") or [] if a["calls"])))
    assert flow.validations(store, "acme", Counting(), repeats=1, parallel=3).counts["validated_now"] == 0
