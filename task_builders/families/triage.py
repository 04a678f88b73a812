"""Ticket triage: a Jira issue as first filed -> the type, priority, components and assignee it held
after triage, reconstructed from its changelog.

Invariants:
- The values "as filed" are the current values with every later changelog item undone; the values
  "after triage" are the filed values with the changes made within `triage_window_days` applied.
- An issue with no triage change in its changelog is skipped with a reason, never guessed.
- The world holds only what was known when the issue was filed: earlier issues of the project with
  their fields as of that moment (changes after it are undone too).
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections import defaultdict
from collections.abc import Iterator

from graders.rubric import CheckSpec, Rubric
from task_builders.families import BuildContext, Family
from task_builders.worlds import write_json
from warehouse.schemas import Event, Rejection, Task

FIELDS = {"issuetype": "type", "type": "type", "priority": "priority", "component": "components",
          "components": "components", "assignee": "assignee"}


def _name(value) -> str | None:
    if isinstance(value, dict):
        return value.get("display_name") or value.get("displayName") or value.get("name")
    return value or None


def current_fields(issue: Event) -> dict:
    a = issue.attrs
    return {"type": _name(a.get("issuetype")), "priority": _name(a.get("priority")),
            "components": sorted(_name(c) for c in a.get("components") or [] if _name(c)),
            "assignee": _name(a.get("assignee"))}


def _changes(changes: list[Event]) -> list[tuple[dt.datetime, str, dict]]:
    out = []
    for ch in changes:
        f = FIELDS.get(str(ch.attrs.get("field", "")).casefold())
        if f:
            out.append((ch.ts, f, ch.attrs))
    return sorted(out, key=lambda x: x[0])


def state_at(issue: Event, changes: list[Event], moment: dt.datetime | None, *, filed: bool = False) -> dict:
    """The triage fields as they stood at `moment` (or as filed), undoing later changelog items."""
    state = current_fields(issue)
    comps = set(state["components"])
    for ts, f, item in reversed(_changes(changes)):
        if not filed and moment is not None and ts <= moment:
            break
        if f == "components":
            if item.get("toString"):
                comps.discard(item["toString"])
            if item.get("fromString"):
                comps.add(item["fromString"])
        else:
            state[f] = item.get("fromString") or None
    state["components"] = sorted(comps)
    return state


def triage_values(issue: Event, changes: list[Event], window: dt.timedelta) -> tuple[dict, dict, int]:
    """(as filed, after triage, number of triage changes inside the window)."""
    filed = state_at(issue, changes, None, filed=True)
    after = dict(filed, components=set(filed["components"]))
    n = 0
    for ts, f, item in _changes(changes):
        if ts > issue.ts + window:
            break
        n += 1
        if f == "components":
            if item.get("fromString"):
                after["components"].discard(item["fromString"])
            if item.get("toString"):
                after["components"].add(item["toString"])
        else:
            after[f] = item.get("toString") or None
    after["components"] = sorted(after["components"])
    return filed, after, n


class TicketTriage(Family):
    name = "ticket_triage"

    def build(self, ctx: BuildContext) -> Iterator[Task | Rejection]:
        issues = {e.native_id: e for e in ctx.by_kind("issue_created")}
        changes: dict[str, list[Event]] = defaultdict(list)
        for e in ctx.by_kind("field_changed"):
            changes[e.thread_key].append(e)
        by_project: dict[str, list[Event]] = defaultdict(list)
        for e in issues.values():
            by_project[str(e.attrs.get("project"))].append(e)
        people = self._people(ctx)
        window = dt.timedelta(days=ctx.config.triage_window_days)

        for item in ctx.items:
            issue = issues.get(item.thread_key)
            if issue is None or item.kind != "issue":
                continue
            filed, after, n = triage_values(issue, changes[issue.native_id], window)
            if n == 0:
                yield self.reject(ctx, item, "no triage change recorded in the changelog")
                continue
            if not after["type"] or not after["priority"]:
                yield self.reject(ctx, item, "type or priority missing after triage")
                continue
            yield self._task(ctx, item, issue, filed, after, by_project, changes, people)

    def _people(self, ctx: BuildContext) -> dict[str, dict]:
        """Pseudonymized people by display name, with the aliases a grader should accept."""
        out: dict[str, dict] = {}
        for e in ctx.by_kind("issue_created"):
            for p in e.attrs.get("people") or []:
                if p.get("display_name"):
                    aliases = {p.get("username"), p.get("email"), (p.get("handle") or "").split(":", 1)[-1]}
                    out.setdefault(p["display_name"], {"aliases": set()})["aliases"].update(a for a in aliases if a)
        return out

    def _task(self, ctx, item, issue, filed, after, by_project, changes, people) -> Task | Rejection:
        cutoff = issue.ts
        world = ctx.world_root / self.name / item.thread_key
        if world.exists():
            shutil.rmtree(world)
        project = str(issue.attrs.get("project"))
        earlier = sorted((e for e in by_project[project] if e.ts < cutoff), key=lambda e: (e.ts, e.native_id))
        earlier = earlier[-ctx.config.history_limit:] if ctx.config.history_limit else []
        history = []
        for e in earlier:
            st = state_at(e, changes[e.native_id], cutoff)
            history.append({"key": e.native_id, "summary": e.title, "created": e.ts.isoformat(), **st})
        known_people = sorted({h["assignee"] for h in history if h["assignee"]} | {a for a in [after["assignee"]] if a})
        as_filed = {"key": issue.native_id, "project": project, "summary": issue.title,
                    "description": issue.body or "", "reporter": issue.actor_name,
                    "created": issue.ts.isoformat(), "type": filed["type"], "priority": filed["priority"],
                    "components": filed["components"], "assignee": filed["assignee"]}
        write_json(world / "issue.json", as_filed)
        write_json(world / "history.json", history)
        write_json(world / "project.json", {
            "project": project,
            "types": sorted({h["type"] for h in history if h["type"]} | {after["type"]}),
            "priorities": sorted({h["priority"] for h in history if h["priority"]} | {after["priority"]}),
            "components": sorted({c for h in history for c in h["components"]} | set(after["components"])),
            "people": known_people,
        })
        prompt = (
            f"You are triaging issue {issue.native_id} in project {project}, just filed by "
            f"{issue.actor_name or 'a user'}.\n\nSummary: {issue.title}\n\n{(issue.body or '').strip()[:4000]}\n\n"
            "Set its type, priority, components and assignee the way this team would. Earlier issues of the "
            "project with their triage are in /world/history.json; the allowed values are in "
            "/world/project.json; `company jira show` prints the issue.\n"
            "Submit with: company jira update --type TYPE --priority PRIORITY "
            "[--component NAME ...] [--assignee 'Full Name']"
        )
        fields = {"type": after["type"], "priority": after["priority"]}
        checks = [CheckSpec(id="type", check="field_equals", weight=1,
                            args={"field": "type", "expected": after["type"]}),
                  CheckSpec(id="priority", check="field_equals", weight=1,
                            args={"field": "priority", "expected": after["priority"]})]
        if after["components"]:
            fields["components"] = after["components"]
            checks.append(CheckSpec(id="components", check="set_overlap", weight=1,
                                    args={"field": "components", "expected": after["components"]}))
        if after["assignee"]:
            fields["assignee"] = after["assignee"]
            aliases = sorted(people.get(after["assignee"], {}).get("aliases", set()))
            checks.append(CheckSpec(id="assignee", check="field_equals", weight=1,
                                    args={"field": "assignee", "expected": after["assignee"], "aliases": aliases}))
        reference = {"outbox": [{"action": "jira.update", "fields": fields}], "filed": {
            k: as_filed[k] for k in ("type", "priority", "components", "assignee")}}
        return self.finish(ctx, item, prompt=prompt, world_dir=world, cutoff=cutoff, reference=reference,
                           rubric=Rubric(checks=checks))
