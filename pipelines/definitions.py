"""The one Definitions root. New stages go into their own module and are listed here, nothing else."""

from __future__ import annotations

from dagster import Definitions, colored_console_logger, multi_or_in_process_executor

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
    # Each step in its own process (run config `execution: {config: {in_process: {}}}` for one process): steps
    # that run at once write different files (a table is one Parquet file per dataset, replaced by rename; the
    # world stage writes only worlds/<dataset>), and runs of different datasets share nothing but the catalog.
    executor=multi_or_in_process_executor,
)
