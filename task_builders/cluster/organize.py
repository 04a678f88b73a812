"""Organize work items: near-duplicate groups, embeddings, families, the 2-D map and the splits.

Steps (each item's text is its request: title/subject and the text it adds, `signals.request_text`):
1. near-duplicate groups over the full request texts (dedup.py); the earliest item of a group (an issue
   before the resolution item of the same issue) is its representative, the only one a task is built from;
2. one embedding per group, of the representative's `gist` (subject and opening lines, no URLs or keys),
   through the content-hash cache (embed.py): a re-run embeds only new text;
3. families over the group vectors (families.py); every member takes its group's family;
4. the map: PCA of the group vectors, one dot per group;
5. splits by family or group, optionally by time, with the canary on test (splits.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.config import DatasetConfig
from privacy.anonymize import unsalted
from task_builders.cluster.dedup import near_duplicate_groups
from task_builders.cluster.embed import embed_cached
from task_builders.cluster.families import cluster, gist
from task_builders.cluster.plot import family_map, project
from task_builders.cluster.splits import assign_splits, canary
from task_builders.signals import request_text
from warehouse.schemas import Cluster, Event, WorkItem


@dataclass
class Organized:
    rows: list[Cluster]
    counts: dict
    preview: list[dict]
    families: list[dict] = field(default_factory=list)   # per family: id, label, size, groups, examples
    map_png: bytes = b""


def organize(store, dataset: str, items: Sequence[WorkItem], events: Mapping[str, Event],
             config: DatasetConfig, embed=None) -> Organized:
    """Cluster rows for `items`. `embed(texts) -> (vectors, stats)` defaults to the warehouse cache."""
    if embed is None:
        def embed(texts):
            return embed_cached(store, dataset, texts)

    # earliest first; of the items sharing one request (an issue and its resolution note) the issue leads
    items = sorted(items, key=lambda i: (i.ts, i.kind != "issue", i.item_id))
    if not items:
        return Organized([], {"work_items": 0, "families": 0, "near_duplicate_groups": 0}, [])
    texts = [request_text(events[i.request_event_id]) if i.request_event_id in events else "" for i in items]
    # groups, vectors and families are made from the texts without their pseudonyms (privacy.anonymize.unsalted):
    # they, and the splits drawn from them, are the same whatever fake names the salt drew
    plain = [unsalted(t) for t in texts]
    group_of, pairs = near_duplicate_groups(plain, config.near_duplicate_threshold)
    reps = sorted(set(group_of))
    rep_index = {r: k for k, r in enumerate(reps)}
    members = Counter(group_of)
    vectors, stats = embed([gist(plain[r]) for r in reps])
    vectors = np.asarray(vectors, dtype=np.float32)
    fams = cluster(vectors, [plain[r] for r in reps], method=config.cluster_method,
                   distance=config.cluster_distance, weights=[members[r] for r in reps])
    xy = project(vectors)
    fam_of_item = [fams.labels[rep_index[g]] for g in group_of]
    fam_ids = [f"f{f:02d}" for f in fam_of_item]
    group_ids = [items[g].item_id for g in group_of]
    split = assign_splits(dataset, [i.item_id for i in items], fam_ids, group_ids, [i.ts for i in items],
                          test_share=config.test_share, split_by=config.split_by, test_after=config.test_after)
    fam_size = Counter(fam_of_item)
    mark = canary(dataset)
    rows = []
    for n, item in enumerate(items):
        g = group_of[n]
        k = rep_index[g]
        rows.append(Cluster(
            item_id=item.item_id, dataset=dataset, kind=item.kind, ts=item.ts, family=fam_ids[n],
            family_label=fams.names[fam_of_item[n]], family_size=fam_size[fam_of_item[n]],
            dup_group=group_ids[n], dup_count=members[g], representative=(g == n), split=split[n],
            canary=mark if split[n] == "test" else "", x=round(float(xy[k, 0]), 5), y=round(float(xy[k, 1]), 5)))
    members_of: list[list[int]] = [[] for _ in fams.names]
    for n, f in enumerate(fam_of_item):
        members_of[f].append(n)
    families = []
    for f, idx in enumerate(members_of):
        groups = sorted({group_of[n] for n in idx})
        families.append({"family": f"f{f:02d}", "label": fams.names[f], "items": len(idx), "groups": len(groups),
                         "kinds": dict(Counter(items[n].kind for n in idx).most_common()),
                         "split": split[idx[0]] if len({split[n] for n in idx}) == 1 else "mixed",
                         "examples": [gist(texts[g], 100) for g in groups[:3]]})
    dup_sizes = sorted((c for c in members.values() if c > 1), reverse=True)
    counts = {
        "work_items": len(items), "families": len(fams.names),
        "near_duplicate_groups": sum(1 for c in members.values() if c > 1),
        "near_duplicates_collapsed": sum(c - 1 for c in members.values()),
        "largest_near_duplicate_group": dup_sizes[0] if dup_sizes else 1,
        "representatives": len(reps), "test_items": split.count("test"), "train_items": split.count("train"),
        "embedded": stats.get("embedded", 0), "embeddings_cached": stats.get("cached", 0),
    }
    preview = [{"family": f["family"], "label": f["label"], "items": str(f["items"]),
                "distinct": str(f["groups"]), "split": f["split"], "example": f["examples"][0] if f["examples"] else ""}
               for f in families[:12]]
    png = family_map(xy, fams.labels, fams.names, [members[r] for r in reps],
                     f"{dataset}: {len(items)} work items, {len(fams.names)} families, "
                     f"{len(reps)} distinct requests")
    return Organized(rows, counts, preview, families, png)
