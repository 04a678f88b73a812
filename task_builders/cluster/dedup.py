"""Near-duplicate groups: MinHash over word 3-grams, LSH banding, exact Jaccard to confirm.

Invariants:
- Two texts are near-duplicates when the exact Jaccard similarity of their word 3-gram sets is at least
  the threshold and they do not name different things: when both name issue keys or code identifiers
  (`snake_case` words, backticked names) and no name is common to both, they are two requests that read
  alike ("which release has the fix for CORE-1?" / "... CORE-17?"), not copies. MinHash/LSH only
  proposes candidate pairs (126 hashes in 42 bands of 3 rows: a pair
  with Jaccard 0.5 is proposed with probability 1 - (1 - 0.5^3)^42 > 0.996, one with 0.2 only 0.29).
- Groups are the connected components of the near-duplicate relation (union-find), so a chain of
  near-copies is one group; the representative is the earliest member (then the smallest id).
- Deterministic: fixed hash seeds (blake2b, not Python's salted `hash`), stable output order.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from privacy.identity import UnionFind
from task_builders.cluster.families import ADDRESS
from task_builders.mining import KEY

NUM_PERM = 126
BANDS = 42
ROWS = NUM_PERM // BANDS
PRIME = (1 << 61) - 1
_rng = np.random.default_rng(20240611)
_A = _rng.integers(1, 1 << 32, NUM_PERM, dtype=np.uint64)
_B = _rng.integers(0, 1 << 32, NUM_PERM, dtype=np.uint64)
WORD = re.compile(r"[\w'-]+", re.UNICODE)
ANCHOR = re.compile(rf"{KEY.pattern}|`[^`\n]{{2,60}}`|\b[a-z][a-z0-9]*_[a-z0-9_]+\b")


def shingles(text: str, n: int = 3) -> set[int]:
    """32-bit hashes of the text's lower-cased word n-grams (the whole text when it is shorter); e-mail
    addresses and URLs count as one word each, whatever they are (the account a request is about)."""
    words = WORD.findall(ADDRESS.sub(" addr ", text).lower())
    grams = [" ".join(words[i:i + n]) for i in range(max(1, len(words) - n + 1))] if words else [""]
    return {int.from_bytes(hashlib.blake2b(g.encode(), digest_size=4).digest(), "little") for g in grams}


def anchors(text: str) -> frozenset[str]:
    """The issue keys and code identifiers a text names (backticked calls reduced to their name)."""
    out = set()
    for m in ANCHOR.finditer(text):
        out.add(re.split(r"[(\s]", m.group(0).strip("`"), maxsplit=1)[0])
    return frozenset(x for x in out if x)


def compatible(a: frozenset[str], b: frozenset[str]) -> bool:
    return not a or not b or bool(a & b)


def signature(sh: set[int]) -> np.ndarray:
    x = np.fromiter(sh, dtype=np.uint64, count=len(sh))
    # a < 2^32 and x < 2^32, so a*x + b < 2^64: exact in uint64 before the reduction mod 2^61 - 1
    return ((np.outer(_A, x) + _B[:, None]) % PRIME).min(axis=1)


def jaccard(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def near_duplicate_groups(texts: Sequence[str],
                          threshold: float = 0.5) -> tuple[list[int], list[tuple[int, int, float]]]:
    """Group index per text (the smallest index in its group) and the confirmed pairs with their Jaccard."""
    sets = [shingles(t) for t in texts]
    names = [anchors(t) for t in texts]
    uf = UnionFind()
    pairs: list[tuple[int, int, float]] = []
    # identical texts are one group without any hashing
    first: dict[str, int] = {}
    for i, t in enumerate(texts):
        j = first.setdefault(t, i)
        if j != i:
            uf.union(j, i)
            pairs.append((j, i, 1.0))
    uniq = sorted(first.values())
    buckets: dict[tuple[int, bytes], list[int]] = defaultdict(list)
    for i in uniq:
        sig = signature(sets[i])
        for b in range(BANDS):
            buckets[(b, sig[b * ROWS:(b + 1) * ROWS].tobytes())].append(i)
    seen: set[tuple[int, int]] = set()
    for members in buckets.values():
        if len(members) < 2:
            continue
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                i, j = members[x], members[y]
                if (i, j) in seen or uf.find(i) == uf.find(j):
                    continue  # already known, or already one group: a big group costs ~n, not n^2, checks
                seen.add((i, j))
                s = jaccard(sets[i], sets[j])
                if s >= threshold and compatible(names[i], names[j]):
                    uf.union(i, j)
                    pairs.append((i, j, round(s, 4)))
    return [uf.find(i) for i in range(len(texts))], sorted(pairs)
