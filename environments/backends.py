"""Which sandbox a run gets (`get_sandbox`): one Docker daemon, a pool of several (environments.pool), the local
fallback, or any registered backend (kind "sandbox" of core.registry: the Kubernetes one, a third party's).

Its own module above both environments.sandbox and environments.pool: the pool is built of the sandbox module's
Docker sessions, so choosing between them belongs to neither.
"""

from __future__ import annotations

from pathlib import Path

from core.hosts import hosts_from
from core.registry import registry
from environments.docker_cli import SandboxError, daemon_answers
from environments.pool import SandboxPool
from environments.sandbox import DockerSandbox, LocalSandbox, Sandbox, home_label


def get_sandbox(kind: str = "auto", home: Path | None = None, hosts=None) -> Sandbox:
    """The sandbox for `kind`: "docker", "local", "auto" (docker if a daemon answers within ~2 s), or any
    registered backend (`taskmine sandboxes list`). `home` labels the images a Docker sandbox builds, so that
    home's runs can prune them. For "docker" and "auto", Docker hosts named in TASKMINE_SANDBOX_HOSTS, else in
    `hosts` (a dataset's `sandbox_hosts`), make it a pool over those daemons (environments.pool); named hosts
    of which none answers are an error, never a silent fall back to "local"."""
    if kind == "local":
        return LocalSandbox()
    if kind in ("docker", "auto"):
        labels = {"taskmine.home": home_label(home)} if home else None
        specs, _ = hosts_from(hosts)
        if specs:
            return SandboxPool(specs, image_labels=labels)
        if daemon_answers(timeout=2.0):
            return DockerSandbox(image_labels=labels)
        if kind == "docker":
            raise SandboxError(
                "sandbox 'docker' requested but no Docker daemon answers; start dockerd "
                "(scripts/ci-docker.sh) or use sandbox 'local'"
            )
        return LocalSandbox()
    known = registry("sandbox").all()
    if kind in known:
        return known[kind].obj()
    raise ValueError(f"unknown sandbox kind {kind!r}; use 'auto' or one of: {', '.join(known)}")
