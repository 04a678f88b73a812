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


# telemetry off; no "Join the community" modal in every new browser; one run at a time per dataset
# partition (the sensor's run and a click on "Materialize all" never write the same partition at once).
INSTANCE_YAML = ("telemetry:\n  enabled: false\n"
                 "nux:\n  enabled: false\n"
                 "concurrency:\n  runs:\n    tag_concurrency_limits:\n"
                 "      - key: dagster/partition\n        value:\n          applyLimitPerUniqueValue: true\n"
                 "        limit: 1\n")


def dagster_home(create: bool = True) -> Path:
    """The DAGSTER_HOME under TASKMINE_HOME, with INSTANCE_YAML written on first use (`create`). An existing
    dagster.yaml is the user's: only a missing `nux:` section is added to it."""
    d = home() / "dagster"
    if not create:
        return d
    d.mkdir(parents=True, exist_ok=True)
    cfg = d / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text(INSTANCE_YAML)
    elif "\nnux:" not in "\n" + cfg.read_text():
        with open(cfg, "a") as f:
            f.write("nux:\n  enabled: false\n")
    return d


CACHE_VARS = (("TORCHINDUCTOR_CACHE_DIR", "torchinductor"), ("TRITON_CACHE_DIR", "triton"),
              ("PYTORCH_KERNEL_CACHE_PATH", "torch-kernels"), ("MPLCONFIGDIR", "matplotlib"))
_OURS = "TASKMINE_CACHE_VARS"  # which of CACHE_VARS taskmine itself set (so a later home re-points them)


def contain_caches(root: Path | None = None) -> None:
    """Point the caches our dependencies write by default to $TMPDIR or ~ (torch's inductor and kernel
    caches, triton, matplotlib) under TASKMINE_HOME/cache, unless the user chose a place for them. A value
    taskmine set for an earlier home (the same process, or a parent `taskmine` process) is re-pointed."""
    cache = (root or home()) / "cache"
    ours = set(filter(None, os.environ.get(_OURS, "").split(",")))
    for var, sub in CACHE_VARS:
        if var not in os.environ or var in ours:
            os.environ[var] = str(cache / sub)
            ours.add(var)
    os.environ[_OURS] = ",".join(sorted(ours))
