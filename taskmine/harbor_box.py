"""Inside a Harbor task's container (see taskmine.harbor): the company's tool server, and the grader of tests/test.sh.

    python3 -m taskmine.harbor_box serve          # the entrypoint starts it, as root, before the agent
    python3 -m taskmine.harbor_box grade /tests   # tests/test.sh runs it, as root, after the agent

`serve` serves the task's tools over MCP on /run/company/tools.sock (the `company` CLI and `company mcp` of the
base image are its clients) from the task's world cut at its cutoff (`/opt/taskmine/task/world`: nothing later
is in the image), and appends every write the agent makes to the action log, in a folder only root reads.
`grade` reads that log and the grading files Harbor copies into /tests only now (rubric, and for a code task the
fix's test files and what they must do), runs a code task's verifier phase in this container as the agent's
uid (graders.verifier, unchanged), grades with the task's rubric (graders.replay.grade_actions) and writes the
score to /logs/verifier/reward.txt (details in reward.json and grade.json). A grade that cannot be computed
writes no reward: Harbor then reports a verifier error, never a silent 0.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

TASK_DIR = Path("/opt/taskmine/task")          # box.json (the tools' world manifest) and world/world.sqlite
STATE_DIR = Path("/var/lib/taskmine")          # root only: the action log, the server's pid
ACTIONS = STATE_DIR / "actions.jsonl"
PIDFILE = STATE_DIR / "server.pid"
VERIFIER_DIR = Path("/logs/verifier")


def serve() -> int:
    from environments import actions as A
    from environments.episode import tool_server
    from environments.tools import SOCKET_NAME, ToolSocket

    box = json.loads((TASK_DIR / "box.json").read_text())
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    os.chmod(STATE_DIR, 0o700)
    PIDFILE.write_text(f"{os.getpid()}\n")
    tools = tool_server(TASK_DIR / "world", box["world"])
    tools.allowed = set(box["tools"]) if box.get("tools") is not None else None
    record = tools._record

    def logged(action: A.Tool, effect: dict) -> A.Logged:   # every write, as it is recorded, on disk
        entry = record(action, effect)
        with open(ACTIONS, "a", encoding="utf-8") as f:
            f.write(entry.model_dump_json() + "\n")
            f.flush()
            os.fsync(f.fileno())
        return entry

    tools._record = logged
    folder = Path("/run/company")
    (folder / SOCKET_NAME).unlink(missing_ok=True)
    sock = ToolSocket(tools, folder).start()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.5)
    sock.close()
    return 0


def _stop_the_agent() -> None:
    """Kill every process but PID 1, this one and its ancestors, and the tool server (an agent that ran as root
    too; the verifier kills the agent uid's own)."""
    keep = {1, os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        keep.add(pid)
    try:
        keep.add(int(PIDFILE.read_text()))
    except (OSError, ValueError):
        pass
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in keep:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


def grade(tests: Path) -> int:
    from environments import actions as A
    from environments.sandbox import InPlaceSession
    from environments.world import World
    from graders import replay, verifier
    from warehouse.schemas import Task

    g = json.loads((tests / "grading.json").read_text())
    task = Task.model_validate(g["task"])
    box = json.loads((TASK_DIR / "box.json").read_text())
    actions = [A.Logged.model_validate_json(line) for line in ACTIONS.read_text().splitlines() if line.strip()] \
        if ACTIONS.exists() else []
    extra = {}
    spec = verifier.spec_of(task)
    if spec is not None:
        _stop_the_agent()
        os.system("chown -R 1000:1000 /home/agent")   # files a root agent made: the agent's uid verifies them
        extra["verifier"] = verifier.verify(InPlaceSession(), spec, tests / "world")
        if extra["verifier"].get("no_report"):    # a published task's oracle leaves one (validation proved it)
            extra["verifier"] = replay.agent_failed(extra["verifier"])
    view = World(TASK_DIR / "world" / "world.sqlite").at(task.cutoff) if box.get("has_world") else None
    result = replay.grade_actions(task, actions, view, extra)
    VERIFIER_DIR.mkdir(parents=True, exist_ok=True)
    details = {"task_id": task.task_id, "family": task.family, "score": result.score,
               "points": f"{result.points:g}/{result.max_points:g}", "error_class": result.error_class,
               "message": result.message, "checks": result.checks, "actions": len(actions),
               "verifier": extra.get("verifier")}
    (VERIFIER_DIR / "grade.json").write_text(json.dumps(details, indent=1, default=str) + "\n")
    print(json.dumps({k: details[k] for k in ("task_id", "family", "score", "points", "error_class", "message")}))
    if result.score is None:
        print(f"no grade: {result.error_class}: {result.message}", file=sys.stderr)
        return 2
    (VERIFIER_DIR / "reward.json").write_text(json.dumps({"reward": result.score}) + "\n")
    (VERIFIER_DIR / "reward.txt").write_text(f"{result.score:g}\n")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        return serve()
    if argv[:1] == ["grade"] and len(argv) == 2:
        return grade(Path(argv[1]))
    print("usage: python3 -m taskmine.harbor_box serve | grade TESTS_DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
