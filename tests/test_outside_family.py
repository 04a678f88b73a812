"""A family defined outside the project gets work items, tasks and validation with no edit to the project.

The family (tests/plugins/acme_priority.py) is registered the way a third party's is: an entry point of the
`taskmine.families` group in a distribution's metadata on sys.path (a dist-info this test writes, as installing a
package would). `taskmine run` then mines its own kind of work item, builds and seals its tasks, validates them
(oracle, null, its probe and the catalogue's, its baseline) in the local sandbox, and reads its
[families.priority_call] table of taskmine.toml; a bad value there is a one-line error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from warehouse.store import Store

PLUGINS = Path(__file__).parent / "plugins"
# (final priority, hours after filing the team set it): the last one is outside the 2-day window
CALLS = [("Blocker", 3), ("Critical", 5), ("Minor", 1), ("Trivial", 20), ("Highest", 7), ("Low", 30),
         ("Critical", 80)]
TOPICS = ["the export button does nothing", "search returns deleted pages", "typo on the settings page",
          "a tooltip is cut off", "payments fail for every card", "the logo is blurry on small screens",
          "the dark theme forgets itself"]


def _user(name: str) -> dict:
    return {"name": name, "key": name, "displayName": name.title() + " Example", "emailAddress": f"{name}@acme.test"}


def _issue(n: int, priority: str, hours: int) -> dict:
    key, created = f"SHOP-{n}", f"2022-05-{n + 1:02d}T09:00:00.000+0000"
    changed = (f"2022-05-{n + 1 + (9 + hours) // 24:02d}T{(9 + hours) % 24:02d}:00:00.000+0000")
    return {"id": str(1000 + n), "key": key, "fields": {
        "summary": TOPICS[n - 1].capitalize(), "description": f"Seen by a customer today: {TOPICS[n - 1]}.",
        "created": created, "updated": changed, "reporter": _user("rosa"), "creator": _user("rosa"),
        "assignee": None, "issuetype": {"name": "Bug"}, "project": {"key": "SHOP", "name": "Shop"},
        "priority": {"name": priority}, "status": {"name": "Open"}, "resolution": None, "components": [],
        "comment": {"total": 0, "comments": []}},
        "changelog": {"total": 1, "histories": [{"id": str(50 + n), "author": _user("omar"), "created": changed,
                                                 "items": [{"field": "priority", "fromString": "Major",
                                                            "toString": priority}]}]}}


def _env(tmp_path: Path) -> dict:
    site = tmp_path / "site"
    dist = site / "acme_priority-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-priority\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[taskmine.families]\npriority_call = acme_priority:PriorityCall\n")
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    return {**env, "PYTHONPATH": f"{site}:{PLUGINS}", "TASKMINE_HOME": str(tmp_path / "home")}


def _run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, env=env,
                          timeout=900)


def test_a_family_outside_the_project_gets_work_items_tasks_and_validation(tmp_path):
    env = _env(tmp_path)
    listing = _run(env, "families", "list")
    line = next(x for x in listing.stdout.splitlines() if x.startswith("priority_call"))
    assert "entry-point:acme-priority" in line and line.split()[1] == "priority_call"    # the kind it reads

    export = tmp_path / "exports" / "shop"
    (export / "jira").mkdir(parents=True)
    for n, (priority, hours) in enumerate(CALLS, 1):
        (export / "jira" / f"SHOP-{n}.json").write_text(json.dumps(_issue(n, priority, hours)))
    (export / "taskmine.toml").write_text('ner_model = ""\nrepeats = 1\n[families]\nenabled = ["priority_call"]\n'
                                          '[families.priority_call]\nwindow_days = 2\n')
    r = _run(env, "run", "--exports", str(tmp_path / "exports"), "--dataset", "shop", "--sandbox", "local")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    store = Store(tmp_path / "home")
    items = store.read("work_items", "shop")
    assert sorted(i.thread_key for i in items) == [f"SHOP-{n}" for n in range(1, 7)]   # SHOP-7: outside the window
    assert {i.kind for i in items} == {"priority_call"}
    skipped = [x for x in store.read("rejections", "shop") if x.stage == "work_items"]
    assert [(x.subject_id, x.reason) for x in skipped] == [("SHOP-7", "no priority call within the window")]

    tasks = store.read("tasks", "shop")
    assert tasks and {t.family for t in tasks} == {"priority_call"}
    mined = {i.thread_key: i.attrs["priority"] for i in items}
    assert all(t.reference["actions"][0]["priority"] == mined[t.reference["key"]] for t in tasks)
    runs = {}
    for v in store.read("validations", "shop"):
        runs.setdefault(v.task_id, {})[v.run_kind] = v.score
    for t in tasks:
        got = runs[t.task_id]
        assert got["oracle"] >= 0.99 and got["null"] <= 0.05, got
        assert got["probe:lowest"] < 0.5, got
        assert "baseline:guess_major" in got, got      # its own baseline ran, graded by its rubric
    assert "published:" in r.stdout

    (export / "taskmine.toml").write_text('[families.priority_call]\nwindow_days = -1\n')
    bad = _run(env, "run", "--exports", str(tmp_path / "exports"), "--dataset", "shop", "--sandbox", "local")
    assert bad.returncode != 0
    last = [x for x in bad.stderr.splitlines() if x.strip()][-1]
    assert last.startswith("taskmine: error: ") and "families.priority_call.window_days: Input should be greater " \
        "than 0" in last, bad.stderr[-2000:]
