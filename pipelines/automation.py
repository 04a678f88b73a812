"""The sensor that turns a new export folder into a dataset partition, and the daily re-run of changed ones."""


from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    multi_or_in_process_executor,
    schedule,
    sensor,
)

from extractors.stages import changed_datasets, dataset_folders
from pipelines.assets import datasets
from pipelines.resources import ExportsResource

taskmine_job = define_asset_job("taskmine_job", selection=AssetSelection.all(), partitions_def=datasets,
                                executor_def=multi_or_in_process_executor,
                                description="Every stage for one dataset: ingest -> ... -> publish.")


@sensor(job=taskmine_job, minimum_interval_seconds=30, default_status=DefaultSensorStatus.RUNNING,
        description="A new folder under the exports directory becomes a dataset partition and is run.")
def new_export_folders(context: SensorEvaluationContext, exports: ExportsResource):
    found = dataset_folders(exports.path())
    known = set(context.instance.get_dynamic_partitions(datasets.name))
    new = [d for d in found if d not in known]
    if not new:
        return SkipReason(f"no new folder under {exports.path()}")
    return SensorResult(
        run_requests=[RunRequest(partition_key=d, run_key=f"new-{d}") for d in new],
        dynamic_partitions_requests=[datasets.build_add_request(new)],
    )


@schedule(job=taskmine_job, cron_schedule="0 3 * * *", default_status=DefaultScheduleStatus.RUNNING,
          description="Daily at 03:00 (on while `taskmine ui` or a Dagster daemon runs): re-run every dataset "
                      "whose export changed since its last ingest; unchanged ones cost nothing. Turn it off with "
                      "the toggle on this page.")
def daily_changed_datasets(context: ScheduleEvaluationContext, exports: ExportsResource):
    known = context.instance.get_dynamic_partitions(datasets.name)
    changed = changed_datasets(exports.path(), known)
    if not changed:
        return SkipReason("no dataset changed")
    return [RunRequest(partition_key=d, run_key=f"changed-{d}-{fp[:12]}") for d, fp in changed]
