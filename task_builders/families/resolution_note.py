"""Resolution note: a ticket about to be resolved -> its resolution and the comment that explains it.

The agent is the person who really resolved it (who wrote the note), just before the resolution: the ticket
shows as it stood then (no resolution yet). It resolves the ticket (`company jira update KEY --resolution R
--status S`) and explains the resolution (`company jira comment KEY --body TEXT`). The rubric checks the
comment, the resolution the team chose, one grounded fact of the real note per check, forbidden content and,
with a model, four judge checks (task_builders.families.communication).
"""

from __future__ import annotations

import datetime as dt
import re

from environments import actions as A
from graders import facts as F
from graders.baselines import nearest_resolution
from graders.rubric import CheckSpec
from task_builders.families import READ_TOOLS, BuildContext, register_family
from task_builders.families.communication import Communication, Exchange, Tools, thread_addresses
from task_builders.mining import NOTE_HINT
from task_builders.signals import new_text
from warehouse.schemas import Event, Rejection, WorkItem

BEFORE = dt.timedelta(milliseconds=1)
DONE = ("resolved", "closed", "done", "fixed")


def _name(value) -> str | None:
    if isinstance(value, dict):
        return value.get("name") or value.get("value")
    return str(value) if value else None


def outcome(issue: Event, thread: list[Event], resolved_at: dt.datetime) -> tuple[str | None, str | None]:
    """(resolution, status) the ticket got when it was resolved: the changelog's values at that moment, else
    the issue's fields (resolution, status; GitHub: state_reason, state)."""
    resolution = status = None
    for e in thread:
        if e.kind != "field_changed" or abs(e.ts - resolved_at) > dt.timedelta(hours=1):
            continue
        field = str(e.attrs.get("field") or "").casefold()
        if field == "resolution" and e.attrs.get("toString"):
            resolution = str(e.attrs["toString"])
        elif field == "status" and str(e.attrs.get("toString") or "").casefold() in DONE:
            status = str(e.attrs["toString"])
    a = issue.attrs or {}
    resolution = resolution or _name(a.get("resolution")) or _name(a.get("state_reason"))
    status = status or _name(a.get("status")) or _name(a.get("state"))
    return resolution, status


def _resolved_by(e: Event, cutoff: dt.datetime) -> bool:
    try:
        at = dt.datetime.fromisoformat(str((e.attrs or {}).get("resolved_at")))
    except ValueError:
        return False
    return (at if at.tzinfo else at.replace(tzinfo=dt.UTC)) <= cutoff


def not_a_note(text: str, issue: Event, tools: Tools) -> str | None:
    """Why a ticket's comment nearest its resolution is no note about that resolution, or None. A note explains
    what was decided about this ticket: it may not carry another matter's personal data (a customer's e-mail
    address, or the anonymizer's placeholders of someone's phone number, card, account or address, which no agent
    is expected to write), and it reads as a resolution (fixed, merged, duplicate, cannot reproduce, ...:
    NOTE_HINT, the words the mining stage takes a late note by), names a commit, a version, an issue or a link
    (a pull request), or talks about the ticket's own subject (two words of its summary). A question handing the
    ticket to someone ("can you take a look?") is none of these."""
    personal = sorted({p for p in F.PLACEHOLDER.findall(text) if p.strip("[]") in PERSONAL})
    if personal:
        return f"it carries redacted personal data ({', '.join(personal[:3])}): another matter, not the resolution"
    if _MAILBOX.search(text):
        return "it discloses someone's e-mail address: another matter, not the resolution"
    if NOTE_HINT.search(text):
        return None
    if any(f.kind in ("commit", "version", "issue_key", "ref", "url") for f in F.extract(text)):
        return None
    summary = {w for w in re.findall(r"[a-z][a-z0-9_]{3,}", (issue.title or "").casefold()) if w not in _COMMON}
    said = set(re.findall(r"[a-z][a-z0-9_]{3,}", text.casefold()))
    if len(summary & said) >= min(2, len(summary)) and summary:
        return None
    return "it says nothing of a resolution (no fix, duplicate, release, commit, version) nor of the ticket's subject"


_COMMON = frozenset("""with when that this from have does should into then than there their about after before
what which while will would could your some more most only also just""".split())
# the anonymizer's placeholders of someone's personal data (privacy.pii kinds, and a person NER found): a log
# level in brackets (`[ERROR]`) or a redacted user in a home path (`[USER]`) is none
PERSONAL = frozenset({"PERSON", "EMAIL", "PHONE", "POSTAL_ADDRESS", "CREDIT_CARD", "IBAN", "US_SSN", "URL_PERSONAL"})
_MAILBOX = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?![\w.-])")   # not `alloy@1.9.3`


@register_family("resolution_note")
class ResolutionNote(Communication):
    """A ticket about to be resolved -> its resolution and the note explaining it (the real note)."""

    kinds = ("resolution",)
    tools = (*READ_TOOLS, "jira_update", "jira_comment")
    baselines = (nearest_resolution,)
    medium = "ticket"

    def exchange(self, ctx: BuildContext, item: WorkItem, tools: Tools) -> Exchange | Rejection:
        issue = ctx.events.get(item.request_event_id)
        note = ctx.events.get(item.outcome_event_ids[0]) if item.outcome_event_ids else None
        if issue is None or note is None:
            return self.reject(ctx, item, "the ticket or its note is not among the anonymized events")
        key = issue.native_id
        try:
            resolved_at = dt.datetime.fromisoformat(item.attrs["resolved_at"])
        except (KeyError, ValueError):
            return self.reject(ctx, item, "no resolution time")
        text = tools.text(new_text(note))
        if not text.strip():
            return self.reject(ctx, item, "the real reply has no text of its own")
        cutoff = min(note.ts, resolved_at) - BEFORE
        if cutoff <= issue.ts:
            return self.reject(ctx, item, "resolved as it was filed: nothing to read before the resolution")
        thread = tools.thread(issue)
        before = [e for e in thread if e.ts <= cutoff and e.kind == "comment"]
        later = [e for e in thread if e.ts > note.ts and e.kind == "comment"]
        resolution, status = outcome(issue, thread, resolved_at)
        if not resolution and not status:
            return self.reject(ctx, item, "the ticket's resolution is not recorded")
        persona = tools.persona(note)
        scope = {"medium": "ticket", "target": key}
        structure = [CheckSpec(id="action_type", check="action_type", weight=1,
                               criterion=f"explains the resolution in a comment on {key}",
                               args={"scope": scope, "tool": "jira_comment"})]
        field, value = ("resolution", resolution) if resolution else ("status", status)
        why = not_a_note(text, issue, tools)
        if why:
            return self.reject(ctx, item, "the reference is no note about the ticket's resolution", why)
        # the decision itself gates the rubric: a note that says the right things about the wrong resolution
        # earns nothing (graders.rubric, critical checks)
        structure.append(CheckSpec(id=field, check="field_equals", weight=1, critical=True,
                                   criterion=f"the {field} the team chose (critical: no credit without it)",
                                   args={"key": key, "field": field, "expected": value}))
        used = sorted({r for e in ctx.events.values() if e.kind in ("issue_created", "pr_created")
                       and e.native_id != key and _resolved_by(e, cutoff)
                       for r in [_name((e.attrs or {}).get(field if field == "resolution" else "status"))] if r})
        head = (f"You are {persona.name} (@{persona.handle}). Issue {key}, filed on {issue.ts:%Y-%m-%d} by "
                f"{issue.actor_name or 'a user'}, is ready to be resolved, and you are the one resolving it.\n\n"
                f"{key}: {issue.title or ''}\n\n{tools.text(issue.body or '').strip()[:4000]}")
        tail = (f"Resolve it as {persona.name} would: set its {field} and add the comment that explains the "
                f"resolution to the people on the ticket. `company jira show {key}` shows the ticket as it stands "
                "(its comments and history); `company jira search WORDS`, `company mail search WORDS` and "
                "`company slack search WORDS` show what the company knew"
                + (f"; the {field} values this tracker has used so far: {', '.join(used[:12])}" if used else "")
                + f". If something is unclear you may ask {issue.actor_name or 'the reporter'} in a comment.\n"
                f"Submit with: company jira update {key} --{field} VALUE [--status STATUS] && "
                f"company jira comment {key} --body 'TEXT'")
        update = A.JiraUpdate(key=key, **{k: v for k, v in (("resolution", resolution), ("status", status)) if v})
        people = thread_addresses([issue, *before, note])
        return Exchange(item=item, request=issue, reply=note, medium="ticket", cutoff=cutoff, persona=persona,
                        requester={"name": issue.actor_name or "the reporter", "address": tools.email_of(issue),
                                   "handle": (issue.actor or "").split(":", 1)[-1]},
                        scope=scope, request_text=tools.text(f"{key}: {issue.title or ''}\n\n{issue.body or ''}"),
                        reply_text=text, reference=[update, A.JiraComment(key=key, body=text)],
                        structure=structure, thread=before, later=later,
                        hidden_events=[note.event_id] + [e.event_id for e in thread if e.ts > cutoff],
                        people=people, prompt_head=head, prompt_tail=tail,
                        meta={"key": key, "resolution": resolution, "status": status,
                              "note_by": item.attrs.get("note_by")})
