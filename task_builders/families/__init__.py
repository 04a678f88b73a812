"""Task families: each turns work items into tasks (prompt, world slice, reference, rubric).

Invariants:
- Builders read anonymized events and work items only.
- A builder proves its own reference passes its own rubric (>= 0.99) and that an empty outbox fails
  it (<= 0.05) before a task exists (DESIGN.md, Convention 8); otherwise it emits a `Rejection`.
- The task id is the content hash of everything that defines the task, so re-runs give the same id.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from graders.rubric import Rubric, grade
from task_builders.cluster.splits import canary
from task_builders.config import DatasetConfig
from task_builders.worlds import manifest, world_hash
from warehouse.ids import content_hash
from warehouse.schemas import Event, Rejection, Task, WorkItem



@dataclass
class BuildContext:
    dataset: str
    events: dict[str, Event]              # anonymized, by event_id
    items: list[WorkItem]
    world_root: Path                      # $TASKMINE_HOME/worlds/<dataset>
    config: DatasetConfig
    repos: dict[str, dict] = field(default_factory=dict)  # repo name -> {"path", "sha_map"}
    splits: dict[str, tuple[str, str]] = field(default_factory=dict)  # item_id -> (split, canary) from clusters

    def by_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events.values() if e.kind == kind]


class Family(ABC):
    name: str = ""
    kinds: tuple[str, ...] = ("issue",)   # the work-item kinds it builds tasks from

    @abstractmethod
    def build(self, ctx: BuildContext) -> Iterator[Task | Rejection]:
        """Yield a Task per usable item and a Rejection (with its reason) per unusable one."""

    def reject(self, ctx: BuildContext, item: WorkItem | str, reason: str, detail: str = "",
               stage: str = "candidates") -> Rejection:
        subject = item if isinstance(item, str) else item.thread_key
        return Rejection(dataset=ctx.dataset, stage=stage, family=self.name, subject_id=subject,
                         reason=reason, detail=detail[:500])

    def finish(self, ctx: BuildContext, item: WorkItem, *, prompt: str, world_dir: Path, cutoff: dt.datetime,
               reference: dict, rubric: Rubric) -> Task | Rejection:
        """Seal a task: hash its world, prove the reference passes and doing nothing fails."""
        oracle = grade(rubric, reference["outbox"])
        null = grade(rubric, [])
        if oracle.score is None or oracle.score < 0.99:
            return self.reject(ctx, item, "reference does not pass its own rubric",
                               f"score={oracle.score} {oracle.message}")
        if null.score is None or null.score > 0.05:
            return self.reject(ctx, item, "doing nothing passes the rubric", f"score={null.score}")
        m = manifest(world_dir)
        wh = world_hash(m)
        body = {"dataset": ctx.dataset, "family": self.name, "item": item.item_id, "prompt": prompt,
                "cutoff": cutoff.isoformat(), "world": wh, "reference": reference,
                "rubric": rubric.model_dump(mode="json")}
        task_id = content_hash("task", body)[:32]
        if item.item_id in ctx.splits:        # the clusters stage: no near-duplicate crosses the splits
            split, mark = ctx.splits[item.item_id]
        else:                                 # no clustering ran: a hash of the thread
            test = int(content_hash("split", ctx.dataset, item.thread_key)[:8], 16) / 0xFFFFFFFF < ctx.config.test_share
            split, mark = ("test", canary(ctx.dataset)) if test else ("train", "")
        return Task(
            task_id=task_id, dataset=ctx.dataset, family=self.name, item_id=item.item_id, prompt=prompt,
            cutoff=cutoff, world={"dir": str(world_dir.relative_to(ctx.world_root)), **m}, world_hash=wh,
            reference=reference, rubric=rubric.model_dump(mode="json"), lineage=item.lineage,
            split=split, canary=mark,
        )


def families() -> dict[str, Family]:
    from task_builders.families.commit_link import CommitLink
    from task_builders.families.triage import TicketTriage

    return {f.name: f for f in (TicketTriage(), CommitLink())}
