"""Train/test splits that no near-duplicate crosses, and the canary the test split carries.

Invariants:
- The unit of the split is a family (`split_by="family"`, the default) or a near-duplicate group
  (`"near_duplicate"`); every member of a near-duplicate group is in one family, so either way a group is
  never split.
- Units go to test in the order of a hash of (dataset, unit key) until the test share is reached; the key
  of a unit is its smallest item id, so the assignment does not depend on input order and moves little
  when items are added.
- With `test_after`, every item after that date is test as well, and so is every other member of its
  near-duplicate group (the time rule can move a group to test, never split it).
- Every test item carries the dataset's canary string; train items carry none.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence

from warehouse.ids import content_hash

CANARY_PREFIX = "taskmine canary GUID"


def canary(dataset: str) -> str:
    """The string that marks a dataset's test split, so a lab can find it in a training corpus."""
    return f"{CANARY_PREFIX} {content_hash('canary', dataset)[:32]}"


def assign_splits(dataset: str, item_ids: Sequence[str], families: Sequence[str], groups: Sequence[str],
                  times: Sequence[dt.datetime], *, test_share: float, split_by: str = "family",
                  test_after: str = "") -> list[str]:
    """"train" or "test" per item."""
    if split_by not in ("family", "near_duplicate"):
        raise ValueError(f"split_by must be 'family' or 'near_duplicate', got {split_by!r}")
    units: dict[str, list[int]] = defaultdict(list)
    for i, (fam, grp) in enumerate(zip(families, groups)):
        units[fam if split_by == "family" else grp].append(i)
    keyed = sorted(((content_hash("split", dataset, min(item_ids[i] for i in members)), u)
                    for u, members in units.items()))
    n, target, test = len(item_ids), test_share * len(item_ids), 0
    split = ["train"] * n
    chosen = []
    for _, u in keyed:
        if test_share > 0 and test + len(units[u]) / 2 <= target:
            chosen.append(u)
            test += len(units[u])
    if test_share > 0 and not chosen and len(units) > 1:   # a share too small for any unit: the smallest
        chosen = [min((len(units[u]), k, u) for k, u in keyed)[2]]
    for u in chosen:
        for i in units[u]:
            split[i] = "test"
    if test_after:
        cutoff = dt.datetime.fromisoformat(test_after[:10]).replace(tzinfo=dt.UTC) + dt.timedelta(days=1)
        late_groups = {groups[i] for i in range(n) if times[i] >= cutoff}
        for i in range(n):
            if groups[i] in late_groups:
                split[i] = "test"
    return split
