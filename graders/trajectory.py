"""Oracle trajectories for supervised fine-tuning: each task's real outcome as a chat in the OpenAI
tool-calling format SFT trainers read (`messages` with `tool_calls` and `tool` replies, `tools` as function
definitions).

- Tool tasks: the reference's calls replayed through the in-process tool server (environments.tools) on the
  task's world at its cutoff; each tool message is what the server really answered.
- Code tasks: the oracle's change made with the `shell` and `git` tools in a checkout of the repository at the
  task's base commit (a host temp folder, HOME pointed at it): the patch applied, then `git diff --stat`; each
  tool message is the command's real output, formatted as the tool server formats a sandbox's.

Invariants: nothing here is invented: every tool result comes from running the call; the trajectory of a test
task carries the dataset's canary string (in the system message), like its row.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from environments import actions as A
from environments.tools import Persona, ToolServer
from environments.world import World

PATCH_EOF = "EOF_TASKMINE_PATCH"


def system_message(task, canary: str = "") -> str:
    text = ("You work inside a company as it stood at one moment, through its tools: the issue tracker, mail, chat"
            " and, where the task has one, its repository. Do the task, then stop.")
    if task.world.get("persona"):
        p = task.world["persona"]
        text += f" You act as {p.get('name') or 'an employee'}."
    return text + (f"\n\n{canary}" if canary else "")


def tool_defs(names) -> list[dict[str, Any]]:
    """OpenAI function definitions of the tools `names` (the typed models' schemas)."""
    return [{"type": "function", "function": {"name": n, "description": A.TOOLS[n].description(),
                                              "parameters": A.TOOLS[n].input_schema()}}
            for n in A.TOOLS if n in set(names)]


@dataclass
class _Run:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    error: str = ""


class HostSession:
    """A minimal stand-in for a sandbox session: `sh -c` on the host with HOME at a temp folder, used only to run
    the oracle's own commands (git apply of the real fix) while writing a trajectory."""

    kind = "host"

    def __init__(self, home: Path):
        self.home = home

    def exec(self, command: str, timeout_s: float = 60, kill_others: bool = False) -> _Run:
        env = {"HOME": str(self.home), "PATH": "/usr/bin:/bin:/usr/local/bin", "LC_ALL": "C.UTF-8",
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_DATE": "@0 +0000", "GIT_COMMITTER_DATE": "@0 +0000"}
        try:
            r = subprocess.run(["sh", "-c", command], cwd=self.home, env=env, capture_output=True, text=True,
                               timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return _Run("", "", -1, timed_out=True)
        return _Run(r.stdout, r.stderr, r.returncode)


def _messages(system: str, prompt: str, steps: list[tuple[A.Tool, str]], closing: str) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    for i, (call, result) in enumerate(steps):
        cid = f"call_{i}"
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": call.name(), "arguments": json.dumps(call.arguments(), sort_keys=True)}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "name": call.name(), "content": result})
    msgs.append({"role": "assistant", "content": closing})
    return msgs


def oracle(task, world_file: Path | None, git_dir: Path | None = None, hidden: list[str] | None = None
           ) -> dict[str, Any]:
    """The task's oracle trajectory: {"messages": [...], "tools": [...], "steps": n, "source": ...}.
    `world_file`: the world's world.sqlite; `git_dir`: the folder of the world's repositories (<slug>.git or
    <slug>.bundle), for code tasks."""
    world = task.world
    cutoff = dt.datetime.fromisoformat(world["cutoff"]) if isinstance(world.get("cutoff"), str) else task.cutoff
    view = World(world_file).at(cutoff, hidden if hidden is not None else (world.get("hidden") or ())) \
        if world_file is not None and Path(world_file).exists() else None
    persona = Persona(**world["persona"]) if world.get("persona") else None
    code = (task.reference or {}).get("code")
    system = system_message(task, task.canary)
    if code:
        with tempfile.TemporaryDirectory(prefix="taskmine-traj-") as tmp:
            home = Path(tmp)
            _checkout(git_dir, code["repo"], code["base_commit"], home / code["repo"])
            server = ToolServer(view, persona=persona, session=HostSession(home), repos=(code["repo"],))
            calls: list[A.Tool] = [
                A.Shell(command=f"cd ~/{shlex.quote(code['repo'])} && git apply --whitespace=nowarn - <<'{PATCH_EOF}'\n"
                                f"{code.get('patch', '').rstrip(chr(10))}\n{PATCH_EOF}"),
                A.Git(args=["diff", "--stat"], repo=code["repo"])]
            steps = [(c, server.call(c.name(), c.arguments()).text) for c in calls]
            tools = sorted(server.available)
        return {"messages": _messages(system, task.prompt, steps, "The change is made."),
                "tools": tool_defs(tools), "steps": len(steps), "source": "oracle: the real fix applied"}
    server = ToolServer(view, persona=persona, tools=set(world["tools"]) if world.get("tools") is not None else None)
    calls = [A.CALL.validate_python(a) for a in (task.reference or {}).get("actions") or []]
    steps = [(c, server.call(c.name(), c.arguments()).text) for c in calls]
    return {"messages": _messages(system, task.prompt, steps, "Done."), "tools": tool_defs(server.available),
            "steps": len(steps), "source": "oracle: the real outcome replayed through the tool server"}


def _checkout(git_dir: Path | None, slug: str, commit: str, dest: Path) -> None:
    """The repository at `commit` in `dest` (a clone of the world's repository or bundle, nothing else)."""
    src = None
    for name in (f"{slug}.git", f"{slug}.bundle"):
        if git_dir is not None and (Path(git_dir) / name).exists():
            src = Path(git_dir) / name
    if src is None:
        raise FileNotFoundError(f"no repository {slug} under {git_dir}")
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(dest.parent), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    t0 = time.perf_counter()
    for argv in (["git", "init", "-q", str(dest)],
                 ["git", "-C", str(dest), "-c", "safe.directory=*", "fetch", "-q", "--no-tags", str(src.resolve()),
                  "+refs/heads/*:refs/remotes/world/*"],
                 ["git", "-C", str(dest), "-c", "advice.detachedHead=false", "checkout", "-q", commit]):
        r = subprocess.run(argv, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:4])} failed after {time.perf_counter() - t0:.1f}s: "
                               f"{r.stderr.strip()[:300]}")
