"""A task family that is not part of taskmine: a third party's, as it would ship in its own package.

`tests/test_outside_family.py` registers it through an entry point (`taskmine.families`) of a distribution it
writes on sys.path, then runs taskmine on an export: nothing in the project names it. It declares everything a
family is (task_builders.families.Family): the work items it wants (a kind of its own, and `mine`), its settings
(`Config`, the [families.first_look] table of taskmine.toml), how it builds tasks, a probe and a baseline.

The family: an issue as filed -> the priority and type the team gave it at its first look, within `window_days`.
Two fields, so that a constant answer (the commonest priority and type, a probe of the catalogue) earns at most
half where it guesses one (`probe_max` 0.75, as ticket_triage).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from pydantic import Field

from core.config import FamilyConfig
from environments.actions import JiraUpdate
from graders.baselines import Baseline
from graders.rubric import CheckSpec, Rubric
from task_builders.families import READ_TOOLS, BuildContext, Draft, Family, Probe
from warehouse.schemas import Rejection, WorkItem

KIND = "first_look"
FIELDS = {"priority": "priority", "issuetype": "type"}   # changelog field -> the field the agent sets


class FirstLookConfig(FamilyConfig):
    window_days: float = Field(2.0, gt=0)    # changes this soon after filing are the team's first look


def as_filed(task, view, worlds_dir) -> Baseline:
    """A baseline with no model: the issue keeps the values it was filed with."""
    key, filed = task.reference["key"], task.reference["filed"]
    return Baseline("as_filed", [JiraUpdate(key=key, **filed)], source="the values as filed")


class FirstLook(Family):
    """An issue as filed -> the priority and type the team gave it."""

    kinds = (KIND,)
    Config = FirstLookConfig
    tools = (*READ_TOOLS, "jira_update")
    baselines = (as_filed,)
    probe_max = 0.75

    def mine(self, m) -> Iterator[WorkItem]:
        window = dt.timedelta(days=m.config.family(self.name).window_days)
        for key, issue in sorted(m.issue_events.items()):
            look = [e for e in m.threads.get(key, []) if e.kind == "field_changed" and e.ts - issue.ts <= window
                    and str(e.attrs.get("field", "")).lower() in FIELDS]
            after = {FIELDS[str(e.attrs["field"]).lower()]: e.attrs.get("toString") for e in look}
            before = {FIELDS[str(e.attrs["field"]).lower()]: e.attrs.get("fromString") for e in reversed(look)}
            if set(after) != set(FIELDS.values()):
                m.skip(KIND, issue, "priority and type not both set within the window", key)
                continue
            yield m.item(KIND, issue, look, [], {"key": key, "after": after, "filed": before}, thread_key=key)

    def build(self, ctx: BuildContext) -> Iterator[Draft | Rejection]:
        issues = {e.native_id: e for e in ctx.by_kind("issue_created")}
        for item in ctx.items:
            key, after, filed = item.attrs["key"], item.attrs["after"], item.attrs["filed"]
            issue = issues[key]
            changes = [e.event_id for e in ctx.events.values() if e.thread_key == key and e.kind == "field_changed"]
            yield Draft(
                item=item, cutoff=issue.ts, hidden_events=changes,
                prompt=(f"Issue {key} was just filed.\n\nSummary: {issue.title}\n\n{issue.body or ''}\n\n"
                        "Give it the priority and the kind this team would, as earlier issues show "
                        f"(`company jira search WORDS`): company jira update {key} --priority P --type T"),
                reference=[JiraUpdate(key=key, **after)],
                rubric=Rubric(checks=[CheckSpec(id=f, check="field_equals", weight=1, criterion=f"the {f} chosen",
                                                args={"key": key, "field": f, "expected": v})
                                      for f, v in sorted(after.items())]),
                probes=[Probe("as_filed", [JiraUpdate(key=key, **filed)])],   # confirming the values as filed
                meta={"key": key, "filed": filed})
