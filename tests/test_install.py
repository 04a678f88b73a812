"""The README's setup on machines unlike the one CI runs on.

CI runs on a machine that already has docker.io and the CPU torch wheel, which once hid two install bugs:
`scripts/ci-docker.sh` took the `docker` client for an engine, and pyproject.toml bound torch to a wheel
at an absolute path of this machine. These tests drive the scripts' decision logic (TASKMINE_SETUP_PLAN=1
prints the plan and installs nothing) with a PATH and pip configuration that describe other machines.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASH = shutil.which("bash") or "/bin/bash"


def _bin(tmp_path: Path, fakes: dict[str, str]) -> Path:
    """A PATH folder with the few real tools the scripts use and the given fake commands (name -> sh body)."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in ("dirname", "timeout", "sed", "grep", "cut", "sha256sum", "uname", "id", "python3"):
        real = shutil.which(tool)
        if real:
            (d / tool).symlink_to(real)
    for name, body in fakes.items():
        (d / name).write_text(f"#!/bin/sh\n{body}\n")
        (d / name).chmod(0o755)
    return d


def _plan(script: str, path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": str(path), "HOME": os.environ.get("HOME", "/root"), "TASKMINE_SETUP_PLAN": "1",
            "PIP_CONFIG_FILE": os.devnull}
    return subprocess.run([BASH, str(ROOT / "scripts" / script)], capture_output=True, text=True,
                          env={**base, **env}, timeout=60, check=False)


# --- Docker engine ----------------------------------------------------------------------------------------

NO_DAEMON = 'echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock" >&2; exit 1'


def test_a_docker_client_without_an_engine_installs_docker_io(tmp_path):
    """The fresh machine of our kind: a `docker` client on PATH, no dockerd, no daemon answering."""
    r = _plan("ci-docker.sh", _bin(tmp_path, {"docker": NO_DAEMON}))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["install:", "docker.io", "debootstrap"]


def test_an_installed_engine_is_only_started(tmp_path):
    r = _plan("ci-docker.sh", _bin(tmp_path, {"docker": NO_DAEMON, "dockerd": "exit 0", "debootstrap": "exit 0"}))
    assert r.stdout.strip() == "install: nothing", r.stdout + r.stderr


def test_a_daemon_that_answers_needs_no_engine_here(tmp_path):
    """A remote or rootless daemon (DOCKER_HOST) answers `docker info`: no docker.io, no dockerd needed."""
    r = _plan("ci-docker.sh", _bin(tmp_path, {"docker": "exit 0", "debootstrap": "exit 0"}))
    assert r.stdout.strip() == "install: nothing", r.stdout + r.stderr


def test_no_docker_at_all_installs_docker_io(tmp_path):
    r = _plan("ci-docker.sh", _bin(tmp_path, {"debootstrap": "exit 0"}))
    assert r.stdout.strip() == "install: docker.io", r.stdout + r.stderr


# --- torch --------------------------------------------------------------------------------------------------

def test_no_dependency_is_bound_to_a_path_of_this_machine():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    sources = project.get("tool", {}).get("uv", {}).get("sources", {})
    for name, spec in sources.items():
        for s in spec if isinstance(spec, list) else [spec]:
            assert "path" not in s or not Path(s["path"]).is_absolute(), f"{name} is bound to {s['path']}"
    lock = (ROOT / "uv.lock").read_text()
    assert not re.search(r'(path|url) = "(file://)?/(opt|home|root|tmp|work)/', lock)


def _pins(path: Path) -> dict[str, set[str]]:
    pins: dict[str, set[str]] = {}
    for m in re.finditer(r"^([A-Za-z0-9_.-]+)==([^ ;\\]+)", path.read_text(), re.MULTILINE):
        pins.setdefault(m.group(1).lower(), set()).add(m.group(2))
    return pins


@pytest.mark.parametrize("name", ["torch-pypi.txt", "torch-cpu.txt"])
def test_torch_requirements_agree_with_the_lock(name):
    """`uv run` syncs the lock inexactly: a package pinned both here and in uv.lock at different versions
    would be changed back and forth. Every shared pin must be the lock's, and torch the project's pin."""
    pins = _pins(ROOT / "requirements" / name)
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    locked = {p["name"]: p["version"] for p in lock["package"]}
    torch_pin = re.search(r'"torch==([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert {v.split("+")[0] for v in pins["torch"]} == {torch_pin}
    for pkg, versions in pins.items():
        if pkg != "torch" and pkg in locked:
            assert locked[pkg] in versions, f"{name} pins {pkg} {versions}, uv.lock has {locked[pkg]}"
    assert all("--hash=sha256:" in block for block in
               re.split(r"\n(?=[A-Za-z])", (ROOT / "requirements" / name).read_text()) if "==" in block)


def test_without_the_cpu_wheel_torch_comes_from_pypi(tmp_path):
    r = _plan("setup.sh", _bin(tmp_path, {}), TASKMINE_WHEELS=str(tmp_path), PIP_FIND_LINKS="")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "torch: pypi"


def test_a_wheel_with_another_hash_is_not_used(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    version = next(iter(_pins(ROOT / "requirements" / "torch-cpu.txt")["torch"]))
    fake = wheels / f"torch-{version}-cp311-cp311-manylinux_2_28_{os.uname().machine}.whl"
    fake.write_bytes(b"not the wheel")
    r = _plan("setup.sh", _bin(tmp_path, {}), TASKMINE_WHEELS=str(wheels), PIP_FIND_LINKS="")
    assert r.stdout.strip() == "torch: pypi"
    assert "sha256 differs" in r.stderr


def _cpu_wheel() -> Path | None:
    text = (ROOT / "requirements" / "torch-cpu.txt").read_text()
    version = next(iter(_pins(ROOT / "requirements" / "torch-cpu.txt")["torch"]))
    digest = re.search(r"^torch==.*\n\s+--hash=sha256:([0-9a-f]+)", text, re.MULTILINE).group(1)
    for d in filter(None, (os.environ.get("PIP_FIND_LINKS") or "").split() + ["/opt/wheels"]):
        for f in Path(d).glob(f"torch-{version}-*.whl") if Path(d).is_dir() else ():
            if hashlib.sha256(f.read_bytes()).hexdigest() == digest:
                return f
    return None


def test_the_cpu_wheel_is_found_through_pips_find_links(tmp_path):
    wheel = _cpu_wheel()
    if wheel is None:
        pytest.skip("this machine has no CPU torch wheel in pip's find-links")
    r = _plan("setup.sh", _bin(tmp_path, {}), PIP_FIND_LINKS=str(wheel.parent))
    assert r.stdout.strip() == f"torch: cpu {wheel.parent}"
