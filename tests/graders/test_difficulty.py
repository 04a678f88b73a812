"""Difficulty through the pipeline, on the sample company's triage tasks: the validations stage adds a baseline run
per valid task (and model rollouts when a model is configured), publishing keeps every task marked without
rollouts and retires the ones outside the band with them, and the published dataset carries the measurements
(the task files' columns, manifest, card)."""

from __future__ import annotations

import json
import shutil

import pytest

from environments.sandbox import LocalSandbox
from graders import difficulty
from task_builders.config import DatasetConfig
from taskmine import flow
from warehouse.loader import load_dataset
from warehouse.schemas import Validation
from warehouse.store import Store

CONFIG = DatasetConfig(ner_model="", families=("ticket_triage",))


@pytest.fixture(scope="module")
def built_home(tmp_path_factory):
    # the sample at scale 2: at scale 1 the constant probes (the commonest values of the tasks kept) leave three
    # triage tasks of thirteen, too few for the four roles below; at scale 2 twenty stay
    from sample.company import write_sample

    exports = tmp_path_factory.mktemp("difficulty-sample") / "exports"
    write_sample(exports, seed=0, scale=2, dataset="acme")
    home = tmp_path_factory.mktemp("difficulty") / "home"
    store = Store(home)
    flow.prepare(store, "acme", exports / "acme", CONFIG)
    flow.work_items(store, "acme", CONFIG)
    flow.tasks(store, "acme", CONFIG)
    return home


@pytest.fixture
def store(built_home, tmp_path) -> Store:
    home = tmp_path / "home"
    shutil.copytree(built_home, home, symlinks=True)
    return Store(home)


def _row(task, kind: str, attempt: int, score: float | None) -> Validation:
    return Validation(validation_id=f"{task.task_id}-{kind}-{attempt}", task_id=task.task_id, dataset="acme",
                      run_kind=kind, attempt=attempt, score=score, duration_s=1.0, sandbox="local")


def _validated(store: Store, n: int = 4):
    tasks = sorted(store.read("tasks", "acme"), key=lambda t: t.task_id)[:n]
    res = flow.validations(store, "acme", LocalSandbox(), repeats=1, only=[t.task_id for t in tasks], config=CONFIG)
    assert res.counts["valid"] == n
    return tasks, res


def test_without_rollouts_every_valid_task_is_published_marked_easy_or_unmeasured(store):
    tasks, res = _validated(store)
    rows = store.read("validations", "acme")
    base = [v for v in rows if v.run_kind.startswith("baseline:")]
    assert sorted(v.task_id for v in base) == sorted(t.task_id for t in tasks)   # one baseline run per task
    assert {v.run_kind for v in base} == {"baseline:nearest_issue"} and res.counts["baseline_runs_now"] == 4
    assert all(v.score is not None for v in base)
    again = flow.validations(store, "acme", LocalSandbox(), repeats=1, only=[t.task_id for t in tasks],
                             config=CONFIG)
    assert again.counts["baseline_runs_now"] == 0       # cached like the validation runs
    assert res.extra["difficulty"]["ticket_triage"]["valid"] == 4 and res.extra["difficulty_plot"][:4] == b"\x89PNG"

    published, counts = flow.publish(store, "acme", CONFIG)
    assert published.tasks == 4 and "retired_by_difficulty" not in counts
    table = load_dataset(published.path).table.to_pylist()
    by_id = {r["task_id"]: r for r in table}
    for v in base:
        r = by_id[v.task_id]
        solved = v.score >= difficulty.SOLVED
        assert json.loads(r["baseline_scores"]) == {"nearest_issue": v.score}
        assert r["baseline_solved"] is solved and r["difficulty"] == ("easy" if solved else "unmeasured")
        assert r["rollouts"] == 0 and r["pass_at_1"] is None and r["flaky"] is False
    probes = [v for v in rows if v.run_kind.startswith("probe:")]
    grading = [load_dataset(published.path).grading(r["task_id"]) for r in table]
    assert sum(len(json.loads(g["probe_scores"])) for g in grading) == len(probes)
    assert all("probe_scores" not in r and "best_probe" not in r for r in table)   # the grader view only
    for g in grading:
        scores = json.loads(g["probe_scores"])
        assert g["best_probe_score"] == max(scores.values()) and scores[g["best_probe"]] == g["best_probe_score"]

    manifest = json.loads((published.path / "manifest.json").read_text())
    st = manifest["grader"]["ticket_triage"]
    assert st["probe_pass"] == {"n": len(probes), "k": 0, "rate": 0.0 if probes else None}
    assert st["baseline_solved"]["n"] == 4
    assert st["baseline_solved"]["k"] == sum(1 for v in base if v.score >= difficulty.SOLVED)
    alts = [v for v in rows if v.run_kind.startswith("alt:")]     # valid alternatives (graders.alternatives)
    assert st["false_negative"] == {"n": len(alts), "k": sum(1 for v in alts if (v.score or 0) < 0.99),
                                    "rate": (0.0 if alts else None)} and st["rollout_pass"]["n"] == 0
    assert sum(manifest["difficulty"].values()) == 4
    card = (published.path / "README.md").read_text()
    assert "## Difficulty and grader error" in card and "| ticket_triage |" in card
    # the hack-resistance table: every probe class tried, beside the oracle's, in the manifest and the card
    res = manifest["hack_resistance"]["ticket_triage"]
    assert res["published"] == 4 and res["oracle"] == 1.0 and res["null"] == 0.0
    kinds = {v.run_kind for v in rows if v.run_kind.startswith(("probe:", "baseline:"))}
    assert set(res["attacks"]) == kinds
    for kind, a in res["attacks"].items():
        runs = [v for v in rows if v.run_kind == kind and v.score is not None]
        # ... and the drafts this probe rejected when they were built (graded in process, never validated)
        built = [r for r in store.read("rejections", "acme") if r.reason == "a probe passes the rubric"
                 and f"{kind.removeprefix('probe:')} scored" in r.detail]
        if kind.startswith("probe:"):
            assert a["tried"] == len({v.task_id for v in runs}) + len(built) and a["passing"] == len(built)
        else:       # a baseline's "passing" are the tasks it solves: easy, published in the easy configuration
            assert a["tried"] == len({v.task_id for v in runs})
            assert a["passing"] == sum(1 for v in runs if v.score >= difficulty.SOLVED)
        assert a["best"] == max(v.score for v in runs)
    assert "## Hack resistance" in card and "| ticket_triage | oracle (lowest) |" in card
    assert max(len(line) for line in card.splitlines() if line.startswith("|")) <= 160


def test_the_difficulty_command_prints_the_table_per_family(store, capsys):
    from pipelines.cli import main

    tasks, _ = _validated(store, 2)
    assert main(["--home", str(store.home), "difficulty", "--dataset", "acme"]) == 0
    out = capsys.readouterr().out
    assert "acme: " in out and "2 baseline runs (0 infrastructure failures)" in out
    row = next(line for line in out.splitlines() if line.startswith("| ticket_triage |"))
    assert row.split(" | ")[2] == "2"     # valid


def test_with_rollouts_the_band_keeps_pass_rates_inside_it_and_retires_the_rest(store):
    tasks, _ = _validated(store)
    easy, fit, hard, alt = tasks
    rows = [r for r in store.read("validations", "acme") if not r.run_kind.startswith("alt:")]  # only ours below
    for task, scores in ((easy, [1.0] * 5), (fit, [1.0, 0.0, 0.5, 0.0, 0.0]), (hard, [0.0] * 5)):
        rows += [_row(task, "rollout:openai/some-model", i, s) for i, s in enumerate(scores)]
    rows += [_row(alt, "alt:alias", 0, 1.0), _row(alt, "alt:paraphrase", 0, 0.4)]
    store.replace("validations", "acme", rows)

    published, counts = flow.publish(store, "acme", CONFIG)
    table = {r["task_id"]: r for r in load_dataset(published.path).table.to_pylist()}
    assert set(table) == {fit.task_id, alt.task_id} and counts["retired_by_difficulty"] == 2
    assert table[fit.task_id]["difficulty"] == "in_band" and table[fit.task_id]["rollouts"] == 5
    assert table[fit.task_id]["pass_at_1"] == pytest.approx(0.2) and table[fit.task_id]["pass_at_k"] == 1.0
    assert table[alt.task_id]["difficulty"] in ("easy", "unmeasured")   # no rollouts: kept, marked
    reasons = {r.subject_id: r.detail for r in store.read("rejections", "acme") if r.stage == "published"}
    assert set(reasons) == {easy.task_id, hard.task_id}
    assert "above band_max 0.7" in reasons[easy.task_id] and "below band_min 0.02" in reasons[hard.task_id]
    manifest = json.loads((published.path / "manifest.json").read_text())
    st = manifest["grader"]["ticket_triage"]
    assert st["false_negative"] == {"n": 2, "k": 1, "rate": 0.5}
    assert st["rollout_pass"] == {"n": 15, "k": 6, "rate": 0.4}
    assert st["difficulty"]["too_easy"] == 1 and st["difficulty"]["too_hard"] == 1 and st["retired"] == 2

    wide = CONFIG.model_copy(update={"band_max": 1.0})
    published, counts = flow.publish(store, "acme", wide)
    kept = {r["task_id"] for r in load_dataset(published.path).table.to_pylist()}
    assert easy.task_id in kept and hard.task_id not in kept and counts["retired_by_difficulty"] == 1


def test_band_min_above_band_max_is_a_config_error():
    with pytest.raises(ValueError, match="band_min 0.8 is above band_max 0.7"):
        DatasetConfig(band_min=0.8)


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def box(request):
    return LocalSandbox() if request.param == "local" else request.getfixturevalue("docker_sandbox")


def test_rollouts_run_in_the_validations_stage_when_a_model_is_configured(store, box, llm_standin, tmp_path):
    """The stand-in model solves one task on both rollouts (pass rate 1.0: too easy, retired) and another on one
    of two (0.5: in the band, published), through the task's MCP tools in the sandbox."""
    from standin import reply, tool_call

    from llm.client import LLM

    tasks = sorted(store.read("tasks", "acme"), key=lambda t: t.task_id)[:2]
    answers = {t.task_id: {k: v for k, v in t.reference["actions"][0].items() if k != "tool"} for t in tasks}
    started: dict[str, int] = {}

    def model(body):
        if any(m.get("role") == "tool" for m in body["messages"]):
            return reply("Done.")
        prompt = json.dumps(body["messages"])
        task = next(t for t in tasks if f"triaging issue {answers[t.task_id]['key']} " in prompt)
        started[task.task_id] = started.get(task.task_id, 0) + 1
        if task is tasks[1] and started[task.task_id] == 2:
            return reply("I cannot tell.")
        return tool_call(("jira_update", answers[task.task_id]))

    llm_standin.responder = model
    llm = LLM(llm_standin.config(tmp_path))
    config = CONFIG.model_copy(update={"rollouts": 2})
    res = flow.validations(store, "acme", box, repeats=1, only=[t.task_id for t in tasks], llm=llm, config=config)
    assert res.counts["rollouts_now"] == 4 and started == {tasks[0].task_id: 2, tasks[1].task_id: 2}
    runs = [v for v in store.read("validations", "acme") if v.run_kind.startswith("rollout:")]
    assert sorted((v.task_id == tasks[0].task_id, v.attempt, v.score) for v in runs) == \
        [(False, 0, 1.0), (False, 1, 0.0), (True, 0, 1.0), (True, 1, 1.0)]
    assert all(v.sandbox == box.kind and "receipt" in v.checks[-1] for v in runs)
    again = flow.validations(store, "acme", box, repeats=1, only=[t.task_id for t in tasks], llm=llm, config=config)
    assert again.counts["rollouts_now"] == 0
    without = flow.validations(store, "acme", box, repeats=1, only=[t.task_id for t in tasks], config=config)
    assert without.counts["rollouts_now"] == 0          # no model: no rollout, nothing faked

    published, counts = flow.publish(store, "acme", config)
    table = {r["task_id"]: r for r in load_dataset(published.path).table.to_pylist()}
    assert set(table) == {tasks[1].task_id} and counts["retired_by_difficulty"] == 1
    assert table[tasks[1].task_id]["difficulty"] == "in_band" and table[tasks[1].task_id]["pass_at_1"] == 0.5
