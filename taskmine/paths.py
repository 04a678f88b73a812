"""Where things live by default. Read at call time, never at import."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("TASKMINE_HOME") or ".taskmine").resolve()


def default_exports() -> Path:
    """TASKMINE_EXPORTS, else the bundled sample company written under TASKMINE_HOME."""
    env = os.environ.get("TASKMINE_EXPORTS")
    return Path(env).resolve() if env else home() / "sample-exports"


def dagster_home() -> Path:
    """A DAGSTER_HOME under TASKMINE_HOME with telemetry off, created on first use."""
    d = home() / "dagster"
    d.mkdir(parents=True, exist_ok=True)
    cfg = d / "dagster.yaml"
    if not cfg.exists():
        # One run at a time per dataset: the sensor's run and a click on "Materialize all" never write
        # the same partition's warehouse files at once (runs launched from the UI go through this queue).
        cfg.write_text("telemetry:\n  enabled: false\n"
                       "concurrency:\n  runs:\n    tag_concurrency_limits:\n"
                       "      - key: dagster/partition\n        value:\n          applyLimitPerUniqueValue: true\n"
                       "        limit: 1\n")
    return d
