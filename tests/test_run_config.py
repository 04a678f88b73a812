"""A dataset's taskmine.toml is read once per run: every stage of the run gets the first read's snapshot, so an
edit during a run changes the next run, never half of this one."""

from __future__ import annotations

import pytest

from core.config import ConfigError
from core.stage import run_config
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
