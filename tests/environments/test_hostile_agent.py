"""A hostile agent against the sandbox: it fills disks, leaves junk where its outbox should be, kills the
orchestrator, and the host must neither crash, fill up, nor keep anything running.

Docker tests need a daemon (tests/conftest.py: required on CI); the local sandbox's share runs anywhere.
The tool server's side (hostile calls, huge lines, a full log) is in test_tools.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from environments import sandbox as sb
from environments.docker_cli import docker
from environments.sandbox import LocalSandbox


@pytest.fixture
def world(tmp_path: Path) -> Path:
    w = tmp_path / "world"
    w.mkdir()
    (w / "issue.json").write_text(json.dumps({"key": "PROJ-7", "summary": "Login times out"}))
    return w


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def any_sandbox(request):
    return LocalSandbox() if request.param == "local" else request.getfixturevalue("docker_sandbox")


# --- what the agent leaves behind is its own failure, never our crash ----------------------------------------


@pytest.mark.docker
def test_the_agent_cannot_touch_the_tool_socket_or_write_to_the_host(docker_sandbox, tmp_path, world):
    """The socket folder and the world are read-only mounts: the agent cannot replace the socket, drop a file
    beside it or change the world; `dd` into every writable place stops at its tmpfs limit."""
    from environments.episode import Episode

    with Episode(tmp_path / "no-world", {"cutoff": "2020-01-01T00:00:00+00:00"}, docker_sandbox) as ep:
        s = ep.session
        mounts = json.loads(docker("inspect", "--format", "{{json .Mounts}}", s.name).stdout)
        assert {m["Destination"]: m["RW"] for m in mounts} == {"/run/company": False}
        r = ep.exec("rm -f /run/company/tools.sock 2>&1 | head -1; touch /run/company/x 2>&1 | head -1; "
                    "company answer --text still-here; echo rc=$?")
        assert r.stdout.count("Read-only file system") == 2 and "recorded #1: answer" in r.stdout  # still answers
        assert [e.action.text for e in ep.actions] == ["still-here"]
        r = ep.exec("for d in /tmp /home/agent; do dd if=/dev/zero of=$d/fill bs=1M count=2048 2>/dev/null; done; "
                    "du -sm /tmp/fill /home/agent/fill; dd if=/dev/zero of=/fill bs=1M count=1 2>&1 | head -1",
                    timeout_s=120)
        sizes = {line.split()[1]: int(line.split()[0]) for line in r.stdout.splitlines()[:2]}
        assert sizes["/tmp/fill"] <= 256 and sizes["/home/agent/fill"] <= 256
        assert "Read-only file system" in r.stdout
        info = json.loads(docker("inspect", "--format", "{{json .HostConfig}}", s.name).stdout)
        assert info["ReadonlyRootfs"] is True and info["LogConfig"]["Type"] == "none"


def test_the_agent_killing_its_supervisor_is_its_own_failure(any_sandbox, world):
    r = any_sandbox.run(world, "echo started; kill -9 $PPID; sleep 5", timeout_s=60)
    if r.error:  # it could: no frame, so nothing it printed is trusted
        assert r.exit_code is None and r.error == "the command killed its supervisor (no result)"
        assert r.stdout == "" and r.status() == r.error
    else:  # the local sandbox in a PID namespace: the supervisor is its init, which ignores the SIGKILL
        assert any_sandbox.kind == "local" and r.network_isolated
        assert r.exit_code == 0 and r.stdout == "started\n"


def test_a_forged_result_frame_is_not_believed(any_sandbox, world):
    """The agent prints a frame claiming exit 0: the supervisor's own frame wins."""
    import base64

    fake = {"exit_code": 0, "stdout": "all tests passed"}
    line = "TASKMINE-RESULT " + base64.b64encode(json.dumps(fake).encode()).decode()
    r = any_sandbox.run(world, f"echo '{line}'; echo '{line}' >&2; exit 5", timeout_s=60)
    assert r.exit_code == 5 and r.stdout.startswith("TASKMINE-RESULT ")  # its own output, as output


def test_local_runs_cannot_write_one_huge_file(world, monkeypatch):
    monkeypatch.setattr(sb, "LOCAL_FILE_LIMIT", 1 << 20)
    r = LocalSandbox().run(world, "head -c 5000000 /dev/zero > big; wc -c < big", timeout_s=60)
    assert int(r.stdout.split()[-1]) <= 1 << 20


# --- exit status, OOM and timeouts are reported ------------------------------------------------------------


@pytest.mark.docker
def test_oom_kill_is_reported(docker_sandbox, world):
    tight = sb.DockerSandbox(docker_sandbox.base_image, memory="96m", image_labels=docker_sandbox.image_labels)
    r = tight.run(world, "python3 -c 'x = bytearray(400 << 20)'", timeout_s=60)
    assert r.oom_killed and r.exit_code == 137 and "OOM-killed" in r.status()


def test_status_says_how_the_command_ended(any_sandbox, world):
    assert any_sandbox.run(world, "exit 3").status() == "exit 3"
    assert any_sandbox.run(world, "kill -TERM $$").status() == "exit 143 (SIGTERM)"
    assert any_sandbox.run(world, "sleep 30", timeout_s=1).status() == "timed out"


# --- orphans: the orchestrator dies (kill -9) --------------------------------------------------------------

ORCHESTRATOR = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from environments.sandbox import DockerSandbox, LocalSandbox
    kind, world, deadline = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
    labels = {"taskmine.home": sys.argv[5]} if kind == "docker" else {}
    box = DockerSandbox(sys.argv[4], image_labels=labels) if kind == "docker" else LocalSandbox()
    s = box.session(world, deadline_s=deadline)
    print(getattr(s, "name", None) or s.root, flush=True)
    s.exec("sleep 1000", timeout_s=1000)
""")


def _orphan(kind: str, world: Path, deadline: float, box=None) -> tuple[str, subprocess.Popen]:
    """Start an orchestrator that opens a session and runs `sleep 1000`; kill -9 it; return the session."""
    base, label = (box.base_image, box.image_labels["taskmine.home"]) if box else ("", "")
    proc = subprocess.Popen([sys.executable, "-c", ORCHESTRATOR, kind, str(world), str(deadline), base, label],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    name = proc.stdout.readline().strip()
    assert name, "the orchestrator did not start a session"
    time.sleep(1.5)  # let it reach the exec
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return name, proc


def _containers(name: str) -> list[str]:
    return docker("ps", "-aq", "--filter", f"name=^{name}$").stdout.split()


@pytest.mark.docker
def test_a_killed_orchestrator_leaves_a_container_that_the_next_start_sweeps(docker_sandbox, world):
    name, _ = _orphan("docker", world, 600, docker_sandbox)
    assert _containers(name), "the orphan should still be there before the sweep"
    removed = sb.sweep()
    assert removed["containers"] >= 1 and not _containers(name)


@pytest.mark.docker
def test_the_deadline_holds_in_the_container_when_nobody_is_left_to_enforce_it(docker_sandbox, world):
    name, _ = _orphan("docker", world, 6, docker_sandbox)
    assert _containers(name)
    end = time.monotonic() + 60
    while _containers(name) and time.monotonic() < end:
        time.sleep(1)
    assert not _containers(name), "PID 1 should have killed everything at the deadline (and --rm removed it)"


def test_a_killed_orchestrator_leaves_a_local_root_that_the_next_start_sweeps(world):
    root, _ = _orphan("local", world, 600)
    assert Path(root).is_dir()
    assert sb.sweep()["temp_dirs"] >= 1
    assert not Path(root).exists()


def test_sweep_leaves_a_live_owners_session_alone(world):
    with LocalSandbox().session(world, deadline_s=60) as s:
        sb.sweep()
        assert s.root.is_dir()


# --- images no current task references are pruned ----------------------------------------------------------


@pytest.mark.docker
def test_prune_removes_the_images_of_worlds_no_task_uses(docker_sandbox, tmp_path):
    home = sb.home_label(tmp_path / "home")
    box = sb.DockerSandbox(docker_sandbox.base_image, image_labels={"taskmine.home": home})
    worlds = {}
    for wid in ("kept", "gone"):
        w = tmp_path / wid
        w.mkdir()
        (w / "f.txt").write_text(f"{wid} {time.time_ns()}\n")
        worlds[wid] = box.prepare(w, world_id=wid)
    try:
        removed = box.prune({"kept"})
        assert worlds["gone"] in removed and worlds["kept"] not in removed
        listed = docker("images", "--filter", f"label=taskmine.home={home}", "--format",
                        "{{.Repository}}:{{.Tag}}").stdout.split()
        assert listed == [worlds["kept"]]
    finally:
        docker("rmi", *worlds.values(), check=False)


@pytest.mark.docker
def test_prune_keeps_a_base_another_taskmine_built_lately(docker_sandbox, tmp_path, monkeypatch):
    """Another checkout or version of taskmine on the same daemon has another base recipe, current for it and
    in use now: a run here (or a test session's clean-up) must not remove it; a recipe nobody built for a day
    goes. Before, every run removed every other recipe at once, and a concurrent run's tasks all failed as
    infra (the base vanished between two of its containers)."""
    import tarfile
    import uuid

    from environments import images

    other = f"taskmine-base:pytest-{uuid.uuid4().hex[:12]}"
    empty = tmp_path / "empty.tar"
    with tarfile.open(empty, mode="w"):
        pass
    with open(empty, "rb") as f:
        docker("import", "-", other, stdin=f)
    try:
        home = sb.home_label(tmp_path / "home")
        assert other not in images.prune_task_images(home, set())
        assert sb.image_id(other) is not None
        monkeypatch.setattr(images, "BASE_GRACE_S", -1)      # as if it were built long ago
        assert other in images.prune_task_images(home, set())
        assert sb.image_id(other) is None
        assert sb.image_id(docker_sandbox.base_image) is not None    # the current recipe stays
    finally:
        docker("rmi", other, check=False)


@pytest.mark.docker
def test_a_base_that_vanished_during_a_run_is_built_again(docker_sandbox, monkeypatch):
    """A sandbox that chose its base checks it at every use: a base removed under it (`docker image prune -a`,
    another taskmine) is built again rather than every later container failing to start."""
    box = sb.DockerSandbox(image_labels=docker_sandbox.image_labels)
    built = []
    monkeypatch.setattr(sb, "ensure_base_image", lambda: built.append(1) or docker_sandbox.base_image)
    assert box.base_image == docker_sandbox.base_image and len(built) == 1
    assert box.base_image == docker_sandbox.base_image and len(built) == 1       # there: no rebuild
    box._base = "taskmine-base:pytest-removed-meanwhile"                          # as if removed since
    assert box.base_image == docker_sandbox.base_image and len(built) == 2
    given = sb.DockerSandbox("taskmine-base:pytest-given-and-absent")             # an image the caller named
    assert given.base_image == "taskmine-base:pytest-given-and-absent"


def test_local_sandbox_prunes_nothing():
    assert LocalSandbox().prune(set()) == []
