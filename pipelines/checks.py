"""Asset checks, one per gate of `taskmine.flow.STAGES`, generated from the table.

The checks that guard publishing are blocking with ERROR severity: when one fails, the stages after it do
not run, the run fails, and the check's one-line description becomes the run's `taskmine/error` tag. A
non-blocking check that fails is a warning.
"""

import warnings

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetKey,
    PreviewWarning,
    asset_check,
)

from pipelines.assets import datasets, run_context
from pipelines.errors import tag_run
from taskmine import flow

# Partitioned asset checks are a Dagster preview feature; we rely on it knowingly (pinned Dagster version).
warnings.filterwarnings("ignore", category=PreviewWarning)


def _check(stage: flow.Stage, gate: flow.Check):
    @asset_check(name=gate.name, asset=AssetKey(stage.name), partitions_def=datasets, blocking=gate.blocking,
                 description=gate.description, required_resource_keys={"warehouse", "exports"})
    def body(context: AssetCheckExecutionContext) -> AssetCheckResult:
        verdict = gate.run(run_context(context))
        if not verdict.passed and gate.blocking:
            tag_run(context, verdict.why)
        return AssetCheckResult(passed=verdict.passed, description=verdict.why, metadata=verdict.metadata,
                                severity=AssetCheckSeverity.ERROR if gate.blocking else AssetCheckSeverity.WARN)

    return body


CHECKS = [_check(s, c) for s in flow.STAGES for c in s.checks]
