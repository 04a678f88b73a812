"""The 2-D map of the families: a PNG scatter of the items' embeddings projected by PCA."""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f", "#393b79", "#637939")


TSNE_MAX = 3000  # above this many points the map is the PCA projection (t-SNE is O(n log n) but slow here)


def project(vectors: np.ndarray) -> np.ndarray:
    """(n, 2) coordinates: t-SNE (seeded, PCA-initialised, so deterministic) for up to `TSNE_MAX` points,
    which keeps families apart on the map; above that, or below 6 points, the first two principal
    components."""
    if 6 <= len(vectors) <= TSNE_MAX:
        # scikit-learn and matplotlib are heavy: loaded only when the map is drawn
        from sklearn.manifold import TSNE

        xy = TSNE(n_components=2, perplexity=min(30.0, (len(vectors) - 1) / 3), init="pca", random_state=0,
                  metric="cosine", max_iter=500).fit_transform(vectors.astype(np.float64))
        return np.round(xy, 4)
    return _pca(vectors)


def _pca(vectors: np.ndarray) -> np.ndarray:
    if len(vectors) == 0:
        return np.zeros((0, 2))
    centered = vectors - vectors.mean(axis=0)
    if len(vectors) < 3:
        return np.pad(centered[:, :2], ((0, 0), (0, max(0, 2 - centered.shape[1]))))[:, :2]
    _, _, vt = np.linalg.svd(centered, full_matrices=False)
    comps = vt[:2]
    comps *= np.sign(comps[np.arange(len(comps)), np.abs(comps).argmax(axis=1)])[:, None]
    xy = centered @ comps.T
    return np.pad(xy, ((0, 0), (0, 2 - xy.shape[1])))


def family_map(xy: np.ndarray, labels: Sequence[int], names: Sequence[str], sizes: Sequence[int],
               title: str) -> bytes:
    """PNG bytes: one dot per distinct request (size grows with its near-duplicate count), coloured by
    family; the largest families are named at their centroid."""
    # scikit-learn and matplotlib are heavy: loaded only when the map is drawn
    import matplotlib

    matplotlib.use("Agg")
    # scikit-learn and matplotlib are heavy: loaded only when the map is drawn
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6.5), dpi=90)
    labels = np.asarray(labels)
    sizes = np.asarray(sizes, dtype=float)
    for fam in sorted(set(labels.tolist())):
        sel = labels == fam
        color = PALETTE[fam] if fam < len(PALETTE) else "#c7c7c7"
        ax.scatter(xy[sel, 0], xy[sel, 1], s=18 + 10 * np.sqrt(sizes[sel]), c=color, alpha=0.75,
                   edgecolors="white", linewidths=0.5, label=f"{names[fam]} ({int(sizes[sel].sum())})"
                   if fam < len(PALETTE) else None)
        if fam < len(PALETTE):
            cx, cy = xy[sel].mean(axis=0)
            ax.annotate(names[fam], (cx, cy), fontsize=7, ha="center", va="bottom", color="#222222")
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
    if len(set(labels.tolist())):
        ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
