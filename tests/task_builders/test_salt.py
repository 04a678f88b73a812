"""Validity independent of the draw (issue 18): the sample company under several pseudonym salts yields the same
tasks (by lineage: the events a task was built from, whose ids hash the raw records, not pseudonymized text),
every probe scoring the same; and a run is reproducible given its salt (TASKMINE_SALT, privacy.anonymize.Vault).

On the main branch before this change, salts s1, s2 and s3 gave different email_reply tasks (a probe seeded from a
work item's id, which hashes the salted Message-ID, drew another random reply).

And the same salt gives the same tasks in two fresh homes, under two run ids and two PYTHONHASHSEEDs (issues 20,
21: the published output is a function of the input and the salt). Before this test, every task id differed (the
world key hashed the events file, whose rows carry the run's id) and the listing probes of the communication
families named tied values in a set's order (task_builders.prevalence)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import DatasetConfig
from privacy.anonymize import Vault, VaultError, unsalted
from privacy.stages import vault_path
from taskmine import flow
from warehouse.store import Store

FAMILIES = ("ticket_triage", "commit_link", "email_reply", "chat_answer", "resolution_note")


def build(sample_company, home, salt: str, monkeypatch) -> Store:
    monkeypatch.setenv("TASKMINE_SALT", salt)
    store = Store(home)
    config = DatasetConfig(ner_model="", families=FAMILIES)
    ctx = flow.context(store, "acme", sample_company / "acme", config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items", "clusters")
    flow.run(flow.context(store, "acme"), "world")
    flow.run(flow.context(store, "acme", config=config), "tasks")
    return store


def organized(store: Store) -> dict:
    """What the clusters stage decided, keyed by what hashes the raw records: per work item (kind, request event)
    its id, its near-duplicate group (as the request events of the group's members), whether it leads the group,
    its family (as the request events of the family's members) and its split."""
    items = {i.item_id: (i.kind, i.request_event_id) for i in store.read("work_items", "acme")}
    rows = store.read("clusters", "acme")
    groups: dict[str, set] = {}
    fams: dict[str, set] = {}
    for c in rows:
        groups.setdefault(c.dup_group, set()).add(items[c.item_id])
        fams.setdefault(c.family, set()).add(items[c.item_id])
    return {items[c.item_id]: (c.item_id, frozenset(groups[c.dup_group]), c.representative,
                               frozenset(fams[c.family]), c.split) for c in rows}


@pytest.mark.slow
def test_the_sample_under_several_salts_yields_the_same_tasks(sample_company, tmp_path, monkeypatch):
    """The same tasks, probe scores, work item ids, near-duplicate groups, families and splits under three salts;
    and every anonymized text the same once its pseudonyms are set aside (`unsalted`: no salted form escapes it).
    Before `unsalted` and work item ids from the request's event id, the splits (keyed by the smallest item id of a
    family, which hashed a salted Message-ID) and, at 50x, the near-duplicate groups (shingles and MinHash bands of
    the fake names) changed with the salt."""
    seen, clusters, texts = {}, {}, {}
    for salt in ("s1", "s2", "s3"):
        store = build(sample_company, tmp_path / salt, salt, monkeypatch)
        assert json.loads(vault_path(store, "acme").read_text())["salt"] == salt
        seen[salt] = {(t.family, tuple(t.lineage)): ({p["name"]: p.get("score") for p in t.reference["probes"]},
                                                      t.item_id, t.split)
                      for t in store.read("tasks", "acme")}
        clusters[salt] = organized(store)
        texts[salt] = {e.event_id: f"{e.title}\n{e.body}" for e in store.read("anonymized_events", "acme")}
    assert clusters["s1"] == clusters["s2"] == clusters["s3"]
    assert {s for *_, s in clusters["s1"].values()} == {"train", "test"}
    assert len({g for _, g, *_ in clusters["s1"].values() if len(g) > 1}) >= 2   # near-duplicate groups were made
    for salt in ("s2", "s3"):
        assert sum(texts["s1"][k] != texts[salt][k] for k in texts["s1"]) > 50     # the fakes differ ...
        differ = [k for k in texts["s1"] if unsalted(texts["s1"][k]) != unsalted(texts[salt][k])]
        assert not differ, (salt, len(differ), unsalted(texts["s1"][differ[0]])[:300],   # ... nothing else does
                            unsalted(texts[salt][differ[0]])[:300])
    first = seen["s1"]
    assert len({f for f, _ in first}) >= 4, sorted({f for f, _ in first})
    for salt, tasks in seen.items():
        assert set(tasks) == set(first), (salt, sorted(f for f, _ in set(tasks) ^ set(first)))
        for key, (probes, item_id, split) in tasks.items():
            assert (item_id, split) == first[key][1:], (salt, key[0])
            assert probes == first[key][0], (salt, key[0], {n: (s, first[key][0].get(n)) for n, s in probes.items()
                                                             if first[key][0].get(n) != s})


def test_a_vault_keeps_its_salt_and_refuses_another(tmp_path):
    path = tmp_path / "vault.json"
    a = Vault.load(path, salt="0f" * 16)
    a.save()
    again = Vault.load(path)
    assert again.salt == "0f" * 16 and again.domain == a.domain      # reproducible given its salt
    assert Vault.load(tmp_path / "other.json", salt="0f" * 16).domain == a.domain
    assert Vault.load(tmp_path / "random.json").salt != a.salt       # drawn when none is given
    with pytest.raises(VaultError, match="another salt"):
        Vault.load(path, salt="1e" * 16)
    with pytest.raises(VaultError, match="empty"):
        Vault.load(tmp_path / "x.json", salt=" ")


# One run of the stages up to `tasks` in its own process: a fresh home, the run id Dagster would give (a new one per
# run), the salt and hash seed of the environment; prints the tasks (and the world key) as JSON.
_ONE_RUN = """
import json, sys, uuid
from pathlib import Path
from core.config import DatasetConfig
from taskmine import flow
from warehouse.store import Store
home, export, families = sys.argv[1], Path(sys.argv[2]), tuple(sys.argv[3].split(","))
store = Store(home)
config = DatasetConfig(ner_model="", families=families)
ctx = flow.context(store, "acme", export, config=config, run_id=uuid.uuid4().hex)
flow.prepare(ctx)
flow.run(ctx, "work_items", "clusters", "world", "tasks")
world = json.loads((store.worlds("acme") / "world.json").read_text())["key"]
print(json.dumps({"world": world, "tasks": [t.model_dump(mode="json") for t in store.read("tasks", "acme")]}))
"""


@pytest.mark.slow
def test_one_salt_gives_the_same_tasks_in_every_run(sample_company, tmp_path):
    """Two runs in fresh homes with one salt, other run ids and other hash seeds: the same world key, the same task
    ids per family, the same task rows (prompt, world, reference with its probes and their scores, rubric)."""
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "TASKMINE_SALT": "one-salt", "PYTHONHASHSEED": seed, "TASKMINE_HOME": str(tmp_path / seed)}
        done = subprocess.run([sys.executable, "-c", _ONE_RUN, str(tmp_path / seed), str(sample_company / "acme"),
                               ",".join(FAMILIES)], env=env, capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[2])
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    a, b = runs
    assert len({t["family"] for t in a["tasks"]}) >= 4, sorted({t["family"] for t in a["tasks"]})
    assert a["world"] == b["world"]
    ids = [{f: sorted(t["task_id"] for t in r["tasks"] if t["family"] == f) for f in FAMILIES} for r in runs]
    assert ids[0] == ids[1], {f: len(set(ids[0][f]) ^ set(ids[1][f])) for f in FAMILIES}
    rows = [{t["task_id"]: t for t in r["tasks"]} for r in runs]
    for task_id, row in rows[0].items():
        other = rows[1][task_id]
        assert row == other, (row["family"], task_id, sorted(k for k in row if row[k] != other[k]))
