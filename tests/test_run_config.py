"""A dataset's taskmine.toml is read once per run: every stage of the run gets the first read's snapshot, so an
edit during a run changes the next run, never half of this one."""

from __future__ import annotations

import shutil

import pytest

from core.config import ConfigError, DatasetConfig
from core.stage import run_config
from taskmine import flow
from warehouse.store import Store


def test_one_config_per_run(tmp_path):
    ds_dir = tmp_path / "exports" / "acme"
    ds_dir.mkdir(parents=True)
    (ds_dir / "taskmine.toml").write_text("repeats = 2\n")
    store = Store(tmp_path / "home")
    assert run_config(store, "acme", ds_dir, "run-1").repeats == 2
    (ds_dir / "taskmine.toml").write_text("repeats = 5\n")          # edited while run-1 goes on
    assert run_config(store, "acme", ds_dir, "run-1").repeats == 2
    assert run_config(store, "acme", ds_dir, "run-2").repeats == 5
    assert run_config(store, "acme", ds_dir).repeats == 5         # no run: the file as it is
    (ds_dir / "taskmine.toml").write_text("repeats = 'many'\n")
    with pytest.raises(ConfigError, match="repeats"):
        run_config(store, "acme", ds_dir, "run-3")
    assert run_config(store, "acme", ds_dir, "run-2").repeats == 5   # a bad file never replaced a snapshot


def test_no_stage_reads_taskmine_toml(tmp_path, sample_company):
    """A stage reads the run's config (ctx.config) and nothing else: with a taskmine.toml that no longer parses in
    the export, the stages up to the world still run on the config the run was given."""
    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    ctx = flow.context(Store(tmp_path / "home"), "acme", exports / "acme", config=DatasetConfig(ner_model=""),
                       run_id="r1")
    (exports / "acme" / "taskmine.toml").write_text("repeats = [unclosed\n")   # any read would raise ConfigError
    flow.prepare(ctx)
    res = flow.run(ctx, "work_items", "world")
    assert res.counts["documents"] > 0 and ctx.store.count("work_items", "acme") > 0


def test_the_stage_table_orders_and_connects_the_stages(tmp_path):
    """Dependencies come from what each stage reads and writes: the nearest earlier writer of each table it reads,
    without those another of them implies; every stage body and gate is named once."""
    assert flow.after(flow.BY_NAME["tasks"]) == ("clusters", "world")
    assert flow.after(flow.BY_NAME["world"]) == ("anonymized_events",)
    assert flow.after(flow.BY_NAME["published_dataset"]) == ("validations",)
    assert all(flow.ORDER.index(d) < flow.ORDER.index(s.name) for s in flow.STAGES for d in flow.after(s))
    gates = [c.name for s in flow.STAGES for c in s.checks]
    assert len(gates) == len(set(gates)) and len(flow.ORDER) == len(set(flow.ORDER))
    with pytest.raises(KeyError, match="no stage named 'nope'; the stages are raw_events, identities"):
        flow.run(flow.context(Store(tmp_path), "x", config=DatasetConfig()), "nope")
