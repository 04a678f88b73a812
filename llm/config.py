"""`LLMConfig`: which model, where, and the limits of one run. No model (the default) is a mode of its own.

The API key is never part of the configuration: `api_key_env` names the environment variable that holds
it (default TASKMINE_LLM_API_KEY), read when a call is made. Unset, litellm's own variable for the provider
applies (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...); with neither, an `openai/<name>` server at `api_base` (a
local OpenAI-compatible server, which needs no key) is sent the placeholder "no-key".

Any provider litellm speaks works: `model` is litellm's model string, e.g. "anthropic/claude-sonnet-4-5",
"gpt-4o-mini", or a local OpenAI-compatible server as "openai/<name>" with `api_base`
"http://127.0.0.1:8000/v1".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.paths import home

ENV_MODEL = "TASKMINE_LLM_MODEL"
ENV_API_BASE = "TASKMINE_LLM_API_BASE"
DEFAULT_KEY_ENV = "TASKMINE_LLM_API_KEY"


class LLMConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field("", description="litellm model string; empty = no model configured (the default)")
    api_base: str = Field("", description="base URL of the provider or of a local OpenAI-compatible server")
    api_key_env: str = Field(DEFAULT_KEY_ENV, description="NAME of the environment variable holding the key")
    timeout_s: float = Field(60.0, gt=0, description="per HTTP attempt")
    max_retries: int = Field(4, ge=0, description="retries on 429, 5xx, timeouts and connection errors")
    backoff_base_s: float = Field(1.0, ge=0, description="retry i waits base * 2**i (+ up to 25% jitter)")
    backoff_max_s: float = Field(60.0, ge=0, description="cap of one wait, Retry-After included")
    concurrency: int = Field(4, ge=1, description="most calls in flight at once, across threads")
    budget_tokens: int | None = Field(2_000_000, ge=0, description="tokens (in + out) per run; None = no cap")
    budget_usd: float | None = Field(5.0, ge=0, description="USD per run (litellm's cost map); None = no cap")
    temperature: float = Field(0.0, ge=0)
    max_output_tokens: int | None = Field(1024, ge=1, description="max_tokens of one reply")
    structured_output: Literal["json_schema", "prompt"] = Field(
        "json_schema", description="json_schema: send response_format (and the instructions); prompt: "
                                   "instructions only, for servers that reject response_format")
    cache_dir: str = Field("", description="response cache; empty = $TASKMINE_HOME/cache/llm")

    @property
    def enabled(self) -> bool:
        return bool(self.model.strip())

    def api_key(self) -> str | None:
        """The key from the environment variable `api_key_env`, read now; None when unset."""
        return os.environ.get(self.api_key_env) or None if self.api_key_env else None

    def cache_path(self) -> Path:
        if self.cache_dir:
            return Path(self.cache_dir).expanduser().resolve()

        return home() / "cache" / "llm"

    @classmethod
    def from_env(cls, **overrides) -> LLMConfig:
        """`model` and `api_base` from TASKMINE_LLM_MODEL and TASKMINE_LLM_API_BASE unless `overrides` give
        them non-empty (so a Dagster resource's empty field falls back to the environment); every other
        field from `overrides` or its default."""
        values = dict(overrides)
        for field, env in (("model", ENV_MODEL), ("api_base", ENV_API_BASE)):
            if not values.get(field):
                values[field] = os.environ.get(env, "")
        return cls(**values)

    def describe(self) -> str:
        """One line for logs and task metadata; never the key."""
        if not self.enabled:
            return "no model configured"
        where = f" at {self.api_base}" if self.api_base else ""
        return f"{self.model}{where}"
