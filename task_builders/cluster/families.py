"""Families of work items: clusters of their request texts' embeddings, labelled by their top terms.

Method (measured on the sample company, whose truth knows each item's family; numbers in
tests/task_builders/test_cluster_truth.py and the closing note of the issue):
- One point per near-duplicate group (its representative's vector), so 200 copies of one request
  count once and cannot outvote a family of 5 distinct requests; every member gets its group's family.
- Agglomerative clustering, average linkage over cosine distance, cut at `distance` (default 0.5):
  deterministic and stable on small and uneven families. HDBSCAN (scikit-learn) is available as
  `method="hdbscan"`; on the sample it scored lower and its result flipped between one giant cluster and
  many small ones as min_cluster_size moved by one, so it is not the default. Its noise points join the
  nearest family when their cosine to its centroid is >= 0.5, else stay families of their own.
- Above `MAX_EXACT` distinct points the average-linkage tree (O(n^2) memory) is built over k-means
  centroids (`MAX_EXACT` of them) instead, each point then taking its centroid's family.
- A family's label is its top 3 terms by class-based TF-IDF (terms frequent in the family, rare in the
  others; a term of a title or subject line counts twice, a text as often as its near-duplicate group is
  large); identifiers are split at `_` so `normalize_ttl` counts as "normalize" and "ttl"; capitalized
  words (mostly pseudonymized names) are left out.
- Family ids are stable for the same input: `f<rank>` by (size descending, smallest member index).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from task_builders.mining import KEY

MAX_EXACT = 4000
ADDRESS = re.compile(r"https?://\S+|\b[\w.+-]+@[\w-]+(\.[\w-]+)+\b")  # URLs and e-mail addresses
TOKEN = re.compile(r"[^\W\d_][^\W_]{2,}")
NAME = re.compile(r"^[A-Z][a-z]+$")  # a capitalized word: a (pseudonymized) name more often than a topic
STOP = frozenset("""a about above after again against all also am an and any are aren't as at be because been before
being below between both but by can cannot could did do does doing down during each few for from further had has
have having he her here hers him his how i if in into is it its itself just let me more most my no nor not now of off
on once only or other our ours out over own same she should so some such than that the their them then there these
they this those through to too under until up very was we were what when where which while who whom why will with
would you your yours hi hello dear thanks thank please regards best all team re fwd fw http https www com example
invalid org net calling call returns return instead expected actual steps reproduce import""".split())


def gist(text: str, limit: int = 300) -> str:
    """The part of a request that says what it is about: URLs, addresses and ticket keys removed,
    whitespace collapsed, the first `limit` characters (the subject and opening lines)."""
    text = KEY.sub(" ", ADDRESS.sub(" ", text))
    return re.sub(r"\s+", " ", text).strip()[:limit]


@dataclass(frozen=True)
class Families:
    labels: list[int]                 # family index per point, 0 = the largest family
    names: list[str]                  # label per family index
    terms: list[list[str]]            # top terms per family index


def _agglomerative(x: np.ndarray, distance: float) -> np.ndarray:
    # scikit-learn is heavy: loaded only when clustering runs
    from sklearn.cluster import AgglomerativeClustering, KMeans

    if len(x) == 1:
        return np.zeros(1, dtype=int)
    if len(x) <= MAX_EXACT:
        return AgglomerativeClustering(n_clusters=None, distance_threshold=distance, metric="cosine",
                                       linkage="average").fit_predict(x)
    km = KMeans(n_clusters=MAX_EXACT, n_init=1, random_state=0).fit(x)
    centers = km.cluster_centers_ / np.maximum(np.linalg.norm(km.cluster_centers_, axis=1, keepdims=True), 1e-12)
    top = AgglomerativeClustering(n_clusters=None, distance_threshold=distance, metric="cosine",
                                  linkage="average").fit_predict(centers)
    return top[km.labels_]


def _hdbscan(x: np.ndarray, min_cluster_size: int, attach: float = 0.5) -> np.ndarray:
    # scikit-learn is heavy: loaded only when clustering runs
    from sklearn.cluster import HDBSCAN

    if len(x) < max(2, min_cluster_size):
        return np.arange(len(x))
    labels = HDBSCAN(min_cluster_size=min_cluster_size, min_samples=1, copy=True).fit_predict(x)
    found = sorted(set(labels) - {-1})
    nxt = (max(found) + 1) if found else 0
    if found:
        cents = np.stack([x[labels == c].mean(axis=0) for c in found])
        cents /= np.maximum(np.linalg.norm(cents, axis=1, keepdims=True), 1e-12)
    for i in np.where(labels == -1)[0]:
        if found:
            sims = cents @ x[i]
            j = int(sims.argmax())
            if sims[j] >= attach:
                labels[i] = found[j]
                continue
        labels[i] = nxt
        nxt += 1
    return labels


def cluster(vectors: np.ndarray, texts: Sequence[str], *, method: str = "agglomerative", distance: float = 0.5,
            min_cluster_size: int = 3, weights: Sequence[int] | None = None) -> Families:
    """Family per row of `vectors` (unit-norm), with a label from `texts` (one per row)."""
    n = len(vectors)
    if n == 0:
        return Families([], [], [])
    if method == "agglomerative":
        raw = _agglomerative(vectors, distance)
    elif method == "hdbscan":
        raw = _hdbscan(vectors, min_cluster_size)
    else:
        raise ValueError(f"unknown clustering method {method!r}; use 'agglomerative' or 'hdbscan'")
    # stable ids: largest family first, ties by first member
    first: dict[int, int] = {}
    for i, c in enumerate(raw):
        first.setdefault(int(c), i)
    size = Counter(int(c) for c in raw)
    order = sorted(size, key=lambda c: (-size[c], first[c]))
    remap = {c: k for k, c in enumerate(order)}
    labels = [remap[int(c)] for c in raw]
    terms = top_terms(texts, labels, len(order), weights=weights)
    names = [" / ".join(t) if t else f"family {k}" for k, t in enumerate(terms)]
    return Families(labels, names, terms)


def _tokens(text: str) -> list[str]:
    text = gist(text, 2000).replace("_", " ")
    return [t.lower() for t in TOKEN.findall(text) if not NAME.match(t) and t.lower() not in STOP]


def top_terms(texts: Sequence[str], labels: Sequence[int], k: int, n: int = 3,
              weights: Sequence[int] | None = None) -> list[list[str]]:
    """Class-based TF-IDF: per family, the terms most frequent in it relative to all families; a text
    counts `weights[i]` times (the size of its near-duplicate group)."""
    per = [Counter() for _ in range(k)]
    for i, (text, lab) in enumerate(zip(texts, labels)):
        w = weights[i] if weights is not None else 1
        head = set(_tokens(text.split("\n", 1)[0]))        # the subject / title line says what it is about
        per[lab].update({t: w * (2 if t in head else 1) for t in set(_tokens(text))})
    df = Counter()
    for c in per:
        df.update(c.keys())
    sizes = Counter()
    for i, lab in enumerate(labels):
        sizes[lab] += weights[i] if weights is not None else 1
    out = []
    for lab, c in enumerate(per):
        scored = sorted(c.items(), key=lambda kv: (-(kv[1] / sizes[lab]) * np.log(1 + k / df[kv[0]]), kv[0]))
        out.append([t for t, _ in scored[:n]])
    return out
