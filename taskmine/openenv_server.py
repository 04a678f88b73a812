"""A published dataset as an OpenEnv environment (`taskmine serve --openenv --port P --published DIR`).

OpenEnv's contract (the `openenv-core` package): `reset` starts an episode and returns the first observation,
`step(action)` returns the next one with `reward` and `done`, `state` says where the episode is. Its server app
(`create_fastapi_app`) serves one `TaskEnvironment` per WebSocket session (the protocol of OpenEnv's own
`EnvClient`); its stateless HTTP /reset and /step make a fresh environment per request, so an episode of
several steps needs the WebSocket.

- `reset(task_id=ID)` opens that task (a unique prefix; without one, the dataset's tasks in id order, the
  `seed`-th one) as a `taskmine.serving.TaskSession`: its company tools at the cutoff, narrowed to what its
  family uses, and for a task with repositories a sandbox session where they stand as at the cutoff. The first
  observation holds the prompt and the tools (name, description, JSON schema).
- `step(ToolCall(tool=NAME, arguments={...}))` makes one typed tool call (environments.actions validates it:
  a bad call is one line in `text` with `error` set, and records nothing); `step(ToolCall(tool="submit"))`
  ends the episode: the task is graded with its rubric (a code task: after its verifier phase), `done` is
  True and `reward` is the score. After MAX_STEPS calls the episode is graded and ends by itself.
"""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from publishing.loader import load_dataset
from taskmine import serving

MAX_STEPS = 200
SUBMIT = "submit"
SUBMIT_SPEC = {"name": SUBMIT, "description": "End the episode: your work is graded and the reward returned.",
               "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False}}


class ToolCall(Action):
    """One typed tool call of the task: a tool's name and its arguments (validated by the tool's own model), or
    `submit` to end the episode and be graded."""

    tool: str = Field(..., min_length=1, max_length=64, description="a tool of the task (see the reset "
                                                                     "observation's `tools`), or `submit`")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments")


class TaskObservation(Observation):
    task_id: str = Field("", description="the task of the episode")
    family: str = Field("", description="its family")
    prompt: str = Field("", description="the task's instruction (at reset)")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="the tools (at reset): name, "
                                                                          "description, inputSchema")
    text: str = Field("", description="the tool's answer")
    error: bool = Field(False, description="the call was refused (the answer says why); nothing was recorded")
    data: dict[str, Any] = Field(default_factory=dict, description="the tool's structured answer")
    grade: dict[str, Any] | None = Field(None, description="at the end: score, points, checks")


class TaskState(State):
    task_id: str | None = None
    family: str | None = None
    done: bool = False
    actions: int = 0
    score: float | None = None


class TaskEnvironment(Environment[ToolCall, TaskObservation, TaskState]):
    """The tasks of one published dataset (see the module docstring)."""

    SUPPORTS_CONCURRENT_SESSIONS = True   # every instance has its own TaskSession (episode, sandbox, log)

    def __init__(self, published, sandbox: str = "auto", home: Path | None = None, llm=None):
        """`published`: a loaded dataset (shared by the sessions: read only) or its folder."""
        super().__init__()

        self.ds = load_dataset(published) if isinstance(published, (str, Path)) else published
        self.sandbox, self.home, self.llm = sandbox, home, llm
        self.session: serving.TaskSession | None = None
        self._state = TaskState(episode_id=None, step_count=0)

    def _pick(self, task_id: str | None, seed: int | None) -> str:
        if task_id:
            return task_id
        ids = sorted(serving.task_ids(self.ds))
        if not ids:
            raise ValueError("the dataset has no tasks")
        return ids[(seed or 0) % len(ids)]

    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              **kwargs: Any) -> TaskObservation:
        self.close()
        session = serving.TaskSession(self.ds, self._pick(task_id, seed), sandbox=self.sandbox, home=self.home,
                                      llm=self.llm)
        session.__enter__()
        self.session = session
        t = session.task
        self._state = TaskState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=t.task_id,
                                family=t.family)
        tools = [{k: s[k] for k in ("name", "description", "inputSchema")} for s in session.specs()]
        return TaskObservation(task_id=t.task_id, family=t.family, prompt=t.prompt, tools=[*tools, SUBMIT_SPEC],
                               text=t.prompt, done=False, reward=None)

    def step(self, action: ToolCall, timeout_s: float | None = None, **kwargs: Any) -> TaskObservation:
        s = self.session
        if s is None:
            return TaskObservation(text="no episode: reset first (reset(task_id=...))", error=True)
        t = s.task
        if self._state.done:
            return TaskObservation(task_id=t.task_id, family=t.family, text="the episode is over: reset to start "
                                   "another", error=True, done=True, reward=self._state.score)
        self._state.step_count += 1
        if action.tool == SUBMIT or self._state.step_count > MAX_STEPS:
            return self._finish()
        r = s.call(action.tool, action.arguments)
        self._state.actions = len(s.actions)
        return TaskObservation(task_id=t.task_id, family=t.family, text=r.text, error=r.error,
                               data=serving.jsonable(r.data), done=False, reward=None)

    def _finish(self) -> TaskObservation:
        s = self.session
        g = s.grade()
        self._state.done, self._state.score = True, g.score
        note = f"graded {g.summary}: score {g.score}" if g.score is not None else \
            f"not graded ({g.error_class}): {g.message}"
        return TaskObservation(task_id=s.task.task_id, family=s.task.family, text=note, done=True,
                               reward=g.score if g.score is not None else 0.0, grade=g.to_json(),
                               error=g.score is None)

    @property
    def state(self) -> TaskState:
        return self._state

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


def app(published: Path | str, *, sandbox: str = "auto", home: Path | None = None, max_sessions: int = 4, llm=None):
    """The FastAPI app of OpenEnv's server for a published dataset (one TaskEnvironment per WebSocket session)."""
    # the HTTP server: only for `taskmine serve --openenv`
    from openenv.core.env_server.http_server import create_fastapi_app

    ds = load_dataset(published)       # verified once (a bad folder fails now, in one line); sessions share it
    serving.world_root(ds)             # the world folder made once, before the first session
    factory = functools.partial(TaskEnvironment, ds, sandbox, home, llm)
    return create_fastapi_app(factory, ToolCall, TaskObservation, max_concurrent_envs=max_sessions)


def serve(published: Path | str, *, host: str = "127.0.0.1", port: int = 8000, **kwargs) -> None:
    # the HTTP server: only for `taskmine serve --openenv`
    import uvicorn

    uvicorn.run(app(published, **kwargs), host=host, port=port, log_level="warning")
