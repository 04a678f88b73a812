"""Validity independent of the draw (issue 18): the sample company under several pseudonym salts yields the same
tasks (by lineage: the events a task was built from, whose ids hash the raw records, not pseudonymized text),
every probe scoring the same; and a run is reproducible given its salt (TASKMINE_SALT, privacy.anonymize.Vault).

On the main branch before this change, salts s1, s2 and s3 gave different email_reply tasks (a probe seeded from a
work item's id, which hashes the salted Message-ID, drew another random reply)."""

from __future__ import annotations

import json

import pytest

from privacy.anonymize import Vault, VaultError
from task_builders.config import DatasetConfig
from taskmine import flow
from warehouse.store import Store

FAMILIES = ("ticket_triage", "commit_link", "email_reply", "chat_answer", "resolution_note")


def build(sample_company, home, salt: str, monkeypatch) -> Store:
    monkeypatch.setenv("TASKMINE_SALT", salt)
    store = Store(home)
    config = DatasetConfig(ner_model="", families=FAMILIES)
    flow.prepare(store, "acme", sample_company / "acme", config)
    flow.work_items(store, "acme", config)
    flow.clusters(store, "acme", config)
    flow.world(store, "acme")
    flow.tasks(store, "acme", config)
    return store


@pytest.mark.slow
def test_the_sample_under_several_salts_yields_the_same_tasks(sample_company, tmp_path, monkeypatch):
    seen = {}
    for salt in ("s1", "s2", "s3"):
        store = build(sample_company, tmp_path / salt, salt, monkeypatch)
        assert json.loads(flow.vault_path(store, "acme").read_text())["salt"] == salt
        seen[salt] = {(t.family, tuple(t.lineage)): {p["name"]: p.get("score") for p in t.reference["probes"]}
                      for t in store.read("tasks", "acme")}
    first = seen["s1"]
    assert len({f for f, _ in first}) >= 4, sorted({f for f, _ in first})
    for salt, tasks in seen.items():
        assert set(tasks) == set(first), (salt, sorted(f for f, _ in set(tasks) ^ set(first)))
        for key, probes in tasks.items():
            assert probes == first[key], (salt, key[0], {n: (s, first[key].get(n)) for n, s in probes.items()
                                                          if first[key].get(n) != s})


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
