"""Every external dependency as a typed resource, chosen in one place (definitions.py).

Resources read the environment lazily (at run time, never at import): TASKMINE_HOME,
TASKMINE_EXPORTS, TASKMINE_SANDBOX, and the LLM key from the variable the resource names.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import ConfigurableResource, EnvVar, InitResourceContext
from pydantic import PrivateAttr

from core.paths import contain_caches, default_exports
from environments.backends import get_sandbox
from llm.client import LLM
from llm.config import LLMConfig
from warehouse.store import Store


class WarehouseResource(ConfigurableResource):
    """The DuckDB/Parquet warehouse under TASKMINE_HOME (default ./.taskmine)."""

    home: str = ""

    def store(self):
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
    """Where tasks are replayed: `docker` (hardened containers), `local` (fallback) or `auto`; over several
    Docker daemons when TASKMINE_SANDBOX_HOSTS or the dataset's `sandbox_hosts` names them (environments.pool)."""

    kind: str = ""
    repeats: int = 0

    def get(self, home: Path | None = None, hosts=None):
        """The sandbox; `home` (the warehouse's) labels the images it builds so its runs can prune them; `hosts`
        is the dataset's `sandbox_hosts` (the environment's TASKMINE_SANDBOX_HOSTS wins)."""
        return get_sandbox(self.kind or os.environ.get("TASKMINE_SANDBOX", "auto"), home=home, hosts=hosts)


class LLMResource(ConfigurableResource):
    """The LLM layer's client (llm/), one per run: its budget and usage are the run's.

    `model` and `api_base` from this config, else TASKMINE_LLM_MODEL / TASKMINE_LLM_API_BASE; empty = no model
    (the default): every use says so and callers take their no-model path. The key is never config: `api_key_env`
    names the variable that holds it; the client reads it when it calls, and the run's log says whether
    `EnvVar(api_key_env)` is set. A field holding `EnvVar(...)` itself would fail every run where the variable
    is unset (Dagster's config check), the no-model default included. Field meanings: llm/config.py.
    """

    model: str = ""
    api_base: str = ""
    api_key_env: str = "TASKMINE_LLM_API_KEY"
    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_base_s: float = 1.0
    concurrency: int = 4
    budget_tokens: int | None = 2_000_000
    budget_usd: float | None = 5.0
    temperature: float = 0.0
    max_output_tokens: int | None = 1024
    structured_output: str = "json_schema"
    cache_dir: str = ""

    _client = PrivateAttr(default=None)

    def llm_config(self):
        fields = self.model_dump(exclude={"model", "api_base"})
        return LLMConfig.from_env(model=self.model, api_base=self.api_base, **fields)

    @property
    def enabled(self) -> bool:
        return self.llm_config().enabled

    def key_is_set(self) -> bool:
        return bool(EnvVar(self.api_key_env).get_value()) if self.api_key_env else False

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._client = None
        if context.log is not None and self.enabled:
            context.log.info(f"LLM: {self.llm_config().describe()}; key from ${self.api_key_env}: "
                             f"{'set' if self.key_is_set() else 'unset'}")

    def client(self):
        """The run's `llm.LLM` (made on first use; `LLM.enabled` is False with no model)."""
        if self._client is None:
            self._client = LLM(self.llm_config())
        return self._client
