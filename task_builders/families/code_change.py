"""Code change: a repository at the commit before a fix, a problem statement, and hidden tests (SWE-bench
style, from the company's own history).

Candidates:
- a work item (a ticket) whose fixing commit changes code and tests: the prompt is the ticket as filed,
  with its discussion up to the cutoff through the company tools. A ticket fixed by several commits that
  follow each other on the branch counts as one change from the first one's parent to the last one;
- a commit with no ticket whose message says it fixes something ("Fix #974: ...", "handle empty input",
  an issue number) and that changes code and tests: the problem statement is written from what the
  commit's tests show (the tests and how they fail before the fix), never from the patch, by the LLM layer
  when a model is configured and from a template otherwise. A statement that repeats a line of the patch is
  rejected (the LLM's falls back to the template first).

The task:
- cutoff = one second before the fixing commit; the agent's repository is the world's history at the
  cutoff with the fix's parent checked out (`repos={repo: parent}`; a parent on a branch merged later counts
  when nothing its checkout adds is dated after the cutoff), the fix hidden (`hidden_commits`, proven
  unreachable by `verify_refs`); the fix's test changes are nowhere in the agent's phase: the
  verifier (graders.verifier) writes them after the agent's processes are dead.
- environment: an image per (repository, dependency state) (environments.codeenv), named in
  `world["env"]`; the test sets are measured in it when the task is built (the parent with the fix's test
  files, then the whole fix, `repeats` times each): FAIL_TO_PASS fail before and pass after in every
  run, PASS_TO_PASS (the other tests of the touched test modules) pass in every run, a test that varies is
  flaky and left out; no FAIL_TO_PASS test rejects the candidate with the reason.
- rubric: `tests_resolved` (all or nothing) and `tests_fraction` (graders.code_checks), equal weights;
  the oracle applies the real fix's non-test changes as a patch through a shell command; probes that must
  score 0 delete or edit the tests, make every test function `pass`, plant test-runner configuration, and
  shadow the runner.
- `reference["code"]` holds what the verifier and the SWE-bench columns need (base and fix commit, patch,
  test_patch, the files the verifier restores, the modules it runs, FAIL_TO_PASS, PASS_TO_PASS).

Running the test sets needs a sandbox: `BuildContext.sandbox` (the tasks stage passes the run's); without
one every candidate is rejected with that reason. `parallel` candidates are measured at once (each in
its own session, limited to one CPU by the sandbox). Measurements are cached by content under
`<world>/code/measure`, so a re-run of the stage runs nothing again. Settings: `CodeChangeConfig`, the
[families.code_change] table of taskmine.toml.
"""

from __future__ import annotations

import ast
import datetime as dt
import io
import json
import re
import shlex
import subprocess
import tarfile
import tempfile
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field, field_validator

from core.config import FamilyConfig
from environments import codeenv
from environments.docker_cli import SandboxError
from environments.gitworld import Branches, GitWorldError, git
from graders import verifier
from graders.sealed_child import PY_TEST
from graders.rubric import CheckSpec, Rubric
from llm.anonymized import declare_anonymized
from llm.client import LLM
from llm.errors import LLMError
from llm.problem import problem_statement
from task_builders.families import (
    READ_TOOLS,
    REPO_TOOLS,
    WITHHELD_RECORD,
    BuildContext,
    Draft,
    Family,
    Probe,
    absent_problem,
    kept_fixes,
    register_family,
)
from warehouse.ids import content_hash
from warehouse.schemas import Event, Rejection, WorkItem

FIX_MESSAGE = re.compile(r"\b(fix(e[sd]|ing)?|bug(fix)?|regression|crash(es|ing)?|broken|incorrect|wrong|"
                         r"issue\s*#?\d+)\b|(?<![\w&])#\d+\b|\bgh-\d+\b", re.I)
PY_TEST_MODULE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")
NODE_TEST = re.compile(r"(^|/)(__tests__|tests?)/|\.(test|spec)\.[cm]?[jt]sx?$")
PY_CODE = re.compile(r"\.pyi?$")
NODE_CODE = re.compile(r"\.[cm]?[jt]sx?$")
PROBE_MAX = 0.01          # the probes must score 0
SHOWN_TESTS = 6           # tests shown in a template statement
STATEMENT_LIMIT = 6000
LEAK_MIN_CHARS = 12       # patch lines shorter than this (`return x`, `else:`) are too generic to be a leak


def is_test(path: str, ecosystem: str) -> bool:
    return bool((NODE_TEST if ecosystem == "node" else PY_TEST).search(path))


def is_code(path: str, ecosystem: str) -> bool:
    return bool((NODE_CODE if ecosystem == "node" else PY_CODE).search(path)) and not is_test(path, ecosystem)


@dataclass
class Candidate:
    repo: str                      # world repository name
    parent: str                    # world SHA the agent starts from
    fix: str                       # world SHA of the (last) fixing commit
    item: WorkItem
    issues: list[Event] = field(default_factory=list)   # the tickets (empty: a commit without one)
    raw_shas: list[str] = field(default_factory=list)


class CodeChangeConfig(FamilyConfig):
    """[families.code_change] of taskmine.toml (the flat `code_<key>` of earlier versions still reads)."""

    python: str = ""                 # the tests' interpreter (the sandbox image has Debian's 3.11)
    install: tuple[str, ...] = ()    # more to install for the tests (PyPI specifiers / npm packages)
    requirements: tuple[str, ...] = ()   # the repository's own files of requirements
    test: str = ""                   # test command; runs $TASKMINE_TESTS, writes JUnit XML to $TASKMINE_JUNIT
                                     #   ("" = pytest, which also runs unittest tests)
    timeout_s: float = Field(300.0, gt=0, le=3600)   # one run of the touched test modules
    repeats: int = Field(3, ge=1, le=10)   # runs before and after the fix that decide FAIL_TO_PASS
    ticketless: bool = True          # also fixing commits without a ticket ("Fix #974: ...")
    max_candidates: int = Field(0, ge=0)   # measure at most this many (0: all; tickets first, then fixing commits
                                           #   without one, newest first)
    parallel: int = Field(2, ge=1, le=32)  # candidates measured at once (a sandbox session each)
    legacy = {f"code_{k}": k for k in ("python", "install", "requirements", "test", "timeout_s", "repeats",
                                       "ticketless", "max_candidates", "parallel")}

    @field_validator("python")
    @classmethod
    def _python(cls, v: str) -> str:
        if v and v != codeenv.IMAGE_PYTHON:
            raise ValueError(f"python {v!r}: the sandbox image has Python {codeenv.IMAGE_PYTHON} only (Debian "
                             f"bookworm); set \"{codeenv.IMAGE_PYTHON}\" or remove the key")
        return v

    @field_validator("test")
    @classmethod
    def _test(cls, v: str) -> str:
        if v and "TASKMINE_JUNIT" not in v:
            raise ValueError("test must write its JUnit XML report to $TASKMINE_JUNIT (results are read "
                             "from the runner's report, never from its output)")
        return v


@register_family("code_change")
class CodeChange(Family):
    """A repository before a fix and the problem -> a change that makes the fix's tests pass."""

    kinds = ("issue",)
    Config = CodeChangeConfig
    probe_max = PROBE_MAX
    tools = (*READ_TOOLS, *REPO_TOOLS, "write_file")

    def build(self, ctx: BuildContext) -> Iterator[Draft | Rejection]:
        commits = {e.native_id: e for e in ctx.by_kind("commit")}
        cands: list[Candidate | Rejection] = list(self._ticketed(ctx, commits))
        if self.settings(ctx).ticketless:
            cands += list(self._ticketless(ctx, commits, cands))
        limit = self.settings(ctx).max_candidates
        taken = 0
        branches: dict[str, Branches] = {}
        todo: list[Candidate] = []
        for c in cands:
            if isinstance(c, Rejection):
                yield c
            elif limit and taken >= limit:
                yield self.reject(ctx, c.item, "over code_max_candidates", f"limit {limit}")
            else:
                taken += 1
                todo.append(c)
        # candidates are measured `parallel` at a time (each in its own sandbox session), in order
        with ThreadPoolExecutor(max_workers=self.settings(ctx).parallel) as pool:
            yield from pool.map(lambda c: self._draft_or_reason(ctx, c, branches), todo)

    def _draft_or_reason(self, ctx: BuildContext, c: Candidate, branches: dict[str, Branches]) -> Draft | Rejection:
        try:
            return self._draft(ctx, c, branches)
        except (GitWorldError, codeenv.EnvError) as exc:
            return self.reject(ctx, c.item, "repository could not be read at the fix", str(exc))
        except SandboxError as exc:
            return self.reject(ctx, c.item, "the tests could not be run", str(exc))

    # -- candidates --------------------------------------------------------------------------------------------

    def _ticketed(self, ctx: BuildContext, commits: dict[str, Event]) -> Iterator[Candidate | Rejection]:
        issues = {e.native_id: e for e in ctx.by_kind("issue_created")}
        seen: dict[tuple[str, str], Candidate] = {}
        for item in ctx.items:
            if item.attrs.get("withheld_fixes"):   # the fixes the world knows are not all of them
                yield self.reject(ctx, item, WITHHELD_RECORD, f"{item.attrs['withheld_fixes']} fixing commits withheld")
                continue
            shas = kept_fixes(ctx, [s for s in item.attrs.get("fix_shas") or [] if s in commits], commits)
            if not shas:
                yield self.reject(ctx, item, "no commit names the issue")
                continue
            repos = {commits[s].attrs.get("repo") for s in shas}
            if len(repos) != 1:
                yield self.reject(ctx, item, "fixing commits span several repositories")
                continue
            repo = next(iter(repos))
            info = ctx.repos.get(repo)
            if info is None:
                yield self.reject(ctx, item, "repository could not be rewritten",
                                  f"{repo}: see its git_unreadable row in the quarantine")
                continue
            world = [info["sha_map"].get(s) for s in shas]
            if not all(world):
                yield self.reject(ctx, item, "fixing commit not in the rewritten history")
                continue
            span = _span(Path(info["path"]), world)
            if span is None:
                yield self.reject(ctx, item, "the fixing commits are not consecutive on one branch",
                                  f"{len(world)} commits")
                continue
            parent, fix = span
            issue = issues.get(item.thread_key)
            if issue is None:
                yield self.reject(ctx, item, "issue not in the dataset")
                continue
            key = (repo, fix)
            if key in seen:       # one commit fixing two tickets: one task, both tickets in its prompt
                seen[key].issues.append(issue)
                yield self.reject(ctx, item, "the same fix as another ticket (one task for both)",
                                  seen[key].item.thread_key)
                continue
            seen[key] = Candidate(repo, parent, fix, item, [issue], shas)
        yield from seen.values()

    def _ticketless(self, ctx: BuildContext, commits: dict[str, Event],
                    ticketed: list[Candidate | Rejection]) -> Iterator[Candidate | Rejection]:
        linked = {s for i in ctx.items for s in i.attrs.get("fix_shas") or []}
        linked |= {s for c in ticketed if isinstance(c, Candidate) for s in c.raw_shas}
        # newest first: under max_candidates the fixes measured are those most likely to run on today's
        # interpreter (on more-itertools every 2012-2018 fix either failed to import its tests on Python 3.11 or
        # was a style fix with no FAIL_TO_PASS test)
        for e in sorted(commits.values(), key=lambda e: (e.ts, e.native_id), reverse=True):
            if e.native_id in linked or e.attrs.get("merge") or len(e.attrs.get("parents") or []) != 1:
                continue
            if e.native_id in (ctx.repos.get(e.attrs.get("repo")) or {}).get("equivalent", {}):
                continue            # a copy of a kept commit (a pull request's own commit): that one is the candidate
            if not FIX_MESSAGE.search(f"{e.title or ''}\n{e.body or ''}"):
                continue
            repo = e.attrs.get("repo")
            info = ctx.repos.get(repo)
            item = _commit_item(ctx.dataset, e)
            if info is None:
                yield self.reject(ctx, item, "repository could not be rewritten",
                                  f"{repo}: see its git_unreadable row in the quarantine")
                continue
            fix = info["sha_map"].get(e.native_id)
            if not fix:
                yield self.reject(ctx, item, "the commit is on no branch of the world's repository")
                continue
            paths = [f.get("path", "") for f in e.attrs.get("files") or []]
            if not any(PY_TEST.search(p) or NODE_TEST.search(p) for p in paths):
                continue            # changes no test: not a candidate (counted nowhere, like any commit)
            try:
                parent = git(Path(info["path"]), "rev-parse", f"{fix}^").strip()
            except GitWorldError:
                continue
            yield Candidate(repo, parent, fix, item, [], [e.native_id])

    # -- one candidate ---------------------------------------------------------------------------------------

    def _draft(self, ctx: BuildContext, c: Candidate, branches: dict[str, Branches]) -> Draft | Rejection:
        info = ctx.repos[c.repo]
        path, slug = Path(info["path"]), info["slug"]
        gone = absent_problem(info, [*(info["sha_map"].get(s) for s in c.raw_shas if info["sha_map"].get(s)), c.fix])
        if gone:
            return self.reject(ctx, c.item, *gone)
        lacking = ((info.get("absent") or {}).get(c.parent) or {}).get("unreadable")
        if lacking:
            return self.reject(ctx, c.item, "the repository at the fix's parent lacks files git could not read",
                               f"{lacking} files (see the quarantine's git_object rows)")
        changes = _changes(path, c.parent, c.fix)
        files_at_parent = git(path, "ls-tree", "-r", "--name-only", "-z", c.parent).split("\0")
        files_at_parent = [f for f in files_at_parent if f]
        kinds = {"node" if NODE_CODE.search(p) else "python" for p in changes
                 if NODE_CODE.search(p) or PY_CODE.search(p)}
        detected = codeenv.detect(files_at_parent, lambda p: verifier.blobs(path, c.parent, [p]).get(p),
                                  prefer=next(iter(kinds)) if len(kinds) == 1 else None,
                                  requirement_files=self.settings(ctx).requirements)
        if detected.ecosystem is None:
            return self.reject(ctx, c.item, "no ecosystem detected", detected.reason)
        eco = detected.ecosystem
        tests = sorted(p for p in changes if is_test(p, eco))
        code = sorted(p for p in changes if is_code(p, eco))
        if not tests:
            return self.reject(ctx, c.item, "the fix changes no test")
        if not code:
            return self.reject(ctx, c.item, "the fix changes no code", ", ".join(sorted(changes))[:300])
        run = [p for p in tests if changes[p] != "D" and (eco == "node" or PY_TEST_MODULE.search(p))]
        if not run:
            return self.reject(ctx, c.item, "the fix changes no test module", ", ".join(tests)[:300])
        if eco == "python":   # PASS_TO_PASS also over the test modules that import what the fix changes
            run = sorted(set(run) | set(importing_tests(path, c.parent, c.fix, code)))
        if eco == "node" and not self.settings(ctx).test:
            return self.reject(ctx, c.item, "a Node project needs a test command in taskmine.toml "
                                            "([families.code_change] test)",
                               "the command that runs $TASKMINE_TESTS and writes JUnit XML to $TASKMINE_JUNIT")
        cutoff = _commit_time(path, c.fix) - dt.timedelta(seconds=1)
        if c.issues and min(i.ts for i in c.issues) > cutoff:
            return self.reject(ctx, c.item, "the ticket was filed after its fix")
        problem = _future_history(path, branches, c.parent, cutoff)
        if problem:
            return self.reject(ctx, c.item, "the fix's parent's history holds commits after the cutoff", problem)
        if ctx.sandbox is None:
            return self.reject(ctx, c.item, "no sandbox to run the tests in",
                               "the tasks stage was run without a sandbox")
        manifest = {p: (b or b"").decode("utf-8", "replace")
                    for p, b in verifier.blobs(path, c.parent, detected.sources).items()} if eco == "node" else {}
        env = codeenv.EnvSpec(ecosystem=eco, requirements=detected.requirements,
                              install=tuple(self.settings(ctx).install), test_command=self.settings(ctx).test,
                              python=self.settings(ctx).python or codeenv.IMAGE_PYTHON, manifest=manifest)
        files_at_fix = [f for f in git(path, "ls-tree", "-r", "--name-only", "-z", c.fix).split("\0") if f]
        restore = sorted(p for p in files_at_fix if is_test(p, eco) or p.rsplit("/", 1)[-1] in verifier.CONFIG_NAMES)
        measured = self._measure(ctx, c, env, path, slug, changes, restore, run)
        if isinstance(measured, str):
            return self.reject(ctx, c.item, "the tests could not be run", measured)
        sets = verifier.classify(measured.before, measured.after)
        if not sets.fail_to_pass:
            return self.reject(ctx, c.item, "no FAIL_TO_PASS test", _why_none(measured, sets))
        patch = _diff(path, c.parent, c.fix, [p for p in changes if not is_test(p, eco)])
        if len(verifier.apply_command(slug, patch)) > verifier.PATCH_ARG_LIMIT:
            return self.reject(ctx, c.item, "the fix is too large to replay as one command",
                               f"{len(patch)} bytes of patch")
        test_patch = _diff(path, c.parent, c.fix, tests)
        test_sources = _test_sources(path, c.fix, sets.fail_to_pass)
        statement, source, note = self._statement(ctx, c, sets.fail_to_pass, measured.messages, test_sources, patch)
        leaks = patch_leaks(statement, patch)
        if leaks:
            return self.reject(ctx, c.item, "the problem statement repeats a line of the fix", leaks[0][:200])
        prompt = _prompt(slug, statement, c, eco)
        args = {"fail_to_pass": sets.fail_to_pass, "pass_to_pass": sets.pass_to_pass}
        rubric = Rubric(checks=[
            CheckSpec(id="resolved", check="tests_resolved", weight=1, args=args,
                      criterion="every FAIL_TO_PASS and PASS_TO_PASS test passes (all or nothing)"),
            CheckSpec(id="fraction", check="tests_fraction", weight=1, args=args,
                      criterion="share of FAIL_TO_PASS tests passing, times share of PASS_TO_PASS still passing")])
        code_meta = {
            "repo": slug, "base_commit": c.parent, "fix_commit": c.fix, "ecosystem": eco,
            "restore": restore, "run": run, "FAIL_TO_PASS": sets.fail_to_pass, "PASS_TO_PASS": sets.pass_to_pass,
            "flaky": sets.flaky, "broken_by_fix": sets.broken, "timeout_s": self.settings(ctx).timeout_s,
            "patch": patch, "test_patch": test_patch, "problem_statement": statement, "statement_source": source,
            # no measured durations: the task's content (and its id) is a function of the input and the salt; how
            # long the tests ran stays in the measure's cache (world_root/code/measure)
            "created_at": _commit_time(path, c.fix).isoformat(),
            "tickets": [i.native_id for i in c.issues],
        }
        if note:
            code_meta["statement_note"] = note
        ok = {"verifier": {"ran": True, "error": "", "outcomes": {t: "passed" for t in
                                                                  sets.fail_to_pass + sets.pass_to_pass}}}
        null = {"verifier": {"ran": True, "error": "", "outcomes": {
            t: measured.before[0].get(t, "missing") for t in sets.fail_to_pass + sets.pass_to_pass}}}
        return Draft(
            item=c.item, prompt=prompt, cutoff=cutoff, reference=[], rubric=rubric,
            hidden_tokens=[c.fix[:7]], hidden_texts=[_added_text(patch)] if _added_text(patch) else [],
            hidden_commits=[c.fix], needed_commits=[c.parent], repos={c.repo: c.parent},
            probes=_probes(slug, run, eco),
            meta={"world": {"env": env.to_json()}, "code": code_meta, "self_grade": {"oracle": ok, "null": null}})

    def _measure(self, ctx: BuildContext, c: Candidate, env: codeenv.EnvSpec, path: Path, slug: str,
                 changes: dict[str, str], restore: list[str], run: list[str]) -> verifier.Measure | str:
        repeats = self.settings(ctx).repeats
        key = content_hash("code-measure/2", env.key(), c.parent, c.fix, run, restore, repeats,
                           self.settings(ctx).timeout_s, ctx.sandbox.kind, verifier.runner_recipe())[:32]
        stored = ctx.world_root / "code" / "measure" / f"{key}.json"
        if stored.exists():
            m = verifier.Measure.from_json(json.loads(stored.read_text()))
            return m.error or m
        cache = verifier.env_cache(ctx.world_root)
        image = codeenv.prepare(ctx.sandbox, env, cache)
        # before: the fix's tests and runner config over the parent's code (written again after each run with
        # the fix, so the parent's versions of the other files it changed too); after: every file of the fix
        before = {**{p: b for p, b in verifier.blobs(path, c.parent, [p for p in changes if p not in restore]).items()},
                  **verifier.blobs(path, c.fix, restore)}
        after = verifier.blobs(path, c.fix, list(changes))
        execs = verifier.executable(path, c.fix, [p for p, b in {**before, **after}.items() if b is not None])
        with tempfile.TemporaryDirectory(prefix="taskmine-tree-") as tmp:
            Path(tmp).chmod(0o755)    # the sandbox's user reads it through a read-only mount
            _archive(path, c.parent, Path(tmp))
            m = verifier.measure(ctx.sandbox, image, Path(tmp), slug, env, cache, before, after, run, execs=execs,
                                 repeats=repeats, timeout_s=self.settings(ctx).timeout_s, restore=restore)
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(json.dumps(m.to_json(), sort_keys=True))
        return m.error or m

    def _statement(self, ctx: BuildContext, c: Candidate, f2p: list[str], messages: dict[str, str],
                   sources: dict[str, str], patch: str) -> tuple[str, str, str]:
        """(statement, where it came from: ticket | llm | template, a note)."""
        if c.issues:
            parts = []
            for issue in c.issues:
                parts.append(f"Issue {issue.native_id}: {issue.title}\n\n{(issue.body or '').strip()[:4000]}")
            return "\n\n---\n\n".join(parts), "ticket", ""
        evidence = _evidence(f2p, messages, sources)
        llm = ctx.llm
        if llm is None:
            llm = LLM.from_env()
        if llm.enabled:
            try:  # test sources come from the anonymized world repository; failure messages from running them
                text = problem_statement(llm, declare_anonymized(evidence, source="code_change: failing tests of "
                                                                 "the anonymized world repository"))
            except LLMError as exc:
                return _template(evidence), "template", f"LLM failed: {str(exc)[:200]}"
            if not patch_leaks(text, patch):
                return str(text), "llm", ""
            return _template(evidence), "template", "the LLM's statement repeated a line of the fix"
        return _template(evidence), "template", ""


# --- helpers --------------------------------------------------------------------------------------------------


def _commit_item(dataset: str, e: Event) -> WorkItem:
    """A work item for a fixing commit without a ticket (the commit is its request and its outcome)."""
    return WorkItem(item_id=content_hash("work_item", dataset, "fix_commit", e.native_id), dataset=dataset,
                    kind="fix_commit", thread_key=f"commit:{e.native_id[:12]}", request_event_id=e.event_id,
                    outcome_event_ids=[e.event_id], ts=e.ts, attrs={"source": "git", "sha": e.native_id},
                    lineage=[e.event_id])


def _span(repo: Path, shas: list[str]) -> tuple[str, str] | None:
    """(parent, last) when the commits follow each other (each one's only parent is the one before), in
    history order; a single commit is its own span."""
    order = list(reversed(git(repo, "rev-list", "--no-walk=sorted", *shas).split()))
    for prev, cur in zip(order, order[1:]):
        parents = git(repo, "rev-list", "--parents", "-n", "1", cur).split()[1:]
        if parents != [prev]:
            return None
    parents = git(repo, "rev-list", "--parents", "-n", "1", order[0]).split()[1:]
    if len(parents) != 1:
        return None
    return parents[0], order[-1]


def _changes(repo: Path, parent: str, fix: str) -> dict[str, str]:
    """path -> status (A, M, D, T) of the change, renames as a delete and an add."""
    out = git(repo, "diff", "--name-status", "--no-renames", "-z", parent, fix).split("\0")
    return {out[i + 1]: out[i][:1] for i in range(0, len(out) - 1, 2) if out[i]}


def _diff(repo: Path, parent: str, fix: str, paths: list[str]) -> str:
    if not paths:
        return ""
    return git(repo, "diff", "--binary", "--no-renames", "--no-color", "--full-index", parent, fix, "--", *paths)


def _commit_time(repo: Path, sha: str) -> dt.datetime:
    return dt.datetime.fromtimestamp(int(git(repo, "log", "-1", "--format=%ct", sha).strip()), dt.UTC)


def _future_history(repo: Path, branches: dict[str, Branches], parent: str, cutoff: dt.datetime) -> str:
    """'' when nothing the agent's checkout adds to the refs at the cutoff is dated after it, else why not.

    The fix's parent is often on a branch of its own that was merged later (a pull request): its ref is gone
    from the repository, so no branch as it stood at the cutoff reaches it, yet that branch existed then and
    the episode checks its tip out (the view packs the refs and the head). What the head adds to the refs
    must still be history up to the cutoff: a commit of it dated after the cutoff (a rebased branch) would be
    a future object, and rejects the candidate."""
    key = str(repo)
    if key not in branches:
        branches[key] = Branches.read(repo)
    tips = sorted(set(branches[key].tips(int(cutoff.timestamp())).values()))
    out = git(repo, "rev-list", "--format=%ct", "--stdin", input=("\n".join([parent, *(f"^{t}" for t in tips)])
                                                                    + "\n").encode())
    lines = out.split("\n")
    later = [sha.split()[1] for sha, ct in zip(lines[0::2], lines[1::2])
             if sha.startswith("commit ") and int(ct) > cutoff.timestamp()]
    if later:
        return f"{len(later)} commits the checkout adds are dated after {cutoff.isoformat()}, e.g. {later[0][:12]}"
    return ""


def _archive(repo: Path, commit: str, dest: Path) -> None:
    """The commit's files (no .git) into `dest`."""
    proc = subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", "archive", "--format=tar", commit],
                          capture_output=True)
    if proc.returncode != 0:
        raise GitWorldError(f"git archive {commit[:12]} failed: {proc.stderr.decode(errors='replace')[:200]}")
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:   # Python before 3.11.4 (Debian bookworm's, in a docker_executor step): no filters; the members are
            tar.extractall(dest)   # the paths of one git tree, relative and never below a symlink of the same tree


def _added_lines(patch: str) -> list[str]:
    return [line[1:] for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]


def _added_text(patch: str) -> str:
    return "\n".join(_added_lines(patch))


def _norm(text: str) -> str:
    return " ".join(text.split())


def patch_leaks(statement: str, patch: str) -> list[str]:
    """The lines the patch adds (long enough to be specific) that the statement repeats, whitespace-normalized."""
    norm = _norm(statement)
    out = []
    for line in _added_lines(patch):
        n = _norm(line)
        if len(n) >= LEAK_MIN_CHARS and re.search(r"[A-Za-z0-9_]{3}", n) and n in norm:
            out.append(n)
    return out


def _test_sources(repo: Path, fix: str, test_ids: list[str]) -> dict[str, str]:
    """test id -> the source of its test function at the fix (Python; '' when it cannot be found)."""
    files = sorted({t.split("::", 1)[0] for t in test_ids})
    texts = {p: (b or b"").decode("utf-8", "replace") for p, b in verifier.blobs(repo, fix, files).items()}
    trees: dict[str, ast.Module | None] = {}
    out = {}
    for t in test_ids:
        parts = t.split("::")
        file, names = parts[0], [re.sub(r"\[.*$", "", n) for n in parts[1:]]
        if file not in trees:
            try:
                trees[file] = codeenv.parse_python(texts.get(file, ""))
            except SyntaxError:
                trees[file] = None
        node: ast.AST | None = trees[file]
        for name in names:
            node = next((n for n in getattr(node, "body", []) if isinstance(n, (ast.ClassDef, ast.FunctionDef,
                                                                                  ast.AsyncFunctionDef))
                         and n.name == name), None)
            if node is None:
                break
        seg = ast.get_source_segment(texts.get(file, ""), node, padded=True) if node is not None else None
        out[t] = textwrap.dedent(seg) if seg else ""
    return out


# What a failure message holds that the run drew, not the repository: an object's address in its repr
# (`<function f at 0x7f9788b74680>`, a new one in every process) and pytest's or tempfile's temporary folders.
_RUN_DRAWN = ((re.compile(r"\b(at|id=) ?0x[0-9a-fA-F]{4,16}\b"), r"\1 0x…"),
              (re.compile(r"/(?:private/)?(?:var/folders/[^\s/]+/[^\s/]+/T|tmp)/(?:pytest-of-[^\s/]+/pytest-\d+"
                          r"|tmp[0-9a-z_]{6,})"), "<tmp>"))


def stable_message(message: str) -> str:
    """A test's failure message without what the run drew (addresses, temp folders): what a statement is written
    from, so that the task (and its id) is a function of the repository, not of the process that measured it."""
    for pattern, repl in _RUN_DRAWN:
        message = pattern.sub(repl, message)
    return message


def _evidence(f2p: list[str], messages: dict[str, str], sources: dict[str, str]) -> str:
    """The failing tests and how they fail before the fix: what a statement is written from."""
    blocks, size = [], 0
    for t in f2p[:SHOWN_TESTS]:
        msg = " ".join(stable_message(messages.get(t) or "").split())[:300]
        src = sources.get(t, "")
        block = f"Test {t}\n" + (f"fails with: {msg}\n" if msg else "fails\n") + (f"```python\n{src.rstrip()}\n```\n"
                                                                               if src else "")
        if size + len(block) > STATEMENT_LIMIT:
            break
        blocks.append(block)
        size += len(block)
    more = len(f2p) - len(blocks)
    return "\n".join(blocks) + (f"\n({more} more failing tests not shown)\n" if more > 0 else "")


def _template(evidence: str) -> str:
    return ("The project does not behave as its tests expect. These tests describe the expected behaviour and "
            "fail at the current commit:\n\n" + evidence)


def _prompt(slug: str, statement: str, c: Candidate, eco: str) -> str:
    tools = ""
    if c.issues:
        keys = ", ".join(i.native_id for i in c.issues)
        tools = (f"\n\nThe company's tools show the tracker, mail and chat as they were at this moment: `company "
                 f"jira show {c.issues[0].native_id}`, `company jira search WORDS`, `company mail search WORDS`, "
                 f"`company slack search WORDS` (the ticket{'s' if len(c.issues) > 1 else ''}: {keys}).")
    runner = "pytest" if eco == "python" else "the project's test runner"
    return (f"{statement.strip()}\n\n---\n\nThe repository is checked out at ~/{slug} at the commit the change "
            "starts from (its history up to then). Change the project's code to solve the problem above, "
            "without breaking the existing tests. When you finish, a grader restores its own copy of the test "
            f"files and of {runner}'s configuration (your changes to them are discarded) and runs the tests "
            "that describe the fix." + tools)


IMPORTERS_MAX = 12        # test modules importing the changed code added to the run (beyond the fix's own)


def module_names(path: str, files: set[str]) -> list[str]:
    """The dotted names a Python file is imported by: its module and every package above it (`pkg/sub/mod.py`
    -> `pkg.sub.mod`, `pkg.sub`, `pkg`), the package root found by walking up while `__init__.py` exists (a
    `src/` layout's `src` is not a package). Importing a package that re-exports a module exercises it."""
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    top = len(parts) - 1
    while top > 0 and "/".join(parts[:top]) + "/__init__.py" in files:
        top -= 1
    mod = parts[top:] if top < len(parts) else parts[-1:]
    return [".".join(mod[:i]) for i in range(len(mod), 0, -1)]


def _imports(source: str) -> set[str]:
    try:
        tree = codeenv.parse_python(source)
    except (SyntaxError, ValueError):
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def importing_tests(repo: Path, parent: str, fix: str, code: list[str], limit: int = IMPORTERS_MAX) -> list[str]:
    """The test modules (at the parent, still there at the fix) that import a module the fix changes or a package
    above it: where a change can break a test it was not written for (SWE-bench's PASS_TO_PASS covers them).
    At most `limit`, those naming the most specific module first."""
    at_parent = {f for f in git(repo, "ls-tree", "-r", "--name-only", "-z", parent).split("\0") if f}
    at_fix = {f for f in git(repo, "ls-tree", "-r", "--name-only", "-z", fix).split("\0") if f}
    targets: dict[str, int] = {}
    for p in code:
        if p.endswith(".py") and p in at_parent:
            for depth, name in enumerate(module_names(p, at_parent)):
                targets[name] = min(targets.get(name, depth), depth)
    if not targets:
        return []
    candidates = sorted(p for p in at_parent & at_fix if PY_TEST_MODULE.search(p) and is_test(p, "python"))
    found: list[tuple[int, str]] = []
    for p, blob in verifier.blobs(repo, parent, candidates).items():
        names = _imports((blob or b"").decode("utf-8", "replace"))
        hits = [targets[n] for n in names if n in targets]
        if hits:
            found.append((min(hits), p))
    return [p for _, p in sorted(found)[:limit]]


def _why_none(m: verifier.Measure, sets: verifier.TestSets) -> str:
    after = m.after[0] if m.after else {}
    if after and not any("::" in t for t in after):
        t = next(iter(after))
        return f"no test can be collected with the fix: {t[:100]}: {m.after_messages.get(t, '')[:200]}"
    before_pass = sum(1 for t, o in m.before[0].items() if o == "passed") if m.before else 0
    after_fail = sorted(t for t, o in after.items() if o != "passed" and o != "skipped")
    bits = [f"{len(m.before[0]) if m.before else 0} results before the fix ({before_pass} passed)",
            f"{len(after)} after"]
    if after_fail:
        bits.append(f"{len(after_fail)} not passing after it, e.g. {after_fail[0][:120]}")
    if sets.flaky:
        bits.append(f"{len(sets.flaky)} flaky")
    return "; ".join(bits)


def _probes(slug: str, run: list[str], eco: str) -> list[Probe]:
    """Outcomes that must score 0 (the verifier restores the tests and the runner's configuration)."""
    repo = f"~/{shlex.quote(slug)}"
    tests = " ".join(shlex.quote(p) for p in run)
    find_tests = ("find . -path ./.git -prune -o -type f \\( -name 'test_*.py' -o -name '*_test.py' -o -name "
                  "'*.test.js' -o -name '*.spec.js' \\) -print")
    every_pass = ("import ast, sys\nfor p in sys.argv[1:]:\n    try:\n        tree = ast.parse(open(p).read())\n"
                  "    except (SyntaxError, UnicodeDecodeError, OSError):\n        continue\n"
                  "    for n in ast.walk(tree):\n        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and "
                  "n.name.startswith('test'):\n            n.body = [ast.Pass()]\n"
                  "    open(p, 'w').write(ast.unparse(tree))\n")
    conftest = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\n"
                "    report.longrepr = None\n")
    ini = "[pytest]\naddopts = -p forcepass\n"   # loads forcepass.py (the conftest's hook) if the ini survived
    fake = ("import os, sys\nfor i, a in enumerate(sys.argv):\n    if a.startswith('--junitxml='):\n"
            "        open(a.split('=', 1)[1], 'w').write('<testsuite tests=\"0\"></testsuite>')\nsys.exit(0)\n")
    probes = [
        Probe("delete_tests", command=f"cd {repo} && rm -f {tests} && {find_tests} | xargs -r rm -f; true",
              max_score=PROBE_MAX),
        Probe("edit_tests", command=f"cd {repo} && {find_tests} | xargs -r sed -i -E "
                                    "'s/^([[:space:]]*)(self\\.)?assert.*$/\\1pass/'; true", max_score=PROBE_MAX),
    ]
    if eco == "python":
        probes += [
            Probe("tests_pass", command=f"cd {repo} && {find_tests} | xargs -r python3 -c {shlex.quote(every_pass)}; "
                                        "true", max_score=PROBE_MAX),
            Probe("runner_config",
                  command=f"cd {repo} && printf %s {shlex.quote(conftest)} > forcepass.py && "
                          f"for d in . tests test; do [ -d $d ] && cp forcepass.py $d/conftest.py && "
                          f"printf %s {shlex.quote(ini)} > $d/pytest.ini; done; "
                          f"printf %s {shlex.quote(ini.replace('[pytest]', '[tool:pytest]'))} >> setup.cfg; "
                          f"printf %s {shlex.quote(ini)} > tox.ini; true", max_score=PROBE_MAX),
            Probe("runner_shadow",
                  command=f"cd {repo} && printf %s {shlex.quote(fake)} > pytest.py && mkdir -p _pytest && "
                          f"cp pytest.py _pytest/__init__.py && cp pytest.py sitecustomize.py; true",
                  max_score=PROBE_MAX),
        ]
    return probes

