"""An episode: one run of an agent (or a replayed reference) in one task's world.

It starts the task's tool server on the host (the world at the task's cutoff, without its hidden events, the
persona the agent acts as), serves it on a Unix socket in a fresh folder, packs the task's git view there (its
repositories as they stood at the cutoff, environments.gitworld), opens a sandbox session that sees the socket
at /run/company and the view at /world/git (both read-only: bind-mounted, or on a host that cannot see this
machine's files the view copied in and the socket relayed, environments.relay), and makes the agent's
repositories in its home.
Closing it ends the session and the server; the action log stays
readable on the episode (`actions`) for the grader, which the agent never reaches.

Invariants:
- The world is read through `environments.world` at the task's cutoff; nothing is stored per episode but
  its view's pack (deleted with the episode) and the agent's own work tree (objects borrowed from the view).
- A failure to set the episode up is infrastructure (`SandboxError`), never the agent's score.
- The socket folder is owned by this process and swept (like sandbox temp roots) when its owner is gone.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from environments.docker_cli import SandboxError
from environments.gitworld import SETUP_SCRIPT, pack_view
from environments.requester import SimulatedRequester
from environments.sandbox import ExecResult, Mount, Sandbox, Session, owner_tag
from environments.tools import CONTAINER_SOCKET, Persona, ToolServer, ToolSocket
from environments.world import World

GIT_TARGET = "/world/git"


@dataclass(frozen=True)
class TaskWorld:
    """What a task says about its world (the `world` column of a task), parsed."""

    cutoff: dt.datetime
    hidden: tuple[str, ...] = ()
    persona: Persona | None = None
    tools: tuple[str, ...] | None = None
    refs: dict[str, dict[str, str]] = field(default_factory=dict)  # repo slug -> {ref: sha} at the cutoff
    heads: dict[str, str] = field(default_factory=dict)            # repo slug -> commit checked out
    repos: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, world: dict) -> TaskWorld:
        p = world.get("persona")
        return cls(cutoff=dt.datetime.fromisoformat(world["cutoff"]), hidden=tuple(world.get("hidden") or ()),
                   persona=Persona(**p) if p else None,
                   tools=tuple(world["tools"]) if world.get("tools") is not None else None,
                   refs=dict((world.get("git") or {}).get("refs") or {}),
                   heads=dict((world.get("git") or {}).get("heads") or {}),
                   repos=tuple((world.get("git") or {}).get("repos") or ()),
                   extra={k: v for k, v in world.items() if k not in ("cutoff", "hidden", "persona", "tools", "git")})


def socket_root() -> Path:
    """Where the episode's socket folder goes: the temp folder, unless its path is too long for AF_UNIX
    (about 100 bytes with the folder and socket names), then /tmp or /dev/shm."""
    for d in (tempfile.gettempdir(), "/tmp", "/dev/shm"):
        if len(d) <= 60 and os.path.isdir(d) and os.access(d, os.W_OK):
            return Path(d)
    raise SandboxError("no folder with a path short enough for the tool server's socket; set TMPDIR=/tmp")


def tool_server(worlds_dir: Path, world: dict | TaskWorld, llm=None) -> ToolServer:
    """The task's tool server (no session yet): its world at the cutoff without its hidden events, the persona,
    its tool list, and for a communication task its simulated requester (with `llm`, or the fixed answer)."""
    world = world if isinstance(world, TaskWorld) else TaskWorld.of(world)
    wf = Path(worlds_dir) / "world.sqlite"
    view = World(wf).at(world.cutoff, world.hidden) if wf.exists() else None
    requester = None
    if world.extra.get("requester"):      # a communication task: its requester answers questions

        requester = SimulatedRequester(world.extra["requester"], llm)
    return ToolServer(view, persona=world.persona, repos=world.repos,
                      tools=set(world.tools) if world.tools is not None else None, requester=requester)


class Episode:
    """Use as a context manager; `exec` runs commands as the agent, `actions` is the log."""

    def __init__(self, worlds_dir: Path, world: dict | TaskWorld, sandbox: Sandbox, *, deadline_s: float = 900,
                 image: str | None = None, llm=None):
        self.worlds_dir = Path(worlds_dir)
        self.world = world if isinstance(world, TaskWorld) else TaskWorld.of(world)
        self.sandbox, self.deadline_s, self.image = sandbox, deadline_s, image
        self.llm = llm  # the run's llm.LLM: the simulated requester answers with it (without: a fixed answer)
        self.session: Session | None = None
        self.tools: ToolServer | None = None
        self._socket: ToolSocket | None = None
        self._rundir: Path | None = None

    def __enter__(self) -> Episode:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        self.tools = tool_server(self.worlds_dir, self.world, self.llm)
        self._rundir = Path(tempfile.mkdtemp(prefix="taskmine-tools-", dir=socket_root()))
        (self._rundir / "owner").write_text(owner_tag() + "\n")
        self._socket = ToolSocket(self.tools, self._rundir / "s").start()
        mounts = [Mount(self._socket.folder, "/run/company", relay=True)]
        if self.world.refs:
            folder = pack_view(self._rundir / "git", self._repositories())
            mounts.append(Mount(folder, GIT_TARGET))
        local = self.sandbox.kind == "local"
        env = {"TASKMINE_TOOLS": str(self._socket.path) if local else CONTAINER_SOCKET}
        self.session = self.sandbox.session(None, deadline_s=self.deadline_s, image=self.image, mounts=tuple(mounts),
                                            env=env)
        self.tools.session = self.session
        if self.world.refs:
            home = "$HOME"
            cmd = f"sh -c {shlex.quote(SETUP_SCRIPT)} setup {shlex.quote(self.session.path_of(GIT_TARGET))} {home}"
            r = self.session.exec(cmd, timeout_s=300, kill_others=False)
            if r.exit_code != 0:
                raise SandboxError(f"could not make the task's repositories: {r.status_line()}: "
                                   f"{r.stderr.strip()[-300:]}")

    def _repositories(self) -> dict[str, tuple[Path, dict[str, str], str | None]]:
        """slug -> (world repository, refs, head) of every repository of the task."""
        meta = self.worlds_dir / "world.json"
        paths = {r.get("slug"): Path(r["path"]) for r in json.loads(meta.read_text())["repos"].values()} \
            if meta.exists() else {}
        missing = [s for s in self.world.refs if s not in paths or not paths[s].exists()]
        if missing:
            raise SandboxError(f"the world has no repository {missing[0]!r} (re-run the world stage)")
        return {s: (paths[s], refs, self.world.heads.get(s)) for s, refs in self.world.refs.items()}

    def exec(self, command: str, *, timeout_s: float = 120, env: dict | None = None) -> ExecResult:
        assert self.session is not None, "use the episode as a context manager"
        return self.session.exec(command, timeout_s=timeout_s, env=env)

    @property
    def actions(self):
        return self.tools.actions if self.tools else []

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        if self._socket is not None:
            self._socket.close()
        if self._rundir is not None:
            shutil.rmtree(self._rundir, ignore_errors=True)

    def __exit__(self, *exc) -> None:
        self.close()
