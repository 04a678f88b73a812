"""Dagster keeps process-wide state between in-process runs: the current instance's definitions-state storage
(a ContextVar set when an instance is created and reset only when it is disposed) and the current
DefinitionsLoadContext. A test that builds contexts on an instance it does not dispose leaves a storage whose
instance is gone, and the next test's Definitions fail with "undefined DagsterInstance weakref". Every test
here starts from a clean slate instead of depending on test order."""

from __future__ import annotations

import pytest


def _reset() -> None:
    from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext
    from dagster._core.storage.defs_state.base import _current_storage

    _current_storage.set(None)
    DefinitionsLoadContext.set(None)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _fresh_dagster_state():
    _reset()     # before too: a test outside this folder may have left an instance's storage behind
    yield
    _reset()
