import pytest
from extractor_inputs import jira_issue, make_repo, search_page, write_json

from extractors.detect import NothingToIngest, ingest, plan, unclaimed
from extractors.jira import JiraJsonExtractor
from warehouse.schemas import Event, Quarantine


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "export"
    write_json(root / "jira" / "PROJ-1.json", jira_issue("PROJ-1"))
    write_json(root / "jira" / "page.json", search_page([jira_issue("PROJ-2"), jira_issue("PROJ-3")]))
    write_json(root / "slack" / "users.json", [{"id": "U1", "name": "someone"}])
    (root / "README.txt").parent.mkdir(parents=True, exist_ok=True)
    (root / "README.txt").write_text("notes")
    (root / ".DS_Store").write_text("hidden")
    write_json(root / ".cache" / "PROJ-9.json", jira_issue("PROJ-9"))
    make_repo(root / "code", 2)
    write_json(root / "code" / "tests" / "fixture.json", jira_issue("PROJ-8"))  # code, not an export
    return root


def test_plan_lists_every_claimed_input(dataset):
    assert plan(dataset) == [("git", dataset / "code"),
                             ("jira_json", dataset / "jira" / "PROJ-1.json"),
                             ("jira_json", dataset / "jira" / "page.json")]


def test_unclaimed_skips_hidden_files_and_repositories(dataset):
    assert unclaimed(dataset) == [dataset / "README.txt", dataset / "slack" / "users.json"]


def test_ingest_chains_all_inputs(dataset):
    rows = list(ingest("ds", dataset, "run-1"))
    events = [r for r in rows if isinstance(r, Event)]
    assert not [r for r in rows if isinstance(r, Quarantine)]
    assert sorted(e.native_id for e in events if e.kind == "issue_created") == ["PROJ-1", "PROJ-2", "PROJ-3"]
    assert sum(e.kind == "commit" for e in events) == 2
    assert {e.provenance["file"] for e in events} == {"code", "jira/PROJ-1.json", "jira/page.json"}
    assert {e.ingest_run_id for e in events} == {"run-1"}


def test_a_crashing_extractor_costs_only_its_input(dataset, monkeypatch):
    original = JiraJsonExtractor.iter_records

    def flaky(self, path):
        if path.name == "PROJ-1.json":
            raise RuntimeError("boom")
        return original(self, path)

    monkeypatch.setattr(JiraJsonExtractor, "iter_records", flaky)
    rows = list(ingest("ds", dataset, "run-1"))
    (q,) = [r for r in rows if isinstance(r, Quarantine)]
    assert (q.file, q.error_class) == ("jira/PROJ-1.json", "extractor_error") and "boom" in q.message
    assert sorted(r.native_id for r in rows if isinstance(r, Event) and r.kind == "issue_created") == [
        "PROJ-2", "PROJ-3"]


def test_nothing_to_ingest_is_one_clear_line(tmp_path):
    write_json(tmp_path / "users.json", [{"id": "U1"}])
    with pytest.raises(NothingToIngest) as err:
        ingest("ds", tmp_path, "r")
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{tmp_path}: no ")
    assert "Jira JSON" in message and "git repository" in message and "expected" in message
    with pytest.raises(NothingToIngest, match="no such folder"):
        ingest("ds", tmp_path / "absent", "r")


def test_bad_settings_fail_before_the_first_row(dataset):
    with pytest.raises(ValueError, match="jira_json.*max_issue_bytes") as err:
        ingest("ds", dataset, "r", config={"jira_json": {"max_issue_bytes": "lots"}})
    assert "\n" not in str(err.value)


def test_the_dataset_folder_itself_can_be_a_repository(tmp_path):
    make_repo(tmp_path, 1)
    write_json(tmp_path / "PROJ-1.json", jira_issue("PROJ-1"))  # a file of the repository, not an export
    assert plan(tmp_path) == [("git", tmp_path)]
    assert unclaimed(tmp_path) == []
