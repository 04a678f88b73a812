"""`taskmine bench scale`: the arithmetic (growth, linear costs, the extrapolation) and the stage seam, without
running the pipeline (the measuring is what the bench itself is for)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from taskmine import flow

from bench.scale import (
    GROWTH_FLAG,
    Cost,
    Machine,
    ScaleRun,
    StageCost,
    extrapolate,
    fit_growth,
    fit_linear,
    per_task,
    pipeline_stages,
    stage_names,
    table,
    target_items,
    validation_sample,
)


def test_growth_exponent_of_power_laws():
    assert fit_growth([(n, 3.0 * n) for n in (10, 50, 100)]) == pytest.approx(1.0)
    assert fit_growth([(n, 0.01 * n * n) for n in (10, 50, 100)]) == pytest.approx(2.0)
    assert fit_growth([(n, 5.0) for n in (10, 50, 100)]) == pytest.approx(0.0)
    assert fit_growth([(10, 1.0)]) is None                       # one size says nothing about growth
    assert fit_growth([(10, 1.0), (10, 2.0)]) is None
    assert fit_growth([(0, 1.0), (10, 0.0), (20, 2.0)]) is None  # non-positive points are left out


def test_linear_cost_has_a_fixed_part_and_a_cost_per_item():
    fixed, per = fit_linear([(n, 20 + 0.5 * n) for n in (10, 50, 100)])
    assert fixed == pytest.approx(20) and per == pytest.approx(0.5)
    assert fit_linear([(4, 2.0)]) == (0.0, 0.5)                 # one point: all of it per item
    # a negative intercept is not a cost: the line goes through the origin instead
    fixed, per = fit_linear([(10, 1.0), (20, 5.0), (30, 9.0)])
    assert fixed == 0.0 and per == pytest.approx((10 + 100 + 270) / (100 + 400 + 900))
    assert fit_linear([(10, 5.0), (20, 4.0)]) == (4.5, 0.0)      # cost fell as items grew: no cost per item


def test_the_seam_covers_the_cli_stage_order():
    assert stage_names(pipeline_stages()) == list(flow.ORDER)
    assert [s.name for s in pipeline_stages()].count("tasks+code") == 1


def test_validation_sample_is_fixed_per_family():
    tasks = [SimpleNamespace(task_id=f"{i:02d}", family=f) for i, f in enumerate(["a", "b", "a", "a", "b", "c"])]
    assert validation_sample(tasks, 2) == ["00", "02", "01", "04", "05"]
    assert validation_sample(list(reversed(tasks)), 2) == ["00", "02", "01", "04", "05"]   # by id, not order


def _run(scale: int, k: float = 1.0) -> ScaleRun:
    """A made-up run: events cost 10 ms each (anonymize k-th power), tasks 0.1 s per work item, validation 30 s
    per commit_link task and 5 s per email_reply task, code candidates 100 s each."""
    events, items = 100 * scale, 10 * scale

    def st(name, unit, n, cpu):
        return StageCost(name, unit, n, Cost(seconds=cpu, cpu_self=cpu))

    return ScaleRun(
        scale=scale, units={"messages": 50 * scale, "tickets": 10 * scale, "commits": 20 * scale, "events": events},
        stages=[st("raw_events", "events", events, 0.01 * events),
                st("anonymized_events", "events", events, 0.01 * events ** k),
                st("tasks", "work_items", items, 0.1 * items),
                st("tasks+code", "work_items", items, 0.1 * items + 2 * 100.0),
                st("validations:commit_link", "tasks_validated", 2, 60.0),
                st("validations:email_reply", "tasks_validated", 2, 10.0),
                st("published_dataset", "tasks", 3 * scale, 0.5 * 3 * scale)],
        tasks_by_family={"commit_link": 2 * scale, "email_reply": 5 * scale, "code_change": 1},
        validated_by_family={"commit_link": 2, "email_reply": 2},
        code_candidates=4 * scale, code_measured=2)


def test_target_items_scale_each_kind_by_its_own_unit():
    want = target_items(_run(10), {"messages": 5000, "tickets": 1000, "commits": 400})
    # 200 other events per 100 tickets at scale 10: 2 per ticket
    assert want["events"] == pytest.approx(5000 + 1000 + 400 + 2 * 1000)
    assert want["tasks:commit_link"] == pytest.approx(20 * 400 / 200)      # grows with commits
    assert want["tasks:email_reply"] == pytest.approx(50 * 5000 / 500)     # grows with messages
    # code tasks: 1 of 2 candidates measured became a task; 40 candidates at scale 10, growing with commits
    assert want["code_candidates"] == pytest.approx(40 * 2)
    assert want["tasks:code_change"] == pytest.approx(0.5 * 80)


def test_extrapolation_uses_per_unit_costs_and_counts_machines():
    target = {"messages": 5000, "tickets": 1000, "commits": 400}
    est = extrapolate([_run(1), _run(5), _run(10)], target, Machine(cores=10, deadline_hours=1, efficiency=1.0))
    by = {s.stage: s for s in est.stages}
    events = 5000 + 1000 + 400 + 2000
    assert by["raw_events"].seconds == pytest.approx(0.01 * events)
    assert by["tasks+code"].seconds == pytest.approx(100.0 * 80)           # per code candidate measured
    tasks = {"commit_link": 40, "email_reply": 500, "code_change": 40}
    # code_change was never validated: its validation is not counted (and the model line says so)
    assert by["validations"].seconds == pytest.approx(30 * tasks["commit_link"] + 5 * tasks["email_reply"])
    assert "code_change not measured" in by["validations"].model
    assert est.cpu_seconds == pytest.approx(sum(s.seconds for s in est.stages))
    serial = by["published_dataset"].seconds
    assert est.serial_seconds == pytest.approx(serial)
    assert est.parallel_fraction == pytest.approx(1 - serial / est.cpu_seconds)
    assert est.machines == math.ceil((est.cpu_seconds - serial) / (10 * (3600 - serial)))
    assert any("of 10 cores" in a for a in est.assumptions) and any("within 1 h" in a for a in est.assumptions)


def test_a_stage_growing_faster_than_linear_is_extrapolated_with_its_power_law():
    runs = [_run(1, 1.5), _run(5, 1.5), _run(10, 1.5)]
    est = extrapolate(runs, {"messages": 5000, "tickets": 1000, "commits": 400})
    anon = next(s for s in est.stages if s.stage == "anonymized_events")
    assert "power law" in anon.model
    assert anon.seconds == pytest.approx(0.01 * 1000 ** 1.5 * (8400 / 1000) ** 1.5)
    lines = table(runs)
    assert any(line.startswith("anonymized_events") and "WORSE THAN LINEAR" in line for line in lines)
    assert not any(line.startswith("raw_events") and "WORSE" in line for line in lines)
    assert GROWTH_FLAG > 1


def test_global_stages_longer_than_the_deadline_need_no_machine_count():
    runs = [_run(1), _run(10)]
    est = extrapolate(runs, {"messages": 5000, "tickets": 1000, "commits": 400},
                      Machine(cores=4, deadline_hours=0.0001))
    assert est.machines == 0


def test_per_task_validation_cost_is_the_mean_over_scales():
    runs = [_run(1), _run(5)]
    assert per_task(runs, "commit_link") == pytest.approx(30.0)
    assert per_task(runs, "code_change") is None


def test_a_run_saved_reads_back_the_same(tmp_path):
    from bench.scale import load_run, save_run

    run = _run(5)
    save_run(run, tmp_path / "scale-5.json")
    assert load_run(tmp_path / "scale-5.json") == run


def test_a_stage_the_largest_scale_did_not_reach_is_still_estimated():
    stopped = _run(10)
    stopped.stages = [s for s in stopped.stages if not s.stage.startswith(("validations", "published"))]
    est = extrapolate([_run(1), _run(5), stopped], {"messages": 5000, "tickets": 1000, "commits": 400})
    by = {s.stage: s for s in est.stages}
    assert by["published_dataset"].seconds == pytest.approx(0.5 * by["published_dataset"].units)
    assert by["validations"].seconds > 0
    assert any(line.startswith("published_dataset") for line in table([_run(1), stopped]))
