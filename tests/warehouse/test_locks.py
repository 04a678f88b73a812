"""One writer per dataset: a second run waits or says who is running; a killed holder frees the lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from warehouse.locks import DatasetBusy, dataset_lock, lock_path

HOLD = """
import sys, time
from pathlib import Path
from warehouse.locks import dataset_lock
with dataset_lock(Path(sys.argv[1]), "acme", "taskmine run"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(home, seconds):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(home), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_is_told_who_holds_the_dataset(tmp_path):
    proc = _holder(tmp_path, 30)
    try:
        busy = rf"acme is being written by taskmine run \(pid {proc.pid}, since"
        with pytest.raises(DatasetBusy, match=busy), dataset_lock(tmp_path, "acme", "publish", wait=False):
            pass
        with dataset_lock(tmp_path, "other", "publish", wait=False):   # other datasets are not blocked
            pass
    finally:
        proc.kill()
        proc.wait()


def test_a_waiting_writer_goes_on_when_the_first_finishes(tmp_path):
    proc = _holder(tmp_path, 1.5)
    said = []
    t0 = time.monotonic()
    with dataset_lock(tmp_path, "acme", "publish", on_wait=said.append):
        waited = time.monotonic() - t0
    proc.wait()
    assert waited > 0.5 and said and "waiting" in said[0]


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    proc = _holder(tmp_path, 60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with dataset_lock(tmp_path, "acme", "publish", wait=False):
        assert lock_path(tmp_path, "acme").exists()


def test_the_lock_is_reentrant_in_one_process(tmp_path):
    with dataset_lock(tmp_path, "acme", "taskmine run"):
        with dataset_lock(tmp_path, "acme", "publish", wait=False):   # the run's own publish step
            pass
        proc = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                               "from warehouse.locks import dataset_lock\n"
                               "with dataset_lock(Path(sys.argv[1]), 'acme', 'x', wait=False): pass", str(tmp_path)],
                              capture_output=True, text=True)
        assert proc.returncode != 0 and "DatasetBusy" in proc.stderr   # still held by the outer block


def test_the_holders_steps_in_other_processes_re_enter_it(tmp_path, monkeypatch):
    """Under the multiprocess or docker executor the run's publish step is a child process (or a container) of
    the process holding the lock: with the holder's token it goes on; a process without it still waits."""
    from warehouse.locks import TOKEN_ENV, share_with_steps

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    token = share_with_steps()
    assert os.environ[TOKEN_ENV] == token and share_with_steps() == token     # one token per process
    step = ("import sys; from pathlib import Path; from warehouse.locks import dataset_lock\n"
            "with dataset_lock(Path(sys.argv[1]), 'acme', 'publish', wait=False): print('in')")
    with dataset_lock(tmp_path, "acme", "taskmine run"):
        child = subprocess.run([sys.executable, "-c", step, str(tmp_path)], capture_output=True, text=True)
        assert child.returncode == 0 and child.stdout.strip() == "in", child.stderr
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        other = subprocess.run([sys.executable, "-c", step, str(tmp_path)], capture_output=True, text=True, env=env)
        assert other.returncode != 0 and "DatasetBusy" in other.stderr
        env[TOKEN_ENV] = "another-run"
        other = subprocess.run([sys.executable, "-c", step, str(tmp_path)], capture_output=True, text=True, env=env)
        assert other.returncode != 0 and "DatasetBusy" in other.stderr
    # a token alone takes no lock: with nobody holding it, the step holds it itself (and writes its token)
    child = subprocess.run([sys.executable, "-c", step, str(tmp_path)], capture_output=True, text=True)
    assert child.returncode == 0 and token in lock_path(tmp_path, "acme").read_text()
