"""Checks of written communication: an e-mail reply, a chat answer, a resolution note.

A communication task's rubric has many small checks (task_builders.families.communication builds them):
the action and the thread, the recipients, one check per grounded fact of the real reply, forbidden content,
and judge checks a model grades with the real reply as guidance. Every check reads "the response": the
agent's writes of the task's kind to the task's target (`Scope`): mails in the request's thread (a new mail
counts for content, not for the thread), posts in the request's channel, comments on the ticket. A response
split over several writes (a clarifying question, then the answer) is read whole.

Invariants:
- Doing nothing scores 0 on every check, forbidden-content checks included: there is nothing to vet, and a
  rubric must never reward an empty episode.
- Facts are matched by `graders.facts.mentions`, the same matcher the builder used to decide which facts
  the real reply states.
- Judge checks never decide without a model: with no judge in the context the rubric records them as not
  run; an unusable verdict is a grader error; a model that does not answer is an infrastructure error; a
  spent budget leaves the check not run. The verdict's one-sentence rationale is kept with the grade.
- Only `Anonymized` text reaches a model (llm/): the request and the real reply stored in the rubric were
  built from anonymized events, and the agent wrote its response in a world of anonymized text.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.registry import registry
from environments import actions as A
from graders.facts import PLACEHOLDER, Fact, extract, key_of, mentions, values_named
from graders.rubric import CheckInfraError, CheckNotRun, CheckResult, CheckSpec, Context, Rubric, register_check
from llm import BudgetExceeded, LLMCallError, LLMUnavailable, declare_anonymized, judge

ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
PHONE = re.compile(r"(?<![\w+])\+?\d[\d ().-]{7,}\d(?![\w])")

JUDGE_CRITERIA = {
    "answers": "The response answers what the request asked (or does what it asked for), as the reference does.",
    "consistent": "The response states nothing that contradicts what the company knew when the request was "
                  "made; the reference shows what was known and decided.",
    "commits": "The response commits to nothing (dates, fixes, releases, promises, decisions) that the reference "
               "does not commit to.",
    "audience": "The response is appropriate for its audience: tone, register and level of detail suit the "
                "requester and the channel, as in the reference.",
}


class Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Scope(Args):
    """Where the response goes: `mail` (the request's Message-ID and thread), `chat` (channel, and the
    question's ts), or `ticket` (the issue key)."""

    medium: Literal["mail", "chat", "ticket"]
    target: str = Field(min_length=1)          # Message-ID | channel | issue key
    thread: str | None = None                  # mail thread key | chat thread_ts


def responses(actions: list, scope: Scope) -> list[A.Logged]:
    """The agent's writes that respond in this scope (see the module docstring)."""
    return [e for e in actions if isinstance(e, A.Logged) and _responds(e.action, scope) and not _elsewhere(e, scope)]


def _elsewhere(entry: A.Logged, scope: Scope) -> bool:
    """A reply in another conversation answers someone else, whatever it says (the `wrong_target` probe of
    task_builders.probes scored 0.92-0.95 with the real reply's text sent to another thread): a mail reply
    outside the request's thread, a chat post in another thread of the channel."""
    a = entry.action
    if scope.medium == "mail" and isinstance(a, A.MailReply):
        return not in_thread(entry, scope)
    if scope.medium == "chat" and isinstance(a, A.SlackPost):
        return a.thread_ts is not None and a.thread_ts != scope.thread
    return False


def _responds(a: A.Tool, scope: Scope) -> bool:
    if scope.medium == "mail":
        return isinstance(a, (A.MailReply, A.MailSend))
    if scope.medium == "chat":
        return isinstance(a, A.SlackPost) and a.channel == scope.target.lstrip("#")
    return isinstance(a, A.JiraComment) and a.key.upper() == scope.target.upper()


def text_of(entry: A.Logged) -> str:
    a = entry.action
    return getattr(a, "body", None) or getattr(a, "text", None) or ""


def response_text(actions: list, scope: Scope) -> str:
    return "\n\n".join(text_of(e) for e in responses(actions, scope))


def recipients(entry: A.Logged) -> list[str]:
    m = entry.effect.get("message") or {}
    return [str(x).lower() for x in [*(m.get("to") or []), *(m.get("cc") or [])]]


def in_thread(entry: A.Logged, scope: Scope) -> bool:
    a = entry.action
    if scope.medium == "mail":
        m = entry.effect.get("message") or {}
        return isinstance(a, A.MailReply) and (m.get("thread") == scope.thread or m.get("in_reply_to") == scope.target)
    if scope.medium == "chat":
        return isinstance(a, A.SlackPost) and a.thread_ts == scope.thread
    return True


def _none(scope: Scope) -> CheckResult:
    what = {"mail": "no mail written", "chat": f"nothing posted in #{scope.target}",
            "ticket": f"no comment on {scope.target}"}[scope.medium]
    return CheckResult(0.0, what)


# --- the action and the thread ------------------------------------------------------------------------------


class ActionArgs(Args):
    scope: Scope


@register_check("responds_in_thread", args=ActionArgs)
def responds_in_thread(actions: list, a: ActionArgs, ctx: Context) -> CheckResult:
    """1 when the response is a reply in the request's thread: a mail reply to the request (or a message of its
    thread), a post in the question's thread, a comment on the ticket."""
    rs = responses(actions, a.scope)
    if not rs:
        return _none(a.scope)
    if any(in_thread(e, a.scope) for e in rs):
        return CheckResult(1.0, "answered in the request's thread")
    if a.scope.medium == "mail":
        return CheckResult(0.0, "sent a new mail instead of replying in the thread")
    return CheckResult(0.0, "posted in the channel, not in the question's thread")


class KindArgs(Args):
    scope: Scope
    tool: Literal["mail_reply", "slack_post", "jira_comment"]


@register_check("action_type", args=KindArgs)
def action_type(actions: list, a: KindArgs, ctx: Context) -> CheckResult:
    """1 when the response is made with the expected kind of action (a mail reply, a chat post, a comment)."""
    rs = responses(actions, a.scope)
    if not rs:
        return _none(a.scope)
    kinds = {e.action.name() for e in rs}
    return CheckResult(1.0 if a.tool in kinds else 0.0, f"responded with {', '.join(sorted(kinds))}")


# --- recipients ---------------------------------------------------------------------------------------------


class ReachArgs(Args):
    scope: Scope
    any_of: list[str] = Field(min_length=1)   # the requester's address and the list the request came through


@register_check("reaches_requester", args=ReachArgs)
def reaches_requester(actions: list, a: ReachArgs, ctx: Context) -> CheckResult:
    """Mail: 1 when a response goes to the requester (or the list the request came through). Chat: 1 when a
    post is in the question's thread or names the asker."""
    rs = responses(actions, a.scope)
    if not rs:
        return _none(a.scope)
    want = {x.lower() for x in a.any_of}
    if a.scope.medium == "mail":
        got = {r for e in rs for r in recipients(e)}
        hit = sorted(got & want)
        return CheckResult(1.0 if hit else 0.0, f"reaches {hit[0]}" if hit else "the requester is not a recipient")
    for e in rs:
        if in_thread(e, a.scope) or any(re.search(rf"(?<!\w)@?{re.escape(w)}(?!\w)", text_of(e), re.I)
                                        for w in a.any_of):
            return CheckResult(1.0, "the asker sees the answer")
    return CheckResult(0.0, "neither in the question's thread nor addressed to the asker")


class CoverArgs(Args):
    scope: Scope
    expected: list[str] = Field(min_length=1)


@register_check("recipients_cover", args=CoverArgs)
def recipients_cover(actions: list, a: CoverArgs, ctx: Context) -> CheckResult:
    """The share of the people the real reply copied (cc) that the response copies too."""
    rs = responses(actions, a.scope)
    if not rs:
        return _none(a.scope)
    got = {r for e in rs for r in recipients(e)}
    want = {x.lower() for x in a.expected}
    hit = len(got & want)
    return CheckResult(round(hit / len(want), 6), f"{hit} of {len(want)} copied")


class WithinArgs(Args):
    scope: Scope
    allowed: list[str] = Field(min_length=1)


@register_check("recipients_within", args=WithinArgs)
def recipients_within(actions: list, a: WithinArgs, ctx: Context) -> CheckResult:
    """1 when nobody outside the thread (its senders and recipients, and those the real reply added) is
    added as a recipient."""
    rs = responses(actions, a.scope)
    if not rs:
        return _none(a.scope)
    allowed = {x.lower() for x in a.allowed}
    outside = sorted({r for e in rs for r in recipients(e)} - allowed)
    if outside:
        return CheckResult(0.0, f"adds {len(outside)} recipient(s) from outside the thread, e.g. {outside[0]}")
    return CheckResult(1.0, "only people of the thread")


# --- facts --------------------------------------------------------------------------------------------------


class FactModel(Args):
    kind: str
    text: str = Field(min_length=1, max_length=500)
    variants: list[str] = []

    def fact(self) -> Fact:
        return Fact(self.kind, self.text, tuple(self.variants))


class FactArgs(Args):
    scope: Scope
    fact: FactModel
    prose: bool = False                 # a response that is a list of keywords states no fact
    min_words: int = Field(3, ge=1)     # ... fewer ordinary words than this (the builder: the real reply's, 1-3)
    max_mentions: int | None = None     # nor does one that names more facts than this (everything at once)
    # the values of the fact's kind the real reply and the request name: a response naming MIN_OTHERS or more
    # others, and more others than these, commits to none of them (None: not checked)
    named: list[str] | None = None


PROSE_WORDS = 3   # ordinary words (lowercase, letters only) a response needs besides its keywords, at most
_PLAIN = re.compile(r"^[(\"']?[a-z]+[,.;:!?)\"']*$")


def plain_words(text: str) -> int:
    """Ordinary words of `text`: lowercase, letters only (a fact keyword, a name, code, a path is none)."""
    return sum(1 for w in text.split() if _PLAIN.match(w))


def stuffed(text: str, max_mentions: int | None = None, min_words: int = PROSE_WORDS) -> str | None:
    """Why `text` is no reply, or None: fewer than `min_words` ordinary words (the rubric's fact keywords
    with no sentence around them), or more distinct facts than `max_mentions` (every issue key, SHA and
    version of the world in one text)."""
    plain = plain_words(text)
    if plain < min_words:
        return f"a list of keywords, not a reply ({plain} ordinary words)"
    if max_mentions is not None:
        n = len({f.text.casefold() for f in extract(text[:200_000])})
        if n > max_mentions:
            return f"names {n} facts at once (more than {max_mentions})"
    return None


MIN_OTHERS = 3     # values of a fact's kind the real reply does not name from which a response is a list of guesses


def candidates(text: str, kind: str, view=None) -> set[str]:
    """The values of `kind` a text names (graders.facts.key_of), found wherever `mentions` would credit one:
    people by the world's names (a full name, `@handle`, `[~handle]`, as the person's full name) in the text with
    its whitespace collapsed (two spaces, a line break or a no-break space between a name's words), every other
    kind by graders.facts.values_named (the extractor's facts and the kind's shape on the matcher's boundaries)."""
    if kind != "person":
        return values_named(text, kind)
    pattern = view.name_pattern() if view is not None and hasattr(view, "name_pattern") else None
    if pattern is None:
        return set()
    by_handle = {h.casefold(): n for n, h in view.people().items() if h}
    out = set()
    for m in pattern.finditer(" ".join(text.split())):
        name = m.group(1) or by_handle.get((m.group(2) or "").casefold(), m.group(2) or "")
        out.add(key_of("person", name))
    return out


def others(text: str, kind: str, named: list[str], view=None) -> list[str]:
    """The values of `kind` the text names that none of `named` is (a path and its file name are one value)."""
    allowed = {key_of(kind, n) for n in named}

    def known(c: str) -> bool:
        return c in allowed or any(c.endswith("/" + x) or x.endswith("/" + c) for x in allowed)

    return sorted(c for c in candidates(text, kind, view) if not known(c))


@register_check("states_fact", args=FactArgs)
def states_fact(actions: list, a: FactArgs, ctx: Context) -> CheckResult:
    """1 when the response states the fact (an issue key, version, file, command, URL, number, date, commit,
    name) the real reply stated and the company's record held at the time; with `prose`, in the response's
    own lines (not quoted mail) and in a reply (not a keyword list, not everything at once: `stuffed`); with
    `named`, committed to: a response naming MIN_OTHERS or more values of the fact's kind that neither the real
    reply nor the request names, and more of them than it names of those, is a list of guesses (the nine
    commonest people of the world, every version) and states none of them."""
    text = response_text(actions, a.scope)
    if not text:
        return _none(a.scope)
    if a.prose:   # the response's own lines: a line quoting mail ("> ...") states nothing of the responder's
        text = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(">"))
    why = stuffed(text, a.max_mentions, a.min_words) if a.prose else None
    if why:
        return CheckResult(0.0, f"{a.fact.kind} {a.fact.text[:60]!r} not credited: {why}")
    ok = mentions(text, a.fact.fact())
    if ok and a.named is not None:
        wrong = others(text, a.fact.kind, a.named, ctx.view)
        right = len(candidates(text, a.fact.kind, ctx.view)) - len(wrong)
        if len(wrong) >= MIN_OTHERS and len(wrong) > right:
            return CheckResult(0.0, f"{a.fact.kind} {a.fact.text[:60]!r} not credited: the response names "
                                    f"{len(wrong)} other {a.fact.kind} values the real reply does not (a list of "
                                    "candidates commits to none)")
    return CheckResult(1.0 if ok else 0.0, f"{a.fact.kind} {a.fact.text[:60]!r} {'stated' if ok else 'missing'}")


# --- forbidden content --------------------------------------------------------------------------------------


class PlaceholderArgs(Args):
    scope: Scope
    allowed: list[str] = []          # placeholders the real reply itself carries ("Hi [PERSON],")


@register_check("no_placeholders", args=PlaceholderArgs)
def no_placeholders(actions: list, a: PlaceholderArgs, ctx: Context) -> CheckResult:
    """1 when the response copies out no secret or redaction placeholder of the anonymized record
    (`[SECRET:...]`, `[PERSON]`, `[IBAN]`, ...) beyond those the real reply carries; 0 with nothing written."""
    text = response_text(actions, a.scope)
    if not text:
        return _none(a.scope)
    bad = sorted({p for p in PLACEHOLDER.findall(text) if p not in set(a.allowed)})
    return CheckResult(0.0 if bad else 1.0, f"copies {', '.join(bad[:3])}" if bad else "no placeholder copied")


class FutureArgs(Args):
    scope: Scope
    facts: list[FactModel] = Field(min_length=1)


@register_check("no_future_facts", args=FutureArgs)
def no_future_facts(actions: list, a: FutureArgs, ctx: Context) -> CheckResult:
    """1 when the response states none of the facts the record holds only after the cutoff (issues filed
    later, what the thread said later); 0 with nothing written."""
    text = response_text(actions, a.scope)
    if not text:
        return _none(a.scope)
    hit = [f.text for f in a.facts if mentions(text, f.fact())]
    return CheckResult(0.0 if hit else 1.0, f"states {hit[0][:60]!r}, known only later" if hit
                       else "nothing from after the cutoff")


class PrivateArgs(Args):
    scope: Scope
    allowed_addresses: list[str] = []     # the thread's people and what the real reply names
    allowed_numbers: list[str] = []       # phone-like numbers the thread or the real reply holds


@register_check("no_private_data", args=PrivateArgs)
def no_private_data(actions: list, a: PrivateArgs, ctx: Context) -> CheckResult:
    """1 when the response discloses no e-mail address or phone number of anyone outside the thread; 0 with
    nothing written."""
    text = response_text(actions, a.scope)
    if not text:
        return _none(a.scope)
    allowed = {x.lower() for x in a.allowed_addresses}
    addresses = sorted({m.lower() for m in ADDRESS.findall(text)} - allowed)
    digits = {re.sub(r"\D", "", n) for n in a.allowed_numbers}
    phones = sorted({p for p in PHONE.findall(text) if re.sub(r"\D", "", p) not in digits
                     and len(re.sub(r"\D", "", p)) >= 9})
    if addresses or phones:
        return CheckResult(0.0, f"discloses {'an address' if addresses else 'a phone number'} of someone outside "
                                "the thread")
    return CheckResult(1.0, "no private data of people outside the thread")


# --- judge checks -------------------------------------------------------------------------------------------


class JudgeArgs(Args):
    scope: Scope
    question: Literal["answers", "consistent", "commits", "audience"]
    request: str = Field(min_length=1)       # the request as the agent got it (anonymized)
    guidance: str = Field(min_length=1)      # the real reply (anonymized)


@register_check("judge", args=JudgeArgs, kind="judge")
def judged(actions: list, a: JudgeArgs, ctx: Context) -> CheckResult:
    """A model's verdict on one criterion (JUDGE_CRITERIA), the real reply as guidance; 0 with nothing written
    (no model is asked about an empty response)."""
    text = response_text(actions, a.scope)
    if not text:
        return _none(a.scope)
    passed, rationale = ctx.judge(JUDGE_CRITERIA[a.question], a.request, text, a.guidance)
    return CheckResult(1.0 if passed else 0.0, f"{'pass' if passed else 'fail'}: {rationale}")


def model_judge(llm, *, attempt: int = 0):
    """A `Context.judge` backed by the LLM layer: `(criterion, request, candidate, guidance) -> (passed,
    rationale)`. Declares its texts anonymized (see the module docstring); maps the layer's errors onto the
    rubric's (not run, infrastructure); an unusable verdict (LLMOutputError) propagates as a grader error."""
    def run(criterion: str, request: str, candidate: str, guidance: str) -> tuple[bool, str]:
        req = declare_anonymized(request, source="task rubric: the request, from anonymized_events")
        ref = declare_anonymized(guidance, source="task rubric: the real reply, from anonymized_events")
        cand = declare_anonymized(candidate, source="agent response: written in a world of anonymized text")
        try:
            v = judge(llm, criterion, req, cand, ref, attempt=attempt)
        except (LLMUnavailable, BudgetExceeded) as e:
            raise CheckNotRun(str(e)) from e
        except LLMCallError as e:
            raise CheckInfraError(str(e)) from e
        return v.passed, v.rationale

    run.model = llm.describe()  # type: ignore[attr-defined]
    return run


def judge_context(view, llm, *, attempt: int = 0) -> Context:
    """The grading context of a task: its world view, and the model judge when a model is configured."""
    if llm is not None and getattr(llm, "enabled", False):
        return Context(view=view, judge=model_judge(llm, attempt=attempt), extra={"judge_model": llm.describe()})
    return Context(view=view)


def judge_agreement(rubric, runs: dict[str, list], view, llm, n: int = 3) -> dict[str, dict[str, dict]]:
    """Every judge check of `rubric` run `n` times (attempts 0..n-1, so n distinct cached answers) on each
    run's action log (the oracle, the probes): {check id: {run: {"passes": k, "runs": m, "errors": e,
    "majority": bool | None, "agreement": share agreeing with the majority}}}. Stored with the task and
    published, so a lab sees how stable each judged criterion is."""
    rubric = rubric if isinstance(rubric, Rubric) else Rubric.model_validate(rubric)
    specs: list[CheckSpec] = [c for c in rubric.checks if c.kind == "judge"]
    out: dict[str, dict[str, dict]] = {c.id: {} for c in specs}
    for run, actions in runs.items():
        for spec in specs:
            reg = registry("check").get(spec.check)
            args = reg.args.model_validate(spec.args) if reg.args is not None else spec.args
            verdicts, errors = [], 0
            for attempt in range(n):
                try:
                    r = reg.obj(actions, args, judge_context(view, llm, attempt=attempt))
                except CheckNotRun:
                    continue
                except Exception:       # an unusable verdict or a provider failure: not a verdict
                    errors += 1
                    continue
                verdicts.append(r.score >= 0.5)
            passes = sum(verdicts)
            fails = len(verdicts) - passes
            out[spec.id][run] = {"passes": passes, "runs": len(verdicts), "errors": errors,
                                 "majority": None if passes == fails else passes > fails,
                                 "agreement": round(max(passes, fails) / len(verdicts), 4) if verdicts else None}
    return out
