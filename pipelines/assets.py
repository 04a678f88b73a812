"""One asset per stage, partitioned by dataset. Each is a few lines: call `taskmine.flow`, attach metadata."""


from dagster import (
    AssetExecutionContext,
    DynamicPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from pipelines.errors import stage
from pipelines.resources import ExportsResource, LLMResource, SandboxResource, WarehouseResource
from taskmine import flow

datasets = DynamicPartitionsDefinition(name="datasets")


def _config(context, warehouse: WarehouseResource, exports: ExportsResource):
    """The partition's DatasetConfig, read once per run (flow.run_config)."""
    ds = context.partition_key
    return flow.run_config(warehouse.store(), ds, exports.dataset_dir(ds), context.run_id)


def _result(res: flow.StageResult, **extra) -> MaterializeResult:
    md = {k: v for k, v in res.counts.items()}
    if res.preview:
        cols = list(res.preview[0])
        table = "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] +
                          ["| " + " | ".join(str(r.get(c, "")).replace("|", "/").replace("\n", " ") for c in cols)
                           + " |" for r in res.preview])
        md["preview"] = MetadataValue.md(table)
    md.update(extra)
    return MaterializeResult(metadata=md)


@asset(partitions_def=datasets, group_name="ingest", compute_kind="python",
       description="Every record of the dataset's exports as events (private: real names), plus quarantine.")
@stage
def raw_events(context: AssetExecutionContext, warehouse: WarehouseResource, exports: ExportsResource):
    ds = context.partition_key
    _config(context, warehouse, exports)  # a bad taskmine.toml fails the run here; later stages get this snapshot
    res = flow.ingest(warehouse.store(), ds, exports.dataset_dir(ds), run_id=context.run_id)
    return _result(res, dataset_dir=MetadataValue.path(str(exports.dataset_dir(ds))))


@asset(partitions_def=datasets, group_name="identity", deps=[raw_events],
       description="Handles from every source resolved to persons, with the evidence of each merge.")
@stage
def identities(context: AssetExecutionContext, warehouse: WarehouseResource):
    return _result(flow.identities(warehouse.store(), context.partition_key))


@asset(partitions_def=datasets, group_name="anonymize", deps=[identities],
       description="Events with consistent pseudonyms and scrubbed PII; rewritten git histories.")
@stage
def anonymized_events(context: AssetExecutionContext, warehouse: WarehouseResource, exports: ExportsResource):
    ds = context.partition_key
    return _result(flow.anonymize(warehouse.store(), ds, exports.dataset_dir(ds),
                                  _config(context, warehouse, exports), run_id=context.run_id))


@asset(partitions_def=datasets, group_name="mining", deps=[anonymized_events],
       description="Cross-source links: issue keys, commit SHAs, issue/commit URLs and Message-IDs in any text.")
@stage
def links(context: AssetExecutionContext, warehouse: WarehouseResource):
    return _result(flow.links(warehouse.store(), context.partition_key))


@asset(partitions_def=datasets, group_name="mining", deps=[anonymized_events, links],
       description="Units of real work from every source: issues with fixing commits and the mail/chat that "
                   "mentions them, e-mail requests and their replies, Slack questions and their answers, tickets "
                   "resolved with a comment. Skipped candidates are counted per source and reason.")
@stage
def work_items(context: AssetExecutionContext, warehouse: WarehouseResource, exports: ExportsResource):

    ds = context.partition_key
    return _result(flow.work_items(warehouse.store(), ds, _config(context, warehouse, exports)))


@asset(partitions_def=datasets, group_name="cluster", deps=[work_items],
       description="Near-duplicate groups (MinHash), families (all-MiniLM-L6-v2 embeddings, cached by content "
                   "hash; agglomerative clustering) with labels and a 2-D map, and leakage-safe train/test splits.")
@stage
def clusters(context: AssetExecutionContext, warehouse: WarehouseResource, exports: ExportsResource):
    import base64


    ds = context.partition_key
    res = flow.clusters(warehouse.store(), ds, _config(context, warehouse, exports))
    fams = res.extra.get("families", [])
    extra = {"families_table": MetadataValue.md(_families_md(fams))} if fams else {}
    if res.extra.get("map"):
        b64 = base64.b64encode(res.extra["map"]).decode()
        extra["family_map"] = MetadataValue.md(f"![families](data:image/png;base64,{b64})")
        extra["family_map_path"] = MetadataValue.path(res.extra["map_path"])
    return _result(res, **extra)


def _families_md(fams: list[dict]) -> str:
    rows = ["| family | label | items | distinct | split | kinds | examples |", "|---|---|---|---|---|---|---|"]
    for f in fams[:40]:
        kinds = ", ".join(f"{k} {v}" for k, v in f["kinds"].items())
        ex = " · ".join(e.replace("|", "/") for e in f["examples"])
        rows.append(f"| {f['family']} | {f['label']} | {f['items']} | {f['groups']} | {f['split']} | {kinds} | {ex} |")
    return "\n".join(rows)


@asset(partitions_def=datasets, group_name="families", deps=[anonymized_events],
       description="The company as one world for every task: every issue, mail and chat message with a full-text "
                   "index, and the git histories without issue keys in messages (a task is a cutoff into it).")
@stage
def world(context: AssetExecutionContext, warehouse: WarehouseResource):
    return _result(flow.world(warehouse.store(), context.partition_key))


@asset(partitions_def=datasets, group_name="families", deps=[work_items, clusters, world],
       description="Candidate tasks per family (triage, commit link, e-mail reply, chat answer, resolution note, "
                   "code change): prompt, cutoff into the world, reference actions, rubric; each proves its answer "
                   "is nowhere the agent can reach (code change also measures its tests in the sandbox). With a "
                   "model (the llm resource): rewritten instructions, judge checks.")
@stage
def tasks(context: AssetExecutionContext, warehouse: WarehouseResource, exports: ExportsResource,
          sandbox: SandboxResource, llm: LLMResource):

    ds = context.partition_key
    store = warehouse.store()
    client = llm.client()
    config = _config(context, warehouse, exports)
    return _result(flow.tasks(store, ds, config, sandbox=sandbox.get(home=store.home, hosts=config.sandbox_hosts),
                              llm=client), llm=client.describe())


@asset(partitions_def=datasets, group_name="validation", deps=[tasks],
       description="Oracle and null replays of every task in its sandbox, repeated; cached per task.")
@stage
def validations(context: AssetExecutionContext, warehouse: WarehouseResource, exports: ExportsResource,
                sandbox: SandboxResource, llm: LLMResource):

    ds = context.partition_key
    config = _config(context, warehouse, exports)
    repeats = sandbox.repeats or config.repeats
    store = warehouse.store()
    box = sandbox.get(home=store.home, hosts=config.sandbox_hosts)
    client = llm.client()
    pool = box.describe() if hasattr(box, "describe") else ""
    if pool:
        context.log.info(f"sandbox pool: {pool} ({box.capacity} tasks at once)")
    res = flow.validations(store, ds, box, repeats, progress=context.log.info, llm=client, config=config,
                           parallel=config.validate_parallel)
    if pool:
        context.log.info("dispatched: " + ", ".join(f"{h} {n}" for h, n in box.dispatched().items()))
    return _result(res, sandbox=box.kind, llm=client.describe(), **({"sandbox_hosts": box.describe()} if pool else {}),
                   funnel=funnel_table(flow.funnel(warehouse.store(), ds)), **difficulty_metadata(res.extra))


@asset(partitions_def=datasets, group_name="publish", deps=[validations],
       description="The versioned dataset labs load (a Hugging Face dataset folder): agent view, grader view, "
                   "trajectories, SWE-bench instances, worlds, manifest, card (leak-audited). "
                   "Refused, leaving LATEST where it was, when no task is valid or too much of the export was "
                   "quarantined.")
@stage
def published_dataset(context: AssetExecutionContext, warehouse: WarehouseResource, exports: ExportsResource):

    ds = context.partition_key
    config = _config(context, warehouse, exports)
    result, counts = flow.publish(warehouse.store(), ds, config)
    report = flow.difficulty_report(warehouse.store(), ds, config)   # the published tasks: valid, inside the band
    return MaterializeResult(metadata={
        "path": MetadataValue.path(str(result.path)), "version": result.version, "tasks": result.tasks,
        "new_version": result.created, "funnel": funnel_table(counts), **difficulty_metadata(report)})


def difficulty_metadata(report: dict) -> dict:
    """Per family difficulty and grader error (taskmine.flow.difficulty_report) as a table and the plot, and the
    hack-resistance table (every attack class: tasks tried, tasks it passed, best score on published tasks)."""
    import base64

    from warehouse.card import narrow_tables

    if not report.get("difficulty_table"):
        return {}

    md = {"difficulty": MetadataValue.md("\n\n".join(narrow_tables(report["difficulty_table"])))}
    if report.get("resistance_table"):
        md["hack_resistance"] = MetadataValue.md("\n\n".join(narrow_tables(report["resistance_table"],
                                                                          ("family", "attack"))))
    if report.get("difficulty_plot"):
        b64 = base64.b64encode(report["difficulty_plot"]).decode()
        md["difficulty_plot"] = MetadataValue.md(f"![difficulty](data:image/png;base64,{b64})")
        md["difficulty_plot_path"] = MetadataValue.path(report["difficulty_plot_path"])
    return md


FUNNEL_STAGES = ("events", "work_items", "candidates", "tasks", "validated", "published")


def funnel_rows(counts: dict[str, int]) -> list[dict[str, str | int]]:
    """The dataset's funnel: each stage's count and the share of the previous stage it kept. Candidates fan out
    (one work item is a candidate of every family that reads its kind; a fixing commit without a ticket is one
    too), so their row says how many per work item instead of a share above 100%."""
    rows, previous = [], None
    for name in FUNNEL_STAGES:
        if name not in counts:
            continue
        n = int(counts[name])
        if name == "candidates":
            kept = f"{n / previous:.2f} per work item" if previous else ""
        else:
            kept = f"{n / previous:.0%}" if previous else ""
        rows.append({"stage": name, "count": n, "kept from previous": kept})
        previous = n
    return rows


def funnel_table(counts: dict[str, int]) -> MetadataValue:
    """The dataset's funnel (funnel_rows) as a Dagster table."""
    rows = [TableRecord(r) for r in funnel_rows(counts)]
    schema = TableSchema(columns=[TableColumn("stage", "string"), TableColumn("count", "int"),
                                  TableColumn("kept from previous", "string")])
    return MetadataValue.table(records=rows, schema=schema)


STAGES = [raw_events, identities, anonymized_events, links, work_items, clusters, world, tasks, validations,
          published_dataset]
