"""The sandbox pool (environments.pool) and sessions on a Docker daemon that cannot see this machine's files.

The Docker tests run against two daemons on different sockets: the machine's own and a private dockerd this test
session starts as root (`second_docker_host`, tests/conftest.py: its own data root, exec root, pid file and socket,
no bridge; the base image loaded by save | load; removed at the end). "Remote" is forced with `files="copy"`: the
second daemon runs on this machine, but its sessions then get their folders copied in and the tool socket relayed,
exactly as on another machine, and nothing of this machine is mounted into their containers.
The speed of the pool is not a test here: `taskmine bench pool`.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from tiny_company import episode_world

from environments.docker_cli import SandboxError, daemon_answers, docker, image_id
from environments.episode import Episode
from environments.pool import HOSTS_ENV, HostSpec, PoolConfigError, SandboxPool, hosts_from, parse_hosts
from environments.backends import get_sandbox
from environments.sandbox import DockerSandbox, HostLost

DEFAULT = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


# --- configuration ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entries, hosts", [
    ("unix:///var/run/docker.sock", [HostSpec("unix:///var/run/docker.sock", 1)]),
    ("unix:///var/run/docker.sock*3, ssh://ci@build-2*4 files=copy",
     [HostSpec("unix:///var/run/docker.sock", 3), HostSpec("ssh://ci@build-2", 4, "copy")]),
    (["tcp://10.0.0.7:2376*2", {"url": "ssh://build-3", "concurrency": 5, "files": "bind"}],
     [HostSpec("tcp://10.0.0.7:2376", 2), HostSpec("ssh://build-3", 5, "bind")]),
])
def test_host_entries(entries, hosts):
    assert list(parse_hosts(entries)) == hosts
    assert list(parse_hosts([str(h) for h in hosts])) == hosts     # the canonical form reads back the same


@pytest.mark.parametrize("entry, says", [
    ("tcp://10.0.0.7", "needs its port"),
    ("ftp://host*2", "must start with unix://, tcp://, ssh://"),
    ("unix://relative/docker.sock", "unix:///absolute/path"),
    ("unix:///run/docker.sock*0", "from 1 to 64"),
    ("unix:///run/docker.sock*two", "not a whole number"),
    ("unix:///run/docker.sock*2 speed=fast", "unknown option"),
    ("ssh://build*2 files=nfs", "files must be one of auto, bind, copy"),
    ({"url": "ssh://build", "slots": 2}, "unknown key 'slots'"),
    ("unix:///run/docker.sock*1, unix:///run/docker.sock*2", "listed twice"),
])
def test_a_bad_host_entry_is_one_line_that_names_it(entry, says):
    with pytest.raises(PoolConfigError) as err:
        parse_hosts(entry if isinstance(entry, str) else [entry], "TASKMINE_SANDBOX_HOSTS")
    message = str(err.value)
    assert "\n" not in message and says in message and "TASKMINE_SANDBOX_HOSTS" in message
    assert "URL*N" in message or "listed twice" in message


def test_the_environment_wins_over_the_dataset_config(monkeypatch):
    monkeypatch.delenv(HOSTS_ENV, raising=False)
    assert hosts_from(None) == ((), "")
    assert hosts_from(["ssh://a*2"]) == ((HostSpec("ssh://a", 2),), "taskmine.toml")
    monkeypatch.setenv(HOSTS_ENV, "ssh://b*3")
    assert hosts_from(["ssh://a*2"]) == ((HostSpec("ssh://b", 3),), HOSTS_ENV)


def test_sandbox_hosts_in_taskmine_toml_are_checked_when_it_is_read(tmp_path):
    from core.config import ConfigError, load_config

    (tmp_path / "taskmine.toml").write_text('sandbox_hosts = ["unix:///var/run/docker.sock*2", '
                                            '{url = "tcp://build-2:2376", concurrency = 4, files = "copy"}]\n')
    assert load_config(tmp_path).sandbox_hosts == ("unix:///var/run/docker.sock*2", "tcp://build-2:2376*4 files=copy")
    (tmp_path / "taskmine.toml").write_text('sandbox_hosts = ["tcp://build-2*4"]\n')
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert "\n" not in str(err.value) and "sandbox_hosts" in str(err.value) and "needs its port" in str(err.value)


def test_taskmine_run_refuses_a_bad_host_before_any_work(taskmine_env, tmp_path, capsys, monkeypatch):
    from pipelines.cli import main

    monkeypatch.setenv(HOSTS_ENV, "")   # `run --sandbox-hosts` sets it: as it was again after this test
    (tmp_path / "exports").mkdir()
    rc = main(["run", "--exports", str(tmp_path / "exports"), "--sandbox-hosts", "tcp://build-2"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "sandbox host 'tcp://build-2'" in err and "needs its port" in err and "TASKMINE_DEBUG" not in err


def test_named_hosts_of_which_none_answers_are_an_error_not_a_local_fallback(monkeypatch, tmp_path):
    monkeypatch.setenv(HOSTS_ENV, f"unix://{tmp_path}/nobody.sock*2")
    with pytest.raises(SandboxError) as err:
        get_sandbox("auto")
    assert "no host of the sandbox pool answers" in str(err.value) and "\n" not in str(err.value)


def test_leases_go_to_the_freest_host_and_wait_when_every_host_is_full():
    pool = SandboxPool([HostSpec("unix:///a.sock", 2), HostSpec("unix:///b.sock", 1)], check=False)
    a, b = pool.members
    got = [pool._acquire() for _ in range(3)]
    assert got == [a, b, a] and pool.capacity == 3
    waiting: list = []
    done = threading.Event()
    t = threading.Thread(target=lambda: (waiting.append(pool._acquire()), done.set()), daemon=True)
    t.start()
    assert not done.wait(0.5)               # all three slots are taken: it waits
    pool._release(b)
    assert done.wait(10) and waiting == [b]  # the slot freed is the one it gets
    pool._mark_lost(a, "test")
    assert pool.capacity == 1 and pool.live() == [b]


# --- two daemons ----------------------------------------------------------------------------------------------



AS_HELPER = "for p in /proc/[0-9]*; do [ \"$(stat -c %u $p)\" = 1001 ] && echo ${p#/proc/}; done"


@pytest.mark.docker
def test_an_episode_on_a_daemon_that_cannot_see_our_files(second_docker_host, tmp_path):
    """files="copy": the git view is copied in and the tool socket relayed over `docker exec`; the container has
    nothing of this machine mounted (no socket of any daemon either), the agent can write neither folder nor
    signal the helper processes, and the tools still answer after it tried."""
    worlds, world, shas = episode_world(tmp_path)
    box = DockerSandbox(host=second_docker_host, files="copy")
    assert box.shares_files() is False
    with Episode(worlds, world, box) as ep:
        name = ep.session.name
        assert docker("inspect", name, check=False).returncode != 0                  # not on the default daemon
        info = json.loads(docker("inspect", name, host=second_docker_host).stdout)[0]
        assert info["Mounts"] == [] and "docker.sock" not in json.dumps(info)
        assert set(info["HostConfig"]["Tmpfs"]) == {"/tmp", "/home/agent", "/run/company", "/world/git"}
        r = ep.exec("company jira show PROJ-1 | head -1; git -C ~/repo log --all --format=%s; "
                    "touch /run/company/x /world/git/x 2>&1; rm -f /run/company/tools.sock 2>&1; "
                    f"for p in $({AS_HELPER}); do kill -9 $p 2>&1; done; echo pids=$({AS_HELPER} | wc -l); "
                    f"company answer --sha {shas['Add the CSV export'][:7]}")
        out = r.stdout
        assert "PROJ-1: Login times out after password reset" in out
        assert "Add the CSV export\nAdd the login module" in out and "session pool" not in out
        assert out.count("Permission denied") >= 3 and "Operation not permitted" in out
        assert "pids=0" not in out and "recorded #1: answer" in out      # the relay survived the kills
        assert [e.action.sha for e in ep.actions] == [shas["Add the CSV export"][:7]]
    assert docker("inspect", name, host=second_docker_host, check=False).returncode != 0   # removed


@pytest.mark.docker
def test_a_world_folder_is_copied_read_only_on_a_remote_daemon(second_docker_host, tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "issue.json").write_text('{"key": "PROJ-7"}')
    r = DockerSandbox(host=second_docker_host, files="copy").run(
        tmp_path / "w", "cat /world/issue.json; echo; touch /world/x 2>&1; id -u", timeout_s=60)
    assert r.stdout.splitlines() == ['{"key": "PROJ-7"}', "touch: cannot touch '/world/x': Permission denied",
                                     "1000"]


@pytest.mark.docker
def test_a_pool_spreads_work_over_two_daemons_within_each_concurrency(second_docker_host, docker_sandbox):
    from graders.stages import each_task

    pool = SandboxPool([HostSpec(DEFAULT, 1), HostSpec(second_docker_host, 2)])
    assert pool.capacity == 3
    lock = threading.Lock()
    running = {DEFAULT: 0, second_docker_host: 0}
    most = dict(running)

    def work(box, i):
        with lock:
            running[box.host] += 1
            most[box.host] = max(most[box.host], running[box.host])
        try:
            with box.session(deadline_s=120) as s:
                # the container is on the daemon the lease named, and only there
                seen = docker("ps", "-q", "--filter", f"name={s.name}", host=box.host).stdout.strip()
                r = s.exec("sleep 1; echo ran", timeout_s=60)
            return box.host, bool(seen), r.stdout.strip()
        finally:
            with lock:
                running[box.host] -= 1

    results = [out for _, out in each_task(list(range(9)), work, pool)]
    assert all(seen and out == "ran" for _, seen, out in results)
    hosts = [h for h, _, _ in results]
    assert set(hosts) == {DEFAULT, second_docker_host}
    assert most[DEFAULT] <= 1 and most[second_docker_host] <= 2
    assert sum(pool.dispatched().values()) == 9


@pytest.mark.docker
def test_a_session_outside_a_lease_gets_its_image_copied_to_the_free_host(second_docker_host, docker_sandbox,
                                                                          tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "f.txt").write_text(f"world {uuid.uuid4().hex}\n")
    labels = {"taskmine.home": docker_sandbox.image_labels["taskmine.home"]}
    pool = SandboxPool([HostSpec(DEFAULT, 1), HostSpec(second_docker_host, 1)], image_labels=labels)
    tag = pool.prepare(tmp_path / "w")                       # outside a lease: built on the first host
    assert image_id(tag) is not None and image_id(tag, host=second_docker_host) is None
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool.lease():                                   # the first host's only slot
            held.set()
            release.wait(60)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    assert held.wait(60)
    try:
        with pool.session(image=tag, deadline_s=120) as s:
            assert s.host == second_docker_host
            assert s.exec("cat /world/f.txt").stdout == (tmp_path / "w" / "f.txt").read_text()
    finally:
        release.set()
        t.join(30)
    assert image_id(tag, host=second_docker_host) == image_id(tag)       # the same image, by save | load


@pytest.mark.docker
def test_a_host_gone_before_its_lease_is_left_out_and_the_work_goes_elsewhere(docker_sandbox, tmp_path, capfd):
    dead = f"unix://{tmp_path}/gone.sock"
    pool = SandboxPool([HostSpec(dead, 1), HostSpec(DEFAULT, 1)], check=False)   # the dead one comes first
    assert pool.call(lambda box: box.host) == DEFAULT
    assert [m.url for m in pool.live()] == [DEFAULT]
    assert f"host {dead} left the pool: it stopped answering" in capfd.readouterr().err


@pytest.mark.docker
def test_work_whose_host_is_lost_runs_again_on_another_host(docker_sandbox, capfd):
    """A third daemon dies in the middle of a task's session: the session says HostLost (infrastructure), the host
    leaves the pool, and the task runs again on the host that is left."""
    from bench.dockerd import private_daemon
    from environments.docker_cli import copy_image

    with private_daemon() as third:
        copy_image(docker_sandbox.base_image, None, third)
        pool = SandboxPool([HostSpec(third, 1), HostSpec(DEFAULT, 1)])
        ran: list[str] = []

        def work(box):
            ran.append(box.host)
            with box.session(deadline_s=120) as s:
                if box.host == third:
                    os.kill(int((Path(third[len("unix://"):]).parent / "pid").read_text()), signal.SIGTERM)
                    while daemon_answers(timeout=2, host=third):
                        time.sleep(0.2)
                    with pytest.raises(HostLost):
                        s.exec("echo never")
                    return "infra"          # what replay records for it: an infra row, not a score
                return s.exec("echo ran").stdout.strip()

        assert pool.call(work) == "ran"
        assert ran == [third, DEFAULT] and [m.url for m in pool.live()] == [DEFAULT]
    assert f"host {third} left the pool" in capfd.readouterr().err


@pytest.mark.docker
@pytest.mark.slow
def test_validation_over_two_daemons_one_remote(second_docker_host, docker_sandbox, sample_company,
                                                tmp_path_factory, monkeypatch):
    """Two communication tasks of the sample, validated by the validations stage over a pool of the default daemon and
    the second one as a remote host (copy mode): each host validates one, both valid, rows of kind docker."""
    from core.config import DatasetConfig
    from graders import replay
    from graders.stages import validations
    from taskmine import flow
    from warehouse.store import Store

    store = Store(tmp_path_factory.mktemp("pool") / "home")
    config = DatasetConfig(ner_model="", families=("email_reply", "chat_answer"), baselines=False, repeats=1)
    ctx = flow.context(store, "acme", sample_company / "acme", config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items", "world", "tasks")
    picked = {}
    for t in store.read("tasks", "acme"):
        picked.setdefault(t.family, t.task_id)
    monkeypatch.setenv(HOSTS_ENV, f"{DEFAULT}*1, {second_docker_host}*1 files=copy")
    pool = get_sandbox("docker", home=store.home)
    assert isinstance(pool, SandboxPool) and pool.capacity == 2
    res = validations(ctx.replace(sandbox=pool), only=picked.values())
    rows = [v for v in store.read("validations", "acme") if v.task_id in picked.values()]
    assert res.counts["validated_now"] == 2
    assert res.counts["infra_errors"] == 0, [v.message for v in rows if v.error_class]
    assert {v.sandbox for v in rows} == {"docker"}
    tasks = {t.task_id: t for t in store.read("tasks", "acme")}
    for task_id in picked.values():
        runs = [v for v in rows if v.task_id == task_id]
        assert replay.judge(runs, replay.probe_limits(tasks[task_id]))[0], runs
        assert {(v.run_kind, v.score) for v in runs if v.run_kind in ("oracle", "null")} == {("oracle", 1.0),
                                                                                            ("null", 0.0)}
    assert pool.dispatched() == {DEFAULT: 1, second_docker_host: 1}
