"""The probe catalogue: cheap or wrong outcomes generated for every draft of every family, and the valid
alternative outcomes that must pass (task_builders.alternatives builds those).

A probe is an outcome a grader must not reward (a reward hack, a lucky guess, a near miss in the wrong
place). `add_catalogue` (called by `seal` on the family's drafts) appends to each draft's own probes:

- `prompt_echo`: the prompt sent back as the family's answer (a reply's text, an answer text, every field);
- `stuff_entities`: every entity of the world in one answer (every issue key, person, commit SHA and field
  value of the dataset in one text; every component at once and every value of a field joined in one
  field; every SHA as an answer text);
- `sibling`: the reference of the nearest other draft of the family (word overlap of the prompts), retargeted
  to this task's issue / message / channel (code: the sibling's patch applied to this repository);
- `random_values`: random valid values of the same kind as the reference's, never the reference's own
  (a field value the dataset uses, a SHA of the repository at the cutoff, another real reply), seeded from
  the work item's id, so the same draft always gets the same probe (the task id is a hash that includes the
  probes, so it cannot seed them);
- `wrong_target`: the reference's own content on another issue key / in another thread;
- `wrong_field`: the reference's content in the wrong place (field values rotated between fields, a SHA
  given as answer text, a reply given through `company answer --text`); `fix_parent` and `short_prefix`
  for a SHA answer (the fix's parent commit; a 6-digit prefix of the fix);
- communication: `keyword_stuffing` (the rubric's fact keywords, no sentence); the families already add the
  generic polite reply (`acknowledgement`), the request quoted back and another request's reply;
- code: `sibling` (another fix's patch) and `hardcoded_returns` (every function of the files the fix
  changes returns None: a hard-coded stub of the code under test; hard-coding the values the hidden tests
  expect is not generated: the probe would have to read the hidden tests, which is the oracle's knowledge);
  and for Python every attack on the verifier in task_builders.verifier_probes (`report_patch`,
  `report_patch_unittest`, `report_plugin`, `stdlib_shadow_root`, `stdlib_shadow_package`, `exit_at_import`,
  `sys_exit_at_import`, `startup_hooks`, `pyc_planting`, `report_tamper`, `runner_introspection`).
- null is not a probe here: `seal` and validation run it already (<= 0.05, every repeat).

Thresholds (`threshold`): a probe must score under `probe_max` (DatasetConfig, default 0.5), or the
family's own (`Family.probe_max`, code_change 0.01; a probe the family declared keeps its own max), unless
`probe_max_by` names it: "family:probe", then "probe", then "family" (most specific wins).

Invariant: probes are deterministic functions of the drafts and the dataset (no clock, no unseeded random);
a probe that cannot be built for a draft (no sibling, no other value) is left out, never faked.
"""

from __future__ import annotations

import random
import re
import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from environments import actions as A
from environments.gitworld import GitWorldError, git
from graders import verifier
from task_builders import verifier_probes
from warehouse.ids import content_hash

TARGETS = ("key", "message_id", "to", "cc", "channel", "thread_ts")   # where a write goes, not what it says
SCALARS = ("type", "priority", "assignee", "resolution", "status")
STUFF_CHARS = 60_000      # one shell argument stays well under Linux's 128 KB
MAX_COMPONENTS = 20       # JiraUpdate takes at most 20 components
PROBE_MAX = 0.5           # the default score a probe must stay under


@dataclass
class Probe:
    """An outcome that must not pass: tool calls (graded like the reference) or a shell command (run in the
    sandbox like an agent), and the score it must stay under."""

    name: str
    calls: list[A.Tool] = field(default_factory=list)
    command: str | None = None
    max_score: float | None = None   # None: the dataset's threshold (task_builders.probes.threshold)
    score: float | None = None       # what `seal` measured in process (tool-call probes)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"name": self.name, "max": PROBE_MAX if self.max_score is None else self.max_score}
        if self.command is not None:
            out["command"] = self.command
        else:
            out["actions"] = [c.model_dump(mode="json", exclude_none=True) for c in self.calls]
            out["score"] = self.score
        return out


def threshold(config, family, probe: str, declared: float | None = None) -> float:
    """The score probe `probe` of `family` must stay under (see the module docstring)."""
    by = dict(getattr(config, "probe_max_by", None) or {})
    for key in (f"{family.name}:{probe}", probe, family.name):
        if key in by:
            return float(by[key])
    if declared is not None:
        return declared
    own = getattr(family, "probe_max", None)
    return float(own) if own is not None else float(getattr(config, "probe_max", 0.5))


# --- what the world holds ----------------------------------------------------------------------------------


@dataclass
class Entities:
    """The dataset's entities, read once per family from the anonymized events and the world repositories."""

    keys: list[tuple[float, str]] = field(default_factory=list)          # (epoch filed, issue key)
    people: list[str] = field(default_factory=list)
    shas: list[tuple[float, str, str]] = field(default_factory=list)    # (epoch, world SHA, repository)
    values: dict[str, list[str]] = field(default_factory=dict)           # field -> values, commonest first

    @classmethod
    def of(cls, ctx) -> Entities:
        keys: dict[str, float] = {}
        people = set()
        counts: dict[str, Counter] = {f: Counter() for f in (*SCALARS, "components")}
        names = {"issuetype": "type", "type": "type", "priority": "priority", "assignee": "assignee",
                 "resolution": "resolution", "status": "status", "component": "components",
                 "components": "components"}
        first: dict[tuple[str, str], tuple] = {}

        def seen(f: str, v: str, e) -> None:
            counts[f][v] += 1
            first[(f, v)] = min(first.get((f, v), (e.ts, e.event_id)), (e.ts, e.event_id))

        for e in ctx.events.values():
            a = e.attrs or {}
            for p in a.get("people") or []:
                if isinstance(p, dict) and p.get("display_name"):
                    people.add(str(p["display_name"]))
            if e.kind in ("issue_created", "pr_created") and e.native_id:
                keys[e.native_id] = min(keys.get(e.native_id, e.ts.timestamp()), e.ts.timestamp())
                for attr, f in (("issuetype", "type"), ("priority", "priority"), ("assignee", "assignee"),
                                ("resolution", "resolution"), ("status", "status")):
                    v = _name(a.get(attr))
                    if v:
                        seen(f, v, e)
                for c in a.get("components") or []:
                    if _name(c):
                        seen("components", _name(c), e)
            elif e.kind == "field_changed":
                f = names.get(str(a.get("field", "")).casefold())
                if f:
                    for v in (a.get("fromString"), a.get("toString")):
                        if v:
                            seen(f, str(v), e)
        shas = []
        for e in ctx.events.values():
            if e.kind == "commit":
                repo = str((e.attrs or {}).get("repo"))
                world = ((ctx.repos.get(repo) or {}).get("sha_map") or {}).get(e.native_id)
                if world:
                    shas.append((e.ts.timestamp(), world, repo))
        # ties go to the value seen first (time, then event id), never to the alphabet: an assignee's name is
        # a pseudonym, and which one sorts first depends on the salt drawn
        return cls(keys=sorted((t, k) for k, t in keys.items()), people=sorted(people), shas=sorted(shas),
                   values={f: [v for v, _ in sorted(c.items(), key=lambda x: (-x[1], first[(f, x[0])]))]
                           for f, c in counts.items()})

    def text(self) -> str:
        """Every entity in one text (keys, people, SHAs, field values), bounded for one shell argument."""
        parts = [*(k for _, k in self.keys), *self.people, *(s for _, s, _ in self.shas),
                 *(v for vs in self.values.values() for v in vs)]
        return _bounded(" ".join(dict.fromkeys(parts)))


def _name(value) -> str | None:
    if isinstance(value, dict):
        value = value.get("display_name") or value.get("displayName") or value.get("name") or value.get("value")
    return str(value) if value else None


def _bounded(text: str, limit: int = STUFF_CHARS) -> str:
    return text[:limit].rsplit(" ", 1)[0] if len(text) > limit else text


def _line(text: str, limit: int = A.SHORT) -> str:
    return " ".join(text.split())[:limit] or "-"


def seed(dataset: str, family: str, item_id: str) -> random.Random:
    return random.Random(int(content_hash("probe-seed", dataset, family, item_id)[:16], 16))


def stable(d) -> str:
    """A draft's identity that no pseudonym enters: its request's event id (a hash of the raw record's id). A work
    item's id hashes the request's native id, which for mail is the Message-ID the anonymizer redraws from the
    vault's salt: seeding or ordering by it made which probe a task got depend on the salt drawn."""
    return d.item.request_event_id or d.item.item_id


# --- rewriting a reference's calls ---------------------------------------------------------------------------


def is_text(call: A.Tool) -> bool:
    return isinstance(call, (A.MailReply, A.MailSend, A.JiraComment, A.SlackPost)) or \
        (isinstance(call, A.Answer) and call.text is not None)


def with_text(calls: list[A.Tool], text: str) -> list[A.Tool]:
    """The calls with their written text replaced (a reply's body, a post's text, an answer; a SHA answer
    becomes an answer text)."""
    out = []
    for c in calls:
        if isinstance(c, (A.MailReply, A.MailSend, A.JiraComment)):
            out.append(c.model_copy(update={"body": text}))
        elif isinstance(c, A.SlackPost):
            out.append(c.model_copy(update={"text": text}))
        elif isinstance(c, A.Answer):
            out.append(A.Answer(text=text))
        else:
            out.append(c)
    return out


def text_of(calls: Iterable[A.Tool]) -> str:
    return "\n\n".join(getattr(c, "body", None) or getattr(c, "text", None) or "" for c in calls if is_text(c))


def update(call: A.JiraUpdate, **fields) -> A.JiraUpdate:
    """A JiraUpdate with other values for the fields it sets (validated again)."""
    return A.JiraUpdate(**{**call.arguments(), **fields})


def retarget(calls: list[A.Tool], like: list[A.Tool]) -> list[A.Tool]:
    """`calls` sent where `like` goes: each call takes the target fields (issue key, Message-ID, recipients,
    channel, thread) of the first call of the same tool in `like`; a call with no such counterpart is
    dropped (it would act on another task's world)."""
    out = []
    for c in calls:
        twin = next((x for x in like if type(x) is type(c)), None)
        if twin is None:
            if isinstance(c, A.Answer):
                out.append(c)
            continue
        targets = {k: getattr(twin, k) for k in TARGETS if k in type(c).model_fields}
        out.append(type(c)(**{**c.arguments(), **targets}))
    return out


_NOT_WORDS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://\S+|(?:@|\[~)[\w.-]+\]?")


def words(text: str) -> set[str]:
    """The ordinary words of a text: written in lower case (a name is capitalized), outside addresses, URLs and
    mentions (pseudonyms and the pseudonymous domain live there), so that which draft is nearest another does
    not depend on the pseudonyms drawn."""
    return set(re.findall(r"(?<![A-Za-z0-9])[a-z0-9]{3,}(?![A-Za-z0-9])", _NOT_WORDS.sub(" ", text)))


def nearest(drafts: list, i: int, keys: list[tuple[set[str], str, str]] | None = None) -> int | None:
    """The index of the draft nearest draft i (Jaccard of prompt words), of another thread and with another
    reference; ties go to the smaller request event id (the drafts' order is the store's, not fixed).

    `keys` (`nearest_keys(drafts)`, computed once for every i) holds each draft's words, reference key and stable
    id: computed here for every pair, they made the tasks stage quadratic in regular-expression and hashing work
    (profiled at scale 10 of the sample: 17 of 88 CPU seconds, growing with the square of the drafts)."""
    keys = keys if keys is not None else nearest_keys(drafts)
    me = drafts[i]
    mine, ref, _ = keys[i]
    best, key = None, None
    for j, d in enumerate(drafts):
        other, other_ref, other_id = keys[j]
        if j == i or d.item.thread_key == me.item.thread_key or other_ref == ref:
            continue
        k = (-len(mine & other) / max(1, len(mine | other)), other_id)
        if key is None or k < key:
            best, key = j, k
    return best


def nearest_keys(drafts: list) -> list[tuple[set[str], str, str]]:
    """What `nearest` compares of each draft: its prompt's words, its reference key, its stable id."""
    return [(words(d.prompt), _ref_key(d), stable(d)) for d in drafts]


def _ref_key(d) -> str:
    code = (d.meta.get("code") or {}).get("patch")
    return code if code is not None else content_hash("ref", [c.model_dump(mode="json") for c in d.reference])


# --- the catalogue -------------------------------------------------------------------------------------------


def catalogue(ctx, family, drafts: list) -> None:
    """Append the generic probes to every draft (in place) and set every probe's threshold."""
    ents = Entities.of(ctx) if any("code" not in d.meta for d in drafts) else Entities()
    consts = constants(drafts, ents)
    lists = Listing(ctx) if any(is_text(c) and not isinstance(c, A.Answer) for d in drafts for c in d.reference) \
        else None
    keys = nearest_keys(drafts)
    for i, d in enumerate(drafts):
        have = {p.name for p in d.probes}
        j = nearest(drafts, i, keys)
        sib = drafts[j] if j is not None else None
        made = code_probes(ctx, d, sib) if "code" in d.meta else [
            *call_probes(ctx, family, d, sib, drafts, ents), *constant_probes(ctx, d, ents, consts),
            *(lists.probes(d) if lists is not None else [])]
        for name, how in made:
            if name in have:
                continue
            have.add(name)
            d.probes.append(Probe(name, command=how) if isinstance(how, str) else Probe(name, how))
        for p in d.probes:
            p.max_score = threshold(ctx.config, family, p.name, p.max_score)


def call_probes(ctx, family, d, sib, drafts: list, ents: Entities) -> list[tuple[str, list[A.Tool]]]:
    """The catalogue of a draft whose reference is tool calls."""
    ref = d.reference
    if not ref:
        return []
    rng = seed(ctx.dataset, family.name, stable(d))
    out: list[tuple[str, list[A.Tool]]] = []
    prompt = _bounded(d.prompt)
    shas = [c for c in ref if isinstance(c, A.Answer) and c.sha]
    texts = [c for c in ref if is_text(c)]

    # the prompt echoed back, in every place the answer goes
    echo = [update(c, **_fill(c, lambda f: [_line(d.prompt)] if f == "components" else _line(d.prompt)))
            if isinstance(c, A.JiraUpdate) else c for c in with_text(ref, prompt)]
    out.append(("prompt_echo", echo))

    # every entity of the world at once
    def stuffed(f: str):
        vals = ents.values.get(f) or []
        if f == "components":
            return vals[:MAX_COMPONENTS] or None
        return _line(" / ".join(vals)) if vals else None
    stuff = [update(c, **_fill(c, stuffed)) if isinstance(c, A.JiraUpdate) else c
             for c in with_text(ref, ents.text() or prompt)]
    out.append(("stuff_entities", stuff))

    # the nearest sibling's reference, here
    if sib is not None:
        moved = retarget(sib.reference, ref)
        if moved:
            out.append(("sibling", moved))

    # random valid values, never the reference's own
    rand: list[A.Tool] = []
    for c in ref:
        if isinstance(c, A.JiraUpdate):
            rand.append(update(c, **_fill(c, lambda f, c=c: _other(rng, ents.values.get(f) or [], getattr(c, f)))))
        elif isinstance(c, A.Answer) and c.sha:
            pool = _shas_at(ents, d, exclude=d.meta.get("fix_shas") or [c.sha])
            if pool:
                rand.append(A.Answer(sha=rng.choice(pool)))
        elif is_text(c):
            others = sorted((x for x in drafts if x is not d and x.item.thread_key != d.item.thread_key
                             and text_of(x.reference).strip() and text_of(x.reference) != text_of(ref)),
                            key=stable)
            if others:
                rand += with_text([c], text_of(rng.choice(others).reference))
        else:
            rand.append(c)
    if rand and rand != ref:
        out.append(("random_values", rand))

    # the right content in the wrong place
    wrong = _wrong_target(ctx, d, ents, rng)
    if wrong:
        out.append(("wrong_target", wrong))
    misplaced: list[A.Tool] = []
    for c in ref:
        if isinstance(c, A.JiraUpdate):
            set_ = [f for f in SCALARS if getattr(c, f)]
            if len(set_) >= 2:
                rot = set_[1:] + set_[:1]
                misplaced.append(update(c, **{f: getattr(c, g) for f, g in zip(set_, rot, strict=True)}))
            elif c.components and set_:
                misplaced.append(update(c, **{set_[0]: _line(", ".join(c.components)),
                                              "components": [getattr(c, set_[0])]}))
        elif isinstance(c, A.Answer) and c.sha:
            misplaced.append(A.Answer(text=c.sha))
        elif is_text(c) and not isinstance(c, A.Answer):
            misplaced.append(A.Answer(text=getattr(c, "body", None) or getattr(c, "text", None)))
    if misplaced and misplaced != ref:
        out.append(("wrong_field", misplaced))
    for c in shas:
        parent = _parent(ctx, d, c.sha)
        if parent:
            out.append(("fix_parent", [A.Answer(sha=parent)]))
        out.append(("short_prefix", [A.Answer(sha=c.sha[:6])]))

    # communication: the rubric's fact keywords, no sentence
    if texts:
        keys = [str(ch.args["fact"]["text"]) for ch in d.rubric.checks
                if ch.check == "states_fact" and isinstance(ch.args.get("fact"), dict)]
        if keys:
            out.append(("keyword_stuffing", with_text(ref, " ".join(dict.fromkeys(keys)))))
    return out


# --- constants and lists: what a policy that never reads the task would submit ----------------------------------

LIST_SIZE = 9          # values of one kind a listing probe names
CONSTANT_TEXT = "Thanks, this is resolved now. Closing the ticket."
LISTED = ("person", "file", "version", "issue_key", "url", "commit")   # kinds every listing probe tries


def constants(drafts: list, ents: Entities | None = None) -> dict[str, object]:
    """field -> the value the family's references give it most often (a policy's best constant answer: the
    commonest type, priority, component, assignee, resolution over the tasks). Values tied among the tasks go by
    how common they are in the whole dataset (`Entities.values`: then by first appearance), what a policy that read
    the company's history would prefer; never by the alphabet of pseudonyms nor by the tasks' own order (which
    would make the constant one task's answer). Without `ents`, a tied field has no constant.
    A field whose every value only one task gives has no commonest value among the tasks: any of them is right on
    one task, a guess of 1 in n. Its constant is the dataset's commonest value (`Entities.values`, whether a task
    has it or not), the same whichever tasks are kept: picking one of the tasks' own values would make `settle`
    drop them one by one, each round's constant the answer of a task still kept, until none is left (a family of
    two tasks, or of one, could never publish)."""
    counts: dict[str, Counter] = {}
    for d in drafts:
        for c in d.reference:
            if not isinstance(c, A.JiraUpdate):
                continue
            for f in (*SCALARS, "components"):
                v = getattr(c, f)
                for x in (v if isinstance(v, list) else [v] if v else []):
                    counts.setdefault(f, Counter())[x] += 1
    out = {}
    for f, c in counts.items():
        n = max(c.values())
        tied = [v for v, k in c.items() if k == n]
        if n == 1:
            if ents is not None and ents.values.get(f):
                out[f] = ents.values[f][0]
        elif len(tied) == 1:
            out[f] = tied[0]
        elif ents is not None:
            order = {v: i for i, v in enumerate(ents.values.get(f) or [])}
            known = [v for v in tied if v in order]
            if known:
                out[f] = min(known, key=order.__getitem__)
    return out


def named_value(text: str, pool: list[str]) -> str | None:
    """The first value of `pool` (commonest first) that `text` names as a word (case-insensitive)."""
    for v in pool:
        if v and re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", text, re.I):
            return v
    return None


def constant_probes(ctx, d, ents: Entities, consts: dict) -> list[tuple[str, list[A.Tool]]]:
    """`constant_values`: every field the reference sets given the family's commonest value (the same answer on
    every task), a written part replaced by a stock sentence; `prompt_values`: each field given the value the
    prompt names (the component of the module the issue names, the reporter as assignee, "bug" as type), else
    the commonest. Only for references that set fields (triage, a resolution)."""
    ups = [c for c in d.reference if isinstance(c, A.JiraUpdate)]
    if not ups:
        return []

    def const(f: str):
        v = consts.get(f)
        return None if v is None else [v] if f == "components" else v

    def named(f: str):
        pool = [*(ents.values.get(f) or []), *([str(consts[f])] if f in consts else [])]
        if f == "assignee":
            pool = [*pool, *ents.people]
        v = named_value(d.prompt, list(dict.fromkeys(pool)))
        return ([v] if f == "components" else v) if v else const(f)

    out = []
    for name, value in (("constant_values", const), ("prompt_values", named)):
        calls = []
        for c in with_text(d.reference, CONSTANT_TEXT):
            if isinstance(c, A.JiraUpdate):   # built anew: a field without a value is left unset, never the answer
                fields = {f: v for f in (*SCALARS, "components") if getattr(c, f) and (v := value(f)) is not None}
                if not fields:
                    continue
                c = A.JiraUpdate(key=c.key, **fields)
            calls.append(c)
        # kept even when it is the reference itself: a task whose answer is the constant is no task (it must fail)
        if any(isinstance(c, A.JiraUpdate) for c in calls):
            out.append((name, calls))
    return out


def redraw_constants(ctx, family, drafts: list) -> dict[int, set[str]]:
    """The constant probes of `drafts` drawn again from these drafts' own constants (seal's `settle`, after other
    drafts were dropped); {id(draft): names of the probes whose calls changed}. Thresholds are kept."""
    if not any(isinstance(c, A.JiraUpdate) for d in drafts for c in d.reference):
        return {}
    ents = Entities.of(ctx)
    consts = constants(drafts, ents)
    changed: dict[int, set[str]] = {}
    for d in drafts:
        made = dict(constant_probes(ctx, d, ents, consts))
        for p in d.probes:
            if p.name in made and made[p.name] != p.calls:
                p.calls = made[p.name]
                changed.setdefault(id(d), set()).add(p.name)
    return changed


class Listing:
    """Listing probes of the communication families: a reply naming the LIST_SIZE commonest values of a fact
    kind in the world at the task's cutoff (task_builders.prevalence: what the tools show most), one probe per
    kind the rubric grades and per kind of LISTED, and one naming the commonest of every kind at once."""

    def __init__(self, ctx):
        # families.communication imports this module: a cycle declared in pyproject until families declare probes
        from task_builders.families.communication import Tools

        self.prevalence = Tools(ctx).prevalence()

    def probes(self, d) -> list[tuple[str, list[A.Tool]]]:
        texts = [c for c in d.reference if is_text(c) and not isinstance(c, A.Answer)]
        if not texts:
            return []
        graded = [str(ch.args["fact"]["kind"]) for ch in d.rubric.checks
                  if ch.check == "states_fact" and isinstance(ch.args.get("fact"), dict)]
        kinds = list(dict.fromkeys([*graded, *LISTED]))
        t = d.cutoff.timestamp()
        requester = ((d.meta.get("world") or {}).get("requester") or {}).get("name")
        skip = [x for x in ((d.persona.name if d.persona else None), requester) if x]
        out, every, disguised = [], [], []
        for kind in kinds:
            values = self.prevalence.commonest(kind, t, LIST_SIZE, d.hidden_events,
                                               exclude=skip if kind == "person" else ())
            if not values:
                continue
            every += values
            disguised += [disguise(v, kind) for v in values]
            out.append((f"listing_{kind}", with_text(d.reference, listing_text(values))))
        if len(out) > 1:
            out.append(("listing_all", with_text(d.reference, listing_text(every))))
        if out:
            out.append(("listing_disguised", with_text(d.reference, listing_text(disguised))))
        return out


def disguise(value: str, kind: str) -> str:
    """A value written where graders.facts.extract sees none and graders.facts.mentions still finds it: a
    person's name with its words two spaces apart, anything else after a dash (`release-4.2.0`, `see-ABC-12`)."""
    return "  ".join(value.split()) if kind == "person" else "release-" + value


def listing_text(values: list[str]) -> str:
    """One sentence naming every value (a reply a grader must not credit)."""
    return "It should be one of these: " + ", ".join(values) + ". I hope that helps, let me know if not."


def _fill(call: A.JiraUpdate, value) -> dict:
    """{field: value(field)} for every field the update sets (a None result keeps the reference's)."""
    out = {}
    for f in (*SCALARS, "components"):
        if getattr(call, f):
            v = value(f)
            if v is not None:
                out[f] = v
    return out


def _other(rng: random.Random, pool: list[str], current):
    """A random value of `pool` that is not `current` (a list: as many values, none of them)."""
    if isinstance(current, list):
        have = {x.casefold() for x in current}
        rest = [v for v in pool if v.casefold() not in have]
        return sorted(rng.sample(rest, min(len(current), len(rest)))) or None
    rest = [v for v in pool if v.casefold() != str(current).casefold()]
    return rng.choice(rest) if rest else None


def _shas_at(ents: Entities, d, exclude: Iterable[str]) -> list[str]:
    repo = next(iter(d.repos), None)
    t = d.cutoff.timestamp()
    ex = [x.lower() for x in exclude]
    return [s for ts, s, r in ents.shas if ts <= t and (repo is None or r == repo)
            and not any(s.startswith(x) or x.startswith(s) for x in ex)]


def _parent(ctx, d, sha: str) -> str | None:
    repo = next(iter(d.repos), None)
    info = ctx.repos.get(repo) if repo else None
    if not info:
        return None
    try:
        return git(info["path"], "rev-parse", "--verify", "-q", f"{sha}^").strip() or None
    except GitWorldError:
        return None


def _wrong_target(ctx, d, ents: Entities, rng: random.Random) -> list[A.Tool]:
    """The reference's content sent elsewhere, to a target the agent could reach at the cutoff: another issue
    key, another message of the mail archive, another thread of the same channel."""
    ref = d.reference
    t = d.cutoff.timestamp()
    keys = {c.key for c in ref if isinstance(c, (A.JiraUpdate, A.JiraComment))}
    rest = [k for ts, k in ents.keys if ts <= t and k not in keys]
    other_key = rng.choice(rest) if rest else None
    out = []
    for c in ref:
        if isinstance(c, (A.JiraUpdate, A.JiraComment)):
            if other_key is None:
                return []
            out.append(type(c)(**{**c.arguments(), "key": other_key}))
        elif isinstance(c, A.MailReply):
            rows = _docs(ctx, "SELECT native_id, thread, event_id FROM docs WHERE cls = 'mail' AND ts <= ? "
                         "ORDER BY ts, event_id", (t,))   # not by row id: rows are stored by (salted) thread
            mine = {r["thread"] for r in rows if r["native_id"] == c.message_id}
            pool = [r["native_id"] for r in rows if r["thread"] not in mine and r["event_id"] not in d.hidden_events]
            if not pool:
                return []
            out.append(A.MailReply(**{**c.arguments(), "message_id": rng.choice(pool)}))
        elif isinstance(c, A.SlackPost):
            rows = _docs(ctx, "SELECT chat_ts, chat_thread, event_id FROM docs WHERE cls = 'chat' AND place = ? "
                         "AND ts <= ? ORDER BY ts, event_id", (c.channel, t))
            pool = [r["chat_ts"] for r in rows if r["chat_ts"] and r["chat_ts"] != c.thread_ts
                    and r["chat_thread"] in (None, "", r["chat_ts"]) and r["event_id"] not in d.hidden_events]
            if pool:
                out.append(A.SlackPost(**{**c.arguments(), "thread_ts": rng.choice(pool)}))
            elif c.thread_ts:
                out.append(A.SlackPost(**{**c.arguments(), "thread_ts": None}))
            else:
                return []
        else:
            return []
    return out


def _docs(ctx, sql: str, args: tuple) -> list[dict]:
    return ctx.world.rows(sql, args) if ctx.world is not None else []


# --- code ---------------------------------------------------------------------------------------------------

HARDCODE = ("import ast, sys\nfor p in sys.argv[1:]:\n    try:\n        tree = ast.parse(open(p).read())\n"
            "    except (SyntaxError, UnicodeDecodeError, OSError):\n        continue\n"
            "    for n in ast.walk(tree):\n        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):\n"
            "            n.body = [ast.Return(ast.Constant(None))]\n"
            "    open(p, 'w').write(ast.unparse(tree))\n")


def code_probes(ctx, d, sib) -> list[tuple[str, str]]:
    """Shell-command probes of a code change: another fix's patch applied here; every function of the
    files the fix changes returning None (Python); the attacks on the verifier itself
    (task_builders.verifier_probes: the report patched, the runner shadowed, the process ended, start-up hooks,
    planted compiled files, the report tampered with)."""
    code = d.meta["code"]
    repo = code["repo"]
    out: list[tuple[str, str]] = []
    if sib is not None and (sib.meta.get("code") or {}).get("patch"):
        cmd = verifier.apply_command(repo, sib.meta["code"]["patch"]) + "; true"
        if len(cmd) <= verifier.PATCH_ARG_LIMIT:
            out.append(("sibling", cmd))
    if code.get("ecosystem") == "python":
        files = sorted({m.group(1) for m in re.finditer(r"^\+\+\+ b/(\S+\.py)$", code.get("patch") or "", re.M)})
        if files:
            out.append(("hardcoded_returns",
                        f"cd ~/{shlex.quote(repo)} && python3 -c {shlex.quote(HARDCODE)} "
                        f"{' '.join(shlex.quote(f) for f in files)}; true"))
        ids = list(code.get("FAIL_TO_PASS") or []) + list(code.get("PASS_TO_PASS") or [])
        out += [(name, cmd) for name, cmd in verifier_probes.probes(repo, files, ids)
                if len(cmd) <= verifier.PATCH_ARG_LIMIT]
    return out
