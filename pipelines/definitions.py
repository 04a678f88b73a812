"""The one Definitions root. New stages go into their own module and are listed here, nothing else."""

from __future__ import annotations

from dagster import Definitions, colored_console_logger, in_process_executor

from pipelines.assets import STAGES
from pipelines.automation import daily_changed_datasets, new_export_folders, taskmine_job
from pipelines.checks import CHECKS
from pipelines.progress import progress_logger
from pipelines.resources import ExportsResource, LLMResource, SandboxResource, WarehouseResource

defs = Definitions(
    assets=STAGES,
    asset_checks=CHECKS,
    jobs=[taskmine_job],
    sensors=[new_export_folders],
    schedules=[daily_changed_datasets],
    resources={
        "warehouse": WarehouseResource(),
        "exports": ExportsResource(),
        "sandbox": SandboxResource(),
        "llm": LLMResource(),
    },
    # `console` is what the UI uses; `taskmine run` selects `progress` in its run config.
    loggers={"console": colored_console_logger, "progress": progress_logger},
    # One step at a time: the stages share one warehouse and steps are I/O on the same files.
    executor=in_process_executor,
)
