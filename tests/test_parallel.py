"""core.parallel: a stage's chunks over fork-started workers come back in order with what one process gives, and a
worker that dies is a one-line error that says what to lower."""

from __future__ import annotations

import os

import pytest

from core import parallel


def _sum(state: int, chunk: list[int]) -> tuple[int, int]:
    return os.getpid(), sum(chunk) + state


def _die(state, chunk):
    os._exit(1)


def test_chunks_come_back_in_order_with_what_one_process_gives():
    chunks = list(parallel.chunked(range(103), 10))
    assert [len(c) for c in chunks] == [10] * 10 + [3]
    one = list(parallel.fork_map(_sum, chunks, 1, 7))
    two = list(parallel.fork_map(_sum, chunks, 2, 7))
    assert [r for _, r in one] == [r for _, r in two] == [sum(c) + 7 for c in chunks]
    assert {p for p, _ in one} == {os.getpid()}
    assert os.getpid() not in {p for p, _ in two}      # the work ran in the workers


def test_a_worker_that_dies_says_what_to_lower():
    with pytest.raises(RuntimeError, match="lower `workers` or `chunk_events`"):
        list(parallel.fork_map(_die, [[1], [2]], 2))
    assert list(parallel.fork_map(_sum, [[1]], 2, 0))[0][1] == 1     # the next map starts clean


def test_chunk_size_gives_each_worker_several_chunks_under_the_bound():
    assert parallel.chunk_size(2618, 2, 500) == 328
    assert parallel.chunk_size(10**6, 2, 500) == 500
    assert parallel.chunk_size(5, 2, 500) == 1
    assert parallel.chunk_size(10**6, 1, 500) == 500
    assert parallel.workers(0) == parallel.cores() >= 1 and parallel.workers(3) == 3
