"""The same job with each step in its own container: dagster-docker's `docker_executor` on one Docker host, and
dagster-k8s's `k8s_job_executor` on a Kubernetes cluster.

A code location of its own (`dagster dev -m pipelines.distributed`, or the module a deployment loads), so the root
(`pipelines.definitions`) stays free of the docker and kubernetes clients: its `defs` are the root's plus
`taskmine_job_docker` and `taskmine_job_k8s`, the same assets and checks under another executor.

The step image (`step_image`): the project and its installed environment on the sandbox's base image
(`environments.images.ensure_base_image`: Debian's python3, git), built locally, no registry: the site-packages
of the interpreter running this (the locked environment `uv sync` made, torch included) as a site directory,
the project's packages beside them, the `docker` client, and `dagster`/`taskmine` commands. Tagged
`taskmine-step:<hash of base image, packages, source>`, so an unchanged tree reuses it.

What a step container gets (`docker_execution`):
- the warehouse (TASKMINE_HOME, with the Dagster instance under it when DAGSTER_HOME is there) mounted read-write
  at the same path, so every step reads and writes the tables the others do, and paths stored in rows (worlds,
  repositories) mean the same inside and out; the exports read-only at the same path;
- a temp folder shared with the host at the same path (TMPDIR, `<home>/tmp`: inside the warehouse's mount, so
  a rename between the two never crosses mounts): the sandbox mounts folders it makes there (a code task's tree,
  the tool server's socket) into task containers, and the Docker daemon resolves a mount's path on the host;
- the Docker socket, because the tasks and validations steps start the sandbox's task containers. Only step
  containers get it: they run the pipeline's own code, as trusted as `taskmine run` on the host (the socket is
  root on the host). Task containers, where agent code runs, never get it: the sandbox mounts only the world
  (read-only) and the tool server's socket into them (environments/sandbox.py);
- the host's network (this machine's daemon has no bridge; the code_change stage installs test dependencies
  from the registry), the run's lock token and the settings every stage reads (TASKMINE_*, HF_HUB_OFFLINE, ...).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sysconfig
import tarfile
import tempfile
import tomllib
from pathlib import Path

from dagster import AssetSelection, Definitions, define_asset_job
from dagster_docker import docker_executor
from dagster_k8s import k8s_job_executor

from pipelines.assets import datasets
import taskmine
from core.registry import own_metadata
from environments.docker_cli import docker, image_id
from environments.images import ensure_base_image
from pipelines.definitions import defs as root
from warehouse.store import default_home

STEP_REPOSITORY = "taskmine-step"
STEP_LABEL = "taskmine.step"
# Settings a step reads from the environment (forwarded when set on the host).
FORWARDED_ENV = ("TASKMINE_EXPORTS", "TASKMINE_SANDBOX", "TASKMINE_SALT", "TASKMINE_LOCK_TOKEN",
                 "TASKMINE_BASE_IMAGE", "TASKMINE_LLM_MODEL", "TASKMINE_LLM_API_BASE", "TASKMINE_LLM_API_KEY",
                 "DAGSTER_HOME", "HF_HUB_OFFLINE", "LITELLM_LOCAL_MODEL_COST_MAP", "DAGSTER_DISABLE_TELEMETRY")

taskmine_job_docker = define_asset_job(
    "taskmine_job_docker", selection=AssetSelection.all(), partitions_def=datasets, executor_def=docker_executor,
    description="Every stage for one dataset, each step in its own container (dagster-docker's docker_executor; "
                "run config from pipelines.distributed.docker_execution).")


def _k8s_job():
    return define_asset_job(
        "taskmine_job_k8s", selection=AssetSelection.all(), partitions_def=datasets, executor_def=k8s_job_executor,
        description="Every stage for one dataset, each step a Kubernetes Job (dagster-k8s's k8s_job_executor; "
                    "run config: deploy/k8s/run_config.yaml).")


def _definitions() -> Definitions:
    return Definitions.merge(root, Definitions(jobs=[taskmine_job_docker, _k8s_job()]))


defs = _definitions()


# --- the step image ---------------------------------------------------------------------------------------

def project_root() -> Path:
    return Path(taskmine.__file__).resolve().parent.parent


def project_packages(root: Path) -> list[str]:
    """The project's packages as the wheel lists them (pyproject.toml): what the step image copies."""
    with open(root / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"])


def _source_files(root: Path) -> list[Path]:
    files = [root / "pyproject.toml"]
    for pkg in project_packages(root):
        files += [p for p in sorted((root / pkg).rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    return files


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def _site_entries(site: Path) -> list[Path]:
    """What of site-packages goes into the image: everything but the editable install of this project (its .pth
    names this checkout's path) and caches."""
    return [p for p in sorted(site.iterdir()) if not p.name.startswith(("_editable_impl_taskmine", "__editable__"))
            and not (p.name.startswith("taskmine-") and p.name.endswith(".dist-info")) and p.name != "__pycache__"]


def step_image_tag(base: str) -> str:
    """`taskmine-step:<hash>` of the base image's id, the installed distributions and the project's source."""
    h = hashlib.sha256(f"step/1\0{image_id(base) or base}\0".encode())
    site = _site_packages()
    for entry in _site_entries(site):
        h.update(entry.name.encode() + b"\0")
    root = project_root()
    for f in _source_files(root):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return f"{STEP_REPOSITORY}:{h.hexdigest()[:16]}"


DOCKERFILE = """\
FROM {base}
USER root
COPY site/ /usr/local/lib/python3.11/dist-packages/
COPY src/ /opt/taskmine/
COPY bin/ /usr/local/bin/
RUN echo /opt/taskmine > /usr/local/lib/python3.11/dist-packages/taskmine-src.pth \\
 && python3 -c "import dagster, pipelines.definitions, environments.sandbox; from core.registry import KINDS, \\
registry; [registry(k).all() for k in KINDS]"
ENV HOME=/root PYTHONDONTWRITEBYTECODE=1 DAGSTER_DISABLE_TELEMETRY=1 HF_HUB_OFFLINE=1
WORKDIR /opt/taskmine
LABEL {label}=1
"""

LAUNCHER = """#!/usr/bin/python3
import sys
from {module} import main
sys.exit(main())
"""


def step_image(progress=print) -> str:
    """The step image's tag, built (from the local base image, no registry) when it does not exist yet."""
    base = ensure_base_image(progress)
    tag = step_image_tag(base)
    if image_id(tag):
        return tag
    docker_cli = shutil.which("docker")
    if not docker_cli:
        raise RuntimeError("the `docker` command is not installed; install docker.io")
    progress(f"building the step image {tag} on {base} (the project and its installed packages; no registry)")
    site, root = _site_packages(), project_root()
    with tempfile.TemporaryFile() as ctx:
        with tarfile.open(fileobj=ctx, mode="w") as tar:
            def add_bytes(name: str, data: bytes, mode: int = 0o644) -> None:
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), mode
                tar.addfile(info, io.BytesIO(data))

            add_bytes("Dockerfile", DOCKERFILE.format(base=base, label=STEP_LABEL).encode())
            for entry in _site_entries(site):
                tar.add(entry, arcname=f"site/{entry.name}",
                        filter=lambda i: None if "__pycache__" in i.name else i)
            for f in _source_files(root):
                tar.add(f, arcname=f"src/{f.relative_to(root)}")
            for name, path in own_metadata().items():    # the entry points: how the registry finds built-ins
                tar.add(path, arcname=f"site/{name}")
            add_bytes("bin/dagster", LAUNCHER.format(module="dagster._cli").encode(), 0o755)
            add_bytes("bin/taskmine", LAUNCHER.format(module="pipelines.cli").encode(), 0o755)
            tar.add(docker_cli, arcname="bin/docker")
        ctx.seek(0)
        docker("build", "-q", "--network", "host", "-t", tag, "-", stdin=ctx, timeout=3600)
    return tag


# --- the docker_executor's run config ---------------------------------------------------------------------

def shared_tmp() -> Path:
    """The temp folder shared by the host and the step containers at the same path: inside the warehouse, so a
    file made in one and renamed into the other stays on one mount (git writes a pack next to the world's
    repository and renames it into an episode's folder; rename(2) across two bind mounts fails even on one file
    system), and short, since the tool server's socket lives under it (environments.episode.socket_root)."""
    d = default_home() / "tmp"
    if len(str(d)) > 60:
        raise ValueError(f"TASKMINE_HOME {default_home()} is too long for the docker executor (the tool server's "
                         "socket lives under <home>/tmp, at most 60 characters); use a shorter TASKMINE_HOME")
    d.mkdir(mode=0o1777, parents=True, exist_ok=True)
    d.chmod(0o1777)
    return d


def docker_execution(image: str | None = None, max_concurrent: int = 0, socket: str = "/var/run/docker.sock",
                     network: str = "host", dataset: str = "") -> dict:
    """The `execution` config of `taskmine_job_docker` for this machine (see the module docstring); the step
    containers are labelled with the dataset, so a run cleans up only its own."""
    home = default_home()
    home.mkdir(parents=True, exist_ok=True)
    tmp = shared_tmp()
    volumes = {str(home): {"bind": str(home), "mode": "rw"},       # the shared temp folder is inside it
               socket: {"bind": "/var/run/docker.sock", "mode": "rw"}}
    dagster_home = os.environ.get("DAGSTER_HOME")
    if dagster_home and not Path(dagster_home).resolve().is_relative_to(home):
        volumes[dagster_home] = {"bind": dagster_home, "mode": "rw"}
    exports = os.environ.get("TASKMINE_EXPORTS")
    if exports:
        volumes[exports] = {"bind": exports, "mode": "ro"}
    env = [k for k in FORWARDED_ENV if os.environ.get(k)] + [f"TMPDIR={tmp}", f"TASKMINE_HOME={home}"]
    config: dict = {
        "image": image or step_image(),
        "network": network,
        "env_vars": list(dict.fromkeys(env)),
        "container_kwargs": {"volumes": volumes, "user": "0:0",
                             "labels": {STEP_LABEL: "1", f"{STEP_LABEL}.dataset": dataset}},
    }
    if max_concurrent:
        config["max_concurrent"] = max_concurrent
    return config


def remove_step_containers(dataset: str) -> int:
    """Remove the exited step containers of a dataset's run (docker_executor leaves them for their logs)."""
    proc = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={STEP_LABEL}=1", "--filter",
                           f"label={STEP_LABEL}.dataset={dataset}", "--filter", "status=exited"],
                          capture_output=True, text=True, timeout=60)
    ids = proc.stdout.split()
    if ids:
        subprocess.run(["docker", "rm", *ids], capture_output=True, timeout=120)
    return len(ids)
