import datetime as dt
import subprocess

from task_builders.families.commit_link import strip_keys
from task_builders.families.triage import state_at, triage_values
from task_builders.worlds import cut_repository, manifest, verify_cutoff, world_hash
from warehouse.ids import event_id
from warehouse.schemas import Event

T0 = dt.datetime(2021, 3, 1, 9, tzinfo=dt.UTC)


def change(n, hours, field, frm, to):
    return Event(event_id=event_id("d", "jira", f"K-1#h{n}"), dataset="d", source="jira", kind="field_changed",
                 native_id=f"K-1#h{n}", thread_key="K-1", ts=T0 + dt.timedelta(hours=hours),
                 attrs={"field": field, "fromString": frm, "toString": to})


ISSUE = Event(event_id=event_id("d", "jira", "K-1"), dataset="d", source="jira", kind="issue_created",
              native_id="K-1", thread_key="K-1", ts=T0,
              attrs={"issuetype": {"name": "Bug"}, "priority": {"name": "Critical"},
                     "components": [{"name": "api"}, {"name": "ui"}],
                     "assignee": {"display_name": "Kai Ormsby"}})
CHANGES = [
    change(1, 2, "issuetype", "Task", "Bug"),
    change(2, 3, "Component", None, "api"),
    change(3, 3, "assignee", None, "Avery Ingram"),
    change(4, 24 * 10, "priority", "Major", "Critical"),     # long after triage
    change(5, 24 * 11, "assignee", "Avery Ingram", "Kai Ormsby"),
    change(6, 24 * 12, "Component", None, "ui"),
]


def test_triage_values_from_changelog():
    filed, after, n = triage_values(ISSUE, CHANGES, dt.timedelta(days=3))
    assert filed == {"type": "Task", "priority": "Major", "components": [], "assignee": None}
    assert after == {"type": "Bug", "priority": "Major", "components": ["api"], "assignee": "Avery Ingram"}
    assert n == 3


def test_state_at_undoes_later_changes():
    st = state_at(ISSUE, CHANGES, T0 + dt.timedelta(days=10, hours=1))
    assert st == {"type": "Bug", "priority": "Critical", "components": ["api"], "assignee": "Avery Ingram"}
    assert state_at(ISSUE, CHANGES, T0 + dt.timedelta(days=30)) == {
        "type": "Bug", "priority": "Critical", "components": ["api", "ui"], "assignee": "Kai Ormsby"}


def test_no_triage_change_counts_zero():
    assert triage_values(ISSUE, CHANGES[3:], dt.timedelta(days=3))[2] == 0


def test_strip_keys_leaves_no_key_or_url():
    keys = {"CORE-7", "CORE-9", "CORE-12", "WEB-3"}
    assert strip_keys("CORE-12: fix race in cache", keys) == "fix race in cache\n"
    assert strip_keys("Fix null check (CORE-12)", keys) == "Fix null check\n"
    assert strip_keys("[WEB-3] Update header", keys) == "Update header\n"
    out = strip_keys("Refactor\n\nSee https://jira.acme.example/browse/CORE-12 and refs CORE-7, CORE-9", keys)
    assert "CORE" not in out and "http" not in out
    assert strip_keys("keep CORE-123 value", keys) == "keep CORE-123 value\n"


def _commit(repo, n, date):
    (repo / "f.txt").write_text(f"{n}\n")
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@x",
           "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@x", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", f"c{n}"], check=True, env=env)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_cut_repository_holds_nothing_after_cutoff(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(src)], check=True)
    shas = [_commit(src, i, f"2021-03-0{i}T10:00:00+0000") for i in range(1, 5)]
    subprocess.run(["git", "-C", str(src), "tag", "v1", shas[3]], check=True)
    cutoff = dt.datetime(2021, 3, 2, 12, tzinfo=dt.UTC)
    world = tmp_path / "world"
    cut_repository(src, shas[1], world / "repo")
    assert verify_cutoff(world / "repo", cutoff) == []
    log = subprocess.run(["git", "-C", str(world / "repo"), "log", "--all", "--format=%H"], capture_output=True,
                         text=True).stdout.split()
    assert log == [shas[1], shas[0]]
    assert not (world / "repo" / ".git" / "logs").exists()
    # The checker is not a rubber stamp: a later commit is found.
    assert verify_cutoff(world / "repo", dt.datetime(2021, 3, 1, 12, tzinfo=dt.UTC))
    m = manifest(world)
    assert m["repo"]["head"] == shas[1] and "repo/f.txt" in m["files"]
    cut_repository(src, shas[1], tmp_path / "again" / "repo")
    assert world_hash(manifest(tmp_path / "again")) == world_hash(m)
