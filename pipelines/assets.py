"""One asset per stage of `taskmine.flow.STAGES`, partitioned by dataset, generated from the table: each builds
the run's context from the resources, calls the stage and turns its result into metadata."""

import base64

from dagster import (
    AssetExecutionContext,
    AssetKey,
    DynamicPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from core.stage import FilePath, Image, Markdown, RunContext, StageResult, Table
from pipelines.errors import stage_errors
from taskmine import flow

datasets = DynamicPartitionsDefinition(name="datasets")


def run_context(context, uses: tuple[str, ...] = ()) -> RunContext:
    """The partition's RunContext from the run's resources: the config snapshot of this run id (the run's first
    step reads taskmine.toml, a bad one fails the run there), and a sandbox and an LLM client only for a stage that
    uses them (the sandbox over the dataset's `sandbox_hosts` when TASKMINE_SANDBOX_HOSTS names none)."""
    r, ds = context.resources, context.partition_key
    store = r.warehouse.store()
    ctx = flow.context(store, ds, r.exports.dataset_dir(ds), run_id=context.run.run_id,
                       llm=r.llm.client() if "llm" in uses else None,
                       repeats=r.sandbox.repeats if "sandbox" in uses else 0,
                       progress=context.log.info)
    if "sandbox" not in uses:
        return ctx
    box = r.sandbox.get(home=store.home, hosts=ctx.config.sandbox_hosts)
    if hasattr(box, "describe"):
        context.log.info(f"sandbox pool: {box.describe()} ({box.capacity} tasks at once)")
    return ctx.replace(sandbox=box)


def metadata(res: StageResult, ctx: RunContext | None = None) -> dict:
    """A StageResult as Dagster metadata: counts as they are, the preview and markdown as markdown, tables as
    typed tables, images inline (with `<name>_path`), paths as paths; the sandbox and the model a stage used."""
    md: dict = dict(res.counts)
    if res.preview:
        cols = list(res.preview[0])
        md["preview"] = MetadataValue.md("\n".join(
            ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] +
            ["| " + " | ".join(str(r.get(c, "")).replace("|", "/").replace("\n", " ") for c in cols) + " |"
             for r in res.preview]))
    for name, value in res.shown.items():
        if isinstance(value, Markdown):
            md[name] = MetadataValue.md(value.text)
        elif isinstance(value, Table):
            md[name] = table(value.rows)
        elif isinstance(value, Image):
            b64 = base64.b64encode(value.path.read_bytes()).decode()
            md[name] = MetadataValue.md(f"![{name}](data:image/png;base64,{b64})")
            md[f"{name}_path"] = MetadataValue.path(str(value.path))
        elif isinstance(value, FilePath):
            md[name] = MetadataValue.path(value.path)
    if ctx is not None and ctx.sandbox is not None:
        md["sandbox"] = ctx.sandbox.kind
        if hasattr(ctx.sandbox, "describe"):     # a pool of Docker hosts (environments.pool)
            md["sandbox_hosts"] = ctx.sandbox.describe()
    if ctx is not None and ctx.llm is not None:
        md["llm"] = ctx.llm.describe()
    return md


def table(rows: list[dict]) -> MetadataValue:
    """Rows of one table as a Dagster table (an int column stays an int)."""
    cols = list(rows[0]) if rows else []
    kinds = {c: "int" if rows and all(isinstance(r[c], int) for r in rows) else "string" for c in cols}
    return MetadataValue.table(records=[TableRecord(r) for r in rows],
                               schema=TableSchema(columns=[TableColumn(c, kinds[c]) for c in cols]))


def _asset(stage: flow.Stage):
    @asset(name=stage.name, partitions_def=datasets, group_name=stage.group, compute_kind="python",
           deps=[AssetKey(d) for d in flow.after(stage)], description=stage.description,
           required_resource_keys={"warehouse", "exports", *stage.uses})
    def body(context: AssetExecutionContext) -> MaterializeResult:
        with stage_errors(context):
            ctx = run_context(context, stage.uses)
            res = stage.run(ctx)
            return MaterializeResult(metadata=metadata(res, ctx))

    return body


STAGES = [_asset(s) for s in flow.STAGES]
