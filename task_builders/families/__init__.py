"""Task families: each turns work items into task drafts (prompt, cutoff, reference actions, rubric, the facts
it hides); `seal` turns drafts into tasks the same way for every family.

Invariants:
- Builders read anonymized events, work items and the dataset's world only.
- A family declares what its task hides: events the world withholds, exact tokens (a SHA, a key, a value) and
  texts (the real reply) that must not be reachable, commits that must not be in the task's repositories.
  `seal` proves it: in the prompt and everywhere the agent can reach at the cutoff (every source of the
  world through its full-text index, and the git view), exactly for tokens and by word n-gram overlap for
  texts; a draft that fails is rejected with the reason, never published.
- A builder's reference passes its own rubric (>= 0.99) and doing nothing fails it (<= 0.05), replayed
  through the same tool server the agent uses, before a task exists (DESIGN.md, Convention 8).
- The task id is the content hash of everything that defines the task, so re-runs give the same id.
- A task's repositories are recorded as their refs at the cutoff (environments.gitworld): an episode packs
  exactly what they reach, so nothing is stored per task but a few SHAs.
- A draft may carry probes: cheap or wrong outcomes (the prompt echoed back, a sibling task's answer, a
  generic reply, ...), each as tool calls or a shell command, with the score it must stay under. `seal`
  grades the tool-call probes in process (a probe that passes rejects the draft); validation replays every
  probe in the sandbox (graders.replay).
- Families are plug-ins (core.registry, kind "family"; entry point group `taskmine.families`; see
  `taskmine families list`). A family declares everything it is in its own module: the work items it wants
  (`kinds`, and `mine` for a kind of its own), its settings (`Config`, the `[families.<name>]` table of
  taskmine.toml), how it builds drafts (`build`), its probes (on its drafts, and `probe_max`), the tools its
  agent is served (`tools`) and its retrieval baselines (`baselines`). Nothing else names it.
"""

from __future__ import annotations

import datetime as dt
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config import DatasetConfig, FamilyConfig
from core.registry import registry
from environments import actions as A
from environments.gitworld import Branches, GitWorldError, refs_at, verify_refs
from environments.tools import Persona, ToolServer
from environments.world import World, WorldView
from graders.communication import judge_agreement, judge_context
from graders.rubric import Context, Rubric, grade
from task_builders.alternatives import add_alternatives
from task_builders.cluster.splits import canary
from task_builders.probes import (
    Probe,  # the shared piece lives below the families that use it
    catalogue,
    redraw_constants,
)
from warehouse.ids import content_hash
from warehouse.schemas import Event, Rejection, Task, WorkItem

if TYPE_CHECKING:
    from task_builders.mining import Mining

NGRAM = 8          # words in a shingle of a hidden text
MAX_SHINGLES = 60  # shingles of one hidden text looked up in the world


@dataclass
class BuildContext:
    dataset: str
    events: dict[str, Event]              # anonymized, by event_id
    items: list[WorkItem]
    world_root: Path                      # $TASKMINE_HOME/worlds/<dataset>
    config: DatasetConfig
    repos: dict[str, dict] = field(default_factory=dict)  # world repository name -> {"path", "sha_map", "slug"}
    splits: dict[str, tuple[str, str]] = field(default_factory=dict)  # item_id -> (split, canary) from clusters
    world: World | None = None
    sandbox: Any = None      # environments.sandbox.Sandbox: families that run code while building (code_change)
    llm: Any = None          # llm.LLM: instruction rewrites, judge checks, statements written with a model

    def by_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events.values() if e.kind == kind]

    def view(self, cutoff: dt.datetime, hidden: Iterable[str] = ()) -> WorldView | None:
        return self.world.at(cutoff, hidden) if self.world else None


@dataclass
class Draft:
    """A task before it is sealed (see the module docstring)."""

    item: WorkItem
    prompt: str
    cutoff: dt.datetime
    reference: list[A.Tool]                               # the real outcome, as tool calls
    rubric: Rubric
    hidden_events: list[str] = field(default_factory=list)
    hidden_tokens: list[str] = field(default_factory=list)  # exact, case-insensitive (a SHA prefix matches)
    hidden_texts: list[str] = field(default_factory=list)   # no NGRAM-word run of them may be reachable
    hidden_commits: list[str] = field(default_factory=list)  # world SHAs no repository of the task may reach
    needed_commits: list[str] = field(default_factory=list)  # world SHAs its repositories must reach
    persona: Persona | None = None
    repos: dict[str, str | None] = field(default_factory=dict)  # world repo -> commit to check out (None: HEAD)
    tools: list[str] | None = None
    probes: list[Probe] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


READ_TOOLS = tuple(t.name() for t in A.READS)
REPO_TOOLS = ("git", "shell", "read_file", "list_files")   # reading a repository in the task's sandbox


class Family(ABC):
    name: str = ""
    # The work-item kinds it builds tasks from. The built-in kinds (task_builders.mining.MINERS: issue,
    # email_reply, chat_answer, resolution) are mined for it; a kind of its own needs `mine`.
    kinds: tuple[str, ...] = ("issue",)
    Config: type[FamilyConfig] = FamilyConfig   # its settings: the [families.<name>] table of taskmine.toml
    probe_max: float | None = None        # the family's default probe threshold (None: the dataset's probe_max)
    # The tools an agent of the family is served (MCP, OpenEnv, Harbor): the reads and what the family's work
    # needs; None: every tool. A task's own list (world["tools"]) wins; a reference's tools are always in.
    tools: tuple[str, ...] | None = None
    # Its retrieval baselines (graders.baselines): functions (task, view, worlds_dir) -> Baseline, each one run
    # `baseline:<name>` per valid task; none: the family is reported as "no baseline".
    baselines: tuple[Callable[..., Any], ...] = ()

    def mine(self, m: Mining) -> Iterable[WorkItem]:
        """Its work items from the dataset's anonymized events (`m`: task_builders.mining.Mining, with the helpers
        a miner needs: events in time order, children, mentions, `item`, `skip`, `candidate`, `answer_of`). The
        default mines its `kinds` with the built-in miners, each once per dataset however many families want it;
        a family with a kind of its own overrides this."""
        for kind in self.kinds:
            yield from m.builtin(kind, self.name)

    def settings(self, ctx: BuildContext) -> Any:
        """Its settings for this dataset (an instance of its `Config`)."""
        return ctx.config.family(self.name)

    @abstractmethod
    def build(self, ctx: BuildContext) -> Iterator[Draft | Rejection]:
        """Yield a Draft per usable item and a Rejection (with its reason) per unusable one."""

    def reject(self, ctx: BuildContext, item: WorkItem | str, reason: str, detail: str = "",
               stage: str = "candidates") -> Rejection:
        subject = item if isinstance(item, str) else item.thread_key
        return Rejection(dataset=ctx.dataset, stage=stage, family=self.name, subject_id=subject,
                         reason=reason, detail=detail[:500])


def register_family(name: str):
    """Class decorator: a Family subclass under `name` (kind "family" of core.registry)."""

    def wrap(cls: type[Family]) -> type[Family]:
        if not (isinstance(cls, type) and issubclass(cls, Family)):
            raise TypeError(f"@register_family({name!r}) must decorate a Family subclass")
        cls.name = name
        registry("family").add(name, cls, f"builtin:{cls.__module__}")
        return cls

    return wrap


def families() -> dict[str, Family]:
    return {name: r.obj() for name, r in registry("family").all().items()}


# --- fixing commits as the world holds them ---------------------------------------------------------------

UNREADABLE_FIX = "the fix touches an unreadable object"
WITHHELD_FIX = "the fix touches a withheld file"
WITHHELD_RECORD = "a record it needs was withheld"


def kept_fixes(ctx: BuildContext, shas: Iterable[str], commits: dict[str, Event]) -> list[str]:
    """Fixing commits (original SHAs) as the world's history holds them: a commit only a ref the rewrite drops
    reaches (a pull request's own commit, a tag) is its copy on a kept branch when there is one
    (privacy.gitrewrite.equivalents: same patch id), named once, in order."""
    out: list[str] = []
    for s in shas:
        e = commits.get(s)
        info = ctx.repos.get(e.attrs.get("repo")) if e is not None else None
        kept = ((info or {}).get("equivalent") or {}).get(s, s)
        kept = kept if kept in commits else s
        if kept not in out:
            out.append(kept)
    return out


def absent_problem(info: dict, world_shas: Iterable[str]) -> tuple[str, str] | None:
    """(reason, detail) when a commit of `world_shas` changes a file whose content before or after it the world's
    repository lacks: git could not read it, or the leak audit refused it (privacy.gitrewrite: the file is
    absent there, so the commit's diff in the world is not the real one)."""
    for sha in world_shas:
        touched = (info.get("touched") or {}).get(sha) or {}
        for why, reason in (("unreadable", UNREADABLE_FIX), ("withheld", WITHHELD_FIX)):
            if touched.get(why):
                return reason, f"{touched[why]} files of commit {sha[:12]}"
    return None


# --- sealing --------------------------------------------------------------------------------------------


def seal(ctx: BuildContext, family: Family, drafts: list[Draft]) -> Iterator[Task | Rejection]:
    """Tasks from drafts: refs of their repositories at the cutoff, the hidden-facts check (text and git), the
    self-replay of the reference, the null and the probes (the family's and the generated catalogue,
    task_builders.probes), the valid alternatives (task_builders.alternatives: graded and kept, never a reason to
    reject), the id."""
    catalogue(ctx, family, drafts)
    add_alternatives(ctx, family, drafts)
    branches: dict[str, Branches] = {}
    sealed: list[tuple[Draft, dict, WorldView | None, Context]] = []
    for d in drafts:
        git_world, problems = {}, []
        for repo, head in d.repos.items():
            info = ctx.repos.get(repo)
            if info is None:
                problems.append(f"repository {repo!r} is not in the world")
                continue
            try:
                b = branches.setdefault(repo, Branches.read(Path(info["path"])))
                refs = refs_at(Path(info["path"]), d.cutoff, b)
                problems += verify_refs(Path(info["path"]), refs, d.hidden_commits, d.needed_commits, head)
            except GitWorldError as exc:
                problems.append(str(exc))
                continue
            git_world[info["slug"]] = {"refs": refs, "head": head}
        world_view = ctx.view(d.cutoff, d.hidden_events)
        problems += hidden_fact_problems(world_view, d)
        if problems:
            yield family.reject(ctx, d.item, "the answer is reachable in the world", "; ".join(problems))
            continue
        context = grading_context(world_view, ctx.llm)
        oracle, null = self_grade(world_view, d, context=context)
        if oracle.score is None or oracle.score < 0.99:
            yield family.reject(ctx, d.item, "reference does not pass its own rubric",
                                f"score={oracle.score} {oracle.message}")
            continue
        if null.score is None or null.score > 0.05:
            yield family.reject(ctx, d.item, "doing nothing passes the rubric", f"score={null.score}")
            continue
        kept, refused = [], []
        for p in d.probes:
            if p.command is None:
                errors: list[str] = []
                actions = replay_log(world_view, d, p.calls, errors)
                if errors:  # the tools refuse it: a tool error, not a grade (in the sandbox: a failed command)
                    refused.append(f"{p.name}: {errors[0][:120]}")
                    continue
                p.score = grade(d.rubric, actions, _probe_context(context, d)).score
            kept.append(p)
        d.probes = kept
        if refused:
            d.meta["probes_refused"] = refused
        passing = [(p.name, p.score) for p in d.probes if p.command is None
                   if p.score is None or p.score >= p.max_score]
        for alt in d.meta.get("alternatives") or []:
            if "calls" in alt:
                    alt["score"] = self_grade(world_view, d, [A.CALL.validate_python(c) for c in alt["calls"]],
                                          context=context)[0].score
        if passing:
            yield family.reject(ctx, d.item, "a probe passes the rubric",
                                "; ".join(f"{n} scored {s}" for n, s in passing))
            continue
        d.meta["graded_by"] = oracle.mode if not oracle.not_run else f"{oracle.mode}; {oracle.not_run} judge " \
                                                                     "checks not run (no model configured)"
        sealed.append((d, git_world, world_view, context))
    yield from settle(ctx, family, sealed)
    for d, git_world, world_view, context in sealed:
        if context.judge is not None and any(c.kind == "judge" for c in d.rubric.checks):
            runs = {"oracle": replay_log(world_view, d)}
            runs.update({f"probe:{p.name}": replay_log(world_view, d, p.calls) for p in d.probes if p.command is None})
            d.meta["judge_agreement"] = judge_agreement(d.rubric, runs, world_view, ctx.llm)
        yield _task(ctx, family, d, git_world)


def settle(ctx: BuildContext, family: Family, kept: list) -> Iterator[Rejection]:
    """Probes that depend on the family's whole set of tasks (a constant answer: the commonest values of the tasks'
    references, task_builders.probes.constants) drawn again from the drafts still kept, and graded again, until none
    passes: a lab trains on the published set, so its best constant is that set's, and dropping the tasks one
    constant solved can make another constant the commonest. Removes from `kept` (in place) and yields a rejection
    for every draft such a probe passes."""
    while kept:
        changed = redraw_constants(ctx, family, [k[0] for k in kept])
        failing = []
        for k in kept:
            d, _, world_view, context = k
            for p in d.probes:
                if p.name in changed.get(id(d), ()):
                    p.score = grade(d.rubric, replay_log(world_view, d, p.calls), _probe_context(context, d)).score
            passing = [(p.name, p.score) for p in d.probes if p.name in changed.get(id(d), ())
                       and (p.score is None or p.score >= p.max_score)]
            if passing:
                failing.append((k, passing))
        if not failing:
            return
        for k, passing in failing:
            kept.remove(k)
            yield family.reject(ctx, k[0].item, "a probe passes the rubric",
                                "; ".join(f"{n} scored {s} (the constants of the tasks kept)" for n, s in passing))


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def hidden_fact_problems(view: WorldView | None, d: Draft) -> list[str]:
    """Where the draft's hidden facts can be found: the prompt, or documents reachable at its cutoff."""
    problems = []
    prompt = d.prompt.casefold()
    for token in dict.fromkeys(t for t in d.hidden_tokens if t):
        t = token.casefold()
        if re.search(rf"(?<!\w){re.escape(t)}", prompt):
            problems.append(f"the prompt names {_show(token)}")
        if view is not None:
            hits = view.token_hits(token)
            if hits:
                problems.append(f"{hits[0]['cls']} {hits[0]['native_id'][:60]} names {_show(token)}")
    pwords = _words(d.prompt)
    pgrams = {tuple(pwords[i:i + NGRAM]) for i in range(max(0, len(pwords) - NGRAM + 1))}
    for text in d.hidden_texts:
        words = _words(text)
        grams = [words[i:i + NGRAM] for i in range(max(0, len(words) - NGRAM + 1))]
        step = max(1, len(grams) // MAX_SHINGLES)
        for g in grams[::step][:MAX_SHINGLES]:
            if tuple(g) in pgrams:
                problems.append(f"the prompt repeats the hidden text ({' '.join(g[:4])} ...)")
                break
            hits = view.phrase_hits(g, limit=1) if view is not None else []
            if hits:
                problems.append(f"{hits[0]['cls']} {hits[0]['native_id'][:60]} repeats the hidden text "
                                f"({' '.join(g[:4])} ...)")
                break
    return problems


def _show(token: str) -> str:
    return f"the hidden value {token[:12]!r}" if len(token) <= 64 else "a hidden value"


def grading_context(view: WorldView | None, llm=None) -> Context:
    """The context a task is graded in: its world view, and the model judge when a model is configured."""
    return judge_context(view, llm)


def replay_log(view: WorldView | None, d: Draft, calls: list[A.Tool] | None = None, errors: list | None = None):
    """The action log of the reference (or `calls`) replayed through an in-process tool server."""
    server = ToolServer(view, persona=d.persona, tools=set(d.tools) if d.tools is not None else None)
    for call in d.reference if calls is None else calls:
        r = server.call(call.name(), call.arguments())
        if r.error and errors is not None:
            errors.append(r.text)
    return server.actions


def _probe_context(context: Context, d: Draft) -> Context:
    """A probe's grading context: a family that measures in its own sandbox (code_change) has no measurement
    of a tool-call probe, so its verifier results are empty, as `self_grade` does for anything but the
    reference."""
    return replace(context, extra={}) if d.meta.get("self_grade") else context


def self_grade(view: WorldView | None, d: Draft, calls: list[A.Tool] | None = None, context: Context | None = None):
    """(oracle grade, null grade): the reference (or `calls`) replayed through an in-process tool server;
    nothing. A family whose checks read a verifier phase (code_change) gives the results its own sandbox runs
    measured for the real outcome and for doing nothing (meta["self_grade"])."""
    errors: list[str] = []
    actions = replay_log(view, d, calls, errors)
    context = context or Context(view=view)
    measured = d.meta.get("self_grade") or {}
    if measured:
        context = replace(context, extra=measured.get("oracle") if calls is None else {})
    oracle = grade(d.rubric, actions, context)
    if errors:
        oracle.message = (oracle.message + f" reference calls refused: {errors[0][:200]}").strip()
        oracle.score = 0.0 if oracle.score is not None else None
    return oracle, grade(d.rubric, [], replace(context, extra=measured.get("null") or {}) if measured else context)


def _task(ctx: BuildContext, family: Family, d: Draft, git_world: dict[str, dict]) -> Task:
    world = {"cutoff": d.cutoff.isoformat(), "hidden": sorted(d.hidden_events),
             "persona": d.persona.__dict__ if d.persona else None, "tools": d.tools,
             "git": {"repos": sorted(git_world), "refs": {s: g["refs"] for s, g in sorted(git_world.items())},
                     "heads": {s: g["head"] for s, g in sorted(git_world.items()) if g["head"]}}
             if git_world else None,
             "world_key": ctx.world.key() if ctx.world else None, **d.meta.get("world", {})}
    wh = content_hash("world", world)
    reference = {"actions": [c.model_dump(mode="json", exclude_none=True) for c in d.reference],
                 "probes": [p.to_json() for p in d.probes],
                 **{k: v for k, v in d.meta.items() if k not in ("world", "self_grade")}}
    body = {"dataset": ctx.dataset, "family": family.name, "item": d.item.item_id, "prompt": d.prompt,
            "world": wh, "reference": reference, "rubric": d.rubric.model_dump(mode="json")}
    task_id = content_hash("task", body)[:32]
    if d.item.item_id in ctx.splits:        # the clusters stage: no near-duplicate crosses the splits
        split, mark = ctx.splits[d.item.item_id]
    else:                                   # no clustering ran: a hash of the thread
        test = int(content_hash("split", ctx.dataset, d.item.thread_key)[:8], 16) / 0xFFFFFFFF < ctx.config.test_share
        split, mark = ("test", canary(ctx.dataset)) if test else ("train", "")
    return Task(task_id=task_id, dataset=ctx.dataset, family=family.name, item_id=d.item.item_id, prompt=d.prompt,
                cutoff=d.cutoff, world=world, world_hash=wh, reference=reference,
                rubric=d.rubric.model_dump(mode="json"), lineage=d.item.lineage, split=split, canary=mark)


def served_tools(family: str, world: dict | None, reference: Iterable[dict] = ()) -> set[str] | None:
    """The tools a task of `family` is served with: its world's own list when it has one, else the family's
    (`Family.tools`) plus every tool its reference calls (so the real outcome can always be replayed); None:
    every tool (a family that declares none, or one not registered here)."""
    if (world or {}).get("tools") is not None:
        return set(world["tools"])
    try:
        declared = registry("family").get(family).obj.tools
    except KeyError:
        return None
    if declared is None:
        return None
    return set(declared) | {a["tool"] for a in reference if isinstance(a, dict) and a.get("tool")}
