"""Published tasks, live: what `taskmine serve` (MCP on stdio), the OpenEnv server and the Harbor export share.

A `TaskSession` is one task of a published dataset being worked on: its company tools at the task's cutoff
(environments.tools, narrowed to the tools its family uses: `task_builders.families.served_tools`), and, for a
task with repositories (code_change, commit_link), a sandbox session where they stand exactly as at the cutoff
(an `Episode`, in the task's environment image for a code task), so git, a shell and the file tools reach them.
`grade()` scores what was done with the task's own rubric; a code task's verifier phase runs first (the hidden
tests, graders.verifier), after which the session is finished.

Every read of the published files is here (`published_task`, `world_root`), through `publishing.loader`; the
rest of the module sees `warehouse.schemas.Task`, the form graders and episodes already read.

Invariants:
- A task without repositories never gets a sandbox session, so no shell can reach the world files (which hold
  the whole history); a task with repositories gets one whose only view of the world is its cutoff.
- The world built from a published version (a world file and bare repositories from its bundles) is a cache
  beside it, made once, in a temp folder renamed into place.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from environments.episode import Episode, tool_server
from environments.backends import get_sandbox
from environments.sandbox import SandboxError
from environments.tools import Result
from graders import replay, verifier
from publishing.loader import load_dataset
from task_builders.families import served_tools
from warehouse.schemas import Task

# --- reading the published files (the one place; see the module docstring) ---------------------------------


def published_task(ds, task_id: str) -> Task:
    """The task `task_id` (a unique prefix) of a loaded published dataset, as the pipeline's `Task` (its agent
    view and grader view joined by the loader)."""
    return ds.as_task(task_id)


def published_difficulty(ds, task_id: str) -> str | None:
    """The difficulty band measured for a published task (graders.difficulty), None when not recorded."""
    return ds.task(task_id).get("difficulty")


def task_ids(ds, family: str | None = None, split: str | None = None) -> list[str]:
    return [t["task_id"] for t in ds.tasks(split=split, family=family)]


def world_root(ds, cache: Path | str | None = None) -> Path:
    """A world folder as the pipeline's (`world.sqlite`, `git/<repo>.git`, `world.json`) made from the published
    version's `world/` (its documents and repository bundles), in `cache` (default: beside the version)."""
    cache = Path(cache) if cache else ds.path.parent / f".world-cache-{ds.version}"
    ds.world_file(cache)
    repos = {}
    for bundle in sorted((ds.path / "world" / "git").glob("*.bundle")):
        slug = bundle.name[:-len(".bundle")]
        target = cache / "git" / f"{slug}.git"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{slug}-", dir=target.parent))
            try:
                subprocess.run(["git", "clone", "-q", "--bare", str(bundle.resolve()), str(tmp / "r")],
                               check=True, capture_output=True)
                os.replace(tmp / "r", target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        repos[slug] = {"slug": slug, "path": str(target.resolve())}
    meta = cache / "world.json"
    text = json.dumps({"repos": repos}, indent=1, sort_keys=True)
    if not meta.exists() or meta.read_text() != text:
        tmp_meta = meta.with_name(f".world.json-{os.getpid()}")
        tmp_meta.write_text(text)
        os.replace(tmp_meta, meta)
    return cache


# --- a live task --------------------------------------------------------------------------------------------


def jsonable(data: Any) -> Any:
    return json.loads(json.dumps(data, default=str))


def has_repositories(task: Task) -> bool:
    return bool(((task.world or {}).get("git") or {}).get("refs"))


@dataclass
class Graded:
    score: float | None
    summary: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    error_class: str | None = None
    message: str = ""

    def to_json(self) -> dict:
        return {"score": self.score, "summary": self.summary, "checks": self.checks,
                "error_class": self.error_class, "message": self.message}


class TaskSession:
    """One published task being worked on (see the module docstring). Use as a context manager."""

    def __init__(self, ds, task_id: str, *, sandbox: str = "auto", cache: Path | str | None = None, llm=None,
                 deadline_s: float = 3600, home: Path | None = None):
        self.ds, self.task = ds, published_task(ds, task_id)
        self.sandbox_kind, self.cache, self.llm, self.deadline_s, self.home = sandbox, cache, llm, deadline_s, home
        self.worlds: Path | None = None
        self.episode = None
        self.tools = None
        self.graded: Graded | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------
    def __enter__(self) -> TaskSession:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        self.worlds = world_root(self.ds, self.cache)
        if has_repositories(self.task):
            box = get_sandbox(self.sandbox_kind, home=self.home)
            spec = verifier.spec_of(self.task)
            image = verifier.environment(spec, box, self.worlds) if spec else None
            self.episode = Episode(self.worlds, self.task.world, box, deadline_s=self.deadline_s, image=image,
                                   llm=self.llm)
            self.episode.__enter__()
            self.tools = self.episode.tools
        else:
            self.tools = tool_server(self.worlds, self.task.world, self.llm)
        allowed = served_tools(self.task.family, self.task.world, self.task.reference.get("actions") or [])
        if allowed is not None:
            self.tools.allowed = allowed

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()
            self.episode = None

    # -- what an agent does -------------------------------------------------------------------------------
    @property
    def prompt(self) -> str:
        return self.task.prompt

    def specs(self) -> list[dict[str, Any]]:
        return self.tools.specs()

    def call(self, name: str, arguments: dict | None):
        if self.graded is not None:
            return Result("the task is finished (graded); reset to start again", error=True)
        return self.tools.call(name, arguments or {})

    @property
    def actions(self) -> list:
        return self.tools.actions if self.tools is not None else []

    # -- the grade ------------------------------------------------------------------------------------------
    def grade(self) -> Graded:
        """The task's rubric over what was done (a code task: after its verifier phase). Once per session: the
        verifier ends the agent's processes and writes the hidden tests into its work tree."""
        if self.graded is not None:
            return self.graded

        extra: dict[str, Any] = {}
        spec = verifier.spec_of(self.task)
        if spec is not None:
            if self.episode is None or self.episode.session is None:
                self.graded = Graded(None, "", error_class="infra", message="no sandbox session to verify in")
                return self.graded

            try:
                extra["verifier"] = verifier.verify(self.episode.session, spec, self.worlds)
            except SandboxError as exc:
                self.graded = Graded(None, "", error_class="infra", message=str(exc)[:500])
                return self.graded
            if extra["verifier"].get("no_report"):    # a published task's oracle leaves one: the agent's 0
                extra["verifier"] = replay.agent_failed(extra["verifier"])
        g = replay.grade_actions(self.task, self.actions, self.tools.view, extra, self.llm)
        self.graded = Graded(g.score, g.summary() if g.score is not None else "", list(g.checks),
                             g.error_class, g.message or "")
        return self.graded


@contextlib.contextmanager
def session(published: Path | str, task_id: str, **kwargs):
    """`with session(DIR, ID) as s:` a TaskSession of a published dataset folder."""
    with TaskSession(load_dataset(published), task_id, **kwargs) as s:
        yield s
