"""A family defined outside the project gets work items, tasks and validation with no edit to the project.

The family (tests/plugins/acme_first_look.py) is registered the way a third party's is: an entry point of the
`taskmine.families` group in a distribution's metadata on sys.path (a dist-info this test writes, as installing a
package would). `taskmine run` then mines its own kind of work item, builds and seals its tasks, validates them
(oracle, null, its probe and the catalogue's, its baseline) in the local sandbox, and reads its
[families.first_look] table of taskmine.toml; a bad value there is a one-line error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from warehouse.store import Store

PLUGINS = Path(__file__).parent / "plugins"
# Invented issues of a shop, each filed as (Normal, Report): (summary, priority, type the team gave it, hours after
# filing it did). The pairs differ, and no commonest priority meets the commonest type on one issue for long: the
# catalogue's constant probe rejects SHOP-1, 2 and 3, one per round, and none after; SHOP-8 is outside the window.
ISSUES = [
    ("The export button does nothing", "Blocker", "Defect", 3),
    ("Search could rank recent pages first", "Critical", "Task", 5),
    ("The settings page title reads oddly", "Minor", "Improvement", 1),
    ("A tooltip is cut off on the cart", "Trivial", "Defect", 20),
    ("Payments fail for every card since Monday", "Blocker", "Task", 2),
    ("Customers ask for a wish list", "Minor", "Feature", 7),
    ("The order page loads in ten seconds", "Critical", "Improvement", 4),
    ("The logo is blurry on small screens", "Major", "Defect", 90),
]


def _user(name: str) -> dict:
    return {"name": name, "key": name, "displayName": name.title() + " Example", "emailAddress": f"{name}@acme.test"}


def _issue(n: int, summary: str, priority: str, kind: str, hours: int) -> dict:
    key, day = f"SHOP-{n}", n + 1
    created = f"2022-05-{day:02d}T09:00:00.000+0000"
    looked = f"2022-05-{day + (9 + hours) // 24:02d}T{(9 + hours) % 24:02d}:00:00.000+0000"
    return {"id": str(1000 + n), "key": key, "fields": {
        "summary": summary, "description": f"A customer wrote to us: {summary.lower()}.", "created": created,
        "updated": looked, "reporter": _user("rosa"), "creator": _user("rosa"), "assignee": None,
        "issuetype": {"name": kind}, "project": {"key": "SHOP", "name": "Shop"}, "priority": {"name": priority},
        "status": {"name": "Open"}, "resolution": None, "components": [], "comment": {"total": 0, "comments": []}},
        "changelog": {"total": 1, "histories": [{"id": str(50 + n), "author": _user("omar"), "created": looked,
                                                 "items": [{"field": "priority", "fromString": "Normal",
                                                            "toString": priority},
                                                           {"field": "issuetype", "fromString": "Report",
                                                            "toString": kind}]}]}}


def _env(tmp_path: Path) -> dict:
    site = tmp_path / "site"
    dist = site / "acme_first_look-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-first-look\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[taskmine.families]\nfirst_look = acme_first_look:FirstLook\n")
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    return {**env, "PYTHONPATH": f"{site}:{PLUGINS}", "TASKMINE_HOME": str(tmp_path / "home")}


def _run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, env=env,
                          timeout=900)


def test_a_family_outside_the_project_gets_work_items_tasks_and_validation(tmp_path):
    env = _env(tmp_path)
    listing = _run(env, "families", "list")
    line = next(x for x in listing.stdout.splitlines() if x.startswith("first_look"))
    assert "entry-point:acme-first-look" in line and line.split()[1] == "first_look"    # the kind it reads

    export = tmp_path / "exports" / "shop"
    (export / "jira").mkdir(parents=True)
    for n, issue in enumerate(ISSUES, 1):
        (export / "jira" / f"SHOP-{n}.json").write_text(json.dumps(_issue(n, *issue)))
    (export / "taskmine.toml").write_text('ner_model = ""\nrepeats = 1\n[families]\nenabled = ["first_look"]\n'
                                          '[families.first_look]\nwindow_days = 2\n')
    r = _run(env, "run", "--exports", str(tmp_path / "exports"), "--dataset", "shop", "--sandbox", "local")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "published:" in r.stdout

    store = Store(tmp_path / "home")
    items = store.read("work_items", "shop")
    assert {i.kind for i in items} == {"first_look"}
    assert sorted(i.thread_key for i in items) == [f"SHOP-{n}" for n in range(1, 8)]
    skipped = {x.subject_id: x.reason for x in store.read("rejections", "shop") if x.stage == "work_items"}
    assert skipped == {"SHOP-8": "priority and type not both set within the window"}

    tasks = store.read("tasks", "shop")
    assert {t.family for t in tasks} == {"first_look"}
    assert sorted(t.reference["key"] for t in tasks) == ["SHOP-4", "SHOP-5", "SHOP-6", "SHOP-7"]
    runs: dict = {}
    for v in store.read("validations", "shop"):
        runs.setdefault(v.task_id, {})[v.run_kind] = v.score
    for t in tasks:
        got = runs[t.task_id]
        assert got["oracle"] >= 0.99 and got["null"] <= 0.05, got
        assert got["probe:as_filed"] < 0.75, got              # its own probe, replayed in the sandbox
        assert "baseline:as_filed" in got, got                # its own baseline, graded by its rubric

    (export / "taskmine.toml").write_text('[families.first_look]\nwindow_days = -1\n')
    bad = _run(env, "run", "--exports", str(tmp_path / "exports"), "--dataset", "shop", "--sandbox", "local")
    assert bad.returncode != 0
    last = [x for x in bad.stderr.splitlines() if x.strip()][-1]
    assert last.startswith("taskmine: error: ") and "families.first_look.window_days: Input should be greater " \
        "than 0" in last, bad.stderr[-2000:]
