"""A private Docker daemon on this machine: a second host for the sandbox pool (its tests, `taskmine bench pool`).

`private_daemon()` starts `dockerd` as root with everything of its own (data root, exec root and so its own
containerd, pid file, a Unix socket in a fresh folder under /tmp), a bridge interface of its own (never
`--bridge none`, which deletes the machine's docker0; sandbox containers run with --network none anyway) and no
iptables or masquerading rules, so it touches nothing of the machine's own daemon. It yields the daemon's
DOCKER_HOST URL; on exit it removes the daemon's containers, stops it (SIGTERM, then SIGKILL), unmounts anything
it left mounted under its folder, deletes the folder (its images go with it) and its bridge.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from environments.docker_cli import SandboxError, daemon_answers, docker, last_line

START_TIMEOUT_S = 90


@contextlib.contextmanager
def private_daemon(timeout: float = START_TIMEOUT_S) -> Iterator[str]:
    """A running private dockerd (see the module docstring): its `unix://...` URL."""
    if os.geteuid() != 0:
        raise SandboxError("a private dockerd needs root; run as root, or name a second daemon you started with "
                           "--hosts / TASKMINE_SANDBOX_HOSTS")
    exe = shutil.which("dockerd")
    if exe is None:
        raise SandboxError("dockerd is not installed; install docker.io, or name a second daemon with --hosts")
    root = Path(tempfile.mkdtemp(prefix="tm-dockerd-", dir="/tmp"))   # short: socket paths have ~100 bytes
    url = f"unix://{root / 'docker.sock'}"
    bridge = _own_bridge(root)
    argv = [exe, "--data-root", str(root / "data"), "--exec-root", str(root / "x"), "--pidfile", str(root / "pid"),
            "-H", url, "--bridge", bridge or "none", "--iptables=false", "--ip-masq=false", "--log-level", "warn"]
    log = root / "dockerd.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        end = time.monotonic() + timeout
        while not daemon_answers(timeout=2, host=url):
            if proc.poll() is not None or time.monotonic() > end:
                why = f"exit {proc.returncode}" if proc.poll() is not None else f"no answer in {timeout:.0f}s"
                raise SandboxError(f"the private dockerd did not start ({why}): "
                                   f"{last_line(log.read_text(errors='replace'))}; its log: {log}")
            time.sleep(0.5)
        yield url
    finally:
        _stop(proc, url, root)
        if bridge:
            subprocess.run(["ip", "link", "delete", bridge], check=False, capture_output=True)


def _own_bridge(root: Path) -> str | None:
    """A bridge interface of the private daemon's own (removed after it). Not `--bridge none`: a dockerd whose
    bridge is disabled deletes the machine's `docker0` when it starts, and the machine's daemon then fails every
    `docker build` step that runs a command. None (and `none`, with that risk) when `ip` cannot make one."""
    if shutil.which("ip") is None:
        return None
    name = "tmbr" + "".join(c for c in root.name if c.isalnum())[-8:]
    net = f"10.231.{os.getpid() % 250}.1/24"
    for cmd in (["link", "add", "name", name, "type", "bridge"], ["addr", "add", net, "dev", name],
                ["link", "set", name, "up"]):
        if subprocess.run(["ip", *cmd], check=False, capture_output=True).returncode != 0:
            subprocess.run(["ip", "link", "delete", name], check=False, capture_output=True)
            return None
    return name


def _stop(proc: subprocess.Popen, url: str, root: Path) -> None:
    if proc.poll() is None:
        with contextlib.suppress(SandboxError):
            ids = docker("ps", "-aq", host=url, timeout=30, check=False).stdout.split()
            if ids:
                docker("rm", "--force", *ids, host=url, timeout=120, check=False)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    prefix = str(root.resolve()) + "/"
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
              if line.split()[1].startswith(prefix)]
    for mount in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
    shutil.rmtree(root, ignore_errors=True)
