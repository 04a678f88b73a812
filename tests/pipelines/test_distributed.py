"""The job under Dagster's distributed executors: the Kubernetes run config in the repository is one Dagster
accepts, the docker_executor's config for this machine is too (and gives the Docker socket to step containers
only), and the step image starts the entry point both executors run in it."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml
from dagster import validate_run_config
from dagster._core.errors import DagsterInvalidConfigError

ROOT = Path(__file__).resolve().parents[2]
K8S_CONFIG = ROOT / "deploy" / "k8s" / "run_config.yaml"


@pytest.fixture(scope="module")
def distributed():
    from pipelines import distributed

    return distributed


def test_the_kubernetes_run_config_loads(distributed):
    config = yaml.safe_load(K8S_CONFIG.read_text())
    job = distributed.defs.resolve_job_def("taskmine_job_k8s")
    resolved = validate_run_config(job, config)
    execution = resolved["execution"]["k8s"]     # resolved: by executor name, every default filled in
    assert execution["job_image"].split("/")[-1].startswith("taskmine-step:")
    assert "TASKMINE_HOME=/data/taskmine" in execution["env_vars"]
    # the socket only for the steps that start sandbox containers
    socket_steps = {step for step, c in execution["per_step_k8s_config"].items()
                    if any(v.get("hostPath", {}).get("path") == "/var/run/docker.sock"
                           for v in c.get("pod_spec_config", {}).get("volumes", []))}
    assert socket_steps == {"tasks", "validations"}
    assert not any(v.get("hostPath", {}).get("type") == "Socket" for v in execution["volumes"])


def test_a_wrong_kubernetes_setting_is_refused(distributed):
    config = yaml.safe_load(K8S_CONFIG.read_text())
    job = distributed.defs.resolve_job_def("taskmine_job_k8s")
    bad = copy.deepcopy(config)
    bad["execution"]["config"]["max_concurent"] = 8          # a typo Dagster's schema catches
    with pytest.raises(DagsterInvalidConfigError):
        validate_run_config(job, bad)
    bad = copy.deepcopy(config)
    bad["execution"]["config"]["volumes"] = [{"hostPath": {"path": "/data"}}]   # a volume needs a name
    with pytest.raises(DagsterInvalidConfigError):
        validate_run_config(job, bad)


def test_the_docker_executor_config_for_this_machine(distributed, taskmine_env, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setenv("TASKMINE_HOME", str(tmp_path / ("long-" * 12)))
    with pytest.raises(ValueError, match="too long for the docker executor"):
        distributed.docker_execution(image="taskmine-step:test")
    taskmine_env = Path(tempfile.mkdtemp(prefix="tm-", dir="/tmp"))      # short, as the socket needs
    monkeypatch.setenv("TASKMINE_HOME", str(taskmine_env))
    exports = tmp_path / "exports"
    exports.mkdir()
    monkeypatch.setenv("TASKMINE_EXPORTS", str(exports))
    monkeypatch.setenv("TASKMINE_LOCK_TOKEN", "t0k3n")
    execution = distributed.docker_execution(image="taskmine-step:test", dataset="acme")
    job = distributed.defs.resolve_job_def("taskmine_job_docker")
    validate_run_config(job, {"execution": {"config": execution}})
    volumes = execution["container_kwargs"]["volumes"]
    home = str(taskmine_env.resolve())
    assert volumes[home] == {"bind": home, "mode": "rw"}                 # the warehouse, at the same path
    assert volumes[str(exports)] == {"bind": str(exports), "mode": "ro"}
    tmp = next(e.split("=", 1)[1] for e in execution["env_vars"] if e.startswith("TMPDIR="))
    # inside the warehouse's mount (a rename from a world's repository into an episode's folder stays on one
    # mount), short enough for the tool server's socket
    assert Path(tmp).is_relative_to(home) and Path(tmp).is_dir() and len(tmp) <= 60
    assert volumes["/var/run/docker.sock"]["bind"] == "/var/run/docker.sock"
    assert "TASKMINE_LOCK_TOKEN" in execution["env_vars"]                # the steps re-enter the run's lock
    assert f"TASKMINE_HOME={home}" in execution["env_vars"]
    assert execution["container_kwargs"]["labels"] == {"taskmine.step": "1", "taskmine.step.dataset": "acme"}
    import shutil

    shutil.rmtree(taskmine_env)


def test_the_distributed_jobs_run_the_same_stages(distributed):
    from pipelines.definitions import defs

    keys = set(defs.resolve_job_def("taskmine_job").asset_layer.executable_asset_keys)
    for name in ("taskmine_job_docker", "taskmine_job_k8s"):
        job = distributed.defs.resolve_job_def(name)
        assert set(job.asset_layer.executable_asset_keys) == keys
        assert job.executor_def.name == name.removeprefix("taskmine_job_")


@pytest.mark.docker
def test_the_step_image_starts(distributed, docker_sandbox):
    from environments.docker_cli import docker, image_id

    existed = image_id(distributed.step_image_tag(docker_sandbox.base_image)) is not None
    image = distributed.step_image(progress=lambda m: None)
    checks = {
        ("dagster", "api", "execute_step", "--help"): "execute_step",      # what docker_executor / k8s run
        ("python3", "-c", "import pipelines.distributed as d; print(d.defs.resolve_job_def('taskmine_job_docker')"
                          ".executor_def.name)"): "docker",
        ("taskmine", "--help"): "taskmine run",
        ("docker", "--version"): "Docker version",                         # the sandbox's client
    }
    try:
        for cmd, expected in checks.items():
            r = subprocess.run(["docker", "run", "--rm", "--network", "none", image, *cmd], capture_output=True,
                               text=True, timeout=600)
            assert r.returncode == 0, f"{cmd}: {r.stderr[-2000:]}"
            assert expected in r.stdout, (cmd, r.stdout[-500:])
    finally:
        if not existed:      # only the image this test built: another run may be using an older one
            docker("rmi", "-f", image, check=False, timeout=300)


@pytest.mark.parametrize("executor", ["auto", "multiprocess", "in_process"])
def test_the_run_config_of_taskmine_run_is_one_the_job_accepts(executor):
    from pipelines.definitions import defs
    from pipelines.runner import run_config_for

    config = run_config_for(executor, repeats=2, parallel=2, started=1.0, prefix="acme: ")
    resolved = validate_run_config(defs.resolve_job_def("taskmine_job"), config)
    assert resolved["loggers"]["progress"]["config"] == {"started": 1.0, "prefix": "acme: "}
    if executor == "multiprocess":    # steps fork from a warmed-up server, two at a time
        mp = resolved["execution"]["multi_or_in_process_executor"]["multiprocess"]
        assert mp["max_concurrent"] == 2 and "forkserver" in mp["start_method"]
