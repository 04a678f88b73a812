import datetime as dt

from privacy.anonymize import Anonymizer, Vault
from privacy.identity import resolve
from warehouse.ids import event_id
from warehouse.schemas import Event

T0 = dt.datetime(2021, 3, 1, tzinfo=dt.UTC)


def person(handle, name=None, email=None, username=None):
    return {"handle": handle, "display_name": name, "email": email, "username": username, "role": "x"}


def events():
    jira = Event(event_id=event_id("d", "jira", "K-1"), dataset="d", source="jira", kind="issue_created",
                 native_id="K-1", ts=T0, actor="jira:mlopez", actor_name="Maria Lopez",
                 title="Crash reported by Maria", body="Maria Lopez (maria.lopez@acme.example, +1 415 555 0134) "
                 "says mlopez cannot log in; cc jordan.ames@customer.example",
                 attrs={"people": [person("jira:mlopez", "Maria Lopez", "maria.lopez@acme.example", "mlopez"),
                                   person("jira:tkent", "Tom Kent", "tom@acme.example", "tkent")]})
    git = Event(event_id=event_id("d", "git", "a" * 40), dataset="d", source="git", kind="commit",
                native_id="a" * 40, ts=T0, actor="git:maria.lopez@acme.example", actor_name="M. Lopez",
                body="Fix login\n\nSigned-off-by: Maria Lopez <maria.lopez@acme.example>",
                attrs={"people": [person("git:maria.lopez@acme.example", "M. Lopez", "maria.lopez@acme.example")]})
    other = Event(event_id=event_id("d", "git", "b" * 40), dataset="d", source="git", kind="commit",
                  native_id="b" * 40, ts=T0, actor="git:tom.kent@home.example", actor_name="Tom Kent",
                  body="docs", attrs={"people": [person("git:tom.kent@home.example", "Tom Kent",
                                                        "tom.kent@home.example")]})
    return [jira, git, other]


def test_handles_merge_on_email_and_full_name_with_evidence():
    ids = {i.handle: i for i in resolve("d", events())}
    assert ids["jira:mlopez"].person_id == ids["git:maria.lopez@acme.example"].person_id
    assert ids["jira:tkent"].person_id == ids["git:tom.kent@home.example"].person_id
    assert ids["jira:mlopez"].person_id != ids["jira:tkent"].person_id
    assert any("same e-mail" in e for e in ids["git:maria.lopez@acme.example"].evidence)
    assert any("same full name" in e for e in ids["git:tom.kent@home.example"].evidence)


def test_same_name_different_emails_is_not_merged_silently():
    evs = [Event(event_id=event_id("d", "git", s), dataset="d", source="git", kind="commit", native_id=s,
                 ts=T0, attrs={"people": [person(f"git:{m}", "Alex Smith", m)]})
           for s, m in (("1" * 40, "alex@a.example"), ("2" * 40, "alex@b.example"))]
    ids = resolve("d", evs)
    assert ids[0].person_id != ids[1].person_id
    assert all("not merged" in " ".join(i.evidence) for i in ids)


def test_pseudonyms_are_consistent_and_scrub_text(tmp_path):
    evs = events()
    vault = Vault.load(tmp_path / "vault.json")
    anon = Anonymizer(resolve("d", evs), vault)
    jira, git, _ = (anon.event(e) for e in evs)
    q = anon.pseudonym("jira:mlopez")
    assert anon.pseudonym("git:maria.lopez@acme.example") == q
    assert jira.actor_name == git.actor_name == q.full_name
    assert git.actor == f"git:{q.email}" and jira.actor == f"jira:{q.username}"
    text = jira.title + jira.body + git.body
    for real in ("Maria", "Lopez", "maria.lopez@acme.example", "mlopez", "555 0134", "jordan.ames"):
        assert real not in text, real
    assert q.full_name in jira.body and "[PHONE]" in jira.body and "@redacted.example" in jira.body
    assert jira.attrs["people"][0]["display_name"] == q.full_name


def test_vault_is_stable_and_pseudonyms_avoid_real_names(tmp_path):
    evs = events()
    path = tmp_path / "vault.json"
    v1 = Vault.load(path)
    a1 = Anonymizer(resolve("d", evs), v1)
    v1.save()
    a2 = Anonymizer(resolve("d", evs), Vault.load(path))
    assert a1.vault.pseudonyms == a2.vault.pseudonyms
    real = {"maria", "lopez", "tom", "kent"}
    for q in a1.vault.pseudonyms.values():
        assert q.first.lower() not in real and q.last.lower() not in real
    assert "Maria Lopez" in a1.known_strings() and "maria.lopez@acme.example" in a1.known_strings()
