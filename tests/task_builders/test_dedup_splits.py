"""Near-duplicate groups and splits without the embedding model."""

import datetime as dt

from task_builders.cluster.dedup import anchors, near_duplicate_groups
from task_builders.cluster.splits import assign_splits, canary

RESET = ("Hello,\n\nI cannot log in to the portal since this morning, it says my password has expired. Could you "
         "please reset my password? The account is {e}.\n\nThank you,\n{n}")


def test_a_batch_of_password_resets_is_one_group_with_the_earliest_as_representative():
    names = [f"Person{i}" for i in range(200)]
    texts = [RESET.format(e=f"user{i}@example.com", n=n) for i, n in enumerate(names)]
    texts += ["Export is slow since the upgrade, it takes an hour for 10k rows. Any idea?",
              "which release has the fix for CORE-1?", "which release has the fix for CORE-17?"]
    groups, pairs = near_duplicate_groups(texts, 0.5)
    assert set(groups[:200]) == {0}                         # one group, represented by the first
    assert groups[200] == 200 and groups[201] == 201 and groups[202] == 202  # different keys: not copies
    assert all(j >= 0.5 for _, _, j in pairs)
    assert near_duplicate_groups(texts, 0.5) == (groups, pairs)   # deterministic


def test_anchors_name_keys_and_identifiers():
    assert anchors("`normalize_ttl(None)` fails, see CORE-12 and split_key") == {"normalize_ttl", "CORE-12",
                                                                                  "split_key"}


def test_splits_never_cut_a_group_and_respect_share_and_time():
    t0 = dt.datetime(2021, 1, 1, tzinfo=dt.UTC)
    n = 100
    ids = [f"item{i:03d}" for i in range(n)]
    groups = [f"g{i // 4}" for i in range(n)]             # 4 items per group
    families = [f"f{(i // 4) % 10}" for i in range(n)]    # every group inside one family, as organize makes it
    times = [t0 + dt.timedelta(days=i) for i in range(n)]
    for split_by in ("family", "near_duplicate"):
        split = assign_splits("d", ids, families, groups, times, test_share=0.2, split_by=split_by)
        by_group: dict[str, set] = {}
        for g, s in zip(groups, split):
            by_group.setdefault(g, set()).add(s)
        assert all(len(s) == 1 for s in by_group.values())
        assert 0.1 <= split.count("test") / n <= 0.3, split.count("test")
    cutoff = (t0 + dt.timedelta(days=79)).date().isoformat()
    split = assign_splits("d", ids, families, groups, times, test_share=0.0, test_after=cutoff)
    assert split[:80] == ["train"] * 80 and split[80:] == ["test"] * 20
    # a group straddling the cutoff goes to test whole
    split = assign_splits("d", ids, families, groups, times, test_share=0.0,
                          test_after=(t0 + dt.timedelta(days=81)).date().isoformat())
    assert split[80:] == ["test"] * 20 and split[79] == "train"
    assert canary("d").startswith("taskmine canary GUID ") and canary("d") != canary("e")
