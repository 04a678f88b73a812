"""What a lab does with a published dataset through its own tools, as reusable checks (the end-to-end tests run
them on the sample's published version; a run on a real export can call them the same way):

- `mcp_agent`: an MCP-only scripted agent (the official `mcp` client) on `taskmine serve --published DIR --task ID`:
  the tools its family uses, and the oracle's work done through them (a code task: the fix written with
  write_file and applied with the shell; a commit-link task: the answer after a look at git), then `submit`;
- `openenv_episode`: OpenEnv's own client (GenericEnvClient over the WebSocket) on `taskmine serve --openenv`;
- `harbor_trial`: an exported Harbor folder run as Harbor does (taskmine.harbor.run_folder).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def oracle_calls(task: dict) -> list[tuple[str, dict]]:
    """The reference as tool calls an agent makes: the company actions, or for a code task its fix through the
    file and shell tools (no tool knows a patch)."""
    code = task["reference"].get("code")
    if code:
        return [("list_files", {"path": code["repo"]}),
                ("write_file", {"path": "/tmp/fix.patch", "content": code["patch"]}),
                ("shell", {"command": f"cd ~/{code['repo']} && git apply --whitespace=nowarn /tmp/fix.patch"}),
                ("git", {"args": ["status", "--short"], "repo": code["repo"]})]
    calls = [(a["tool"], {k: v for k, v in a.items() if k != "tool"}) for a in task["reference"]["actions"]]
    if task["family"] == "commit_link":
        calls.insert(0, ("git", {"args": ["log", "--oneline", "-5"]}))
    return calls


def mcp_agent(published: Path, task: dict, home: Path, tmp: Path, *, act: bool = True) -> dict:
    """Serve one task over MCP (stdio), do its oracle's work through the tools (or nothing), and return
    {"tools": names, "answers": [(tool, error, text)], "result": the grade `serve` wrote}."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    result = tmp / f"result-{task['task_id'][:8]}-{int(act)}.json"

    async def main():
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "pipelines.cli", "--home", str(home), "serve", "--published", str(published),
            "--task", task["task_id"][:12], "--result", str(result)], env=dict(os.environ), cwd=str(REPO))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            answers = []
            for name, args in (oracle_calls(task) if act else []):
                r = await session.call_tool(name, args)
                answers.append((name, r.isError, r.content[0].text if r.content else ""))
            graded = await session.call_tool("submit", {}, read_timeout_seconds=dt.timedelta(minutes=15))
            return names, answers, graded.structuredContent

    names, answers, graded = anyio.run(main)
    return {"tools": names, "answers": answers, "graded": graded, "result": json.loads(result.read_text())}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OpenEnvServer:
    """`taskmine serve --openenv` in a subprocess, until closed."""

    def __init__(self, published: Path, home: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        import tempfile

        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close()); a pipe its log filled would block it
        self.proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "--home", str(home), "serve", "--openenv",
                                      "--port", str(self.port), "--published", str(published)], cwd=str(REPO),
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        import urllib.request

        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"the OpenEnv server ended: {self.log.read().decode()[-500:]}")
            try:
                urllib.request.urlopen(f"{self.url}/health", timeout=2).close()
                return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("the OpenEnv server did not answer within 120s")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.seek(0)
        self.output = self.log.read().decode(errors="replace")
        self.log.close()

    def __enter__(self) -> OpenEnvServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def openenv_episode(url: str, task: dict, *, act: bool = True) -> dict:
    """One episode with OpenEnv's own client: reset(task_id), the oracle's tool calls (or none), submit."""
    from openenv.core.generic_client import GenericEnvClient

    with GenericEnvClient(base_url=url, connect_timeout_s=120, message_timeout_s=900).sync() as env:
        first = env.reset(task_id=task["task_id"])
        steps = [env.step({"tool": name, "arguments": args}) for name, args in (oracle_calls(task) if act else [])]
        state = env.state()
        last = env.step({"tool": "submit"})
    return {"first": first, "steps": steps, "last": last, "state": state}
