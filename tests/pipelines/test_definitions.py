"""The Dagster side: one Definitions root with every stage, checks, the sensor and the schedule."""

import shutil

from dagster import (
    AssetCheckKey,
    AssetKey,
    DagsterInstance,
    Definitions,
    build_schedule_context,
    build_sensor_context,
)

from pipelines.assets import STAGES, datasets
from pipelines.automation import daily_changed_datasets, new_export_folders
from pipelines.definitions import defs
from pipelines.resources import ExportsResource


def test_definitions_load_with_every_stage_and_check():
    Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for a in STAGES for k in a.keys}
    assert keys == {"raw_events", "identities", "anonymized_events", "links", "work_items", "clusters", "world",
                    "tasks", "validations", "published_dataset"}
    graph = defs.resolve_asset_graph()
    assert {c.name for c in graph.asset_check_keys} == {"events_schema", "quarantine_rate", "anonymized_leaks",
                                                        "work_item_lineage", "splits_leakage_safe",
                                                        "oracle_and_null", "leak_audit"}
    assert all(graph.get(k).partitions_def == datasets for k in graph.get_all_asset_keys())
    groups = {graph.get(k).group_name for k in graph.get_all_asset_keys()}
    assert len(groups) == 8  # one group per stage
    assert defs.resolve_job_def("taskmine_job") is not None


def test_library_packages_do_not_import_dagster():
    import subprocess
    import sys

    code = ("import sys, core.stage, extractors.base, extractors.detect, extractors.stages, warehouse.store,"
            "publishing.publish, publishing.stages, privacy.anonymize, privacy.stages, task_builders.families,"
            "task_builders.stages, graders.replay, graders.stages, environments.sandbox, taskmine.flow;"
            "sys.exit(1 if 'dagster' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_sensor_turns_a_new_folder_into_a_partition_and_a_run(tmp_path):
    (tmp_path / "acme").mkdir()
    (tmp_path / ".truth").mkdir()  # hidden folders are not datasets
    with DagsterInstance.ephemeral() as instance:  # disposed: no instance state outlives the test
        ctx = build_sensor_context(instance=instance, resources={"exports": ExportsResource(root=str(tmp_path))})
        result = new_export_folders(ctx)
        assert [r.partition_key for r in result.run_requests] == ["acme"]
        assert result.dynamic_partitions_requests[0].partition_keys == ["acme"]
        instance.add_dynamic_partitions(datasets.name, ["acme"])
        again = new_export_folders(build_sensor_context(instance=instance,
                                                        resources={"exports": ExportsResource(root=str(tmp_path))}))
        assert not getattr(again, "run_requests", None)


def test_schedule_reruns_only_changed_datasets(tmp_path, sample_company, taskmine_env):
    from taskmine import flow
    from warehouse.store import Store

    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    flow.run(flow.context(Store(), "acme", exports / "acme", run_id="r1"), "raw_events")
    with DagsterInstance.get() as instance:  # a schedule context needs a persistent instance (DAGSTER_HOME)
        instance.add_dynamic_partitions(datasets.name, ["acme"])
        res = {"exports": ExportsResource(root=str(exports))}
        quiet = daily_changed_datasets(build_schedule_context(instance=instance, resources=res))
        assert not isinstance(quiet, list)  # a SkipReason: nothing changed
        issue = exports / "acme" / "jira" / "CORE-1.json"
        issue.write_text(issue.read_text() + " ")
        changed = daily_changed_datasets(build_schedule_context(instance=instance, resources=res))
        assert [r.partition_key for r in changed] == ["acme"]


def test_the_funnel_never_reads_a_share_above_100_percent_for_candidates():
    from graders.stages import funnel_rows

    rows = {r["stage"]: r["kept from previous"] for r in funnel_rows(
        {"events": 269, "work_items": 42, "candidates": 74, "tasks": 26, "validated": 26, "published": 26})}
    assert rows["candidates"] == "1.76 per work item" and rows["tasks"] == "35%" and rows["published"] == "100%"
    assert not any(v.endswith("%") and int(v[:-1]) > 100 for v in rows.values() if v)


def test_the_assets_and_checks_are_the_stage_table():
    """pipelines/ generates every asset and check from taskmine.flow.STAGES: same names, groups, descriptions,
    dependencies, resources and blocking gates; nothing else is defined."""
    from taskmine import flow

    graph = defs.resolve_asset_graph()
    for s in flow.STAGES:
        node = graph.get(AssetKey(s.name))
        assert {k.to_user_string() for k in node.parent_keys} == set(flow.after(s))
        assert node.group_name == s.group and node.description == s.description
        spec = next(a for a in STAGES if AssetKey(s.name) in a.keys)
        assert set(spec.required_resource_keys) - {"io_manager"} == {"warehouse", "exports", *s.uses}
        for c in s.checks:
            assert graph.get_check_spec(AssetCheckKey(AssetKey(s.name), c.name)).blocking == c.blocking
    assert len(list(graph.get_all_asset_keys())) == len(flow.STAGES)
    assert len(graph.asset_check_keys) == sum(len(s.checks) for s in flow.STAGES)
