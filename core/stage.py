"""The stage contract (DESIGN.md, convention 17): every stage of the pipeline is `run(ctx: RunContext) -> StageResult`,
and every gate on a stage is `check(ctx: RunContext) -> CheckResult`.

A `RunContext` is made once per run of one dataset (`taskmine.flow.context`): the store, the dataset, its export
folder, the run's config, the run id, and what some stages use (a sandbox, an LLM client, a progress callback).
A stage reads its inputs from the store and writes its outputs there. It never reads `taskmine.toml` and never
falls back to a default config: what the run decided is `ctx.config`, read once by the run's first stage and
snapshotted under the run id (`run_config`), so an edit of the file during a run changes the next run, never half
of this one.

A `StageResult` says what a person sees about the stage: numbers (`counts`, also the line `taskmine run` prints),
a few rows (`preview`) and richer values (`shown`: markdown, tables, images, paths) that the Dagster assets render
(pipelines/); `extra` is for library callers and is not shown.

Invariant: this module imports only the warehouse and core; the sandbox and the LLM client are typed `Any` here
because their packages sit above core (they are the runner's to make, and only for the stages that use them).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.config import DatasetConfig, load_config
from warehouse.schemas import Rejection
from warehouse.store import Store

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunContext:
    """One run of one dataset, as every stage and check of the run sees it (see the module docstring)."""

    store: Store
    dataset: str
    config: DatasetConfig                   # the run's snapshot (run_config), never re-read by a stage
    dataset_dir: Path | None = None         # the dataset's export folder (ingest and anonymize read it)
    run_id: str = ""
    sandbox: Any = None                     # environments.sandbox.Sandbox, for the stages that use one
    llm: Any = None                         # llm.LLM, for the stages that use one (None or disabled: no model)
    progress: Progress | None = None        # one line per unit of long work (validated task, baseline run)

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def replace(self, **changes) -> RunContext:
        """This context with some fields changed (another sandbox, a narrower config for a test)."""
        return dataclasses.replace(self, **changes)


# --- what a stage shows -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Markdown:
    text: str


@dataclass(frozen=True)
class Table:
    """Rows of one typed table (every row has the same keys; ints and floats keep their type)."""

    rows: list[dict]


@dataclass(frozen=True)
class Image:
    """A PNG the stage wrote (shown inline, and its path beside it as `<name>_path`)."""

    path: Path


@dataclass(frozen=True)
class FilePath:
    path: str


Shown = Markdown | Table | Image | FilePath


@dataclass
class StageResult:
    counts: dict[str, int | float | str] = field(default_factory=dict)
    preview: list[dict] = field(default_factory=list)
    extra: dict = field(default_factory=dict)   # for library callers (reports, the published version): not shown
    shown: dict[str, Shown] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckResult:
    """A gate's verdict: `why` is one line a person reads (the run's error when a blocking gate fails)."""

    passed: bool
    why: str
    metadata: dict[str, int | float | str] = field(default_factory=dict)


def preview(rows: Iterable, fields: tuple[str, ...], n: int = 5) -> list[dict]:
    """The first `n` rows as short strings of `fields` (a stage's preview table)."""
    out = []
    for r in rows:
        out.append({f: "" if getattr(r, f) is None else str(getattr(r, f))[:120] for f in fields})
        if len(out) >= n:
            break
    return out


def record_rejections(ctx: RunContext, stage: str, rows: list[Rejection]) -> None:
    """Replace this stage's rejections for the dataset (the funnel's reasons), keeping the other stages' rows."""
    kept = [r for r in ctx.store.read("rejections", ctx.dataset) if r.stage != stage]
    ctx.store.replace("rejections", ctx.dataset, kept + rows)


def run_config(store: Store, dataset: str, dataset_dir: Path | None, run_id: str = "") -> DatasetConfig:
    """The dataset's config for one run: read from its taskmine.toml once, by the run's first stage that asks, and
    kept in state/configs/<dataset>.json under the run id; every later stage of that run (each Dagster step may
    be its own process) gets the same snapshot, so an edit of taskmine.toml during a run never changes half of
    it. Without a run id (scripts, tests) the file is read."""
    snap = store.home / "state" / "configs" / f"{dataset}.json"
    if run_id and snap.exists():
        try:
            saved = json.loads(snap.read_text())
        except ValueError:
            saved = {}
        if saved.get("run_id") == run_id:
            return DatasetConfig(**saved["config"])
    config = load_config(dataset_dir)
    if run_id:
        snap.parent.mkdir(parents=True, exist_ok=True)
        tmp = snap.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"run_id": run_id, "config": config.model_dump(mode="json")}, sort_keys=True))
        os.replace(tmp, snap)
    return config
