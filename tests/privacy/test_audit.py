"""The leak audit sees what it does not know (unknown addresses, phones, people NER finds, tampered files) and
does not block on what is no leak (an ordinary word that is also a user name, our own pseudonyms and
placeholders). Every name and address here is invented."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from privacy.anonymize import Anonymizer, Vault
from privacy.audit import Rules, audit
from privacy.identity import resolve
from warehouse.ids import event_id, sha256_file
from warehouse.schemas import Event

T0 = dt.datetime(2021, 3, 1, tzinfo=dt.UTC)


def _anonymizer() -> Anonymizer:
    def ev(native, handle, name, email, username=None):
        return Event(event_id=event_id("d", "jira", native), dataset="d", source="jira", kind="comment",
                     native_id=native, ts=T0, actor=handle, actor_name=name, body="x",
                     attrs={"people": [{"handle": handle, "display_name": name, "email": email, "username": username,
                                        "role": "author"}]})

    events = [ev("1", "jira:family", "Family", "family@acme.example", "family"),
              ev("2", "jira:qnorwell", "Quentin Norwell", "qnorwell@acme.example", "qnorwell"),
              ev("3", "email:e-mail@acme.example", "e-mail", "e-mail@acme.example")]
    return Anonymizer(resolve("d", events), Vault(Path(os.devnull), "salt", "corp-test.example", {}))


def _published(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pub"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    listing = {rel: sha256_file(root / rel) for rel in files}
    (root / "manifest.json").write_text(json.dumps({"files": listing}))
    return root


def test_unknown_addresses_phones_and_tampering_are_found(tmp_path):
    anon = _anonymizer()
    rules = Rules.of(anon)
    issue = {"summary": "Crash on start", "description": "Steps: open the app."}
    root = _published(tmp_path, {"worlds/t1/issue.json": json.dumps(issue), "README.md": "# card\n"})
    assert audit(root, rules, manifest=True).ok
    issue["description"] += " reply to john.whitaker@gmail.example or call +1 (415) 555-0134"
    (root / "worlds/t1/issue.json").write_text(json.dumps(issue))
    report = audit(root, rules, manifest=True)
    assert sorted(h.kind for h in report.hits) == ["email", "manifest:changed", "phone"]
    assert "whitaker" not in report.summary() and "555" not in report.summary()
    (root / "worlds/t1/extra.txt").write_text("x")
    (root / "README.md").unlink()
    kinds = {h.kind for h in audit(root, rules, manifest=True).hits}
    assert {"manifest:extra", "manifest:missing"} <= kinds


def test_an_ordinary_word_that_is_a_user_name_counts_only_as_a_user_name(tmp_path):
    anon = _anonymizer()
    rules = Rules.of(anon)
    card = ("| family | tasks |\n|---|---|\n| ticket_triage | 3 |\n\nPeople are replaced by pseudonyms; e-mail "
            "addresses and phone numbers are scrubbed. The family of tasks is large.\n")
    (tmp_path / "README.md").write_text(card)
    assert audit(tmp_path / "README.md", rules).ok
    (tmp_path / "README.md").write_text(card + "assigned to @family and [~family]\n")
    assert [h.kind for h in audit(tmp_path / "README.md", rules).hits] == ["username", "username"]
    # a known full name or a distinctive user name counts anywhere
    (tmp_path / "README.md").write_text("ask Quentin Norwell or qnorwell\n")
    assert [h.kind for h in audit(tmp_path / "README.md", rules).hits] == ["name", "username"]


def test_our_own_output_is_no_leak(tmp_path):
    anon = _anonymizer()
    q = anon.pseudonym("jira:qnorwell")
    text = anon.scrub("Quentin Norwell <qnorwell@acme.example> wrote from /home/qnorwell/ and "
                      "https://github.com/quentin-norwell; cc unknown.person@other.example, +44 20 7946 0958, "
                      "10.1.2.3, see https://twitter.com/qnorwell")
    assert q.full_name in text and "@redacted.example" in text and "[PHONE]" in text and "[IP]" in text
    (tmp_path / "notes.txt").write_text(text)
    assert audit(tmp_path / "notes.txt", Rules.of(anon)).ok


def test_the_tool_servers_own_message_ids_in_a_trajectory_are_no_leak(tmp_path):
    """An oracle trajectory shows the tools' real answers: a sent reply's id is `<hex>@episode.invalid`, the default
    persona `agent@company.invalid`; a real-looking address beside them is still found."""
    from environments.tools import Persona

    anon = _anonymizer()
    sent = "sent 6a79a9d1e0c24a7f9b6f2f1f6c0c1e2d@episode.invalid in thread t-1"
    (tmp_path / "t.txt").write_text(f"{sent}\nfrom {Persona().email}\n")
    assert audit(tmp_path / "t.txt", Rules.of(anon)).ok
    (tmp_path / "t.txt").write_text(f"{sent}\ncc unknown.person@other.example\n")
    assert [h.kind for h in audit(tmp_path / "t.txt", Rules.of(anon)).hits] == ["email"]


def test_ner_in_the_audit_reads_only_changed_paragraphs_and_finds_people(tmp_path, real_ner):
    anon = _anonymizer()
    from privacy.audit import _digest

    unchanged = "The build on the staging box fails since Tuesday."
    rules = Rules.of(anon, ner=real_ner, seen={_digest(unchanged)})
    doc = {"comments": [unchanged, "I talked to Margarethe Vollstedt about it yesterday.",
                        f"Thanks, {anon.pseudonym('jira:qnorwell').full_name} will fix it."]}
    (tmp_path / "issue.json").write_text(json.dumps(doc))
    report = audit(tmp_path / "issue.json", rules)
    assert [(h.kind, h.where) for h in report.hits] == [("person", "json /comments/1")]
    assert report.ner_read == 2  # the unchanged paragraph was read by discovery already


def test_the_published_world_documents_are_read_record_by_record(tmp_path, real_ner):
    """world/documents.jsonl is where the published mail and chat live: its bodies are prose NER reads, its
    other columns fields, and a line that does not parse is still scanned."""
    anon = _anonymizer()
    rules = Rules.of(anon, ner=real_ner)
    author = anon.pseudonym("jira:qnorwell").full_name
    docs = [{"event_id": "e1", "author": author, "title": "Crash on start", "body": "Steps: open the app."},
            {"event_id": "e2", "author": author, "title": None, "body": "I talked to Margarethe Vollstedt about it."},
            {"event_id": "e3", "author": "Quentin Norwell", "body": "ok", "meta": {"cc": ["x@gmail.example"]}}]
    f = tmp_path / "documents.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in docs) + "{not json qnorwell\n")
    hits = sorted((h.kind, h.where) for h in audit(f, rules).hits)
    assert hits == [("email", "line 3 /meta/cc/0"), ("name", "line 3 /author"), ("person", "line 2 /body"),
                    ("username", "line 4")]
    f.write_text(json.dumps(docs[0]) + "\n")
    assert audit(f, rules).ok


@pytest.mark.parametrize("secret", [True, False])
def test_manifest_listings_are_not_read_as_secrets(tmp_path, secret):
    (tmp_path / "manifest.json").write_text(json.dumps({"files": {"auth.py": "a" * 64}}))
    assert audit(tmp_path / "manifest.json", Rules([], secrets=secret)).ok


def test_json_columns_of_parquet_are_read_as_json(tmp_path):
    """A task's reference is JSON in a string column: a probe's file text "...\\n@pytest.hookimpl" is escaped
    there as `\\n@pytest...`, which read as raw text looks like the address n@pytest.hookimpl (the sample's
    code_change tasks failed publish on it). The strings inside are scanned, so a real address still is a hit."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rules = Rules.of(_anonymizer())
    probe = {"probes": [{"name": "runner_config", "command": "printf 'import pytest\n@pytest.hookimpl(x)\n'"}]}
    root = tmp_path / "pub"
    root.mkdir()
    pq.write_table(pa.table({"reference": [json.dumps(probe)]}), root / "tasks.parquet")
    assert audit(root, rules).ok, audit(root, rules).summary()
    probe["probes"].append({"name": "x", "command": "mail john.whitaker@gmail.example"})
    pq.write_table(pa.table({"reference": [json.dumps(probe)]}), root / "tasks.parquet")
    hits = audit(root, rules).hits
    assert [h.kind for h in hits] == ["email"] and "/probes/1/command" in hits[0].where


def test_a_value_repeated_in_every_record_is_reported_in_every_record_and_read_once(tmp_path, monkeypatch):
    """The audit looks at a short value once (a role, a list's address, an unknown sender recur in every record)
    and reports it where it occurs, each time, with the flags it was read with (as code or as prose)."""
    rules = Rules.of(_anonymizer())
    lines = [json.dumps({"title": "note", "body": "write to quinn.halloran@partner.example"}) for _ in range(3)]
    root = _published(tmp_path, {"documents.jsonl": "\n".join(lines) + "\n"})
    looked: list[str] = []
    find = Rules.find

    def counting(self, text, **kw):
        looked.append(text)
        return find(self, text, **kw)

    monkeypatch.setattr(Rules, "find", counting)
    report = audit(root, rules)
    assert [(h.where, h.kind) for h in report.hits] == [(f"line {i} /body", "email") for i in (1, 2, 3)]
    assert looked.count("write to quinn.halloran@partner.example") == 1


def test_a_short_prose_value_is_scrubbed_once_and_code_each_time():
    """A short prose value's output is kept (the same text always gets the same replacements in prose); code is
    scrubbed every time, since a secret found later changes what a literal repeating it becomes."""
    anon = _anonymizer()
    scrub = anon.scrub
    first = scrub("ask Quentin Norwell or qnorwell@acme.example")
    assert "Norwell" not in first and scrub._memo["ask Quentin Norwell or qnorwell@acme.example"] == first
    assert scrub("ask Quentin Norwell or qnorwell@acme.example") == first
    literal = 'TOKEN = "Xk9mQ2vLp7"'
    assert scrub(literal, code=True) == literal  # no secret known yet: a plain string
    scrub('+ url = "https://deploy:Xk9mQ2vLp7@ci.acme.example/hook"', code=True)  # the secret, in a URL
    assert "Xk9mQ2vLp7" not in scrub(literal, code=True)  # the literal repeating it now gets its fake


def test_a_schema_key_that_is_a_first_name_is_no_hit_and_a_name_as_a_key_still_is(tmp_path):
    """A JSON key is read as the document writes it (`"max":`): a field's name, not a field's whole value. Found on
    the real git-more-itertools export, whose contributors include a Max: every probe's threshold key "max" in the
    published grading table was a "name" hit (120), and the dataset did not publish. The same word as a whole
    value is still a name, and a key holding a full name, a login or an address is still a hit."""
    from privacy.audit import written_key

    events = [Event(event_id=event_id("d", "jira", "1"), dataset="d", source="jira", kind="comment", native_id="1",
                    ts=T0, actor="jira:mnorwell", actor_name="Max Norwell", body="x",
                    attrs={"people": [{"handle": "jira:mnorwell", "display_name": "Max Norwell",
                                       "email": "mnorwell@acme.example", "username": "mnorwell", "role": "author"}]})]
    # the dataset writes "max" in lower case often (its code: `max(...)`), so the name word is an ordinary word too
    anon = Anonymizer(resolve("d", events), Vault(Path(os.devnull), "salt", "corp-test.example", {}),
                      lower={"max": 500})
    assert anon.scrub.terms["max"].ambiguous
    rules = Rules.of(anon)
    assert written_key("max") == '"max":'
    probes = {"probes": [{"name": "listing_all", "max": 0.5, "score": 0.3}]}
    root = _published(tmp_path, {"grading/ref.json": json.dumps(probes)})
    assert audit(root, rules, manifest=True).ok, audit(root, rules, manifest=True).summary()
    for leak in ({"owner": "Max"}, {"Max Norwell": 1}, {"mnorwell": 1}, {"mnorwell@acme.example": 1}):
        (root / "grading/ref.json").write_text(json.dumps(leak))
        hits = [h for h in audit(root, rules).hits if not h.kind.startswith("manifest")]
        assert hits, leak
