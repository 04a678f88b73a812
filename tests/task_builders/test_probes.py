"""The probe catalogue and the valid alternatives (task_builders.probes, task_builders.alternatives) on the sample
company: every generated probe of every tool-call family scores under its threshold and is stored with its
score, replaying a stored probe gives the stored score, generators are deterministic and never reuse the
reference's values, thresholds come from the config, a weak rubric (facts credited in a keyword list) is
caught, and alias alternatives pass."""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.config import DatasetConfig, load_config
from environments import actions as A
from environments.tools import Persona, ToolServer
from environments.world import World
from graders.rubric import CheckSpec, Context, Rubric, grade
from task_builders import probes as P
from task_builders.families import BuildContext, families, seal
from taskmine import flow
from warehouse.schemas import Rejection, Task
from warehouse.store import Store

TOOL_FAMILIES = ("ticket_triage", "commit_link", "email_reply", "chat_answer", "resolution_note")


@pytest.fixture(scope="module")
def built(sample_company, tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("probes") / "home")
    config = DatasetConfig(ner_model="", families=TOOL_FAMILIES)
    ctx = flow.context(store, "acme", sample_company / "acme", config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items", "clusters")
    flow.run(flow.context(store, "acme"), "world")
    flow.run(flow.context(store, "acme", config=config), "tasks")
    return store, config


def _ctx(store, config, name):
    events = {e.event_id: e for e in store.iter("anonymized_events", "acme")}
    from task_builders import world as worldbuild

    fam = families()[name]
    items = [i for i in store.read("work_items", "acme") if i.kind in fam.kinds]
    return BuildContext("acme", events, items, store.worlds("acme"), config, worldbuild.load(store, "acme"),
                        world=World(store.worlds("acme") / "world.sqlite")), fam


def _drafts(ctx, fam):
    return [d for d in fam.build(ctx) if not isinstance(d, Rejection)]


def _grade(task, world, actions):
    view = world.at(task.cutoff, task.world["hidden"])
    persona = Persona(**task.world["persona"]) if task.world.get("persona") else None
    server = ToolServer(view, persona=persona)
    for c in actions:
        call = A.CALL.validate_python(c)
        assert not server.call(call.name(), call.arguments()).error, call
    return grade(task.rubric, server.actions, Context(view=view)).score


def test_every_task_carries_the_catalogue_each_probe_under_its_threshold(built):
    store, _ = built
    tasks = store.read("tasks", "acme")
    world = World(store.worlds("acme") / "world.sqlite")
    fams = {t.family for t in tasks}
    assert fams == set(TOOL_FAMILIES), fams
    for t in tasks:
        names = {p["name"] for p in t.reference["probes"]}
        assert {"prompt_echo", "stuff_entities", "random_values"} <= names, (t.family, names)
        if t.family in ("email_reply", "chat_answer", "resolution_note"):
            assert {"keyword_stuffing", "wrong_field", "acknowledgement"} <= names
        if t.family == "commit_link":
            assert {"wrong_field", "short_prefix", "fix_parent"} <= names
        for p in t.reference["probes"]:
            assert p["score"] is not None and p["score"] < p["max"], (t.family, p["name"], p["score"])
            # the stored score is what replaying the probe gives
            assert _grade(t, world, p["actions"]) == pytest.approx(p["score"]), (t.family, p["name"])
    # the threshold is the family's: triage 0.75, the rest the dataset's default
    assert {p["max"] for t in tasks if t.family == "ticket_triage" for p in t.reference["probes"]} == {0.75}
    assert {p["max"] for t in tasks if t.family == "commit_link" for p in t.reference["probes"]} == {0.5}
    assert sum(1 for t in tasks for p in t.reference["probes"] if p["name"] == "sibling") >= len(tasks) - 2


def test_generators_are_deterministic_and_never_reuse_the_reference(built):
    store, config = built
    for name in ("ticket_triage", "commit_link", "chat_answer"):
        ctx, fam = _ctx(store, config, name)
        one, two = _drafts(ctx, fam), list(reversed(_drafts(ctx, fam)))   # the store gives no fixed order
        P.catalogue(ctx, fam, one)
        P.catalogue(ctx, fam, two)
        assert {d.item.item_id: [p.to_json() for p in d.probes] for d in one} == \
               {d.item.item_id: [p.to_json() for p in d.probes] for d in two}
        for d in one:
            rand = next((p for p in d.probes if p.name == "random_values"), None)
            if rand is None:
                continue
            for r, c in zip(rand.calls, d.reference, strict=False):
                if isinstance(c, A.JiraUpdate):
                    for f in ("type", "priority", "assignee"):
                        if getattr(c, f) and getattr(r, f) != getattr(c, f):
                            assert getattr(r, f).casefold() != getattr(c, f).casefold()
                    assert not set(r.components or []) & set(c.components or [])
                if isinstance(c, A.Answer) and c.sha:
                    assert r.sha not in d.meta["fix_shas"]


def test_stuffing_names_every_entity_and_the_sibling_is_the_nearest(built):
    store, config = built
    ctx, fam = _ctx(store, config, "ticket_triage")
    ents = P.Entities.of(ctx)
    text = ents.text()
    assert all(k in text for _, k in ents.keys) and all(s in text for _, s, _ in ents.shas)
    assert {"type", "priority", "components"} <= {f for f, v in ents.values.items() if v}
    drafts = _drafts(ctx, fam)
    i = 0
    j = P.nearest(drafts, i)
    mine = P.words(drafts[i].prompt)
    best = max(len(mine & P.words(d.prompt)) / len(mine | P.words(d.prompt))
               for k, d in enumerate(drafts) if k != i and d.item.thread_key != drafts[i].item.thread_key)
    assert len(mine & P.words(drafts[j].prompt)) / len(mine | P.words(drafts[j].prompt)) == best
    P.catalogue(ctx, fam, drafts)
    stuff = next(p for p in drafts[0].probes if p.name == "stuff_entities").calls[0]
    assert stuff.components == ents.values["components"][:P.MAX_COMPONENTS]
    wrong = next(p for p in drafts[0].probes if p.name == "wrong_target").calls[0]
    assert wrong.key != drafts[0].reference[0].key


def test_thresholds_are_config_most_specific_first(tmp_path):
    class Fam:
        name = "chat_answer"
        probe_max = None

    c = DatasetConfig(probe_max=0.4, probe_max_by={"chat_answer": 0.3, "sibling": 0.2,
                                                   "chat_answer:wrong_field": 0.1})
    assert P.threshold(c, Fam, "wrong_field") == 0.1
    assert P.threshold(c, Fam, "sibling") == 0.2
    assert P.threshold(c, Fam, "prompt_echo", declared=0.9) == 0.3
    assert P.threshold(DatasetConfig(), Fam, "prompt_echo") == 0.5
    assert P.threshold(DatasetConfig(probe_max=0.4), Fam, "x", declared=0.7) == 0.7
    Fam.probe_max = 0.01
    assert P.threshold(DatasetConfig(), Fam, "x") == 0.01
    (tmp_path / "taskmine.toml").write_text('probe_max = 0.3\nprobe_max_by = {"ticket_triage:sibling" = 0.9}\n')
    cfg = load_config(tmp_path)
    assert cfg.probe_max == 0.3 and cfg.probe_max_by == {"ticket_triage:sibling": 0.9}


def test_a_rubric_that_credits_keywords_is_caught(built):
    """A deliberately weak rubric: its fact checks credit a fact wherever it appears (no `prose`), so the
    fact keywords alone pass it; the keyword-stuffing probe catches it and seal rejects the task; the same
    drafts with the family's rubric are sealed."""
    store, config = built
    ctx, fam = _ctx(store, config, "chat_answer")
    good = _drafts(ctx, fam)
    weak = _drafts(ctx, fam)
    for d in weak:
        d.rubric = Rubric(checks=[c if c.check != "states_fact" else
                                  CheckSpec(**{**c.model_dump(), "args": {k: v for k, v in c.args.items()
                                                                          if k in ("scope", "fact")}})
                                  for c in d.rubric.checks])
    out_weak, out_good = list(seal(ctx, fam, weak)), list(seal(ctx, fam, good))
    assert any(isinstance(o, Task) for o in out_good)
    caught = [o for o in out_weak if isinstance(o, Rejection) and o.reason == "a probe passes the rubric"
              and "keyword_stuffing" in o.detail]
    assert len(caught) == sum(isinstance(o, Task) for o in out_good), [getattr(o, "detail", "") for o in out_weak]


def test_alias_alternatives_pass(built):
    store, _ = built
    world = World(store.worlds("acme") / "world.sqlite")
    tasks = store.read("tasks", "acme")
    seen = set()
    for t in tasks:
        for a in t.reference.get("alternatives") or []:
            seen.add((t.family, a["name"]))
            if a["name"] in ("case_variants", "assignee_alias", "short_sha", "reordered", "with_quote"):
                assert a["score"] == 1.0 and _grade(t, world, a["calls"]) == 1.0, (t.family, a["name"])
            assert a["min"] == 0.99
    assert {("ticket_triage", "case_variants"), ("ticket_triage", "assignee_alias"), ("commit_link", "short_sha"),
            ("resolution_note", "case_variants")} <= seen
    tri = next(t for t in tasks if t.family == "ticket_triage")
    alt = next(a for a in tri.reference["alternatives"] if a["name"] == "case_variants")["calls"][0]
    ref = tri.reference["actions"][0]
    assert alt["type"] != ref["type"] and alt["type"].casefold() == ref["type"].casefold()


def test_hardcoded_returns_stub_every_function(tmp_path):
    f = tmp_path / "mod.py"
    f.write_text("def add(a, b):\n    return a + b\n\nclass K:\n    def m(self):\n        return 3\n")
    subprocess.run([sys.executable, "-c", P.HARDCODE, str(f)], check=True)
    ns: dict = {}
    exec(f.read_text(), ns)
    assert ns["add"](1, 2) is None and ns["K"]().m() is None


def test_code_probes_apply_the_siblings_patch_and_stub_the_changed_files():
    import datetime as dt
    import types

    from graders import verifier

    patch = "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    other = "--- a/pkg/util.py\n+++ b/pkg/util.py\n@@ -1 +1 @@\n-y = 1\n+y = 3\n"

    def draft(p, eco="python"):
        return types.SimpleNamespace(meta={"code": {"repo": "lib", "patch": p, "ecosystem": eco}},
                                     cutoff=dt.datetime(2021, 1, 1, tzinfo=dt.UTC))

    made = dict(P.code_probes(None, draft(patch), draft(other)))
    assert made["sibling"] == verifier.apply_command("lib", other) + "; true"   # never a failed command
    assert made["hardcoded_returns"].startswith("cd ~/lib && python3 -c ")
    assert made["hardcoded_returns"].endswith(" pkg/mod.py; true")
    assert dict(P.code_probes(None, draft(patch, "node"), None)) == {}


def test_the_catalogue_reads_each_prompt_once_not_once_per_pair(built, monkeypatch):
    """Which sibling is nearest is decided over every pair of drafts; each draft's words, reference key and id
    are computed once (computed per pair, they made the tasks stage grow with the square of the drafts)."""
    store, config = built
    ctx, fam = _ctx(store, config, "ticket_triage")
    drafts = _drafts(ctx, fam)
    assert len(drafts) > 3
    siblings = [P.nearest(drafts, i) for i in range(len(drafts))]     # each call computes every key itself
    assert [P.nearest(drafts, i, P.nearest_keys(drafts)) for i in range(len(drafts))] == siblings
    counted = {"words": 0, "ref": 0}
    real_words, real_ref = P.words, P._ref_key

    def words(text):
        counted["words"] += 1
        return real_words(text)

    def ref(d):
        counted["ref"] += 1
        return real_ref(d)

    monkeypatch.setattr(P, "words", words)
    monkeypatch.setattr(P, "_ref_key", ref)
    keys = P.nearest_keys(drafts)
    assert [P.nearest(drafts, i, keys) for i in range(len(drafts))] == siblings
    assert counted == {"words": len(drafts), "ref": len(drafts)}
