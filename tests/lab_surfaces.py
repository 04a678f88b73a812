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


# --- the checks of a published version, as a lab would run them (the e2e tests assert on them on the sample;
# scripts/lab_check.py runs them on any published version, a real export's included) ------------------------


def one_per_family(pub: Path) -> dict[str, dict]:
    """One task per family: its agent row joined with its grader row (the scripted agents replay the reference)."""
    from publishing.loader import load_dataset

    ds = load_dataset(pub)
    out: dict[str, dict] = {}
    for t in sorted(ds.tasks(), key=lambda t: t["task_id"]):
        if t["family"] not in out:
            out[t["family"]] = {**t, **ds.grading(t["task_id"])}
    return out


def config_splits(pub: Path, cache: Path) -> dict[str, tuple[set, set]]:
    """Per config of the card's YAML: (the splits `datasets.load_dataset(dir, name)` returns, the splits the
    config's tasks are in according to the loader)."""
    import datasets
    import yaml

    from publishing.loader import load_dataset

    ds = load_dataset(pub)
    configs = [c["config_name"] for c in yaml.safe_load((pub / "README.md").read_text().split("---")[1])["configs"]]
    out = {}
    for name in configs:
        d = datasets.load_dataset(str(pub), name, cache_dir=str(cache))
        want = {r["split"] for r in ds.tasks()
                if name in ("grading", "trajectories") or (name == "all" and not r["easy"])
                or (name == "easy" and r["easy"]) or (name == r["family"] and not r["easy"])
                or (name == "swebench" and r["family"] == "code_change")}
        out[name] = (set(d), want)
    return out


def agent_leaks(pub: Path) -> list[tuple[str, str]]:
    """(family, string) of the reference strings (longer than 12 characters, not in the task's prompt) found in
    the task's own agent-view row."""
    import pyarrow.parquet as pq

    from publishing.loader import load_dataset

    ds = load_dataset(pub)
    rows = {r["task_id"]: r for f in sorted(pub.glob("tasks/*/*.parquet")) for r in pq.read_table(f).to_pylist()}
    leaked = []
    for tid, row in rows.items():
        g = ds.grading(tid)
        text = json.dumps({k: v for k, v in row.items() if k != "prompt"}, default=str)
        for s in set(_strings(g["reference"])) | set(_strings(g.get("requester") or {})) | set(g["hidden"]):
            if len(s) > 12 and s not in row["prompt"] and (s in text or json.dumps(s)[1:-1] in text):
                leaked.append((row["family"], s[:60]))
    return leaked


# reference fields that are no answer: what the agent is given (the statement, its repository at the base commit,
# the tickets, the test modules it is told about), labels (tool and probe names, how an alternative was made) and
# probes (wrong outcomes: the newest commit at the cutoff is a branch tip of the agent's own repository)
GIVEN = {"tool", "name", "how", "kind", "check", "id", "probes", "base_commit", "created_at", "problem_statement",
         "repo", "restore", "run", "tickets", "ecosystem", "statement_source", "statement_note", "timeout_s",
         "instruction", "grading"}


def _strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            if k not in GIVEN:
                yield from _strings(x)


def trajectory_problems(pub: Path, cache: Path) -> tuple[int, list[str]]:
    """Load the `trajectories` config with `datasets` and replay each communication trajectory's tool calls through
    the published tools: (rows loaded, what is wrong with them)."""
    import datasets

    from environments import actions as A
    from publishing.loader import load_dataset

    ds = load_dataset(pub)
    d = datasets.load_dataset(str(pub), "trajectories", cache_dir=str(cache / "hf"))
    rows = [r for s in d for r in d[s]]
    wrong = []
    if {r["task_id"] for r in rows} != {t["task_id"] for t in ds.tasks()}:
        wrong.append("the trajectories are not one per task")
    for r in rows:
        msgs, tid = r["messages"], r["task_id"][:12]
        if not (msgs[0]["role"] == "system" and msgs[1]["role"] == "user" and msgs[-1]["role"] == "assistant"):
            wrong.append(f"{tid}: not system, user, ..., assistant")
        calls = [c for m in msgs if m["role"] == "assistant" and m["tool_calls"] for c in m["tool_calls"]]
        results = [m for m in msgs if m["role"] == "tool"]
        if not calls or [m["tool_call_id"] for m in results] != [c["id"] for c in calls] or \
                not all(m["content"] for m in results):
            wrong.append(f"{tid}: tool calls and results do not pair")
            continue
        if r["family"] == "code_change":
            if not ("[exit 0]" in results[0]["content"] and "changed" in results[-1]["content"]):
                wrong.append(f"{tid}: the fix was not applied")
            continue
        # replaying the trajectory's calls through the published tools scores what the oracle scored
        tool_calls = [A.CALL.validate_python({"tool": c["function"]["name"], **json.loads(c["function"]["arguments"])})
                      for c in calls]
        score = ds.grade(r["task_id"], [{"tool": c.name(), **c.arguments()} for c in tool_calls],
                         cache=cache / "lab-cache").score
        if score != 1.0:
            wrong.append(f"{tid}: its replay scores {score}")
    return len(rows), wrong


def harbor_trials(pub: Path, home: Path, out: Path, tasks: dict[str, dict]) -> dict[str, tuple[float, float]]:
    """Export each task to a Harbor folder and run it as Harbor does (build, solve or nothing, test, the reward
    file): {family: (oracle reward, null reward)}. The folders' agent side is checked on the way (no grader file,
    no reference text, nothing after the cutoff); a violation raises AssertionError."""
    from environments.sandbox import home_label
    from environments.world import World
    from taskmine import harbor

    got = {}
    try:
        done = harbor.export(pub, out, tasks=[t["task_id"] for t in tasks.values()], home=home)
        assert {e.family for e in done} == set(tasks)
        for e in done:
            folder = e.folder
            assert {p.name for p in folder.iterdir()} == {"instruction.md", "task.toml", "environment", "solution",
                                                          "tests"}
            assert not any("grading" in p.name or p.name == "test.sh" for p in (folder / "environment").rglob("*"))
            # the agent's world holds no reference text and nothing after the cutoff
            task = tasks[e.family]
            world = World(folder / "environment" / "task" / "world" / "world.sqlite")
            texts = [t for _, t in world.at(dt.datetime(2100, 1, 1, tzinfo=dt.UTC)).texts()]
            cutoff = dt.datetime.fromisoformat(task["world_manifest"]["cutoff"])
            assert len(texts) == len(list(world.at(cutoff).texts())), e.family
            # a dataset of documents gives every world some; a repository alone (a git-only export) gives none
            docs = pub / "world" / "documents.jsonl"
            assert texts or not (docs.exists() and docs.stat().st_size), e.family
            for a in task["reference"]["actions"]:
                said = (a.get("body") or a.get("text") or "").strip()
                if len(said) >= 40:
                    assert not any(said[:40] in t for t in texts), e.family
            box = (folder / "environment" / "task" / "box.json").read_text()
            assert '"forbidden"' not in box and '"messages"' not in box
            oracle = harbor.run_folder(folder, "oracle", keep_image=True)
            null = harbor.run_folder(folder, "nop")
            got[e.family] = (oracle.reward, null.reward)
            if (oracle.reward, null.reward) != (1.0, 0.0):
                got[e.family + ":output"] = (oracle.test_output[-1000:], null.test_output[-1000:])
    finally:
        harbor.remove_images({"taskmine.home": home_label(home)})
    return got
