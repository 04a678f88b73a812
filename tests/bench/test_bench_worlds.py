"""`taskmine bench worlds` on the smallest input: its numbers are measured, not made up (the full run with the
real history and Docker is in the closing reports, not in CI)."""

from __future__ import annotations

from bench import worlds
from environments.sandbox import LocalSandbox
from sample.company import write_sample


def test_the_world_is_smaller_than_one_copy_per_task_and_every_number_is_measured(tmp_path):
    write_sample(tmp_path / "exports", seed=1, scale=1, dataset="acme")
    info = worlds._prepare(tmp_path / "home", "acme", tmp_path / "exports" / "acme", with_tasks=True)
    row = worlds._measure("sample", info["store"], "acme", info["world_s"], LocalSandbox())
    assert row["tasks"] >= 5 and row["sandbox"] == "local"
    assert 0 < row["world_bytes_shared"] < row["world_bytes"] < 2 * row["source_bytes"] + row["tasks"] * 1000
    world_file = worlds.disk_bytes(info["store"].worlds("acme") / "world.sqlite")
    assert row["copy_bytes"] > row["world_bytes_shared"] - world_file
    assert row["start_s"] > 0 and row["copy_start_s"] is None  # the image baseline needs Docker
    assert 0 < row["per_task_bytes"] < 2000
