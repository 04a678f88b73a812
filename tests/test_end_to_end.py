"""End to end on the sample company, through the same Dagster job the UI materializes, with tasks
replayed in real Docker containers (required on CI: TASKMINE_REQUIRE_DOCKER=1)."""

import json
import subprocess

import duckdb
import pytest

from graders.stages import funnel
from publishing.loader import load_dataset
from warehouse.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def _run(exports, dataset="acme"):
    from dagster import DagsterInstance

    from pipelines.assets import datasets
    from pipelines.definitions import defs

    with DagsterInstance.get() as instance:  # disposed: its state must not outlive the test
        if not instance.has_dynamic_partition(datasets.name, dataset):
            instance.add_dynamic_partitions(datasets.name, [dataset])
        job = defs.resolve_job_def("taskmine_job")
        return job.execute_in_process(instance=instance, partition_key=dataset, raise_on_error=False)


def _remove_images(home):
    """The task images this module's runs built (labelled with its home): none is used after the tests."""
    from environments.images import prune_task_images
    from environments.sandbox import home_label

    prune_task_images(home_label(home), set())


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, docker_sandbox, request):
    """One full run (Docker sandbox) and a second, unchanged run, shared by the tests below."""
    from sample.company import write_sample

    root = tmp_path_factory.mktemp("e2e")
    exports = root / "exports"
    write_sample(exports, seed=0, scale=1, dataset="acme")
    # two tasks validated at once, as a machine with cores to spare runs them (the verdicts are those of one at a
    # time: tests/graders/test_validation_resume.py); the sample's code tasks take most of this run
    (exports / "acme" / "taskmine.toml").write_text("validate_parallel = 2\n")
    mp = pytest.MonkeyPatch()
    mp.setenv("TASKMINE_HOME", str(root / "home"))
    mp.setenv("TASKMINE_EXPORTS", str(exports))
    mp.setenv("TASKMINE_SANDBOX", "docker")
    (root / "dagster").mkdir()
    (root / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    mp.setenv("DAGSTER_HOME", str(root / "dagster"))
    request.addfinalizer(mp.undo)
    request.addfinalizer(lambda: _remove_images(root / "home"))
    store = Store(root / "home")
    first = _run(exports)
    latest = (store.published_root() / "acme" / "LATEST").read_text().strip()
    pub = store.published_root() / "acme" / latest
    snapshot = {str(p.relative_to(pub)): p.read_bytes() for p in (*sorted(pub.glob("*/*/*.parquet")),
                                                                  *sorted(pub.glob("*/*.parquet")),
                                                                  pub / "manifest.json", pub / "README.md")}
    counts = {t: store.count(t, "acme") for t in ("events", "anonymized_events", "work_items", "tasks",
                                                 "validations", "quarantine")}
    second = _run(exports)
    truth = json.loads((exports / ".truth" / "acme.json").read_text())
    return {"first": first, "second": second, "store": store, "pub": pub, "snapshot": snapshot,
            "counts": counts, "truth": truth, "exports": exports}


def test_run_succeeds_with_every_check_green(pipeline):
    for result in (pipeline["first"], pipeline["second"]):
        assert result.success
        evaluations = [e.event_specific_data for e in result.all_events
                       if e.event_type_value == "ASSET_CHECK_EVALUATION"]
        assert {e.check_name for e in evaluations} >= {"events_schema", "quarantine_rate", "anonymized_leaks",
                                                       "work_item_lineage", "splits_leakage_safe",
                                                       "oracle_and_null", "leak_audit"}
        assert all(e.passed for e in evaluations), [e.check_name for e in evaluations if not e.passed]


def test_funnel_matches_the_ground_truth(pipeline):
    store, truth = pipeline["store"], pipeline["truth"]
    tasks = store.read("tasks", "acme")
    triage = [t for t in tasks if t.family == "ticket_triage"]
    link = [t for t in tasks if t.family == "commit_link"]
    issues = truth["issues"]
    # one task per near-duplicate group: a Jira duplicate (same description) yields no task of its own
    placed = {c.item_id: c for c in store.read("clusters", "acme")}
    rep = {i.thread_key: placed[i.item_id].representative for i in store.read("work_items", "acme")
           if i.kind == "issue"}
    assert {k for k, r in rep.items() if not r} <= {i["key"] for i in issues if i["duplicate_of"]}
    probed = {(r.family, r.subject_id) for r in store.read("rejections", "acme") if r.reason.startswith("a probe")}
    assert len(triage) + sum(f == "ticket_triage" for f, _ in probed) == \
        sum(1 for i in issues if i["triage"] and rep[i["key"]])
    assert len(link) + sum(f == "commit_link" for f, _ in probed) == \
        sum(1 for i in issues if i["fixing_commits"] and rep[i["key"]])
    # code change: every ticket whose fixing commits change code and tests, one task per fix
    repo = pipeline["exports"] / "acme" / "repo"

    def changed(shas):
        out = subprocess.run(["git", "-C", str(repo), "show", "--name-only", "--format=", *shas],
                             capture_output=True, text=True, check=True).stdout.split()
        return any(p.startswith("tests/") for p in out) and any(p.endswith(".py") and not p.startswith("tests/")
                                                                 for p in out)

    eligible = {i["key"] for i in issues if i["fixing_commits"] and rep[i["key"]] and changed(i["fixing_commits"])}
    code = [t for t in tasks if t.family == "code_change"]
    assert eligible and {k for t in code for k in t.reference["code"]["tickets"]} == eligible
    assert all(t.reference["code"]["FAIL_TO_PASS"] for t in code)
    ds = load_dataset(pipeline["pub"])
    assert ds.manifest["tasks"] == len(tasks) == ds.table.num_rows
    assert ds.manifest["counts"]["validated"] == len(tasks)
    runs = store.read("validations", "acme")
    assert {v.sandbox for v in runs} == {"docker"}
    assert all(v.image_digest for v in runs)
    probes = sum(len(t.reference["probes"]) + len(t.reference.get("alternatives") or []) for t in tasks)
    from graders import baselines

    with_baseline = sum(len(baselines.of(t.family)) for t in tasks)   # then each baseline of its
    #                                                                                    family, once per valid task
    assert sum(v.run_kind.startswith("baseline:") for v in runs) == with_baseline
    assert len(runs) == 6 * len(tasks) + probes + with_baseline    # and each valid alternative once (alt:<name>)


def test_triage_reference_equals_truth_after_pseudonymization(pipeline):
    store, truth = pipeline["store"], pipeline["truth"]
    vault = json.loads((store.private / "vault" / "acme.json").read_text())["pseudonyms"]
    ids = {i.handle: i.person_id for i in store.read("identities", "acme")}
    for t in store.read("tasks", "acme"):
        if t.family != "ticket_triage":
            continue
        (update,) = t.reference["actions"]
        key = update["key"]
        want = next(i["triage"] for i in truth["issues"] if i["key"] == key)
        got = {k: v for k, v in update.items() if k not in ("tool", "key")}
        assert got["type"] == want["type"] and got["priority"] == want["priority"]
        assert got.get("components", []) == sorted(want["components"])
        if want["assignee"]:
            assert got["assignee"] == vault[ids[want["assignee"]["handle"]]]["full_name"]


def test_commit_link_reference_is_the_real_fix_in_the_rewritten_history(pipeline):
    store, truth = pipeline["store"], pipeline["truth"]
    for t in store.read("tasks", "acme"):
        if t.family != "commit_link":
            continue
        key = next(i.thread_key for i in store.read("work_items", "acme") if i.item_id == t.item_id)
        want = next(i["fixing_commits"] for i in truth["issues"] if i["key"] == key)
        ds = load_dataset(pipeline["pub"])
        (repo,) = ds.repositories(t.task_id, pipeline["store"].home.parent / f"lab-{t.task_id[:8]}")
        log = subprocess.run(["git", "-C", str(repo), "log", "--all", "--format=%H%x00%an%x00%B%x01"],
                             capture_output=True, text=True, check=True).stdout
        shas = [e.split("\0")[0].strip() for e in log.split("\x01") if e.strip()]
        assert set(t.reference["fix_shas"]) <= set(shas)
        assert len(t.reference["fix_shas"]) == len(want)
        assert key not in log  # the answer cannot be found with grep
        assert not set(want) & set(shas)  # real SHAs are gone: the history is rewritten


def test_nothing_known_survives_in_published_files(pipeline):
    from privacy.audit import Rules, audit

    truth = pipeline["truth"]
    real = set()
    for p in truth["people"]:
        real |= {p["name"], p["email"], p["jira"]["name"], *(g["email"] for g in p["git"]),
                 *(g["name"] for g in p["git"] if " " in g["name"])}
    # Every planted e-mail address, phone number and name, an outsider's too (NER found them at anonymize).
    # Only these strings: the recognizers would read our pseudonyms' own addresses (the leak_audit check,
    # green in this run, audits with the dataset's rules, which know them).
    real |= {x["value"] for x in truth["pii"] if x["type"] in ("email", "phone", "name")}
    assert audit(pipeline["pub"], Rules(real, patterns=False)).hits == []


def test_second_run_adds_nothing_and_is_byte_identical(pipeline):
    store, pub = pipeline["store"], pipeline["pub"]
    assert {p: (pub / p).read_bytes() for p in pipeline["snapshot"]} == pipeline["snapshot"]
    assert len(pipeline["snapshot"]) > 6
    assert {t: store.count(t, "acme") for t in pipeline["counts"]} == pipeline["counts"]
    mats = [e for e in pipeline["second"].all_events if e.event_type_value == "ASSET_MATERIALIZATION"]
    meta = {e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata for e in mats}
    assert meta["raw_events"]["events_added"].value == 0
    assert meta["validations"]["validated_now"].value == 0


def test_lab_reads_it_with_plain_duckdb(pipeline, tmp_path):
    pub = pipeline["pub"]
    rows = duckdb.sql(f"select family, count(*) from '{pub}/tasks/*/*.parquet' group by 1 order by 1").fetchall()
    assert [r[0] for r in rows] == ["chat_answer", "code_change", "commit_link", "email_reply", "resolution_note",
                                    "ticket_triage"]
    swe = duckdb.sql(f"select t.instance_id, t.repo, t.base_commit, g.patch, g.test_patch, t.problem_statement, "
                     f"g.FAIL_TO_PASS, g.PASS_TO_PASS, t.created_at, t.version, t.environment_setup_commit, t.image "
                     f"from '{pub}/tasks/*/*.parquet' t join '{pub}/grading/*.parquet' g using (task_id) "
                     f"where t.family = 'code_change'").fetchall()
    assert swe and all(all(v for v in row[:7]) and json.loads(row[6]) for row in swe)
    assert all(r[1] == "acme/repo" and "+env." in r[9] for r in swe)       # owner/name: no public remote here
    manifest = json.loads((pub / "manifest.json").read_text())
    assert all(len(h) == 64 for h in manifest["files"].values())
    bundles = list(pub.glob("world/git/*.bundle"))
    assert bundles
    # `git bundle verify` needs a repository to check prerequisites against: a lab's empty one, not whatever the
    # current folder is (outside a clone it failed "need a repository to verify a bundle")
    lab = tmp_path / "lab"
    subprocess.run(["git", "init", "-q", str(lab)], check=True)
    assert subprocess.run(["git", "-C", str(lab), "bundle", "verify", str(bundles[0])],
                          capture_output=True).returncode == 0
    clone = subprocess.run(["git", "clone", "-q", str(bundles[0]), str(tmp_path / "clone")], capture_output=True)
    assert clone.returncode == 0 and (tmp_path / "clone" / ".git").is_dir(), clone.stderr
    docs = duckdb.sql(f"select cls, count(*) from read_json_auto('{pub / 'world' / 'documents.jsonl'}') group by 1")
    assert {r[0] for r in docs.fetchall()} >= {"issue", "mail", "chat"}


def test_a_lab_loads_each_config_with_datasets_and_the_agent_view_holds_no_answer(pipeline, tmp_path):
    pytest.importorskip("datasets")
    from lab_surfaces import agent_leaks, config_splits

    splits = config_splits(pipeline["pub"], tmp_path / "hf")
    assert {"all", "grading", "trajectories", "swebench"} <= set(splits)
    assert all(got == want for got, want in splits.values()), splits
    # every string of every reference (calls, probes, alternatives, facts, the code's patch and tests, the
    # requester's script) and every hidden event id is absent from the task's agent row, but what its prompt says
    assert not agent_leaks(pipeline["pub"])


def test_trajectories_load_and_replay_to_a_full_score(pipeline, tmp_path):
    pytest.importorskip("datasets")
    from lab_surfaces import trajectory_problems

    rows, wrong = trajectory_problems(pipeline["pub"], tmp_path)
    assert rows == len(load_dataset(pipeline["pub"]).tasks()) and not wrong, wrong


def test_swebench_loaders_accept_the_code_tasks(pipeline):
    pytest.importorskip("swebench")
    from swebench.harness.utils import load_swebench_dataset, make_test_spec

    pub = pipeline["pub"]
    split = {r["split"] for r in load_dataset(pub).swebench()}
    for s in split:
        for inst in load_swebench_dataset(str(pub / "swebench"), s):
            spec = make_test_spec(inst)
            assert spec.FAIL_TO_PASS and spec.repo == "acme/repo" and spec.log_parser == "parse_log_pytest"
            assert "-rA" in spec.eval_script and inst["environment_setup_commit"]


def test_the_ui_funnel_counts_candidates_as_the_run_log_does(pipeline):

    mats = [e for e in pipeline["first"].all_events if e.event_type_value == "ASSET_MATERIALIZATION"]
    meta = {e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata for e in mats}
    assert meta["tasks"]["candidates"].value == funnel(pipeline["store"], "acme")["candidates"]


def test_a_lab_runs_a_task_with_the_published_tools(pipeline):
    """The published world served through the same tools (in process): the cutoff holds, writes are logged,
    and the reference scores 1 through the published rubric."""
    from environments import actions as A
    from graders.rubric import grade

    ds = load_dataset(pipeline["pub"])
    for row in ds.tasks():
        if row["family"] == "code_change":   # graded by its tests in the verifier phase (tests/task_builders)
            continue
        g = ds.grading(row["task_id"])
        tools = ds.tools(row["task_id"], cache=pipeline["store"].home.parent / "lab-cache")
        for call in g["reference"]["actions"]:
            call = A.CALL.validate_python(call)
            assert not tools.call(call.name(), call.arguments()).error
        assert grade(g["rubric"], tools.actions).score == 1.0
        assert ds.grade(row["task_id"], tools.actions, cache=pipeline["store"].home.parent / "lab-cache").score == 1.0
        assert grade(g["rubric"], []).score == 0.0


def test_a_lab_serves_a_published_task_over_mcp(pipeline, tmp_path):
    """`taskmine serve` is an MCP stdio server (the SDK's client connects) on a published task's world; the
    action log is written when the client leaves."""
    import os
    import sys

    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    task = next(t for t in load_dataset(pipeline["pub"]).tasks() if t["family"] == "ticket_triage")
    key = load_dataset(pipeline["pub"]).grading(task["task_id"])["reference"]["actions"][0]["key"]
    log = tmp_path / "actions.jsonl"

    async def main():
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "pipelines.cli", "--home", str(tmp_path / "home"), "serve", "--published", str(pipeline["pub"]),
            "--task", task["task_id"][:12], "--log", str(log)], env=dict(os.environ))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            shown = await session.call_tool("jira_show", {"key": key})
            await session.call_tool("jira_update", {"key": key, "priority": "Minor"})
            return names, shown.content[0].text

    names, shown = anyio.run(main)
    assert {"jira_show", "jira_update", "mail_search"} <= names and "shell" not in names
    assert shown.startswith(f"{key}: ")
    assert json.loads(log.read_text())["action"] == {"tool": "jira_update", "key": key, "type": None,
                                                      "priority": "Minor", "components": None, "assignee": None,
                                                      "resolution": None, "status": None, "duplicate_of": None}


# --- a lab's own tools: MCP for every family, OpenEnv, Harbor (tests/lab_surfaces.py) --------------------------


def test_an_mcp_only_agent_solves_a_task_of_every_family(pipeline, tmp_path):
    """Over MCP alone (`taskmine serve`, the SDK's client), one task per family, each served only the tools its
    family uses: a code task's fix written with write_file and applied with the shell in the task's sandbox (its
    environment image, the repository at the fix's parent), graded by the verifier at `submit`: 1, doing nothing
    0; a commit-link task answered after a look at git: 1; every other family's reference through its tools: 1."""
    from lab_surfaces import mcp_agent, one_per_family

    from environments import actions as A

    tasks = one_per_family(pipeline["pub"])
    home = pipeline["store"].home
    reads = {t.name() for t in A.READS}
    repo_tools = {"git", "shell", "read_file", "list_files"}
    for family, task in tasks.items():
        got = mcp_agent(pipeline["pub"], task, home, tmp_path)
        assert reads | {"submit"} <= got["tools"], family
        assert (repo_tools <= got["tools"]) == (family in ("code_change", "commit_link")), (family, got["tools"])
        assert ("write_file" in got["tools"]) == (family == "code_change"), family
        assert not any(err for _, err, _ in got["answers"]), (family, got["answers"])
        assert got["result"]["score"] == 1.0 and got["graded"]["score"] == 1.0, (family, got["result"])
    assert tasks["ticket_triage"] and mcp_agent(pipeline["pub"], tasks["ticket_triage"], home, tmp_path,
                                                act=False)["tools"] == reads | {"jira_update", "submit"}
    null = mcp_agent(pipeline["pub"], tasks["code_change"], home, tmp_path, act=False)
    assert null["result"]["score"] == 0.0


def test_an_openenv_client_completes_a_task_of_every_family(pipeline):
    """OpenEnv's own client on `taskmine serve --openenv`: reset(task_id) -> the prompt and tools; the oracle's
    tool calls -> reward 1 at submit; nothing -> 0."""
    from lab_surfaces import OpenEnvServer, one_per_family, openenv_episode

    tasks = one_per_family(pipeline["pub"])
    assert len(tasks) >= 5
    with OpenEnvServer(pipeline["pub"], pipeline["store"].home) as server:
        for family, task in tasks.items():
            ep = openenv_episode(server.url, task)
            assert ep["first"].observation["prompt"] == task["prompt"] and not ep["first"].done
            assert "submit" in {t["name"] for t in ep["first"].observation["tools"]}
            assert not any(s.observation["error"] for s in ep["steps"]), (family, ep["steps"])
            assert ep["last"].done and ep["last"].reward == 1.0, (family, ep["last"].observation)
            assert ep["state"]["task_id"] == task["task_id"]
            null = openenv_episode(server.url, task, act=False)
            assert null["last"].done and null["last"].reward == 0.0, (family, null["last"].observation)


def test_harbor_folders_of_every_family_score_oracle_1_and_null_0(pipeline, tmp_path):
    """`taskmine export harbor` folders run as Harbor runs them (docker build of environment/, solution/solve.sh
    as the agent user, tests/ copied in only then, test.sh, /logs/verifier/reward.txt): oracle 1, nothing 0. No
    grader file is in the image the agent works in."""
    from lab_surfaces import harbor_trials, one_per_family

    tasks = one_per_family(pipeline["pub"])
    got = harbor_trials(pipeline["pub"], pipeline["store"].home, tmp_path / "harbor", tasks)
    assert {f: got[f] for f in tasks} == {f: (1.0, 0.0) for f in tasks}, got
