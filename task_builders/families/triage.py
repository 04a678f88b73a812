"""Ticket triage: an issue as first filed -> the type, priority, components and assignee it held after
triage, reconstructed from its changelog.

Invariants:
- The values "as filed" are the current values with every later changelog item undone; the values
  "after triage" are the filed values with the changes made within `window_days` applied
  ([families.ticket_triage] of taskmine.toml).
- An issue with no triage change in its changelog is skipped with a reason, never guessed; so is one whose
  triage values are what it was filed with (nothing to decide), and every issue of an export that has no
  changelog at all (its reason says so: the team may well have triaged them).
- The cutoff is the moment the issue was filed: the agent sees the whole company as it was then (the issue
  as filed, earlier issues with their fields as of that moment, mail, chat, code) and nothing after.
  The changes that triaged it are after the cutoff by construction, and withheld explicitly too.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Iterator

from pydantic import Field

from environments.actions import JiraUpdate
from graders.baselines import nearest_issue
from graders.rubric import CheckSpec, Rubric
from core.config import FamilyConfig
from task_builders.families import READ_TOOLS, WITHHELD_RECORD, BuildContext, Draft, Family, Probe, register_family
from task_builders.probes import constants
from warehouse.schemas import Event, Rejection

MIN_WEIGHT = 0.1   # the least a field weighs, however often a constant answer gets it right
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


class TriageConfig(FamilyConfig):
    """[families.ticket_triage] of taskmine.toml."""

    window_days: float = Field(3.0, gt=0)   # changes this soon after filing count as triage
    legacy = {"triage_window_days": "window_days"}


@register_family("ticket_triage")
class TicketTriage(Family):
    """An issue as filed -> the type, priority, components and assignee the team gave it."""

    Config = TriageConfig
    baselines = (nearest_issue,)

    # the rubric grades 2-4 independent fields from small vocabularies: a wrong answer (the nearest other
    # issue's triage, the values as filed) commonly shares the commonest type or priority, so half right is
    # no hack; a probe must stay under 3 of 4 (on the sample at 0.5 the sibling probe rejected 9 of 13)
    probe_max = 0.75
    tools = (*READ_TOOLS, "jira_update")

    def build(self, ctx: BuildContext) -> Iterator[Draft | Rejection]:
        issues = {e.native_id: e for e in ctx.by_kind("issue_created")}
        changes: dict[str, list[Event]] = defaultdict(list)
        for e in ctx.by_kind("field_changed"):
            changes[e.thread_key].append(e)
        people = self._people(ctx)
        window = dt.timedelta(days=self.settings(ctx).window_days)
        # an export without any changelog (Jira REST without `expand=changelog`, GitHub issues without their
        # events) cannot tell the values an issue was filed with from the ones it was triaged to
        no_changelog = not changes

        drafts: list[Draft] = []
        for item in ctx.items:
            issue = issues.get(item.thread_key)
            if issue is None or item.kind != "issue":
                continue
            if no_changelog:
                yield self.reject(ctx, item, "the export has no changelog: the values as filed are unknown")
                continue
            withheld = [e for e in changes[issue.native_id] if e.withheld]
            if withheld:   # a change withheld (privacy.withhold): the values as filed and after triage are unknown
                yield self.reject(ctx, item, WITHHELD_RECORD, f"{len(withheld)} changes of its changelog withheld")
                continue
            filed, after, n = triage_values(issue, changes[issue.native_id], window)
            if n == 0:
                yield self.reject(ctx, item, "no triage change recorded in the changelog")
                continue
            if not after["type"] or not after["priority"]:
                yield self.reject(ctx, item, "type or priority missing after triage")
                continue
            if all(filed[k] == after[k] for k in ("type", "priority", "components", "assignee")):
                yield self.reject(ctx, item, "triage changed nothing the task grades")
                continue
            d = self._draft(ctx, item, issue, filed, after, changes[issue.native_id], people)
            if isinstance(d, Rejection):
                yield d
            else:
                drafts.append(d)
        yield from weigh(drafts)

    def _people(self, ctx: BuildContext) -> dict[str, dict]:
        """Pseudonymized people by display name, with the aliases a grader should accept."""
        out: dict[str, dict] = {}
        for e in ctx.by_kind("issue_created"):
            for p in e.attrs.get("people") or []:
                if p.get("display_name"):
                    aliases = {p.get("username"), p.get("email"), (p.get("handle") or "").split(":", 1)[-1]}
                    out.setdefault(p["display_name"], {"aliases": set()})["aliases"].update(a for a in aliases if a)
        return out

    def _draft(self, ctx, item, issue, filed, after, changes, people) -> Draft | Rejection:
        key, project = issue.native_id, str(issue.attrs.get("project"))
        prompt = (
            f"You are triaging issue {key} in project {project}, just filed by {issue.actor_name or 'a user'}.\n\n"
            f"Summary: {issue.title}\n\n{(issue.body or '').strip()[:4000]}\n\n"
            "Set its type, priority, components and assignee the way this team would. The company's tools show "
            f"the tracker, mail and chat as they were at this moment: `company jira show {key}`, `company jira "
            f"project {project}` (the values the project uses), `company jira search WORDS` (earlier issues and "
            "how they were triaged).\n"
            f"Submit with: company jira update {key} --type TYPE --priority PRIORITY [--component NAME ...] "
            "[--assignee 'Full Name']"
        )
        fields = {"type": after["type"], "priority": after["priority"]}
        # what the issue itself says (its summary, its text, who filed it): a value it names is read off the
        # prompt ("from acmekit.parser" -> component parser, the reporter as assignee), not triaged
        said = f"{issue.title or ''}\n{issue.body or ''}\n{issue.actor_name or ''}"
        checks = [CheckSpec(id="type", check="field_equals", weight=1, criterion="the issue type the team chose",
                            args={"key": key, "field": "type", "expected": after["type"]}),
                  CheckSpec(id="priority", check="field_equals", weight=1, criterion="the priority the team chose",
                            args={"key": key, "field": "priority", "expected": after["priority"]})]
        if after["components"]:
            fields["components"] = after["components"]
            checks.append(CheckSpec(id="components", check="set_overlap", weight=1,
                                    criterion="the components the team chose (F1)",
                                    args={"key": key, "field": "components", "expected": after["components"]}))
        if after["assignee"]:
            fields["assignee"] = after["assignee"]
            aliases = sorted(people.get(after["assignee"], {}).get("aliases", set()))
            checks.append(CheckSpec(id="assignee", check="field_equals", weight=1,
                                    criterion="the person the issue was assigned to",
                                    args={"key": key, "field": "assignee", "expected": after["assignee"],
                                          "aliases": aliases}))
        stated = [c.id for c in checks if states(said, fields[c.id])]
        checks = [c for c in checks if c.id not in stated]
        if not checks:
            return self.reject(ctx, item, "the issue states every triage value",
                               "ungraded (named by the issue itself): " + ", ".join(stated))
        as_filed = {k: v for k, v in (("type", filed["type"]), ("priority", filed["priority"]),
                                      ("components", filed["components"] or None), ("assignee", filed["assignee"]))
                    if v}
        # confirming the values it was filed with must not pass: the task is about what the team changed
        probes = [Probe("as_filed", [JiraUpdate(key=key, **as_filed)], max_score=0.75)] if as_filed else []
        return Draft(item=item, prompt=prompt, cutoff=issue.ts, reference=[JiraUpdate(key=key, **fields)],
                     rubric=Rubric(checks=checks), probes=probes,
                     hidden_events=[c.event_id for c in changes if c.ts > issue.ts],
                     meta={"after_triage": {**fields}, "filed": filed, "stated_fields": stated})


def states(text: str, value) -> bool:
    """Does the issue's own text name the value (every one of a list) as a word, case-insensitive?"""
    values = value if isinstance(value, list) else [value]
    return bool(values) and all(v and re.search(rf"(?<![\w-]){re.escape(str(v))}(?![\w-])", text, re.I)
                                for v in values)


def weigh(drafts: list[Draft]) -> list[Draft]:
    """The drafts with each field's weight lowered by how often one constant answer gets it right: a field whose
    commonest value over the family's references (the best constant a policy can learn) is the answer on a share
    s > 1/2 of the drafts grading it weighs 2(1 - s) (at least MIN_WEIGHT), so the same values on every ticket
    earn less than half on average (the constant_values probe, task_builders.probes, rejects a task it still
    passes). Ties between values go to the earliest draft's, never to the alphabet (an assignee is a pseudonym)."""
    if not drafts:
        return drafts
    best = constants(drafts)
    shares: dict[str, float] = {}
    for f in ("type", "priority", "components", "assignee"):
        grading = [d for d in drafts if any(c.id == f for c in d.rubric.checks)]
        if f in best and grading:
            hits = sum(1 for d in grading if best[f] in _as_list(d.reference[0].arguments().get(f)))
            shares[f] = hits / len(grading)
    out = []
    for d in drafts:
        checks = [c.model_copy(update={"weight": max(MIN_WEIGHT, round(min(1.0, 2 * (1 - shares.get(c.id, 0.0))), 4))})
                  for c in d.rubric.checks]
        d.rubric = Rubric(checks=checks)
        d.meta["constant_share"] = {f: round(v, 4) for f, v in sorted(shares.items())}
        out.append(d)
    return out


def _as_list(v) -> list:
    return v if isinstance(v, list) else [v] if v else []
