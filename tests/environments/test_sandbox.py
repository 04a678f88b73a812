"""Sandbox behaviour, asserted from inside real runs (Docker tests need a daemon; see tests/conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from environments import backends, images, sandbox
from environments.docker_cli import SandboxError, docker
from environments.backends import get_sandbox
from environments.sandbox import DockerSandbox, LocalSandbox, Mount


@pytest.fixture
def world(tmp_path: Path) -> Path:
    w = tmp_path / "world"
    (w / "jira").mkdir(parents=True)
    (w / "issue.json").write_text(json.dumps({"key": "PROJ-7", "summary": "Login times out"}))
    (w / "notes.txt").write_text("the login service\n")
    return w


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def any_sandbox(request):
    return LocalSandbox() if request.param == "local" else request.getfixturevalue("docker_sandbox")


# --- behaviour shared by both sandboxes ---------------------------------------------------------------


def test_world_env_and_cwd(any_sandbox, world):
    r = any_sandbox.run(
        world, 'cat "$TASKMINE_WORLD/notes.txt"; echo "$FOO"; pwd; echo "$HOME"', env={"FOO": "bar"}
    )
    lines = r.stdout.splitlines()
    assert lines[:2] == ["the login service", "bar"]
    assert lines[2] == lines[3]  # cwd is the agent's home


def test_timeout_kills_the_command(any_sandbox, world):
    r = any_sandbox.run(world, "echo started; sleep 1000", timeout_s=3)
    assert r.timed_out and r.exit_code is None
    assert "started" in r.stdout


def test_background_children_do_not_outlive_the_run(any_sandbox, world):
    r = any_sandbox.run(world, "(sleep 1000 &) ; echo done", timeout_s=60)
    assert not r.timed_out and r.exit_code == 0 and r.stdout.strip() == "done"


def test_output_is_bounded(any_sandbox, world):
    r = any_sandbox.run(world, "head -c 1000000 /dev/zero | tr '\\0' a; echo END")
    assert r.stdout.endswith("END\n")
    assert len(r.stdout) < sandbox.OUTPUT_LIMIT + 100 and "bytes dropped" in r.stdout


def test_exit_code_is_reported(any_sandbox, world):
    assert any_sandbox.run(world, "exit 7").exit_code == 7


def test_no_network(any_sandbox, world):
    probe = "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3); print('CONNECTED')"
    r = any_sandbox.run(world, f'python3 -c "{probe}"', timeout_s=60)
    if not r.network_isolated:
        pytest.skip("this kernel does not let the local sandbox isolate the network")
    assert r.exit_code != 0 and "CONNECTED" not in r.stdout


def test_local_results_say_local_and_leak_no_host_env(world, monkeypatch):
    monkeypatch.setenv("TASKMINE_TEST_SECRET", "s3cret")
    r = LocalSandbox().run(world, "env")
    assert r.sandbox == "local" and r.image is None
    assert "s3cret" not in r.stdout and "TASKMINE_WORLD=" in r.stdout


def test_local_run_leaves_the_original_world_alone(world):
    LocalSandbox().run(world, 'rm -rf "$TASKMINE_WORLD"/* 2>/dev/null; echo x > "$TASKMINE_WORLD/new"')
    assert sorted(p.name for p in world.iterdir()) == ["issue.json", "jira", "notes.txt"]


def test_bad_env_is_refused(world):
    with pytest.raises(ValueError):
        LocalSandbox().run(world, "true", env={"A=B": "x"})


# --- get_sandbox --------------------------------------------------------------------------------------


def test_get_sandbox_kinds(monkeypatch):
    monkeypatch.setattr(backends, "daemon_answers", lambda timeout=2.0: False)
    assert isinstance(get_sandbox("local"), LocalSandbox)
    assert isinstance(get_sandbox("auto"), LocalSandbox)
    with pytest.raises(SandboxError, match="no Docker daemon answers"):
        get_sandbox("docker")
    with pytest.raises(ValueError):
        get_sandbox("nomad")
    assert get_sandbox("kubernetes").kind == "kubernetes"   # registered; it reaches no cluster until a session
    monkeypatch.setattr(backends, "daemon_answers", lambda timeout=2.0: True)
    assert isinstance(get_sandbox("auto"), DockerSandbox)


# --- docker: hardening flags (no daemon needed) and behaviour (daemon needed) -------------------------


def test_container_args_carry_every_hardening_flag(tmp_path):
    args = DockerSandbox(base_image="img", pids_limit=99, memory="2g", cpus=0.5).container_args(
        "taskmine-x", "img", 300, (Mount(tmp_path, "/world/git"),), {"TASKMINE_TOOLS": "/run/company/tools.sock"}
    )
    joined = " ".join(args)
    for flag in (
        "--rm",
        "--network none",
        "--read-only",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--user 1000:1000",
        "--pids-limit 99",
        "--memory 2g",
        "--memory-swap 2g",
        "--cpus 0.5",
        "--log-driver none",
        "--tmpfs /tmp:",
        "--tmpfs /home/agent:",
        "--env TASKMINE_TOOLS=/run/company/tools.sock",
        "--label taskmine.sandbox=1",
        "--label taskmine.owner=",
        "--label taskmine.deadline=",
    ):
        assert flag in joined, flag
    # host folders only read-only; every writable place is a size-limited tmpfs
    mounts = [args[i + 1] for i, a in enumerate(args) if a == "--mount"]
    assert mounts == [f"type=bind,source={tmp_path.resolve()},target=/world/git,readonly"]
    assert "-v" not in args and "--volume" not in args
    assert all("size=" in args[i + 1] for i, a in enumerate(args) if a == "--tmpfs")
    assert "docker.sock" not in joined and "--privileged" not in joined
    assert args[-6:] == ["img", "-I", images.SUPERVISE_PATH, "init", "--deadline", "300"]
    assert args[args.index("--entrypoint") + 1] == "python3"


def _docker_lines(sb, world, command, **kw) -> list[str]:
    r = sb.run(world, command, **kw)
    assert not r.timed_out, r
    return r.stdout.splitlines()


@pytest.mark.docker
def test_docker_identity_and_privileges(docker_sandbox, world):
    out = _docker_lines(
        docker_sandbox, world, "id -u; id -g; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status"
    )
    assert out[:2] == ["1000", "1000"]
    assert out[2].split() == ["CapEff:", "0000000000000000"]
    assert out[3].split() == ["NoNewPrivs:", "1"]


@pytest.mark.docker
def test_docker_network_interfaces_are_only_loopback(docker_sandbox, world):
    assert _docker_lines(docker_sandbox, world, "ls /sys/class/net") == ["lo"]


@pytest.mark.docker
def test_docker_filesystem(docker_sandbox, world):
    cmd = (
        "touch /usr/x 2>/dev/null && echo usr-writable; touch /world/x 2>/dev/null && echo world-writable; "
        "echo hi > /world/issue.json 2>/dev/null && echo issue-writable; "
        "echo ok > /tmp/t && cat /tmp/t; echo ok > ~/h && cat ~/h; stat -c '%u %a' /world/issue.json; "
        "test -e /var/run/docker.sock || test -e /run/docker.sock || echo no-socket"
    )
    assert _docker_lines(docker_sandbox, world, cmd) == ["ok", "ok", "0 644", "no-socket"]


@pytest.mark.docker
def test_docker_limits_are_applied(docker_sandbox, world):
    tight = DockerSandbox(docker_sandbox.base_image, pids_limit=16, memory="256m",
                          image_labels=docker_sandbox.image_labels)
    out = _docker_lines(
        tight,
        world,
        "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max; "
        "cat /sys/fs/cgroup/memory.max 2>/dev/null || "
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
    )
    assert out == ["16", str(256 << 20)]
    r = tight.run(world, "for i in $(seq 40); do sleep 30 & done; wait", timeout_s=60)
    assert r.exit_code != 0 and "fork" in r.stderr.lower()


@pytest.mark.docker
def test_docker_timeout_removes_the_container(docker_sandbox, world):
    names = []

    class Recording(DockerSandbox):
        def container_args(self, name, *args, **kwargs):
            names.append(name)
            return super().container_args(name, *args, **kwargs)

    box = Recording(docker_sandbox.base_image, image_labels=docker_sandbox.image_labels)
    r = box.run(world, "sleep 1000", timeout_s=3)
    assert r.timed_out and r.exit_code is None
    assert names[0].startswith("taskmine-")
    assert docker("ps", "-aq", "--filter", f"name=^{names[0]}$").stdout.split() == []


@pytest.mark.docker
@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed to make the test repository")
def test_docker_agent_can_read_a_root_owned_git_world(docker_sandbox, world):
    repo = world / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    assert _docker_lines(docker_sandbox, world, "git -C /world/repo log --format=%s") == ["first"]


@pytest.mark.docker
def test_sessions_build_no_image_per_world(docker_sandbox, world, tmp_path):
    """A world is mounted, never baked: two different worlds run on the same image and add none (of this session's
    sandbox: images it builds carry its label, and a neighbour test process builds its own, under its own)."""
    labels = [a for k, v in docker_sandbox.image_labels.items() for a in ("--filter", f"label={k}={v}")]
    assert labels

    def images() -> list[str]:
        return sorted(set(docker("images", "-q", *labels).stdout.split()))

    before = images()
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.txt").write_text("another world\n")
    a, b = docker_sandbox.run(world, "cat /world/notes.txt"), docker_sandbox.run(other, "cat /world/x.txt")
    assert (a.stdout, b.stdout) == ("the login service\n", "another world\n")
    assert a.image == b.image == docker_sandbox.base_image
    # As a set: `docker images` orders images of the same creation second arbitrarily (CI saw two swap).
    assert images() == before


# --- images (no daemon needed) ------------------------------------------------------------------------


def test_world_hash_tracks_content_exec_bit_and_symlinks_not_mtime(world):
    h = images.world_hash(world)
    os.utime(world / "notes.txt", (1, 1))
    assert images.world_hash(world) == h
    (world / "notes.txt").chmod(0o755)
    h_exec = images.world_hash(world)
    assert h_exec != h
    (world / "link").symlink_to("notes.txt")
    assert images.world_hash(world) != h_exec


def test_world_hash_refuses_special_files(world):
    os.mkfifo(world / "pipe")
    with pytest.raises(SandboxError, match="not a file, folder or symlink"):
        images.world_hash(world)


def test_base_tag_changes_with_the_company_tool(monkeypatch):
    before = images.base_tag()
    assert before.startswith("taskmine-base:")
    monkeypatch.setattr(images, "company_tool_source", lambda: b"# another tool\n")
    assert images.base_tag() != before


def test_named_base_image_must_exist(monkeypatch):
    monkeypatch.setenv("TASKMINE_BASE_IMAGE", "nosuch/image:1")
    monkeypatch.setattr(images, "image_id", lambda ref: None)
    with pytest.raises(SandboxError, match="TASKMINE_BASE_IMAGE=nosuch/image:1 is not a local image"):
        images.ensure_base_image()
    monkeypatch.setattr(images, "image_id", lambda ref: "sha256:abc")
    assert images.ensure_base_image() == "nosuch/image:1"


def test_dockerfile_path_builds_the_same_recipe(monkeypatch):
    seen = {}

    def fake_docker(*args, stdin=None, **kw):
        with tarfile.open(fileobj=stdin) as tar:
            seen.update({m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()})
        seen["args"] = args

    monkeypatch.setattr(images, "docker", fake_docker)
    images._build_from_dockerfile("taskmine-base:test", progress=lambda msg: None)
    assert seen["Dockerfile"].startswith(f"FROM debian:{images.SUITE}-slim\n")
    assert "USER agent" in seen["Dockerfile"] and "ENV TASKMINE_WORLD=/world" in seen["Dockerfile"]
    assert seen["supervise"] == images.supervise_source().decode()
    assert seen["setup.sh"] == images.SETUP_SCRIPT
    assert seen["company"] == images.company_tool_source().decode()
    assert seen["args"][-3:] == ("-t", "taskmine-base:test", "-")
