"""The command line as a user meets it: one-line errors, bad input quarantined, replay and audit."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from pathlib import Path

from warehouse.store import Store


# Set by contain_caches() in this process when an earlier test ran a Dagster job in-process: a user's shell has none.
CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "PYTORCH_KERNEL_CACHE_PATH", "MPLCONFIGDIR")


def taskmine(*args, home, check=False, **env_extra):
    env = {**{k: v for k, v in os.environ.items() if k not in CACHE_VARS}, "TASKMINE_HOME": str(home), **env_extra}
    env.pop("DAGSTER_HOME", None)
    # a guard against a hang, not a speed goal (those are `taskmine bench`): a whole run of the sample on a loaded
    # 2-core machine took more than 600 s
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, env=env,
                       timeout=1800)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def one_line_error(r):
    lines = [line for line in r.stderr.splitlines() if line.strip() and "Warning" not in line
             and not line.startswith("  spec =")]
    assert lines and lines[-1].startswith("taskmine: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[-1]


def test_help_has_examples(tmp_path):
    r = taskmine("--help", home=tmp_path, check=True)
    assert "taskmine run --exports" in r.stdout and "taskmine replay --task" in r.stdout


@pytest.mark.parametrize("args, needle", [
    (["run", "--exports", "/nonexistent/exports"], "no such folder"),
    (["sample", "--out", "x", "--scale", "0"], "--scale must be 1 or more"),
    (["replay", "--task", "ffff", "--agent", "oracle"], "no task id starts with"),
    (["audit"], "nothing published"),
    (["extractors", "check"], "needs a PATH"),
])
def test_bad_arguments_get_one_line(tmp_path, args, needle):
    r = taskmine(*args, home=tmp_path)
    assert r.returncode == 2
    assert needle in one_line_error(r)


@pytest.mark.parametrize("args", [["audit"], ["replay", "--task", "ab", "--agent", "null"]])
def test_a_home_that_does_not_exist_is_not_created(tmp_path, args):
    missing = tmp_path / "nowhere" / "home"
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", "--home", str(missing), *args], capture_output=True,
                       text=True, env={k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}, timeout=120)
    assert r.returncode == 2
    one_line_error(r)
    assert not (tmp_path / "nowhere").exists()


def test_bad_dataset_config_is_one_line(tmp_path):
    (tmp_path / "exports" / "acme").mkdir(parents=True)
    (tmp_path / "exports" / "acme" / "taskmine.toml").write_text("repeats = 0\nfamilies = ['nope']\n")
    r = taskmine("run", "--exports", str(tmp_path / "exports"), home=tmp_path / "home")
    assert r.returncode == 2
    assert "taskmine.toml" in one_line_error(r)


def test_folder_with_nothing_recognisable_fails_that_dataset_with_one_line(tmp_path):
    (tmp_path / "exports" / "empty").mkdir(parents=True)
    (tmp_path / "exports" / "empty" / "notes.txt").write_text("hello")
    r = taskmine("run", "--exports", str(tmp_path / "exports"), "--sandbox", "local", home=tmp_path / "home")
    assert r.returncode == 1
    failed = next(line for line in r.stdout.splitlines() if "FAILED raw_events" in line)
    assert " found; expected " in failed and "Traceback" not in r.stdout + r.stderr, r.stdout
    assert " found; expected " in one_line_error(r)   # the run's one-line reason, not "a stage failed"


@pytest.mark.slow
def test_run_with_bad_records_quarantines_them_and_loses_nothing(tmp_path, sample_company):
    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    jira = exports / "acme" / "jira"
    good = json.loads((jira / "CORE-1.json").read_text())
    (jira / "truncated.json").write_text((jira / "CORE-2.json").read_text()[:500])
    (jira / "not-json.json").write_text('{"key": "CORE-999", "fields": {"created": "2021-01-01T00:00:00.000+0000"}')
    nokey = {k: v for k, v in good.items() if k != "key"}
    (jira / "no-key.json").write_text(json.dumps(nokey))
    (jira / "dangling.json").symlink_to(tmp_path / "nowhere.json")  # an unreadable file
    (exports / "acme" / "not-a-repo").mkdir()
    (exports / "acme" / "not-a-repo" / ".git").write_text("gitdir: /nowhere\n")
    # what is tested is ingest losing nothing; the code tasks' minutes of validation add nothing to it
    (exports / "acme" / "taskmine.toml").write_text(
        'families = ["ticket_triage", "commit_link", "email_reply", "chat_answer", "resolution_note"]\n')
    home = tmp_path / "home"
    # a HOME and TMPDIR of their own: the run must leave nothing there (torch, matplotlib, Dagster caches)
    user_home, tmp = tmp_path / "user-home", tmp_path / "tmpdir"
    user_home.mkdir()
    tmp.mkdir()
    r = taskmine("run", "--exports", str(exports), "--sandbox", "local", home=home, HOME=str(user_home),
                 TMPDIR=str(tmp))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "published:" in r.stdout and "validated" in r.stdout
    assert re.search(r"withheld: none of \d+ records", r.stdout), r.stdout   # the leak audit's residue, counted
    assert not [str(p) for p in (*user_home.rglob("*"), *tmp.rglob("*"))]
    store = Store(home)
    quarantined = store.read("quarantine", "acme")
    files = {q.file for q in quarantined}
    assert {"jira/truncated.json", "jira/not-json.json", "jira/no-key.json", "jira/dangling.json"} <= files, files
    assert all(q.message and q.error_class for q in quarantined)
    issues = {e.native_id for e in store.read("events", "acme") if e.kind == "issue_created"}
    truth = json.loads((exports / ".truth" / "acme.json").read_text())
    assert issues == {i["key"] for i in truth["issues"]}  # every good issue is still there

    task = next(t for t in store.read("tasks", "acme") if t.family == "commit_link")
    oracle = taskmine("replay", "--task", task.task_id[:10], "--agent", "oracle", "--sandbox", "local", home=home)
    assert oracle.returncode == 0 and "score 1.000" in oracle.stdout, oracle.stdout + oracle.stderr
    null = taskmine("replay", "--task", task.task_id[:10], "--agent", "null", "--sandbox", "local", home=home)
    assert "score 0.000" in null.stdout
    wrong = taskmine("replay", "--task", task.task_id[:10], "--agent", "company answer --sha 0000000",
                     "--sandbox", "local", home=home)
    assert "score 0.000" in wrong.stdout and "not the fixing commit" in wrong.stdout
    # whatever the agent leaves where its outbox should be is its failure, scored, never our crash
    junk = taskmine("replay", "--task", task.task_id[:10], "--agent", "mkdir -p ~/outbox/outbox.jsonl; exit 1",
                    "--sandbox", "local", home=home)
    assert junk.returncode == 0 and "score 0.000" in junk.stdout and "Traceback" not in junk.stderr, junk.stderr
    assert "agent: exit 1" in junk.stdout and "no SHA answered" in junk.stdout
    failing = taskmine("replay", "--task", task.task_id[:10], "--agent", "exit 3", "--sandbox", "local", home=home)
    assert "agent: exit 3" in failing.stdout and "score 0.000" in failing.stdout
    # what the agent printed is shown, both streams (their last lines)
    chatty = taskmine("replay", "--task", task.task_id[:10], "--agent",
                      "seq 1 100 | sed 's/^/line-/'; echo agent-warns-here >&2; exit 2", "--sandbox", "local",
                      home=home)
    assert "stdout: (last 40 of 100 lines)" in chatty.stdout and "| line-100" in chatty.stdout
    assert "| line-60" not in chatty.stdout and "stderr:" in chatty.stdout and "| agent-warns-here" in chatty.stdout
    # DuckDB on the warehouse and on the published files, without a DuckDB CLI
    q = taskmine("query", "select family, count(*) as n from tasks group by 1 order by 1", home=home, check=True)
    assert "commit_link" in q.stdout and "family" in q.stdout
    pub = home / "published" / "acme"
    q = taskmine("query", f"select count(*) as n from '{pub}/*/tasks/*/*.parquet'", home=home, check=True)
    assert str(len(store.read("tasks", "acme"))) in q.stdout or "n" in q.stdout
    assert "query failed" in one_line_error(taskmine("query", "select * from no_such_table", home=home))
    audit = taskmine("audit", home=home)
    assert audit.returncode == 0 and "no known identity, personal data or secret" in audit.stdout


def test_extractors_list_and_check(tmp_path, sample_company):
    r = taskmine("extractors", "list", home=tmp_path, check=True)
    assert "jira_json" in r.stdout and "git" in r.stdout and "builtin:" in r.stdout
    r = taskmine("extractors", "check", str(sample_company / "acme"), home=tmp_path, check=True)
    assert "issue_created" in r.stdout and "commit" in r.stdout and "0 records quarantined" in r.stdout
    assert "contract: ok" in r.stdout
    assert not (tmp_path / "private").exists()  # check writes nothing


def _eml(path):
    path.write_text("From: Ann Lee <ann@acme.example>\nTo: bob@acme.example\nSubject: Deploy\n"
                    "Message-ID: <m1@acme.example>\nDate: Tue, 02 Mar 2021 10:00:00 +0000\n\nCan you deploy today?\n")
    return path


def test_extractors_check_takes_one_downloaded_file(tmp_path, sample_company):
    """Users download one file (a Slack .zip, an .mbox, a Jira JSON, an .eml) and check it before anything."""
    acme = sample_company / "acme"
    slack_zip = shutil.make_archive(str(tmp_path / "slack-export"), "zip", acme / "slack")
    cases = {acme / "mail" / "dev.mbox": "email", acme / "jira" / "CORE-1.json": "issue_created",
             tmp_path / "slack-export.zip": "message", _eml(tmp_path / "one.eml"): "email"}
    assert str(tmp_path / "slack-export.zip") == slack_zip
    for path, kind in cases.items():
        r = taskmine("extractors", "check", str(path), home=tmp_path / "home", check=True)
        counts = {line.split()[1]: int(line.split()[2]) for line in r.stdout.splitlines()
                  if len(line.split()) == 3 and line.split()[2].isdigit()}
        assert counts.get(kind, 0) > 0, r.stdout
        assert "contract: ok" in r.stdout and "1 inputs" in r.stdout.splitlines()[0], r.stdout
    r = taskmine("extractors", "check", str(acme / "slack" / "users.json"), home=tmp_path / "home")
    assert r.returncode == 2 and "not a " in one_line_error(r)
    assert not (tmp_path / "home").exists()


REAL_SLACK_ZIP = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "real" /
                  "slack-export-viewer-fixture" / "testarchive.zip")


@pytest.mark.real
@pytest.mark.skipif(not REAL_SLACK_ZIP.is_file(), reason=f"real exports not present at {REAL_SLACK_ZIP}")
def test_extractors_check_on_a_real_slack_zip(tmp_path):
    r = taskmine("extractors", "check", str(REAL_SLACK_ZIP), home=tmp_path, check=True)
    assert "slack    message" in r.stdout and "contract: ok" in r.stdout


def test_check_does_not_fail_its_own_rows_about_whole_inputs(tmp_path, sample_company):
    """A repository git cannot read or a file that cannot be opened is quarantined as a whole: `file` says
    where; only a record inside an input needs an offset or member."""
    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    (exports / "acme" / "not-a-repo").mkdir()
    (exports / "acme" / "not-a-repo" / ".git").write_text("gitdir: /nowhere\n")
    # what is tested is ingest losing nothing; the code tasks' minutes of validation add nothing to it
    (exports / "acme" / "taskmine.toml").write_text(
        'families = ["ticket_triage", "commit_link", "email_reply", "chat_answer", "resolution_note"]\n')
    (exports / "acme" / "jira" / "gone.json").symlink_to(tmp_path / "nowhere.json")
    r = taskmine("extractors", "check", str(exports / "acme"), home=tmp_path / "home")
    assert r.returncode == 0, r.stdout
    assert "git      quarantine:git_error" in r.stdout and "jira     quarantine:unreadable" in r.stdout, r.stdout
    assert "2 records quarantined" in r.stdout and "contract: ok" in r.stdout


def test_caches_follow_the_current_home_but_keep_a_users_choice(tmp_path, monkeypatch):
    from core.paths import CACHE_VARS, contain_caches

    for var, _ in CACHE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("TASKMINE_CACHE_VARS", raising=False)
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mine"))          # the user's own choice
    contain_caches(tmp_path / "first")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "first" / "cache" / "torchinductor")
    contain_caches(tmp_path / "second")                                 # a later home in the same process
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "second" / "cache" / "torchinductor")
    assert os.environ["MPLCONFIGDIR"] == str(tmp_path / "mine")


def test_sample_prints_a_summary_a_person_reads(tmp_path):
    r = taskmine("sample", "--out", str(tmp_path / "exports"), home=tmp_path / "home", check=True)
    assert "SampleSummary(" not in r.stdout and "PosixPath(" not in r.stdout
    assert "wrote the sample company 'acme'" in r.stdout and "jira issues" in r.stdout
    assert f"next: taskmine run --exports {tmp_path / 'exports'}" in r.stdout


def test_ui_stops_dagster_and_everything_it_started_on_sigterm(tmp_path):
    """`taskmine ui` runs `dagster dev` through run_forwarding_signals: a stand-in that, like it, stops on SIGINT
    only and leaves a child that ignores SIGINT behind; SIGTERM to us must leave neither running."""
    import signal
    import time

    pids = tmp_path / "pids"
    stand_in = tmp_path / "dev.py"
    stand_in.write_text(
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)'])\n"
        f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
        "try:\n    time.sleep(600)\nexcept KeyboardInterrupt:\n    sys.exit(0)\n")
    wrapper = subprocess.Popen([sys.executable, "-c", "import sys; from pipelines.runner import "
                                "run_forwarding_signals; sys.exit(run_forwarding_signals("
                                f"[sys.executable, {str(stand_in)!r}], grace_s=1))"])
    for _ in range(300):
        if pids.exists() and pids.read_text():
            break
        time.sleep(0.1)
    child = int(pids.read_text())
    wrapper.send_signal(signal.SIGTERM)
    assert wrapper.wait(timeout=60) == 128 + signal.SIGTERM
    state = ""
    try:
        state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        pass
    assert state in ("", "Z"), f"the child {child} outlived `taskmine ui` ({state})"


def test_ui_runs_dagster_dev_through_the_signal_forwarder(tmp_path, monkeypatch):
    import pipelines.cli as cli
    import pipelines.runner as runner

    for var in ("TASKMINE_HOME", "DAGSTER_HOME", "TASKMINE_EXPORTS", "HF_HUB_OFFLINE", "LITELLM_LOCAL_MODEL_COST_MAP",
                "DAGSTER_DISABLE_TELEMETRY", *CACHE_VARS):
        monkeypatch.setenv(var, os.environ.get(var, ""))
    seen = []
    monkeypatch.setattr(runner, "run_forwarding_signals", lambda cmd, **kw: seen.append(cmd) or 0)
    monkeypatch.setattr(os, "execvp", lambda *a: pytest.fail("`taskmine ui` must not exec dagster (SIGTERM)"))
    (tmp_path / "exports").mkdir()
    assert cli.main(["--home", str(tmp_path / "home"), "ui", "--exports", str(tmp_path / "exports")]) == 0
    # the dagster beside this interpreter (a venv's bin may not be on PATH), the name only where there is none
    beside = Path(sys.executable).parent / "dagster"
    assert seen and seen[0][:2] == [str(beside) if beside.exists() else "dagster", "dev"]
