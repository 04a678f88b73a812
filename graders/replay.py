"""Replay tasks in a sandbox and decide whether each is valid.

A task is valid when, in its own world image, replaying its reference through the `company` tool
(the oracle) scores >= 0.99 on every repeat and doing nothing (the null run) scores <= 0.05 on every
repeat (DESIGN.md, Validation 1, 2 and 4). Infrastructure failures (the sandbox could not run, a
timeout) are recorded apart from task failures and never counted as a score.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graders.rubric import grade
from warehouse.ids import content_hash
from warehouse.schemas import Task, Validation

ORACLE_MIN = 0.99
NULL_MAX = 0.05


def entry_command(entry: dict) -> str:
    """The `company` invocation that writes `entry` to the outbox."""
    action = entry.get("action")
    if action == "jira.update":
        args = ["company", "jira", "update"]
        fields = entry.get("fields", {})
        for key, flag in (("type", "--type"), ("priority", "--priority"), ("assignee", "--assignee"),
                          ("duplicate_of", "--duplicate-of")):
            if fields.get(key):
                args += [flag, str(fields[key])]
        for c in fields.get("components") or []:
            args += ["--component", str(c)]
        return shlex.join(args)
    if action == "answer" and "sha" in entry:
        return shlex.join(["company", "answer", "--sha", str(entry["sha"])])
    if action == "answer" and "text" in entry:
        return shlex.join(["company", "answer", "--text", str(entry["text"])])
    raise ValueError(f"no company command writes {action!r}")


def oracle_command(task: Task) -> str:
    return " && ".join(entry_command(e) for e in task.reference["outbox"]) or "true"


NULL_COMMAND = "true"


def agent_command(task: Task, agent: str) -> tuple[str, str]:
    """(run kind, shell command) for `oracle`, `null`, or any other shell command."""
    if agent == "oracle":
        return "oracle", oracle_command(task)
    if agent == "null":
        return "null", NULL_COMMAND
    return "agent", agent


def run_once(task: Task, world_dir: Path, sandbox, run_kind: str, command: str, attempt: int = 0,
             timeout_s: float = 120) -> Validation:
    """Run `command` in the task's world and grade the outbox."""
    result = sandbox.run(world_dir, command, timeout_s=timeout_s, world_id=task.world_hash)
    vid = content_hash("validation", task.task_id, run_kind, attempt, command)[:32]
    base = dict(validation_id=vid, task_id=task.task_id, dataset=task.dataset, run_kind=run_kind,
                attempt=attempt, duration_s=round(result.duration_s, 3), image_digest=result.image_digest,
                sandbox=result.sandbox, exit_code=result.exit_code, status=result.status())
    reference = run_kind in ("oracle", "null")
    if result.timed_out and reference:  # our own replay did not finish: infrastructure, not a score
        return Validation(**base, score=None, error_class="timeout", message=f"killed after {timeout_s}s")
    g = grade(task.rubric, result.outbox)  # an agent is graded on what it recorded, however it ended
    notes = [g.message] if g.message else []
    if result.outbox_errors:
        notes.append(f"outbox_errors={len(result.outbox_errors)}: {result.outbox_errors[0][:120]}")
    if result.error:
        notes.append(result.error)
    if reference and (result.exit_code != 0 or result.error):
        return Validation(**base, score=g.score, checks=g.checks, error_class="infra",
                          message=f"{result.status()}: {result.stderr.strip()[-300:]}")
    return Validation(**base, score=g.score, checks=g.checks, error_class=g.error_class, message="; ".join(notes))


@dataclass(frozen=True)
class Verdict:
    task_id: str
    valid: bool
    reason: str
    validations: list[Validation]


def validate(task: Task, world_dir: Path, sandbox, repeats: int = 3,
             progress: Callable[[str], None] | None = None) -> Verdict:
    """Oracle and null, `repeats` times each; any failure or variance rejects the task with a reason."""
    runs: list[Validation] = []
    for kind, command in (("oracle", oracle_command(task)), ("null", NULL_COMMAND)):
        for attempt in range(repeats):
            runs.append(run_once(task, world_dir, sandbox, kind, command, attempt))
            if progress:
                progress(kind)
    return Verdict(task.task_id, *judge(runs), runs)


def judge(runs: list[Validation]) -> tuple[bool, str]:
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
    return True, "oracle and null as expected on every repeat"
