"""A task family that is not part of taskmine: a third party's, as it would ship in its own package.

`tests/test_outside_family.py` registers it through an entry point (`taskmine.families`) of a distribution it
writes on sys.path, then runs taskmine on an export: nothing in the project names it. It declares everything a
family is (task_builders.families.Family): the work items it wants (a kind of its own, and `mine`), its settings
(`Config`, the [families.priority_call] table of taskmine.toml), how it builds tasks, a probe, and a baseline.

The family: an issue as filed -> the priority the team gave it within `window_days` of filing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from pydantic import Field

from environments.actions import JiraUpdate
from graders.baselines import Baseline
from graders.rubric import CheckSpec, Rubric
from task_builders.config import FamilyConfig
from task_builders.families import READ_TOOLS, BuildContext, Draft, Family, Probe
from warehouse.schemas import Rejection, WorkItem

KIND = "priority_call"


class PriorityCallConfig(FamilyConfig):
    window_days: float = Field(2.0, gt=0)    # a priority change this soon after filing is the team's call


def guess_major(task, view, worlds_dir) -> Baseline:
    """A baseline with no model: every issue is Major."""
    key = task.reference["key"]
    return Baseline("guess_major", [JiraUpdate(key=key, priority="Major")], source="the constant Major")


class PriorityCall(Family):
    """An issue as filed -> the priority the team set within days of filing."""

    kinds = (KIND,)
    Config = PriorityCallConfig
    tools = (*READ_TOOLS, "jira_update")
    baselines = (guess_major,)

    def mine(self, m) -> Iterator[WorkItem]:
        window = dt.timedelta(days=m.config.family(self.name).window_days)
        for key, issue in sorted(m.issue_events.items()):
            calls = [e for e in m.threads.get(key, []) if e.kind == "field_changed"
                     and str(e.attrs.get("field", "")).lower() == "priority" and e.ts - issue.ts <= window]
            if not calls:
                m.skip(KIND, issue, "no priority call within the window", key)
                continue
            yield m.item(KIND, issue, calls[-1:], [], {"key": key, "priority": calls[-1].attrs.get("toString")},
                         thread_key=key)

    def build(self, ctx: BuildContext) -> Iterator[Draft | Rejection]:
        issues = {e.native_id: e for e in ctx.by_kind("issue_created")}
        for item in ctx.items:
            key, value = item.attrs["key"], item.attrs["priority"]
            issue = issues[key]
            changes = [e.event_id for e in ctx.events.values() if e.thread_key == key and e.kind == "field_changed"]
            yield Draft(
                item=item, cutoff=issue.ts, hidden_events=changes,
                prompt=(f"Issue {key} was just filed.\n\nSummary: {issue.title}\n\n{issue.body or ''}\n\n"
                        f"Give it the priority this team would: company jira update {key} --priority PRIORITY"),
                reference=[JiraUpdate(key=key, priority=value)],
                rubric=Rubric(checks=[CheckSpec(id="priority", check="field_equals", weight=1,
                                                criterion="the priority the team chose",
                                                args={"key": key, "field": "priority", "expected": value})]),
                probes=[Probe("lowest", [JiraUpdate(key=key, priority="Lowest")])] if value != "Lowest" else [],
                meta={"key": key})
