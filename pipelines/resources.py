"""Every external dependency as a typed resource, chosen in one place (definitions.py).

Resources read the environment lazily (at run time, never at import): TASKMINE_HOME,
TASKMINE_EXPORTS, TASKMINE_SANDBOX, and the LLM key from the variable the resource names.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import ConfigurableResource

from taskmine.paths import default_exports


class WarehouseResource(ConfigurableResource):
    """The DuckDB/Parquet warehouse under TASKMINE_HOME (default ./.taskmine)."""

    home: str = ""

    def store(self):
        from taskmine.paths import contain_caches
        from warehouse.store import Store

        store = Store(self.home or None)
        contain_caches(store.home)   # runs launched from the UI write their caches under the home too
        return store


class ExportsResource(ConfigurableResource):
    """The folder whose sub-folders are datasets (default: TASKMINE_EXPORTS, else the bundled sample)."""

    root: str = ""

    def path(self) -> Path:
        return Path(self.root).resolve() if self.root else default_exports()

    def dataset_dir(self, dataset: str) -> Path:
        return self.path() / dataset


class SandboxResource(ConfigurableResource):
    """Where tasks are replayed: `docker` (hardened containers), `local` (fallback) or `auto`."""

    kind: str = ""
    repeats: int = 0

    def get(self, home: Path | None = None):
        """The sandbox; `home` (the warehouse's) labels the images it builds so its runs can prune them."""
        from environments.sandbox import get_sandbox

        return get_sandbox(self.kind or os.environ.get("TASKMINE_SANDBOX", "auto"), home=home)


class LLMResource(ConfigurableResource):
    """Optional model for synthesis, judging and rollouts (litellm). Unset model = deterministic mode."""

    model: str = ""
    base_url: str = ""
    api_key_env: str = "TASKMINE_LLM_API_KEY"
    timeout_s: float = 60.0
    budget_usd: float = 5.0

    @property
    def enabled(self) -> bool:
        return bool(self.model or os.environ.get("TASKMINE_LLM_MODEL"))
