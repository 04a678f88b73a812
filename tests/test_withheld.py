"""Residue is withheld, not fatal (DESIGN.md, Convention 19).

Four real exports published 0 tasks: one residual string anywhere stopped the whole dataset at the
`anonymized_leaks` check. A record the leak audit still refuses after anonymization is now withheld (left out of
the world, cited by no task, counted in the `withheld` table by kind and reason, never its text) and the dataset
goes on; the run stops only when the share withheld is over `max_withheld_rate`.

The residue here is planted by an anonymizer that misses one known address in chosen records (a detector's gap
stands in for any other), so the tests do not depend on what the detectors happen to miss today.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from core.config import DatasetConfig
from graders.stages import verdicts_by_task
from privacy import audit
from privacy import repos as repository_anonymization
from privacy.anonymize import Anonymizer
from privacy.repos import repos_index
from privacy.stages import anonymizer, audit_rules
from privacy.withhold import withheld_problem, withheld_summary
from task_builders.families import WITHHELD_FIX, WITHHELD_RECORD
from task_builders.mining import SKIP_WITHHELD
from taskmine import flow
from warehouse.store import Store

CONFIG = DatasetConfig(ner_model="")
SECTION = re.compile(r"^(?=diff --git )", re.M)


@pytest.fixture(scope="module")
def clean(tmp_path_factory, sample_company):
    """The sample anonymized and mined once without residue: where to plant it."""
    home = tmp_path_factory.mktemp("clean")
    store = Store(home / "home")
    ctx = flow.context(store, "acme", sample_company / "acme", config=CONFIG)
    flow.prepare(ctx)
    flow.run(ctx, "work_items")
    return store


def _address(store: Store) -> str:
    """A real address of a person of the dataset: a string the audit knows."""
    return next(i.email for i in store.read("identities", "acme") if i.email and "@" in i.email)


def _targets(store: Store) -> dict[str, str]:
    """event id -> where to plant: the reply of an e-mail work item, a chat question, one file of a commit's diff,
    a triage change of an issue."""
    items = store.read("work_items", "acme")
    events = {e.event_id: e for e in store.read("anonymized_events", "acme")}
    reply = next(i.outcome_event_ids[0] for i in items if i.kind == "email_reply")
    question = next(i.request_event_id for i in items if i.kind == "chat_answer")
    commit = next(e.event_id for e in events.values() if e.kind == "commit" and e.diff
                  and len([p for p in SECTION.split(e.diff) if p]) >= 2)
    change = next(e.event_id for e in events.values() if e.kind == "field_changed"
                  and str(e.attrs.get("field", "")).lower() in ("priority", "issuetype", "assignee", "component",
                                                                "components"))
    fix = next(e.event_id for e in events.values() if e.kind == "commit" and "CORE-10" in (e.title or "")
               and e.event_id != commit)
    return {reply: "body", question: "body", commit: "diff", change: "attrs", fix: "title"}


def _leaky(monkeypatch, targets: dict[str, str], address: str) -> None:
    real = Anonymizer.event

    def event(self, e):
        out = real(self, e)
        where = targets.get(e.event_id)
        if where == "body":
            out = out.model_copy(update={"body": f"{out.body or ''}\nwrite to {address}"})
        elif where == "diff":
            parts = [p for p in SECTION.split(out.diff) if p]
            parts[-1] += f"+# maintainer: {address}\n"
            out = out.model_copy(update={"diff": "".join(parts)})
        elif where == "title":
            out = out.model_copy(update={"title": f"{out.title} (thanks {address})"})
        elif where == "attrs":
            out = out.model_copy(update={"attrs": {**out.attrs, "note": f"set by {address}"}})
        return out

    monkeypatch.setattr(Anonymizer, "event", event)


def test_records_with_residue_are_withheld_and_the_dataset_goes_on(tmp_path, sample_company, clean, monkeypatch):
    targets = _targets(clean)
    address = _address(clean)
    reply, question, commit, change, fix = targets
    _leaky(monkeypatch, targets, address)
    store = Store(tmp_path / "home")
    ctx = flow.context(store, "acme", sample_company / "acme", config=CONFIG, run_id="run-1")
    flow.prepare(ctx)
    flow.run(ctx, "work_items", "tasks")

    withheld = {(w.record_kind, w.record_id): w for w in store.read("withheld", "acme")}
    files = [rid for kind, rid in withheld if kind == "commit_file"]
    assert set(withheld) - {("commit_file", f) for f in files} == {("event", reply), ("event", question),
                                                                    ("event", change), ("event", fix)}
    assert len(files) == 1 and files[0].startswith(f"{commit}#")
    assert {w.reason for w in withheld.values()} == {"email"} and {w.stage for w in withheld.values()} == {"anonymize"}
    assert {w.run_id for w in withheld.values()} == {"run-1"}
    assert address not in json.dumps([w.model_dump(mode="json") for w in withheld.values()])   # never the text
    # what is left of them holds nothing the audit refuses, and nothing of their text
    events = {e.event_id: e for e in store.read("anonymized_events", "acme")}
    assert events[reply].withheld == "email" and events[reply].body is None and events[reply].title is None
    assert events[commit].attrs["diff_files_withheld"] == 1 and address not in events[commit].diff
    report = audit.audit(store.partition("anonymized_events", "acme"), audit_rules(store, "acme"))
    assert report.ok, report.summary()
    # no task cites them: the request whose real reply was withheld takes no later reply instead
    items = store.read("work_items", "acme")
    request = next(i.request_event_id for i in clean.read("work_items", "acme") if reply in i.outcome_event_ids)
    assert not [i for i in items if i.request_event_id in (request, question)]
    assert not [i for i in items for x in (reply, question, change) if x in i.lineage]
    skipped = {(r.subject_id, r.reason) for r in store.read("rejections", "acme") if r.stage == "work_items"}
    assert (events[request].native_id, SKIP_WITHHELD) in skipped and (events[question].native_id, SKIP_WITHHELD) \
        in skipped
    triaged = events[change].thread_key
    rejected = {(r.family, r.subject_id, r.reason) for r in store.read("rejections", "acme")}
    assert ("ticket_triage", triaged, WITHHELD_RECORD) in rejected
    # a withheld fixing commit keeps the keys it named: its issue is no commit-link task with the other fixes only
    assert events[fix].attrs == {"withheld": "email", "keys": ["CORE-10"]}
    assert ("commit_link", "CORE-10", WITHHELD_RECORD) in rejected
    # the world leaves them out; everything else goes on to tasks
    from environments.world import World

    world = World(store.worlds("acme") / "world.sqlite")
    ids = {r["event_id"] for r in world.rows("SELECT event_id FROM docs")}
    assert request in ids and not {reply, question, change} & ids
    assert store.count("tasks", "acme") > 0
    summary = withheld_summary(store, "acme")
    assert summary["total"] == len(withheld) and 0 < summary["rate"] < CONFIG.max_withheld_rate
    assert withheld_problem(flow.context(store, "acme", config=CONFIG)) is None
    problem = withheld_problem(flow.context(store, "acme", config=DatasetConfig(max_withheld_rate=0.001)))
    assert problem is not None and "\n" not in problem
    assert f"{len(withheld)} of {summary['records']} records" in problem and "max_withheld_rate 0.001" in problem
    assert "allow" in problem and "taskmine.toml" in problem


def test_a_blob_with_residue_is_an_absent_file_and_its_fixes_are_rejected(tmp_path, sample_company, monkeypatch):
    """The repository rewrite withholds a blob the audit still refuses: absent where it was written, listed in
    the withheld table, and the commit-link task whose fix wrote it rejected with that reason."""
    exports = tmp_path / "exports"
    shutil.copytree(sample_company, exports, symlinks=True)
    store = Store(tmp_path / "home")
    ctx = flow.context(store, "acme", exports / "acme", config=CONFIG)
    flow.prepare(ctx)
    address = _address(store)
    real = repository_anonymization._blob_scrubber

    def leaky(anon):
        scrub = real(anon)
        return lambda data: scrub(data) + (f"\n# {address}\n".encode() if b"def normalize_endpoint" in data else b"")

    monkeypatch.setattr(repository_anonymization, "_blob_scrubber", leaky)
    shutil.rmtree(store.worlds("acme"))            # rewrite again
    ctx = flow.context(store, "acme", exports / "acme", config=CONFIG)
    flow.prepare(ctx)
    flow.run(ctx, "work_items", "tasks")

    blobs = [w for w in store.read("withheld", "acme") if w.record_kind == "git_blob"]
    assert blobs and {w.reason for w in blobs} == {"email"} and all(w.record_id.startswith("repo:") for w in blobs)
    rewritten = Path(json.loads(repos_index(store, "acme").read_text())["repo"]["path"])
    history = subprocess.run(["git", "-C", str(rewritten), "log", "-p", "--all"], capture_output=True,
                             text=True).stdout
    assert address not in history and "def normalize_endpoint" not in history
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(rewritten), str(checkout)], check=True)
    report = audit.audit(checkout, audit_rules(store, "acme"))
    assert report.ok, report.summary()
    reasons = {(r.subject_id, r.reason) for r in store.read("rejections", "acme") if r.family == "commit_link"}
    assert ("CORE-10", WITHHELD_FIX) in reasons, reasons
    assert store.count("tasks", "acme") > 0


@pytest.mark.slow
def test_a_task_with_residue_at_publish_is_withheld_and_the_rest_published(tmp_path, sample_company):
    from environments.sandbox import LocalSandbox

    store = Store(tmp_path / "home")
    # every family but code_change, whose replays take a minute a task and publish the same way
    config = CONFIG.model_copy(update={"families": ["ticket_triage", "commit_link", "email_reply", "chat_answer",
                                                    "resolution_note"]})
    ctx = flow.context(store, "acme", sample_company / "acme", config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items", "tasks")
    flow.run(flow.context(store, "acme", config=config, sandbox=LocalSandbox(), repeats=1), "validations")
    valid = [t for t in store.read("tasks", "acme")
             if verdicts_by_task(store.read("validations", "acme"), [t]).get(t.task_id, (False,))[0]]
    assert len(valid) >= 2
    victim = valid[0]
    address = _address(store)
    store.replace("tasks", "acme", [t.model_copy(update={"prompt": t.prompt + f"\n(cc {address})"})
                                    if t.task_id == victim.task_id else t for t in store.read("tasks", "acme")])

    res = flow.run(flow.context(store, "acme", config=config), "published_dataset")
    published, counts = res.extra["published"], res.extra["funnel"]

    assert published.withheld == {victim.task_id: "email"} and counts["published"] == published.tasks
    assert published.tasks == len(valid) - 1
    rows = [w for w in store.read("withheld", "acme") if w.stage == "publish"]
    assert [(w.record_kind, w.record_id, w.reason) for w in rows] == [("task", victim.task_id, "email")]
    manifest = json.loads((published.path / "manifest.json").read_text())
    assert manifest["withheld"]["by_kind"] == {"task": 1} and manifest["tasks"] == published.tasks
    assert "1 of" in (published.path / "README.md").read_text().split("## Privacy")[1].split("##")[0]
    final = audit.audit(published.path, audit_rules(store, "acme"), manifest=True)
    assert final.ok, final.summary()
    import pyarrow.parquet as pq

    ids = {i for f in (published.path / "grading").glob("*.parquet") for i in pq.read_table(f).column("task_id")
           .to_pylist()}
    assert victim.task_id not in ids and len(ids) == published.tasks


def test_the_check_of_one_record_agrees_with_the_audit_of_the_table(tmp_path, clean):
    """`privacy.withhold.Check` reads a row as the audit reads a Parquet table: on the sample's anonymized events
    with a real address planted in different columns (prose, a JSON attribute, a list, the diff), the rows it
    refuses are exactly the rows the audit's hits name."""
    from privacy.withhold import Check
    from warehouse.schemas import Event, to_table

    address = _address(clean)
    events = clean.read("anonymized_events", "acme")[:200]
    planted = {3: "body", 17: "attrs", 42: "recipients", 99: "title"}
    diff = next(i for i, e in enumerate(events) if e.diff and i not in planted)
    planted[diff] = "diff"
    rows = []
    for i, e in enumerate(events):
        where = planted.get(i)
        if where == "attrs":
            e = e.model_copy(update={"attrs": {**e.attrs, "x": {"y": [f"by {address}"]}}})
        elif where == "recipients":
            e = e.model_copy(update={"recipients": [*e.recipients, address]})
        elif where:
            e = e.model_copy(update={where: f"{getattr(e, where) or ''} {address}"})
        rows.append(e)
    import pyarrow.parquet as pq

    path = tmp_path / "events.parquet"
    pq.write_table(to_table(Event, rows), path)
    hits = audit.audit(path, audit_rules(clean, "acme"), limit=10_000).hits
    by_audit = {int(re.match(r"column \S+ row (\d+)", h.where).group(1)) for h in hits}
    verdicts = Check(audit_rules(clean, "acme")).rows((i, e.to_row()) for i, e in enumerate(rows))
    assert set(verdicts) == by_audit == set(planted)


def test_a_person_ner_finds_withholds_every_record_that_holds_the_paragraph(clean):
    """NER reads a paragraph once; every record that holds it is withheld, not only the first (the audit reports
    the first place of a hit, withholding needs them all)."""
    from privacy.audit import Rules
    from privacy.ner import load_ner
    from privacy.withhold import Check

    ner = load_ner("en_core_web_sm")
    if ner is None:
        pytest.skip("the spaCy model en_core_web_sm is not installed")
    check = Check(Rules.of(anonymizer(clean, "acme"), ner=ner, seen=set()))
    said = "Yesterday Henrietta Oyelaran called from the ministry about the contract renewal."
    rows = [("a", {"body": f"Hello,\n\n{said}\n\nThanks"}), ("b", {"title": "Renewal", "body": said}),
            ("c", {"body": "The contract renewal is due next week."})]
    assert check.rows(rows) == {"a": "person", "b": "person"}
    assert check.text(f"Re: renewal\n\n{said}", "prose") == "person"     # known now: no second NER read
    assert check.text("The renewal is due.", "prose") is None


def test_hits_of_a_published_folder_are_attributed_to_task_rows_and_documents(tmp_path, clean):
    """Publishing withholds what the audit of the staged version names: a hit in a Parquet row is its task's, one
    in a line of world/documents.jsonl that document's; a hit anywhere else is attributed to nothing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privacy.withhold import attribute

    address = _address(clean)
    root = tmp_path / "version"
    (root / "tasks" / "x").mkdir(parents=True)
    (root / "world").mkdir()
    pq.write_table(pa.table({"task_id": ["t1", "t2", "t3"], "prompt": ["fine", f"ask {address}", "fine"]}),
                   root / "tasks" / "x" / "train.parquet")
    docs = [{"event_id": "e1", "body": "fine"}, {"event_id": "e2", "body": f"from {address}"}]
    (root / "world" / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "README.md").write_text(f"maintained by {address}\n")
    report = audit.audit(root, audit_rules(clean, "acme"))
    tasks, documents, other = attribute(report, root)
    assert tasks == {"t2": "email"} and documents == {"e2": "email"}
    assert {h.file for h in other} == {"README.md"}
