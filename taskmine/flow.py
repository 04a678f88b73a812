"""The pipeline as one table: each stage's name, its body (`run(ctx: RunContext) -> StageResult`, core.stage), what
it reads and writes, what the runner must give it (a sandbox, an LLM) and the gates on its output. The Dagster
assets and asset checks (pipelines/) and the stage order of `taskmine run` are generated from `STAGES`; tests,
benchmarks and scripts run the same bodies with `run(ctx, ...)`.

The bodies live with their concern (extractors, privacy, task_builders, graders, publishing: each package's
`stages` module); nothing here but the table, the derived order and the context a run is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.config import DatasetConfig
from core.stage import CheckResult, Progress, RunContext, StageResult, run_config
from extractors import stages as ingest
from graders import stages as validation
from privacy import stages as privacy
from publishing import stages as publishing
from task_builders import stages as building
from warehouse.store import Store


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[RunContext], CheckResult]
    blocking: bool          # a failure stops the run there (the run's error is its one line)
    description: str


@dataclass(frozen=True)
class Stage:
    name: str               # the Dagster asset and the `taskmine run` line
    run: Callable[[RunContext], StageResult]
    group: str
    reads: tuple[str, ...]  # tables and folders (`exports`, `repos`, `world`) it reads
    writes: tuple[str, ...]
    description: str
    uses: tuple[str, ...] = ()      # what the runner puts in the context: "sandbox", "llm"
    checks: tuple[Check, ...] = ()


STAGES: tuple[Stage, ...] = (
    Stage("raw_events", ingest.ingest, "ingest", ("exports",), ("events", "quarantine"),
          "Every record of the dataset's exports as events (private: real names), plus quarantine.",
          checks=(Check("events_schema", ingest.check_schema, False, "Events and quarantine match their schema."),
                  Check("quarantine_rate", ingest.check_quarantine, True,
                        "The share of quarantined records stays under the dataset's max_quarantine_rate "
                        "(blocking: an export that is mostly unreadable is not mined or published)."))),
    Stage("identities", privacy.identities, "identity", ("events",), ("identities",),
          "Handles from every source resolved to persons, with the evidence of each merge."),
    Stage("anonymized_events", privacy.anonymize, "anonymize", ("exports", "events", "identities"),
          ("anonymized_events", "quarantine", "withheld", "repos"),
          "Events with consistent pseudonyms and scrubbed PII; rewritten git histories.",
          checks=(Check("anonymized_leaks", privacy.check_withheld, True,
                        "What the leak audit still found after anonymization was withheld (left out of the world "
                        "and of every task); the share withheld stays under the dataset's max_withheld_rate "
                        "(blocking: over it, the run stops here)."),)),
    Stage("links", building.links, "mining", ("anonymized_events",), ("links",),
          "Cross-source links: issue keys, commit SHAs, issue/commit URLs and Message-IDs in any text."),
    Stage("work_items", building.work_items, "mining", ("anonymized_events", "links"), ("work_items", "rejections"),
          "Units of real work from every source: issues with fixing commits and the mail/chat that mentions them, "
          "e-mail requests and their replies, Slack questions and their answers, tickets resolved with a comment. "
          "Skipped candidates are counted per source and reason.",
          checks=(Check("work_item_lineage", building.check_lineage, False,
                        "Every work item's lineage names only anonymized events, its request among them."),)),
    Stage("clusters", building.clusters, "cluster", ("work_items", "anonymized_events"), ("clusters",),
          "Near-duplicate groups (MinHash), families (all-MiniLM-L6-v2 embeddings, cached by content hash; "
          "agglomerative clustering) with labels and a 2-D map, and leakage-safe train/test splits.",
          checks=(Check("splits_leakage_safe", building.check_splits, True,
                        "No near-duplicate group crosses train/test; every test item carries the canary."),)),
    Stage("world", building.world, "families", ("anonymized_events", "repos"), ("world",),
          "The company as one world for every task: every issue, mail and chat message with a full-text index, "
          "and the git histories without issue keys in messages (a task is a cutoff into it)."),
    Stage("tasks", building.tasks, "families", ("anonymized_events", "work_items", "clusters", "world", "repos"),
          ("tasks", "rejections"),
          "Candidate tasks per family (triage, commit link, e-mail reply, chat answer, resolution note, code "
          "change): prompt, cutoff into the world, reference actions, rubric; each proves its answer is nowhere the "
          "agent can reach (code change also measures its tests in the sandbox). With a model (the llm resource): "
          "rewritten instructions, judge checks.", uses=("sandbox", "llm")),
    Stage("validations", validation.validations, "validation", ("tasks", "world"), ("validations", "rejections"),
          "Oracle and null replays of every task in its sandbox, repeated; cached per task.", uses=("sandbox", "llm"),
          checks=(Check("oracle_and_null", validation.check_oracle_and_null, True,
                        "Every task was replayed, without infrastructure errors, and at least one is valid "
                        "(blocking: a dataset with nothing valid publishes nothing and LATEST stays)."),)),
    Stage("published_dataset", publishing.publish, "publish",
          ("events", "quarantine", "anonymized_events", "withheld", "world", "tasks", "validations", "rejections"),
          ("published", "withheld", "rejections"),
          "The versioned dataset labs load (a Hugging Face dataset folder): agent view, grader view, trajectories, "
          "SWE-bench instances, worlds, manifest, card (leak-audited). Refused, leaving LATEST where it was, when "
          "no task is valid or too much of the export was quarantined.",
          checks=(Check("leak_audit", publishing.check_leak_audit, True,
                        "Leak audit: no known real name, no personal data the recognizers or NER find, no secret "
                        "in the published files, and every file as its manifest says."),)),
)
BY_NAME = {s.name: s for s in STAGES}
ORDER = tuple(s.name for s in STAGES)   # `taskmine run`'s order: the table's


def after(stage: Stage) -> tuple[str, ...]:
    """The stages `stage` depends on: for each thing it reads, the nearest earlier stage that writes it, without
    those another of them already depends on (the Dagster asset graph's edges)."""
    earlier = STAGES[:STAGES.index(stage)]
    direct = {next(s.name for s in reversed(earlier) if r in s.writes) for r in stage.reads
              if any(r in s.writes for s in earlier)}
    implied = {a for d in direct for a in _ancestors(BY_NAME[d])}
    return tuple(s.name for s in earlier if s.name in direct - implied)


def _ancestors(stage: Stage) -> set[str]:
    out = set(after(stage))
    return out | {a for d in out for a in _ancestors(BY_NAME[d])}


def context(store: Store, dataset: str, dataset_dir: Path | None = None, *, config: DatasetConfig | None = None,
            run_id: str = "", sandbox=None, llm=None, progress: Progress | None = None,
            repeats: int = 0) -> RunContext:
    """The context of one run of `dataset`: `config` as given, else the run's snapshot of the dataset's
    taskmine.toml (core.stage.run_config: read once per run id); `repeats` (the CLI's --repeats) overrides the
    config's for this run."""
    config = config if config is not None else run_config(store, dataset, dataset_dir, run_id)
    if repeats:
        config = config.model_copy(update={"repeats": repeats})
    return RunContext(store, dataset, config, dataset_dir, run_id, sandbox, llm, progress)


def run(ctx: RunContext, *names: str) -> StageResult:
    """Run the named stages (every stage when none) in the table's order, without Dagster and without their
    gates; the last one's result."""
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise KeyError(f"no stage named {unknown[0]!r}; the stages are {', '.join(ORDER)}")
    result = StageResult()
    for stage in STAGES:
        if not names or stage.name in names:
            result = stage.run(ctx)
    return result


def prepare(ctx: RunContext, links_too: bool = True) -> None:
    """Ingest, identities and anonymize (and links): what every later stage reads, without Dagster."""
    run(ctx, "raw_events", "identities", "anonymized_events", *(("links",) if links_too else ()))
