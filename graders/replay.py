"""Replay tasks in a sandbox and decide whether each is valid.

A task is valid when, in its own world (an episode: the task's tool server and repositories in a sandbox
session), replaying its reference through the `company` CLI (the oracle) scores >= 0.99 on every repeat,
doing nothing (the null run) scores <= 0.05 on every repeat (DESIGN.md, Validation 1, 2 and 4), and every
probe the family declared (a cheap or wrong outcome) scores under its threshold (Validation 3).
Infrastructure failures (the sandbox could not run, our own replay timed out) are recorded apart from task
failures and never counted as a score. An agent is graded on the actions it recorded, however it ended. A code
task's run that leaves no test report (graders.verifier `no_report`: its code killed the runner, say) is an
infrastructure failure only when the oracle's run of the same verifier leaves none either (`oracle_reports`);
otherwise it scores 0, so a policy cannot trade a 0 for a grader error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from environments import actions as A
from environments.episode import Episode
from environments.sandbox import SandboxError
from graders import verifier
from graders.rubric import Context, grade
from warehouse.ids import content_hash
from warehouse.schemas import Task, Validation

ORACLE_MIN = 0.99
NULL_MAX = 0.05
NULL_COMMAND = "true"
NO_REPORT = "no test report"
_ORACLE_REPORTS: dict[str, bool] = {}   # task, its verifier's settings, sandbox kind -> the oracle's run reports


def reference_calls(task: Task) -> list[A.Tool]:
    """The task's reference as typed tool calls."""
    return [A.CALL.validate_python(a) for a in task.reference.get("actions") or []]


def oracle_command(task: Task) -> str:
    """The reference replayed through the `company` CLI, one command per call (a code change: its patch
    applied by a shell command, graders.verifier)."""
    patch = verifier.oracle_command(task)
    if patch is not None:
        return patch
    return " && ".join(c.cli() for c in reference_calls(task)) or "true"


def probe_commands(task: Task) -> list[tuple[str, str, float]]:
    """(run kind `probe:<name>`, shell command, the score it must stay under) of every probe of the task."""
    out = []
    for p in task.reference.get("probes") or []:
        if p.get("command") is not None:
            command = p["command"]
        else:
            command = " && ".join(A.CALL.validate_python(a).cli() for a in p.get("actions") or []) or "true"
        out.append((f"probe:{p['name']}", command, float(p.get("max", 0.5))))
    return out


def alternative_commands(task: Task) -> list[tuple[str, str, float]]:
    """(run kind `alt:<name>`, shell command, the score it should reach) of every valid alternative outcome
    (graders.alternatives): run once each; one under its score is a measured grader false negative, recorded
    and never a reason to reject the task (`judge` ignores these runs)."""
    return [(f"alt:{a['name']}", " && ".join(A.CALL.validate_python(c).cli() for c in a.get("calls") or [])
             or "true", float(a.get("min", ORACLE_MIN)))
            for a in task.reference.get("alternatives") or [] if a.get("calls")]


def agent_command(task: Task, agent: str) -> tuple[str, str]:
    """(run kind, shell command) for `oracle`, `null`, or any other shell command."""
    if agent == "oracle":
        return "oracle", oracle_command(task)
    if agent == "null":
        return "null", NULL_COMMAND
    for kind, command, _ in probe_commands(task) + alternative_commands(task):
        if agent == kind:
            return kind, command
    return "agent", agent


def run_once(task: Task, worlds_dir: Path, sandbox, run_kind: str, command: str, attempt: int = 0,
             timeout_s: float = 120, llm=None, on_exec: Callable[[Any], None] | None = None) -> Validation:
    """Run `command` in an episode of the task's world and grade the action log. `llm` (the run's llm.LLM,
    optional) grades judge checks and plays a communication task's requester; without one judge checks are
    not run (counted) and the requester answers "No further information.". `on_exec` receives the command's
    result (exit status, stdout, stderr) before grading: `taskmine replay` shows what the agent printed."""
    vid = content_hash("validation", task.task_id, run_kind, attempt, command)[:32]
    base = dict(validation_id=vid, task_id=task.task_id, dataset=task.dataset, run_kind=run_kind, attempt=attempt,
                sandbox=sandbox.kind)
    reference = run_kind in ("oracle", "null") or run_kind.startswith("probe:")
    spec = verifier.spec_of(task)     # a task with a verifier phase (code_change) runs it after the agent
    extra: dict = {}
    try:
        image = verifier.environment(spec, sandbox, worlds_dir) if spec else None
        deadline = timeout_s + 300 + (spec.timeout_s + 300 if spec else 0)
        with Episode(worlds_dir, task.world, sandbox, deadline_s=deadline, image=image, llm=llm) as ep:
            result = ep.exec(command, timeout_s=timeout_s)
            if on_exec is not None:
                on_exec(result)
            if spec is not None:
                extra["verifier"] = verifier.verify(ep.session, spec, worlds_dir)
            actions = ep.actions
            digest = ep.session.image_digest if ep.session else None
            view = ep.tools.view if ep.tools else None
    except SandboxError as exc:
        return Validation(**base, score=None, duration_s=0.0, error_class="infra", message=str(exc)[:500])
    base.update(duration_s=round(result.duration_s, 3), image_digest=digest, exit_code=result.exit_code,
                status=result.status_line())
    missing = (extra.get("verifier") or {}).get("no_report")
    if missing:      # the run left no test report: infrastructure only when the oracle's run has none either
        if run_kind in ("oracle", "null") or not oracle_reports(task, worlds_dir, sandbox):
            return Validation(**base, score=None, error_class="infra", message=f"{NO_REPORT}: {missing}"[:500])
        extra["verifier"] = agent_failed(extra["verifier"])
    if result.timed_out and (reference or run_kind.startswith("alt:")):  # our own replay did not finish:
        #                                                               infrastructure, not a score
        return Validation(**base, score=None, error_class="timeout", message=f"killed after {timeout_s}s")
    g = grade_actions(task, actions, view, extra, llm)
    notes = [g.message] if g.message else []
    if g.score is not None:
        notes.append(f"graded {g.mode}: {g.summary()}")
    if g.not_run:
        notes.append(f"{g.not_run} judge checks not run (no model)")
    if result.error:
        notes.append(result.error)
    if reference and (result.exit_code != 0 or result.error):
        return Validation(**base, score=g.score, checks=g.checks, error_class="infra",
                          message=f"{result.status_line()}: {result.stderr.strip()[-300:]}")
    if g.error_class == "infra" and reference:
        return Validation(**base, score=None, checks=g.checks, error_class="infra", message=g.message)
    return Validation(**base, score=g.score, checks=g.checks, error_class=g.error_class, message="; ".join(notes))


def agent_failed(result: dict) -> dict:
    """A verifier result without a test report, as the agent's failure (scored 0): what it is when the oracle's
    run of the same verifier leaves a report (`oracle_reports`; a published task's oracle always did)."""
    return {**result, "ran": False, "no_report": "",
            "failed_setup": f"{NO_REPORT} (the oracle's run of the same verifier has one): {result['no_report']}"}


def _oracle_key(task: Task, sandbox) -> str:
    return content_hash("oracle-reports", task.task_id, (task.world or {}).get("env"),
                        (task.reference or {}).get("code"), sandbox.kind)


def oracle_reports(task: Task, worlds_dir: Path, sandbox) -> bool:
    """Whether the oracle's run of the task's verifier leaves a test report (run once per task and sandbox kind,
    unless `validate` already ran the oracle): what tells a run that left none apart from an infrastructure
    failure."""
    key = _oracle_key(task, sandbox)
    if key not in _ORACLE_REPORTS:
        v = run_once(task, worlds_dir, sandbox, "oracle", oracle_command(task))
        _ORACLE_REPORTS[key] = not (v.error_class == "infra" and v.message.startswith(NO_REPORT))
    return _ORACLE_REPORTS[key]


def grade_actions(task: Task, actions: list, view, extra: dict | None = None, llm=None):
    """The task's rubric over an action log, in its world view; `extra` holds what a verifier phase measured
    (`{"verifier": ...}`); judge checks with `llm` (without: not run, counted)."""
    from graders.communication import judge_context

    context = judge_context(view, llm) if llm is not None else Context(view=view)
    context.extra = dict(extra or {})
    return grade(task.rubric, actions, context)


@dataclass(frozen=True)
class Verdict:
    task_id: str
    valid: bool
    reason: str
    validations: list[Validation]


def validate(task: Task, worlds_dir: Path, sandbox, repeats: int = 3,
             progress: Callable[[str], None] | None = None, llm=None) -> Verdict:
    """Oracle and null `repeats` times each, every probe and valid alternative once; any failure, variance or
    probe that passes rejects the task with a reason (an alternative never does: it is a measurement)."""
    runs: list[Validation] = []
    limits = {}
    plan = [("oracle", oracle_command(task), repeats), ("null", NULL_COMMAND, repeats)]
    for kind, command, limit in probe_commands(task):
        plan.append((kind, command, 1))
        limits[kind] = limit
    plan += [(kind, command, 1) for kind, command, _ in alternative_commands(task)]
    for kind, command, times in plan:
        for attempt in range(times):
            runs.append(run_once(task, worlds_dir, sandbox, kind, command, attempt, llm=llm))
            if progress:
                progress(kind)
        if kind == "oracle" and verifier.spec_of(task) is not None:
            _ORACLE_REPORTS[_oracle_key(task, sandbox)] = not any(
                r.error_class == "infra" and r.message.startswith(NO_REPORT) for r in runs if r.run_kind == "oracle")
    return Verdict(task.task_id, *judge(runs, limits), runs)


def probe_limits(task: Task) -> dict[str, float]:
    return {kind: limit for kind, _, limit in probe_commands(task)}


MEASURES = ("baseline:", "rollout:")  # run kinds that measure difficulty: never part of a task's validity


def baseline_runs(task: Task, worlds_dir: Path, sandbox, llm=None) -> list[Validation]:
    """One run of each retrieval baseline of the task (graders.baselines), replayed and graded like a probe;
    the neighbour it copied is noted in the row's message."""
    from graders import baselines

    out = []
    for b in baselines.plan(task, worlds_dir):
        v = run_once(task, worlds_dir, sandbox, f"baseline:{b.name}", b.command(), llm=llm)
        note = f"ran {b.source}" if b.shell is not None else f"copied {b.source}" if b.calls else \
            f"submitted nothing: {b.source}"
        out.append(v.model_copy(update={"message": "; ".join(m for m in (note, v.message) if m)[:1000]}))
    return out


def judge(runs: list[Validation], probe_max: dict[str, float] | None = None) -> tuple[bool, str]:
    """(valid, reason) from a task's runs. Any spread in the oracle's (or the null's) scores over the repeats
    marks it flaky; `alt:*` runs (valid alternatives) measure the grader, `baseline:*` and `rollout:*` runs the
    difficulty: they never decide."""
    runs = [r for r in runs if not r.run_kind.startswith(("alt:", *MEASURES))]
    infra = [r for r in runs if r.error_class in ("infra", "timeout")]
    if infra:
        return False, f"infra: {infra[0].error_class}: {infra[0].message[:200]}"
    errors = [r for r in runs if r.error_class == "grader_error"]
    if errors:
        return False, f"grader_error: {errors[0].message[:200]}"
    oracle = [r.score for r in runs if r.run_kind == "oracle"]
    null = [r.score for r in runs if r.run_kind == "null"]
    if len(set(oracle)) > 1 or len(set(null)) > 1:
        return False, f"flaky: oracle scores {oracle}, null scores {null}"
    if not oracle or min(oracle) < ORACLE_MIN:
        return False, f"oracle scored {min(oracle, default=None)} (< {ORACLE_MIN})"
    if not null or max(null) > NULL_MAX:
        return False, f"null scored {max(null, default=None)} (> {NULL_MAX})"
    for r in runs:
        if r.run_kind.startswith("probe:"):
            limit = (probe_max or {}).get(r.run_kind, 0.5)
            if r.score is None or r.score >= limit:
                return False, f"probe passes: {r.run_kind[6:]} scored {r.score} (>= {limit})"
    probes = sum(1 for r in runs if r.run_kind.startswith("probe:"))
    return True, "oracle and null as expected on every repeat" + (f", {probes} probes fail" if probes else "")
