"""What must stop a run: a mostly unreadable export, a leak after anonymization, nothing valid to publish.

Each gate is a blocking asset check (or the publish step itself); a run it stops fails with one line that
says why (the run's `taskmine/error` tag, printed by `taskmine run`), and LATEST stays where it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from dagster import DagsterInstance, DefaultScheduleStatus

from core.config import DatasetConfig
from pipelines.assets import datasets
from pipelines.automation import daily_changed_datasets
from pipelines.definitions import defs
from graders.stages import nothing_valid
from pipelines.errors import ERROR_TAG
from publishing.stages import PublishRefused
from taskmine import flow
from warehouse.store import Store

GATES = {"quarantine_rate", "anonymized_leaks", "oracle_and_null", "splits_leakage_safe", "leak_audit"}


def test_the_gates_are_blocking_checks():
    graph = defs.resolve_asset_graph()
    blocking = {k.name for k in graph.asset_check_keys if graph.get_check_spec(k).blocking}
    assert blocking >= GATES


def _junk_dataset(root):
    ds = root / "exports" / "junk"
    (ds / "jira").mkdir(parents=True)
    for i in range(3):
        (ds / "jira" / f"ISSUE-{i}.json").write_text('{"key": "X-1", "fields": {"created": ')  # truncated
    (ds / "mail.mbox").write_bytes(b"From nobody\n\xff\xfe garbage without headers\n")
    return ds.parent


def _published(home, dataset, version="0.1.0-earlier"):
    """A version published by an earlier, good run: LATEST must still point at it afterwards."""
    pub = home / "published" / dataset
    (pub / version).mkdir(parents=True)
    (pub / version / "manifest.json").write_text(json.dumps({"tasks": 1}))
    (pub / "LATEST").write_text(version + "\n")
    return pub


def test_a_junk_export_stops_at_the_quarantine_check_and_keeps_latest(tmp_path):
    exports = _junk_dataset(tmp_path)
    home = tmp_path / "home"
    pub = _published(home, "junk")
    env = {**os.environ, "TASKMINE_HOME": str(home)}
    env.pop("DAGSTER_HOME", None)
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", "--exports", str(exports), "--sandbox", "local"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "check quarantine_rate" in r.stdout and "FAILED" in r.stdout
    assert "identities" not in r.stdout.split("check quarantine_rate")[1]   # nothing after the gate ran
    error = [line for line in r.stderr.splitlines() if line.startswith("taskmine: error:")]
    assert len(error) == 1 and "could not be read, over max_quarantine_rate 0.2" in error[0], r.stderr
    assert "Traceback" not in r.stderr
    assert (pub / "LATEST").read_text().strip() == "0.1.0-earlier"
    assert sorted(p.name for p in pub.iterdir()) == ["0.1.0-earlier", "LATEST"]


def _run(dataset: str):
    with DagsterInstance.get() as instance:  # disposed: its state must not outlive the test
        if not instance.has_dynamic_partition(datasets.name, dataset):
            instance.add_dynamic_partitions(datasets.name, [dataset])
        result = defs.resolve_job_def("taskmine_job").execute_in_process(
            instance=instance, partition_key=dataset, raise_on_error=False)
        return result, instance.get_run_by_id(result.run_id)


@pytest.mark.slow
def test_a_leak_after_anonymization_stops_the_run_there(taskmine_env, sample_company, monkeypatch, tmp_path):
    """An anonymizer that lets real names through (here: one that returns events unchanged) must stop the
    run at the anonymized_leaks check, before a single task is built: every record with a name is withheld, far
    more than max_withheld_rate allows."""
    import shutil

    from privacy.anonymize import Anonymizer

    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    (exports / "acme" / "taskmine.toml").write_text('ner_model = ""\n')
    monkeypatch.setenv("TASKMINE_EXPORTS", str(exports))
    monkeypatch.setenv("TASKMINE_SANDBOX", "local")
    monkeypatch.setattr(Anonymizer, "event", lambda self, e: e)
    result, run = _run("acme")
    assert not result.success
    checks = {e.event_specific_data.check_name: e.event_specific_data for e in result.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    assert not checks["anonymized_leaks"].passed
    done = {e.asset_key.to_user_string() for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION"}
    assert done == {"raw_events", "identities", "anonymized_events"}
    assert Store(taskmine_env).count("tasks", "acme") == 0
    reason = run.tags[ERROR_TAG]
    assert "withheld because the leak audit still found personal data in them" in reason, reason
    assert "over max_withheld_rate 0.02" in reason and "name" in reason and "\n" not in reason, reason
    metadata = checks["anonymized_leaks"].metadata
    assert metadata["withheld"].value > 0 and metadata["limit"].value == 0.02


def test_a_little_residue_is_withheld_and_the_run_goes_on(taskmine_env, sample_company, monkeypatch, tmp_path):
    """One record the audit still refuses is withheld: the anonymized_leaks check passes and says so in its
    metadata, and the stages after it run."""
    import shutil

    from dagster import AssetKey

    from privacy.anonymize import Anonymizer

    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    # one process (workers = 1): the planted record below is chosen by state of this process, which forked
    # workers would each have a copy of (each would plant one)
    (exports / "acme" / "taskmine.toml").write_text('ner_model = ""\nworkers = 1\n')
    monkeypatch.setenv("TASKMINE_EXPORTS", str(exports))
    monkeypatch.setenv("TASKMINE_SANDBOX", "local")
    real = Anonymizer.event
    planted = []

    def event(self, e):
        out = real(self, e)
        if not planted and e.kind == "comment":
            planted.append(e.event_id)
            address = next(h.split(":", 1)[1] for h in sorted(self.person_of) if h.startswith("email:"))
            return out.model_copy(update={"body": f"{out.body}\nmail {address}"})   # a real address left in
        return out

    monkeypatch.setattr(Anonymizer, "event", event)
    with DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(datasets.name, ["acme"])
        result = defs.resolve_job_def("taskmine_job").execute_in_process(
            instance=instance, partition_key="acme", raise_on_error=False,
            asset_selection=[AssetKey(k) for k in ("raw_events", "identities", "anonymized_events", "links")])
    checks = {e.event_specific_data.check_name: e.event_specific_data for e in result.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    assert result.success and checks["anonymized_leaks"].passed
    done = {e.asset_key.to_user_string() for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION"}
    assert "links" in done
    metadata = checks["anonymized_leaks"].metadata
    assert metadata["withheld"].value == 1 and "event 1" in metadata["by_kind"].value
    assert [w.record_id for w in Store(taskmine_env).read("withheld", "acme")] == planted


def test_publish_refuses_when_nothing_is_valid(taskmine_env):
    store = Store(taskmine_env)
    refused = r"no task was built from it: no work item is a candidate of an enabled family \(see the funnel\); " \
              r"nothing published$"
    with pytest.raises(PublishRefused, match=refused):
        flow.run(flow.context(store, "empty", config=DatasetConfig()), "published_dataset")
    pub = _published(taskmine_env, "empty")
    with pytest.raises(PublishRefused, match="LATEST stays at 0.1.0-earlier"):
        flow.run(flow.context(store, "empty", config=DatasetConfig()), "published_dataset")
    assert (pub / "LATEST").read_text().strip() == "0.1.0-earlier"


def test_the_daily_schedule_runs_by_default_and_says_so():
    assert daily_changed_datasets.default_status == DefaultScheduleStatus.RUNNING
    assert "03:00" in daily_changed_datasets.description


def test_the_instance_has_no_community_modal_and_keeps_user_settings(tmp_path, monkeypatch):
    from core.paths import dagster_home

    monkeypatch.setenv("TASKMINE_HOME", str(tmp_path / "fresh"))
    d = dagster_home()
    instance = DagsterInstance.from_config(str(d))
    assert not instance.nux_enabled and not instance.telemetry_enabled
    monkeypatch.setenv("TASKMINE_HOME", str(tmp_path / "old"))
    (tmp_path / "old" / "dagster").mkdir(parents=True)
    (tmp_path / "old" / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    assert not DagsterInstance.from_config(str(dagster_home())).nux_enabled
    assert (tmp_path / "old" / "dagster" / "dagster.yaml").read_text().startswith("telemetry:\n  enabled: false\n")


def test_a_dataset_with_nothing_valid_says_why_in_one_line(taskmine_env):
    """A dataset whose every candidate was rejected (a chat whose answers have no fact to grade, without a model)
    or whose every task failed validation stops with one line that names the commonest reasons and their
    counts, not only where to look."""
    import datetime as dt

    from warehouse.schemas import Rejection, Task, Validation

    store = Store(taskmine_env)
    store.replace("rejections", "chat", [
        Rejection(dataset="chat", stage="candidates", family="chat_answer", subject_id=f"q{i}",
                  reason="too few gradable facts and no model for judge checks" if i < 5 else "no channel")
        for i in range(6)] + [Rejection(dataset="chat", stage="work_items", family="chat_answer", subject_id="w",
                                        reason="no reply")])
    why = nothing_valid(store, "chat")
    assert why == ("no task was built from it: all 6 candidates rejected (5 chat_answer: too few gradable facts and "
                   "no model for judge checks, 1 chat_answer: no channel; see the rejections table)")
    with pytest.raises(PublishRefused) as refused:
        flow.run(flow.context(store, "chat", config=DatasetConfig()), "published_dataset")
    assert str(refused.value) == f"chat: {why}; nothing published"

    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    tasks = [Task(task_id=f"t{i}", dataset="mail", family="email_reply", item_id=f"i{i}", prompt="p", cutoff=t0,
                  world={}, world_hash="w", reference={}, rubric={}) for i in range(3)]
    store.replace("tasks", "mail", tasks)
    runs = [Validation(validation_id=f"{t.task_id}{kind}", task_id=t.task_id, dataset="mail", run_kind=kind, attempt=0,
                       score=score, duration_s=0.1, sandbox="local")
            for t in tasks for kind, score in (("oracle", 1.0), ("null", 0.0),
                                               ("probe:listing_url", 0.75 if t.task_id != "t2" else 0.0))]
    runs = [r.model_copy(update={"score": 0.5}) if r.task_id == "t2" and r.run_kind == "oracle" else r for r in runs]
    store.replace("validations", "mail", runs)
    assert nothing_valid(store, "mail") == ("none of its 3 tasks passed validation (2 probe passes: listing_url "
                                                 "scored, 1 oracle scored; see the rejections table)")
    store.replace("validations", "mail", [r.model_copy(update={"score": 0.0}) if r.run_kind.startswith("probe")
                                          else r.model_copy(update={"score": 1.0}) if r.run_kind == "oracle" else r
                                          for r in runs])
    assert nothing_valid(store, "mail") is None
