"""Communication tasks: answer a real request the way the company did (e-mail reply, chat answer, resolution note).

The three families (`email_reply`, `chat_answer`, `resolution_note`) share this module: each turns its work items
into an `Exchange` (the request, the real reply, who asked and who answered, where the answer goes, the
reference as typed tool calls); this module turns an exchange into a draft with a rubric of many small checks
(graders.communication), the facts the task hides, probes, and the simulated requester's part of the world.

Invariants:
- The cutoff is the moment of the request (a ticket: just before its resolution); the real reply, and for a
  ticket its resolution, are after it and withheld besides (hidden events), and the reply's text is a hidden
  text (no 8-word run of it reachable in the prompt or the world), but for the lines that restate the request
  (the agent is shown those anyway). A fact the prompt states (the request's, its date) is not graded.
- The persona is the person who really replied (their pseudonym from the anonymized events).
- A real e-mail reply is its own text without the closing lines its author ends other mails with, or that
  several other people's mails end with (a signature without `-- `, a list footer; Tools.without_signature).
- One `states_fact` check per grounded fact of the real reply (graders.facts): stated by the reply, not
  by the request, and held by the world at the cutoff (a document then, or the repository then: a commit, a
  file). Facts the world cannot support are listed in the task's metadata, never graded. With fewer than
  MIN_FACTS gradable facts the task is judge-only when a model is configured, else rejected with the reason.
- Weights: every structure and forbidden-content check weighs 1 (together S); the facts weigh at least 2S
  together, and "answers what was asked" S (2S when there is no fact); so a reply right in form but empty of
  content (a polite acknowledgement, the request quoted back, the answer to another request) stays under 0.5.
- Text sent to a model is `Anonymized`: the texts here come from anonymized events and are declared so where
  they are read (`anonymized`).
- The simulated requester (environments.requester) is told only what the requester wrote in the thread before
  and after the request; the real reply travels with it only as the text its answers must not reveal.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from environments import actions as A
from environments.tools import Persona
from environments.world import ShaTranslator
from graders import facts as F
from graders.communication import MIN_OTHERS, PROSE_WORDS, plain_words
from graders.rubric import CheckSpec, Rubric
from llm import LLMError, declare_anonymized, rewrite_instruction
from task_builders.families import BuildContext, Draft, Family, Probe
from task_builders.prevalence import Prevalence
from task_builders.signals import new_text, person_of
from warehouse.schemas import Event, Rejection, WorkItem

MIN_FACTS = 1            # gradable facts a deterministic rubric needs (below: judge-only with a model, or rejected)
MAX_TEXT = 4000          # characters of a request or reply kept in a rubric (judge context)
FUTURE_ISSUES = 20       # issues filed after the cutoff whose keys a response must not name
FUTURE_EVENTS = 10       # later messages of the thread whose facts a response must not state
MIN_MENTIONS = 10        # facts a response may name before it counts as naming everything at once
COMMON_SHARE = 0.5       # a fact named by this share of the world's documents at the cutoff is no evidence
# ... nor is one that a short list of the commonest values of its kind holds in this share of the orders of its tie
# group (a reply = its structure, a third of the points, + the facts; at a quarter, such a list averages 1/2)
COMMON_REACH = 0.25
SIGNATURE_LINES = 12     # closing lines of a mail compared with the author's other mails (Tools.without_signature)
FOOTER_AUTHORS = 3       # closing lines that mails of this many other people end with too are a list's footer
ACK = {
    "mail": "Hello,\n\nthank you for your message. I have received it and will look into it and get back to you "
            "as soon as I can.\n\nBest regards",
    "chat": "thanks for asking, I'll have a look and get back to you",
    "ticket": "Thanks for the report. Resolving this ticket now.",
}
SOURCE = "anonymized_events: text of an anonymized event, read by a communication family"


def anonymized(text: str):
    """Text of anonymized events, declared as such for the LLM layer (the boundary the LLM layer names)."""
    return declare_anonymized(text, source=SOURCE)


@dataclass
class Exchange:
    """A request and the real reply, as a family reads them from one work item."""

    item: WorkItem
    request: Event
    reply: Event
    medium: str                                 # mail | chat | ticket
    cutoff: dt.datetime
    persona: Persona
    requester: dict[str, str]                   # name, address, handle
    scope: dict[str, Any]                       # graders.communication.Scope
    request_text: str                           # what the agent is shown of the request (subject + body)
    reply_text: str                             # what the real reply says (its own text, no quote)
    reference: list[A.Tool]
    structure: list[CheckSpec]                  # action, thread, recipients (and a ticket's resolution)
    thread: list[Event] = field(default_factory=list)      # the thread's events up to the request
    later: list[Event] = field(default_factory=list)       # the thread's events after the reply
    hidden_events: list[str] = field(default_factory=list)
    people: set[str] = field(default_factory=set)          # addresses of the thread (senders and recipients)
    prompt_head: str = ""                                   # who the agent is and what happened
    prompt_tail: str = ""                                   # how to act
    meta: dict[str, Any] = field(default_factory=dict)

    def respond(self, text: str) -> list[A.Tool]:
        """The reference's calls with another text (how probes answer)."""
        out = []
        for call in self.reference:
            if isinstance(call, (A.MailReply, A.JiraComment)):
                out.append(call.model_copy(update={"body": text}))
            elif isinstance(call, A.SlackPost):
                out.append(call.model_copy(update={"text": text}))
            else:
                out.append(call)
        return out


class Communication(Family):
    """Base of the communication families (see the module docstring)."""

    medium: str = ""
    tool: str = ""

    def reject(self, ctx: BuildContext, item: WorkItem | str, reason: str, detail: str = "",
               stage: str = "candidates") -> Rejection:
        """A rejection named by the work item (several requests of one thread are several candidates)."""
        return super().reject(ctx, item.item_id if isinstance(item, WorkItem) else item, reason, detail, stage)

    @abstractmethod
    def exchange(self, ctx: BuildContext, item: WorkItem, tools: Tools) -> Exchange | Rejection:
        """The exchange of one work item, or why there is none."""

    def build(self, ctx: BuildContext) -> Iterator[Draft | Rejection]:
        tools = Tools(ctx)
        exchanges: list[Exchange] = []
        # in time, then by the request's event id (a work item's id hashes a salted Message-ID): the order
        # decides each exchange's sibling, which must not depend on the pseudonyms drawn
        for item in sorted(ctx.items, key=lambda i: (i.ts, i.request_event_id, i.item_id)):
            if item.kind not in self.kinds:
                continue
            ex = self.exchange(ctx, item, tools)
            if isinstance(ex, Rejection):
                yield ex
            else:
                exchanges.append(ex)
        for i, ex in enumerate(exchanges):
            yield self.draft(ctx, ex, _sibling(exchanges, i), tools)

    # -- one draft --------------------------------------------------------------------------------------------

    def draft(self, ctx: BuildContext, ex: Exchange, sibling: Exchange | None, tools: Tools) -> Draft | Rejection:
        if not ex.reply_text.strip():
            return self.reject(ctx, ex.item, "the real reply has no text of its own")
        view = ctx.view(ex.cutoff, ex.hidden_events)
        stated = F.extract(ex.reply_text) + tools.people_in(ex.reply_text, exclude={ex.requester.get("name", ""),
                                                                                     ex.persona.name})
        echoed = F.stated_in(stated, ex.request_text, ex.prompt_head, ex.prompt_tail)   # what the agent is told
        fresh = [f for f in stated if f not in echoed]
        gradable, repos, needed = [], {}, []
        for f in fresh:
            if F.supported(view, f):
                gradable.append(f)
                continue
            git = tools.in_repository(f, ex.cutoff)
            if git is not None:
                gradable.append(f)
                repos[git[0]] = None
                needed += git[1]
        ungraded = [f for f in fresh if f not in gradable]
        common = self.common_facts(tools, ex, gradable, stated)
        gradable = [f for f in gradable if f not in common]
        judge = ctx.llm is not None and getattr(ctx.llm, "enabled", False)
        if len(gradable) < MIN_FACTS and not judge:
            return self.reject(ctx, ex.item, "too few gradable facts and no model for judge checks",
                               f"{len(gradable)} of {len(stated)} facts of the real reply are grounded at the "
                               f"cutoff and not common (needs {MIN_FACTS}); "
                               + ("common in the world (a constant or a list of the commonest states them): "
                                  + ", ".join(f"{f.kind} {f.text[:40]}" for f in common[:5]) + "; " if common
                                  else "")
                               + "ungraded: " + ", ".join(f"{f.kind} {f.text[:40]}" for f in ungraded[:5]))
        named = self.named(tools, ex, stated)
        rubric = self.rubric(ex, gradable, self.future_facts(ctx, ex, stated, view), judge, named)
        prompt, how = self.prompt(ctx, ex, stated)
        leaked = [f for f in stated if F.mentions(prompt, f) and f not in echoed]
        if leaked:
            return self.reject(ctx, ex.item, "the instruction names a fact of the real reply",
                               f"{leaked[0].kind} {leaked[0].text[:60]}")
        probes = [Probe("acknowledgement", ex.respond(ACK[ex.medium])),
                  Probe("request_quoted", ex.respond(_quote(ex.request_text)))]
        if sibling is not None:
            probes.append(Probe("other_reply", ex.respond(sibling.reply_text)))
        requester = {**ex.requester, "medium": ex.medium, "target": ex.scope["target"],
                     "thread": ex.scope.get("thread"), "forbidden": ex.reply_text[:MAX_TEXT],
                     "messages": self.requester_messages(ex)}
        meta = {**ex.meta, "facts": [f.to_json() for f in gradable],
                "ungraded_facts": [f.to_json() for f in ungraded], "echoed_facts": len(echoed),
                "common_facts": [f.to_json() for f in common],
                "instruction": how, "grading": "judge" if not gradable else
                ("deterministic+judge" if judge else "deterministic"),
                "rubric_points": sum(c.weight for c in rubric.checks),
                "world": {"requester": requester}}
        hidden = _beyond(ex.reply_text, prompt)
        if not hidden.strip():
            return self.reject(ctx, ex.item, "the real reply only repeats the request")
        return Draft(item=ex.item, prompt=prompt, cutoff=ex.cutoff, reference=ex.reference, rubric=rubric,
                     hidden_events=ex.hidden_events, hidden_texts=[hidden], persona=ex.persona,
                     repos=repos, needed_commits=sorted(set(needed)), probes=probes, meta=meta)

    def common_facts(self, tools: Tools, ex: Exchange, gradable: list[F.Fact], stated: list[F.Fact]
                     ) -> list[F.Fact]:
        """The facts a guess states without reading the request (task_builders.prevalence): named by at least
        COMMON_SHARE of the world's documents at the cutoff (`pom.xml` on a Maven list), or among the commonest
        values of their kind, so that a list of them short enough to be credited (fewer than MIN_OTHERS wrong
        values, graders.communication: MIN_OTHERS - 1 + the values of that kind the real reply names) holds
        them, in at least COMMON_REACH of the orders of the values tied with them (Prevalence.reach). Such a fact
        is no evidence of an answer and is not graded. A value one document names, tied with the dozens of
        others named once (a link in a small chat), is in few such lists: it stays gradable."""
        prev = tools.prevalence()
        t = ex.cutoff.timestamp()
        total = prev.documents(t)
        per_kind: dict[str, int] = {}
        for f in stated:
            per_kind[f.kind] = per_kind.get(f.kind, 0) + 1
        counts: dict[str, dict[str, int]] = {}
        out = []
        for f in gradable:
            c = counts.setdefault(f.kind, prev.counts(f.kind, t, ex.hidden_events))
            value = person_name(f)
            n = prev.count(f.kind, value, t, ex.hidden_events)
            if not n:
                continue
            if n >= COMMON_SHARE * total or prev.reach(f.kind, value, t, MIN_OTHERS - 1 + per_kind[f.kind],
                                                       ex.hidden_events, counts=c) >= COMMON_REACH:
                out.append(f)
        return out

    def named(self, tools: Tools, ex: Exchange, stated: list[F.Fact]) -> dict[str, list[str]]:
        """kind -> the values of that kind the real reply or what the agent is shown names (people by full name,
        the persona and the requester among them): naming those is no guess (graders.communication.others)."""
        shown = "\n".join((ex.request_text, ex.prompt_head, ex.prompt_tail))
        out: dict[str, list[str]] = {}
        for f in [*stated, *F.extract(shown, limit=10**6), *tools.people_in(shown)]:
            out.setdefault(f.kind, []).append(person_name(f))
        out.setdefault("person", []).extend(x for x in (ex.persona.name, ex.requester.get("name")) if x)
        # every value the precision check would count in the real reply or what the agent is shown (a version in
        # a link, a key after a dash): the real reply names no value it does not commit to
        for kind in F.SHAPED:
            found = F.values_named(ex.reply_text, kind) | F.values_named(shown, kind)
            if found:
                out.setdefault(kind, []).extend(found)
        return {k: sorted(set(v)) for k, v in out.items()}

    def rubric(self, ex: Exchange, gradable: list[F.Fact], future: list[F.Fact], judge: bool,
               named: dict[str, list[str]] | None = None) -> Rubric:
        scope = ex.scope
        checks = list(ex.structure)
        placeholders = sorted(set(F.PLACEHOLDER.findall(ex.reply_text)))
        checks.append(CheckSpec(id="no_placeholders", check="no_placeholders", weight=1,
                                criterion="copies out no secret or redaction placeholder of the record",
                                args={"scope": scope, "allowed": placeholders}))
        texts = [e.body or "" for e in ex.thread] + [ex.request_text, ex.reply_text]
        checks.append(CheckSpec(id="no_private_data", check="no_private_data", weight=1,
                                criterion="discloses no address or phone number of anyone outside the thread",
                                args={"scope": scope,
                                      "allowed_addresses": sorted(ex.people | {a.lower() for t in texts for a in
                                                                               _ADDRESS.findall(t)}),
                                      "allowed_numbers": sorted({n for t in texts for n in _PHONE.findall(t)})}))
        if future:
            checks.append(CheckSpec(id="no_future_facts", check="no_future_facts", weight=1,
                                    criterion="states nothing the company learned only after the request",
                                    args={"scope": scope, "facts": [f.to_json() for f in future]}))
        s = sum(c.weight for c in checks)
        if gradable:
            w = math.ceil(2 * s / len(gradable))
            # facts count in a reply only: not in a keyword list, not in a text naming everything at once
            # (a real note that is itself mostly code or a list of versions sets a lower bar: as many ordinary
            # words as it has, at least one; on the real Jira sample 2 of 11 notes had 1 and 2)

            cap = max(MIN_MENTIONS, 3 * len({f.text.casefold() for f in F.extract(ex.reply_text)}))
            least = max(1, min(PROSE_WORDS, plain_words(ex.reply_text)))
            for i, f in enumerate(gradable, 1):
                checks.append(CheckSpec(id=f"fact_{i}_{f.kind}", check="states_fact", weight=w,
                                        criterion=f"states the {f.kind.replace('_', ' ')} {f.text[:120]}",
                                        args={"scope": scope, "fact": f.to_json(), "prose": True,
                                              "min_words": least, "max_mentions": cap,
                                              **({"named": (named or {}).get(f.kind, [])} if named is not None
                                                 else {})}))
        if judge:
            request, guidance = ex.request_text[:MAX_TEXT], ex.reply_text[:MAX_TEXT]
            for q, weight, crit in (("answers", s if gradable else 2 * s, "answers what was asked"),
                                    ("consistent", 1, "consistent with what the company knew at the cutoff"),
                                    ("commits", 1, "commits to nothing the real reply did not"),
                                    ("audience", 1, "appropriate for the audience")):
                checks.append(CheckSpec(id=f"judge_{q}", check="judge", kind="judge", weight=weight, criterion=crit,
                                        args={"scope": scope, "question": q, "request": request,
                                              "guidance": guidance}))
        return Rubric(checks=checks)

    def future_facts(self, ctx: BuildContext, ex: Exchange, stated: list[F.Fact], view) -> list[F.Fact]:
        """Facts the record holds only after the cutoff (later messages of the thread, issues filed later),
        that the real reply does not state and the world at the cutoff does not hold."""
        out: dict[str, F.Fact] = {}
        for e in ex.later[:FUTURE_EVENTS]:
            for f in F.extract(new_text(e)):
                out.setdefault(f.text.casefold(), f)
        later_issues = sorted((e for e in ctx.events.values() if e.kind in ("issue_created", "pr_created")
                               and e.ts > ex.cutoff and "-" in e.native_id), key=lambda e: e.ts)[:FUTURE_ISSUES]
        for e in later_issues:
            out.setdefault(e.native_id.casefold(), F.Fact("issue_key", e.native_id))
        mine = {f.text.casefold() for f in stated}
        keep = [f for f in out.values() if f.text.casefold() not in mine and not F.mentions(ex.request_text, f)
                and f.kind != "number" and not F.supported(view, f)]
        return keep[:30]

    def prompt(self, ctx: BuildContext, ex: Exchange, stated: list[F.Fact]) -> tuple[str, str]:
        """(prompt, how it was made): the model's rewrite of the request when one is configured and the rewrite
        passes the checks here (no fact of the real reply, no run of its words), else the template."""
        template = f"{ex.prompt_head}\n\n{ex.prompt_tail}"
        llm = ctx.llm
        if llm is None or not getattr(llm, "enabled", False):
            return template, "template (no model configured)"

        try:
            text = rewrite_instruction(llm, anonymized(ex.request_text[:MAX_TEXT]),
                                       [anonymized(f.text) for f in stated])
        except LLMError as e:
            return template, f"template (the rewrite failed: {type(e).__name__})"
        words = re.findall(r"\w+", ex.reply_text.casefold())
        grams = {tuple(words[i:i + 8]) for i in range(max(0, len(words) - 7))}
        said = re.findall(r"\w+", text.casefold())
        if any(F.mentions(text, f) for f in stated if not F.mentions(ex.request_text, f)) or \
                any(tuple(said[i:i + 8]) in grams for i in range(max(0, len(said) - 7))):
            return template, "template (the rewrite gave away part of the answer)"
        head = ex.prompt_head.split("\n\n", 1)[0]
        return f"{head}\n\n{text}\n\n{ex.prompt_tail}", f"rewritten by {llm.describe()}"

    def requester_messages(self, ex: Exchange) -> list[str]:
        """What the requester wrote in the thread, before and after the request (the request included)."""
        who = person_of(ex.request)
        events = [e for e in [*ex.thread, ex.request, *ex.later] if person_of(e) == who]
        return [t[:MAX_TEXT] for t in (new_text(e) or e.title or "" for e in events) if t.strip()][:20]


# --- what every family needs of the dataset ---------------------------------------------------------------------

_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?<![\w+])\+?\d[\d ().-]{7,}\d(?![\w])")
# what is left of a quote's header once the quote is cut ("2017-11-09 9:30 GMT+01:00 Ann <ann@x.org>:", "On ...
# Bob wrote:"): it sits between a reply's signature and the list footer, and is no line of the reply itself
_ATTRIBUTION = re.compile(r"(?:\b(?:wrote|writes|schrieb|a écrit|escribió|ha scritto)|<[^<>\s]+@[^<>\s]+>)\s*:$", re.I)


def _closing_lines(text: str) -> list[str]:
    """The non-empty lines of a message that can close it (Tools.without_signature): no quote header."""
    return [ln.strip() for ln in text.split("\n") if ln.strip() and not _ATTRIBUTION.search(ln.strip())]


_PREVALENCE: dict = {}    # the last dataset's Prevalence: the three communication families share one count


def person_name(f: F.Fact) -> str:
    """A fact's value as graders compare it: a person's full name (Tools.people_in puts it first among the
    variants when the reply spelled a mention), anything else as spelled."""
    if f.kind == "person" and f.variants and not f.variants[0].startswith("@"):
        return f.variants[0]
    return f.text


class Tools:
    """Lookups over the dataset a family builds from: SHA translation, people, repositories."""

    def __init__(self, ctx: BuildContext):
        self.ctx = ctx
        sha_map: dict[str, str] = {}
        for info in ctx.repos.values():
            sha_map.update(info.get("sha_map") or {})
        self.translate = ShaTranslator(sha_map)
        self.sha_map = sha_map
        self.emails: dict[str, str] = {}          # username -> pseudonymous address
        self.names: dict[str, str] = {}           # casefolded full name, unique first name, username -> full name
        firsts: dict[str, set[str]] = {}
        for e in ctx.events.values():
            for p in (e.attrs or {}).get("people") or []:
                if not isinstance(p, dict):
                    continue
                user = str(p.get("handle") or "").split(":", 1)[-1]
                name = p.get("display_name") or ""
                if p.get("email") and user and "@" not in user:
                    self.emails.setdefault(user, str(p["email"]).lower())
                if len(name.split()) >= 2 and not F.PLACEHOLDER.search(name):
                    self.names.setdefault(name.casefold(), name)
                    firsts.setdefault(name.split()[0].casefold(), set()).add(name)
                    if user and "@" not in user:
                        self.names.setdefault(user.casefold(), name)
        for first, full in firsts.items():
            if len(full) == 1 and len(first) >= 3:
                self.names.setdefault(first, next(iter(full)))
        self.users: dict[str, list[str]] = {}      # full name -> the person's user names
        for key, full in sorted(self.names.items()):
            if " " not in key and key != full.split()[0].casefold():
                self.users.setdefault(full, []).append(key)
        self._prevalence = None
        self._commits: list[tuple[dt.datetime, str, str, list[str]]] | None = None
        self._names: list[tuple[str, str, bool]] | None = None
        self.threads: dict[str, list[Event]] = {}
        for e in sorted(ctx.events.values(), key=lambda e: (e.ts, e.event_id)):
            if e.thread_key and not e.withheld:   # a withheld event is no part of any world (privacy.withhold)
                self.threads.setdefault(e.thread_key, []).append(e)
        self._tails: dict[str, list[tuple[str, list[str]]]] | None = None

    def without_signature(self, e: Event, text: str) -> str:
        """`text` (what the mail `e` adds) without the closing lines its author ends other mails with too (a
        signature without the `-- ` separator: name, title, blog and social links) or that the mails of at least
        FOOTER_AUTHORS other people end with (a list's footer), and the quote header left between them. They are
        no part of the answer: as facts they would grade the agent on the author's social links, and as hidden
        text the author's earlier mails would "leak" them. At least one line of the text stays (a mail that is
        all closing lines is left to the other checks)."""
        if self._tails is None:
            self._tails = {}
            for x in self.ctx.events.values():
                if x.medium == "mail":
                    lines = _closing_lines(new_text(x))
                    self._tails.setdefault(person_of(x), []).append((x.event_id, lines[-SIGNATURE_LINES:]))
        mine = _closing_lines(text)
        if len(mine) < 2:
            return text

        def shared(tail: list[str]) -> int:
            k = 0
            while k < min(len(tail), len(mine) - 1) and tail[-1 - k] == mine[-1 - k]:
                k += 1
            return k

        me = person_of(e)
        common = max((shared(t) for eid, t in self._tails.get(me, []) if eid != e.event_id), default=0)
        others = sorted((max((shared(t) for _, t in tails), default=0) for who, tails in self._tails.items()
                         if who != me), reverse=True)
        if len(others) >= FOOTER_AUTHORS:       # a list's footer: the closing lines of several other people
            common = max(common, others[FOOTER_AUTHORS - 1])
        if not common:
            return text
        lines = text.rstrip().split("\n")
        while lines and (common or not lines[-1].strip() or _ATTRIBUTION.search(lines[-1].strip())):
            line = lines.pop().strip()
            if line and not _ATTRIBUTION.search(line):
                common -= 1
        return "\n".join(lines).rstrip()

    def prevalence(self):
        """How common each fact is in the world (task_builders.prevalence), counted once per dataset."""
        if self._prevalence is None:
            key = (self.ctx.dataset, self.ctx.world.key() if self.ctx.world else None, len(self.ctx.events))
            if _PREVALENCE.get("key") != key:
                _PREVALENCE.clear()
                _PREVALENCE.update(key=key, value=Prevalence.of(self.ctx.events.values(), self.text, self.names))
            self._prevalence = _PREVALENCE["value"]
        return self._prevalence

    def thread(self, e: Event, medium: str | None = None) -> list[Event]:
        """The events of `e`'s thread (of one medium: mail, chat, ...), in time order."""
        return [x for x in self.threads.get(e.thread_key or "", []) if medium is None or x.medium == medium]

    def text(self, value: str | None) -> str:
        return self.translate(value or "") or ""

    def email_of(self, e: Event) -> str:
        for p in (e.attrs or {}).get("people") or []:
            if isinstance(p, dict) and p.get("role") in ("from", "author") and p.get("email"):
                return str(p["email"]).lower()
        user = (e.actor or "").split(":", 1)[-1]
        return self.emails.get(user, f"{user or 'someone'}@company.invalid")

    def persona(self, e: Event) -> Persona:
        user = (e.actor or "").split(":", 1)[-1] or "someone"
        return Persona(name=e.actor_name or user, email=self.email_of(e), handle=user)

    def people_in(self, text: str, exclude: set[str] = frozenset()) -> list[F.Fact]:
        """People of the dataset the text names by full name or as a mention (@user, [~username]), as facts of
        kind "person" (the spelling used; the full name and the person's @user mentions as variants a reply may
        use). A first name alone is no fact: on real archives the anonymizer's pseudonyms also stand where a
        product or a word was taken for a name, a greeting names no one the agent had to find, and which person
        a first name is depends on the pseudonyms drawn. The people in `exclude` (the requester, the persona)
        are not facts."""
        skip = {x.casefold() for x in exclude if x} | {x.split()[0].casefold() for x in exclude if x and x.split()}
        out: dict[str, tuple[int, F.Fact]] = {}
        for spelled, full, mention in self._spellings():
            if full.casefold() in skip or spelled.casefold() in skip:
                continue
            pattern = (rf"(?:@|\[~){re.escape(spelled)}\]?" if mention else
                       rf"(?<![\w~])@?{re.escape(spelled)}(?![\w])")
            m = re.search(pattern, text)
            if m and full.casefold() not in out:
                # the full name, then the person's mentions: a first name alone is not a person (which one is it
                # depends on the pseudonyms drawn: two people may share one)
                variants = tuple(v for v in dict.fromkeys([full, *(f"@{u}" for u in self.users.get(full, ()))])
                                 if v != m.group(0))
                out[full.casefold()] = (m.start(), F.Fact("person", m.group(0), variants))
        return [f for _, f in sorted(out.values(), key=lambda x: x[0])]

    def _spellings(self) -> list[tuple[str, str, bool]]:
        """(spelling, full name, only as a mention) for every person: full names, then usernames (which count
        only as @user or [~user])."""
        if self._names is None:
            rows = [(full, full, False) for full in sorted(set(self.names.values()))]
            rows += [(key, full, True) for key, full in sorted(self.names.items())
                     if " " not in key and key != full.split()[0].casefold()]
            self._names = rows
        return self._names

    def commits(self) -> list[tuple[dt.datetime, str, str, list[str]]]:
        """(time, world SHA, repository, files) of every commit of a world repository."""
        if self._commits is None:
            rows = []
            for e in self.ctx.events.values():
                if e.kind != "commit":
                    continue
                repo = str((e.attrs or {}).get("repo"))
                info = self.ctx.repos.get(repo)
                if not info or e.native_id not in (info.get("sha_map") or {}):
                    continue
                files = [str(f.get("path")) for f in (e.attrs or {}).get("files") or [] if isinstance(f, dict)]
                rows.append((e.ts, info["sha_map"][e.native_id], repo, files))
            self._commits = sorted(rows)
        return self._commits

    def in_repository(self, fact: F.Fact, cutoff: dt.datetime) -> tuple[str, list[str]] | None:
        """(repository, commits the task's view must hold) when a repository at the cutoff holds the fact: a
        commit (by its world SHA prefix) or a file some commit before the cutoff touched."""
        if fact.kind not in ("commit", "file"):
            return None
        for ts, sha, repo, files in self.commits():
            if ts > cutoff:
                break
            if fact.kind == "commit" and sha.startswith(fact.text.lower()):
                return repo, [sha]
            if fact.kind == "file" and any(p == fact.text or p.endswith("/" + fact.text.lstrip("./"))
                                           for p in files):
                return repo, []
        return None


def _sibling(exchanges: list[Exchange], i: int) -> Exchange | None:
    """Another exchange of the family for the "other reply" probe: the next in time with another thread and
    another reply."""
    me = exchanges[i]
    n = len(exchanges)
    for k in range(1, n):
        other = exchanges[(i + k) % n]
        if other.item.thread_key != me.item.thread_key and other.reply_text.strip() != me.reply_text.strip():
            return other
    return None


def _beyond(reply: str, prompt: str, n: int = 8) -> str:
    """The lines of the reply that add to what the agent is shown: a line that repeats a run of `n` words of the
    prompt (the request restated without quote marks) is no secret, so it is not a hidden text."""
    words = re.findall(r"\w+", prompt.casefold())
    grams = {tuple(words[i:i + n]) for i in range(max(0, len(words) - n + 1))}
    kept = []
    for line in reply.split("\n"):
        w = re.findall(r"\w+", line.casefold())
        if not any(tuple(w[i:i + n]) in grams for i in range(max(0, len(w) - n + 1))):
            kept.append(line)
    return "\n".join(kept)


def _quote(text: str) -> str:
    return "\n".join("> " + line if line.strip() else ">" for line in text.strip().split("\n")) or "> (empty)"


def thread_addresses(events: list[Event]) -> set[str]:
    """Every address that sent or received a message of `events`."""
    out = set()
    for e in events:
        for p in (e.attrs or {}).get("people") or []:
            if isinstance(p, dict) and p.get("email"):
                out.add(str(p["email"]).lower())
    return out


def roles(e: Event, role: str) -> list[str]:
    return list(dict.fromkeys(str(p["email"]).lower() for p in (e.attrs or {}).get("people") or []
                              if isinstance(p, dict) and p.get("role") == role and p.get("email")))
