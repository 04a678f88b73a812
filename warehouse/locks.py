"""One writer per dataset: an advisory lock file under `$TASKMINE_HOME/state/locks/`.

Two runs of one dataset on one `$TASKMINE_HOME` (two `taskmine run`, or one and a click in the Dagster UI)
used to write the same tables and publish the same version folder over each other. Every writer takes
the dataset's lock first; the second one waits (saying who holds it) or, with `wait=False`, fails with one
line that names the holder.

Invariants:
- `fcntl.flock` on the lock file: the kernel releases it when the holder dies (kill -9 included), so a
  crashed run never leaves a stale lock behind.
- Re-entrant within a process: `taskmine run` holds the lock for the whole run and every stage it runs
  (in the same process) takes it again without blocking.
- Inherited by the holder's own steps: under a multi-process or container executor a stage runs in a child
  process or a step container, which would wait for its parent forever. The holder writes its token
  (`TASKMINE_LOCK_TOKEN`, set by `share_with_steps` and passed to step containers in their environment) into the
  lock file; a process whose environment carries the same token, finding the lock taken, goes on as a re-entry.
  Only the holder's descendants (and the containers it starts) have the token; a token alone does not take a
  free lock.
- The file's content says who holds it (pid, what, since when); it is informational, never the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

_held: dict[str, list] = {}   # lock path -> [depth, open file]
_guard = threading.Lock()


TOKEN_ENV = "TASKMINE_LOCK_TOKEN"


def share_with_steps() -> str:
    """Give this process a lock token its children inherit (os.environ): the locks it takes from now on can be
    re-entered by its steps in other processes and containers. Returns the token."""
    return os.environ.setdefault(TOKEN_ENV, uuid.uuid4().hex)


def _held_by_our_run(path: Path) -> bool:
    token = os.environ.get(TOKEN_ENV)
    if not token:
        return False
    try:
        return json.loads(path.read_text() or "{}").get("token") == token
    except (OSError, ValueError):
        return False


class DatasetBusy(RuntimeError):
    """Another process is writing this dataset (raised only with wait=False)."""


def lock_path(home: Path, dataset: str) -> Path:
    return Path(home) / "state" / "locks" / f"{dataset}.lock"


def holder(path: Path) -> str:
    """Who holds (or last held) the lock, as a short phrase."""
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(info.get("since", 0)))
    return f"{info.get('what', 'a run')} (pid {info.get('pid', '?')}, since {since})"


@contextlib.contextmanager
def dataset_lock(home: Path, dataset: str, what: str, *, wait: bool = True,
                 on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the dataset's write lock for the block (see the module docstring)."""
    path = lock_path(home, dataset)
    key = str(path)
    with _guard:
        if key in _held:
            _held[key][0] += 1
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield
        finally:
            with _guard:
                _held[key][0] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")  # noqa: SIM115 (held across the yield, closed in the finally below)
    try:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if _held_by_our_run(path):    # our parent (the run's holder) has it: a step of that run goes on
                f.close()
                yield
                return
            who = holder(path)
            if not wait:
                raise DatasetBusy(f"{dataset} is being written by {who}; wait for it to finish "
                                  f"(or stop it) and run again") from None
            if on_wait:
                on_wait(f"{dataset} is being written by {who}; waiting for it to finish")
            fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "what": what, "since": time.time(),
                            **({"token": os.environ[TOKEN_ENV]} if os.environ.get(TOKEN_ENV) else {})}))
        f.flush()
        with _guard:
            _held[key] = [1, f]
        try:
            yield
        finally:
            with _guard:
                del _held[key]
    finally:
        f.close()   # closing the descriptor releases the flock
