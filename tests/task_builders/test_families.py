import datetime as dt

import pytest

from core.config import DatasetConfig
from environments import actions as A
from environments.gitworld import verify_refs
from environments.world import World
from graders.rubric import CheckSpec, Rubric
from task_builders.families import BuildContext, Draft, families, hidden_fact_problems, seal
from task_builders.families.triage import state_at, triage_values
from task_builders.world import strip_keys
from taskmine import flow
from warehouse.ids import event_id
from warehouse.schemas import Event, Task, WorkItem
from warehouse.store import Store

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


@pytest.fixture(scope="module")
def sample_world(sample_company, tmp_path_factory):
    """The sample company through identities, anonymization, links, work items, the world and tasks."""
    store = Store(tmp_path_factory.mktemp("families") / "home")
    config = DatasetConfig(ner_model="")
    ctx = flow.context(store, "acme", sample_company / "acme", config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items")
    flow.run(flow.context(store, "acme"), "world")
    flow.run(flow.context(store, "acme", config=config), "tasks")
    return store


def test_every_task_hides_its_answer_everywhere_the_agent_can_reach(sample_world):
    store = sample_world
    world = World(store.worlds("acme") / "world.sqlite")
    tasks = [t for t in store.read("tasks", "acme") if t.family in ("ticket_triage", "commit_link")]
    assert {t.family for t in tasks} == {"ticket_triage", "commit_link"}   # the others: test_comm_families.py
    for t in tasks:
        view = world.at(t.cutoff, t.world["hidden"])
        if t.family == "commit_link":
            for sha in t.reference["fix_shas"]:
                assert view.token_hits(sha[:7]) == [] and sha[:7] not in t.prompt
            (repo,) = t.world["git"]["refs"]
            path = store.worlds("acme") / "git" / f"{repo}.git"
            assert verify_refs(path, t.world["git"]["refs"][repo], needed=t.reference["fix_shas"]) == []
        else:
            key = t.reference["actions"][0]["key"]
            shown, filed = view.issue(key)["fields"], t.reference["filed"]
            # the page shows the issue as filed, not as triaged
            assert (shown.get("issuetype"), shown.get("priority"), shown.get("components") or []) == \
                (filed["type"], filed["priority"], filed["components"])
            assert filed != {k: t.reference["after_triage"].get(k, filed[k]) for k in filed}


def test_commit_link_withholds_only_the_documents_that_name_the_fix(sample_world):
    """The sample's chat and mail name fixing commits by SHA: those messages, and only those, are withheld."""
    store = sample_world
    world = World(store.worlds("acme") / "world.sqlite")
    for t in (t for t in store.read("tasks", "acme") if t.family == "commit_link"):
        full = world.at(t.cutoff)
        naming = {h["event_id"] for s in t.reference["fix_shas"] for h in full.token_hits(s[:7], limit=500)}
        assert set(t.world["hidden"]) == naming and t.reference["withheld"] == len(naming)


def _ctx(store, items=()):
    return BuildContext("acme", {}, list(items), store.worlds("acme"), DatasetConfig(ner_model=""),
                        world=World(store.worlds("acme") / "world.sqlite"))


def _item():
    return WorkItem(item_id="i1", dataset="acme", kind="issue", thread_key="CORE-1", request_event_id="e",
                    ts=T0, lineage=["e"])


def test_seal_rejects_a_draft_whose_answer_is_reachable(sample_world):
    import re

    store = sample_world
    world = World(store.worlds("acme") / "world.sqlite")
    later = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    # a commit SHA as the world's text names it (translated to the world's history)
    native, token = next((n, m.group(0)) for n, text in world.at(later).texts()
                         for m in [re.search(r"\b[0-9a-f]{7,40}\b", text)] if m and n.endswith("message-id.invalid"))
    naming = [h["event_id"] for h in world.at(later).token_hits(token, limit=100)]
    rubric = Rubric(checks=[CheckSpec(id="a", check="sha_equals", weight=1, args={"expected": [token]})])
    fam = families()["commit_link"]
    visible = Draft(item=_item(), prompt="Find it.", cutoff=later, reference=[A.Answer(sha=token)], rubric=rubric,
                    hidden_tokens=[token])
    in_prompt = Draft(item=_item(), prompt=f"Find {token}.", cutoff=later, reference=[A.Answer(sha=token)],
                      rubric=rubric, hidden_tokens=[token], hidden_events=naming)
    withheld = Draft(item=_item(), prompt="Find it.", cutoff=later, reference=[A.Answer(sha=token)], rubric=rubric,
                     hidden_tokens=[token], hidden_events=naming)
    ctx = _ctx(store)
    problem = hidden_fact_problems(ctx.view(later), visible)[0]
    assert f"names the hidden value {token[:12]!r}" in problem
    assert hidden_fact_problems(ctx.view(later, in_prompt.hidden_events), in_prompt) == [
        f"the prompt names the hidden value {token[:12]!r}"]
    out = list(seal(ctx, fam, [visible, in_prompt, withheld]))
    assert [type(o).__name__ for o in out] == ["Rejection", "Rejection", "Task"]
    assert out[0].reason == "the answer is reachable in the world"


def test_seal_rejects_a_text_the_world_repeats(sample_world):
    store = sample_world
    ctx = _ctx(store)
    rubric = Rubric(checks=[CheckSpec(id="a", check="sha_equals", weight=1, args={"expected": ["abcdef1"]})])

    def draft(mail):
        return Draft(item=_item(), prompt="Reply.", cutoff=mail.ts, reference=[A.Answer(sha="abcdef1")],
                     rubric=rubric, hidden_texts=[mail.body])

    mails = [e for e in store.iter("anonymized_events", "acme")
             if e.kind == "email" and len((e.body or "").split()) > 20]
    # a mail no other document repeats: withheld, its text is nowhere; visible, the check finds it
    mail = next(m for m in mails if hidden_fact_problems(ctx.view(m.ts, [m.event_id]), draft(m)) == [])
    problems = hidden_fact_problems(ctx.view(mail.ts), draft(mail))
    assert problems and "repeats the hidden text" in problems[0] and mail.native_id in problems[0]
    # and a mail that quotes another's words is caught through that other document
    quoting = [m for m in mails if hidden_fact_problems(ctx.view(m.ts, [m.event_id]), draft(m))]
    assert quoting, "the sample's announcements repeat each other's lines"


def test_seal_proves_the_reference_and_refuses_a_rubric_nothing_passes(sample_world):
    store = sample_world
    fam = families()["commit_link"]
    wrong = Draft(item=_item(), prompt="p", cutoff=T0, reference=[A.Answer(sha="abcdef1")],
                  rubric=Rubric(checks=[CheckSpec(id="a", check="sha_equals", weight=1,
                                                  args={"expected": ["1234567"]})]))
    (out,) = seal(_ctx(store), fam, [wrong])
    assert out.reason == "reference does not pass its own rubric"
    ok = Draft(item=_item(), prompt="p", cutoff=T0, reference=[A.Answer(sha="abcdef1")],
               rubric=Rubric(checks=[CheckSpec(id="a", check="sha_equals", weight=1, args={"expected": ["abcdef1"]})]))
    (task,) = seal(_ctx(store), fam, [ok])
    assert isinstance(task, Task) and task.reference["actions"] == [{"tool": "answer", "sha": "abcdef1"}]
    (again,) = seal(_ctx(store), fam, [ok])
    assert again.task_id == task.task_id  # content-addressed


def _commit_event(native, ts, subject, files):
    return Event(event_id=event_id("acme", "git", native), dataset="acme", source="git", kind="commit",
                 native_id=native, ts=ts, title=subject, body=subject,
                 attrs={"repo": "repo", "files": [{"path": f} for f in files]})


def test_commit_link_refuses_answers_a_grep_finds(sample_world):
    store = sample_world
    issue = Event(event_id=event_id("acme", "jira", "CORE-900"), dataset="acme", source="jira", kind="issue_created",
                  native_id="CORE-900", thread_key="CORE-900", ts=T0, title="Crash when exporting large reports")
    by_name = _commit_event("a" * 40, T0, "Handle big exports", ["test/apps/CORE-900/case.js"])
    by_subject = _commit_event("b" * 40, T0, "CORE-900: crash when exporting large reports", ["src/export.js"])
    fam = families()["commit_link"]
    for fix, reason in ((by_name, "the fix's files are named after the issue key"),
                        (by_subject, "the fix's subject repeats the issue summary")):
        item = WorkItem(item_id="x", dataset="acme", kind="issue", thread_key="CORE-900",
                        request_event_id=issue.event_id, ts=T0, lineage=[issue.event_id],
                        attrs={"fix_shas": [fix.native_id]})
        ctx = BuildContext("acme", {issue.event_id: issue, fix.event_id: fix}, [item], store.worlds("acme"),
                           DatasetConfig(ner_model=""), repos={"repo": {"sha_map": {fix.native_id: "c" * 40},
                                                                        "slug": "repo", "path": ""}})
        (out,) = fam.build(ctx)
        assert out.reason == reason


def _bare_ctx(events, items):
    return BuildContext("d", {e.event_id: e for e in events}, items, None, DatasetConfig(ner_model=""))


def _issue_item():
    return WorkItem(item_id="i1", dataset="d", kind="issue", thread_key="K-1", request_event_id=ISSUE.event_id,
                    ts=T0, attrs={"key": "K-1", "fix_shas": []}, lineage=[ISSUE.event_id])


def test_triage_says_when_the_export_has_no_changelog():
    """The real Jira (appcelerator) and GitHub (rust) exports carry no changelog: every issue was rejected as
    'no triage change recorded', which read as if the team never triaged; the values as filed are unknown."""
    fam = families()["ticket_triage"]
    [r] = list(fam.build(_bare_ctx([ISSUE], [_issue_item()])))
    assert r.reason == "the export has no changelog: the values as filed are unknown"
    # with a changelog (here: one that never touches a triage field) the issue is judged on its own changes
    [r] = list(fam.build(_bare_ctx([ISSUE, change(9, 1, "status", "Open", "In Progress")], [_issue_item()])))
    assert r.reason == "no triage change recorded in the changelog"


def test_commit_link_says_when_the_dataset_has_no_repository():
    """Without a repository (a tracker alone, or git-log metadata no extractor reads) no commit could name the
    issue: the reason says so instead of 'no commit names the issue'."""
    fam = families()["commit_link"]
    [r] = list(fam.build(_bare_ctx([ISSUE], [_issue_item()])))
    assert r.reason == "no git repository in the dataset"
    commit = Event(event_id=event_id("d", "git", "abc"), dataset="d", source="git", kind="commit", native_id="abc",
                   thread_key="abc", ts=T0, attrs={"repo": "r"})
    [r] = list(fam.build(_bare_ctx([ISSUE, commit], [_issue_item()])))
    assert r.reason == "no commit names the issue"
