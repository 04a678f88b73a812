"""Fixtures of the environment tests: `tiny_world`, the world file of tiny_company.py's events."""

from __future__ import annotations

import pytest
from tiny_company import tiny_events

from environments.world import World, build_world


@pytest.fixture
def tiny_world(tmp_path) -> World:
    path = build_world(tiny_events(), tmp_path / "world" / "world.sqlite", "tiny-1")
    return World(path)
