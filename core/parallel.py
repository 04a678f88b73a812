"""A stage's per-record work in bounded chunks over worker processes, with the same output as one process.

`chunked(items, size)` cuts a stream into lists of at most `size`; `fork_map(fn, chunks, workers, state)` runs
`fn(state, chunk)` on each, in fork-started processes when `workers` > 1, and yields the results in the chunks'
order (at most `2 * workers` chunks in flight, so memory holds a few chunks, not the stream). The workers are forked
from the caller after it built `state` (a dataset's anonymizer, the leak audit's rules): they inherit it, nothing is
pickled but the chunks and the results, and what the caller computed globally (identities, the vault's pseudonyms,
what discovery found) is the same in every worker.

The contract for `fn`: its result for a chunk depends only on `state` as it was at the fork and on the chunk, never
on which chunks the same process handled before (a cache is fine; a counter or a table that grows with what it
sees must be returned and merged by the caller). That is what makes the output the same for every `workers` and
chunk size; the tests of each user hold it (tests/privacy/test_chunked_anonymize.py).

`workers(setting)` is the number a config's `workers = 0` means: the cores this process may use.

Fork, not spawn: the state is a loaded spaCy model and a dataset's tables, too big to pickle per worker, and fork
is what the platforms we run on (Linux, in containers too) have; where it is missing the work runs in-process.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_STATE: dict[str, Any] = {}   # what the forked workers inherit: the caller's state and function


def cores() -> int:
    """CPUs this process may run on: its affinity mask, lowered by a cgroup v2 CPU quota if one is set."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def workers(setting: int) -> int:
    """The worker processes a config's `workers` asks for: 0 = every core this process may use."""
    return setting if setting > 0 else cores()


def chunk_size(total: int, workers: int, limit: int) -> int:
    """Records per chunk for `total` records over `workers`: at most `limit` (the config's bound on memory), and
    small enough that each worker gets about four chunks, so a small dataset still spreads and the last chunk is
    not one worker's long tail. The output does not depend on it (the module's contract)."""
    if workers <= 1:
        return max(1, limit)
    return max(1, min(limit, -(-total // (4 * workers))))


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """`items` as consecutive lists of at most `size` (the last may be shorter)."""
    it = iter(items)
    while chunk := list(islice(it, max(1, size))):
        yield chunk


def _call(chunk: Any) -> Any:
    return _STATE["fn"](_STATE["state"], chunk)


def fork_map(fn: Callable[[Any, list[T]], R], chunks: Iterable[list[T]], workers: int, state: Any = None
             ) -> Iterator[R]:
    """`fn(state, chunk)` for every chunk, in order; in `workers` fork-started processes when `workers` > 1 (and the
    platform forks), else here. At most `2 * workers` chunks are submitted and not yet yielded."""
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for chunk in chunks:
            yield fn(state, chunk)
        return
    if _STATE:
        raise RuntimeError("fork_map is already running in this process: nest the work in one map instead")
    _STATE.update(fn=fn, state=state)
    # The caller's objects out of the collector's reach while the workers live: a collection in a worker would
    # write to every object's header and so copy the parent's whole heap into it (fork shares it until written).
    gc.freeze()
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            pending: deque = deque()
            for chunk in chunks:
                pending.append(pool.submit(_call, chunk))
                if len(pending) >= 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
    except BrokenProcessPool as exc:
        raise RuntimeError(f"a worker process of {getattr(fn, '__name__', fn)} died (killed, or out of memory): "
                           "lower `workers` or `chunk_events` in the dataset's taskmine.toml and run again") from exc
    finally:
        _STATE.clear()
        gc.unfreeze()


class Spill:
    """Chunks kept on disk between two passes of a stage: a stage whose next pass needs what the last one learned
    from every chunk (the secret values every chunk found, the people the last pass finds in prose) holds one
    chunk in memory, not the dataset. One pickle file per chunk in a folder of its own under `parent` (on the
    warehouse's disk: the records may be private); `drain` reads them back in order, removing each once read, and
    leaving the `with` block removes the folder whatever happened."""

    def __init__(self, parent: Path):
        parent.mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="spill-", dir=parent))
        self.chunks = 0

    def put(self, chunk: list) -> None:
        (self.folder / f"{self.chunks:09d}.pickle").write_bytes(pickle.dumps(chunk, protocol=5))
        self.chunks += 1

    def drain(self) -> Iterator[list]:
        n, self.chunks = self.chunks, 0
        for k in range(n):
            path = self.folder / f"{k:09d}.pickle"
            chunk = pickle.loads(path.read_bytes())
            path.unlink()
            yield chunk

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
