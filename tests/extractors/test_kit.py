"""The connector kit: scaffolding a new connector, and third-party connectors via entry points."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from extractors.scaffold import ScaffoldError, scaffold

REPO = Path(__file__).resolve().parents[2]


def _env(path: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(path)}


def install_metadata(tree: Path) -> None:
    """What installing `tree` registers, without installing it: a dist-info of the taskmine distribution whose
    entry_points.txt is its pyproject.toml's tables (as a build backend writes it). First on sys.path, it is the
    one importlib.metadata reads."""
    from core.registry import declared

    dist = tree / "taskmine-0.1.0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: taskmine\nVersion: 0.1.0\n")
    tables = declared((tree / "pyproject.toml").read_text())
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for group, eps in tables.items()))


def test_scaffolded_connector_passes_its_contract_out_of_the_box(tmp_path):
    shutil.copytree(REPO / "extractors", tmp_path / "extractors", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    written = scaffold("helpdesk_csv", tmp_path)
    assert {p.name for p in written} == {"helpdesk_csv.py", "test_helpdesk_csv_extractor.py", "pyproject.toml"}
    assert 'helpdesk_csv = "extractors.helpdesk_csv:HelpdeskCsvExtractor"' in (tmp_path / "pyproject.toml").read_text()
    install_metadata(tmp_path)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        str(tmp_path / "tests" / "extractors" / "test_helpdesk_csv_extractor.py")],
                       capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout
    with pytest.raises(ScaffoldError, match="exists already"):
        scaffold("jira_json", tmp_path)
    with pytest.raises(ScaffoldError, match="exists already"):      # declared, though not installed yet
        scaffold("helpdesk_csv", tmp_path)
    with pytest.raises(ScaffoldError, match="not a usable name"):
        scaffold("Bad-Name", tmp_path)


def test_a_connector_without_its_entry_point_fails_its_contract_with_the_fix(tmp_path):
    shutil.copytree(REPO / "extractors", tmp_path / "extractors", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    scaffold("helpdesk_csv", tmp_path)
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")      # the entry point line is lost
    install_metadata(tmp_path)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        str(tmp_path / "tests" / "extractors" / "test_helpdesk_csv_extractor.py"),
                        "-k", "registered"], capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path,
                       timeout=300)
    assert r.returncode == 1, r.stdout[-2000:]
    assert "taskmine.extractors" in r.stdout and "pyproject.toml" in r.stdout


THIRD_PARTY = '''
import datetime as dt
from extractors.base import Extractor


class CrmNotes(Extractor):
    source = "crm"
    medium = "tracker"
    patterns = ("*.crmnotes",)

    def iter_records(self, path):
        for i, line in enumerate(path.read_text().splitlines()):
            yield self.event(kind="note", native_id=f"{path.name}:{i}", body=line,
                             ts=dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc),
                             provenance={"file": self.rel(path), "offset": i})
'''


def test_a_package_outside_the_repo_adds_a_source_through_an_entry_point(tmp_path):
    site = tmp_path / "site"
    (site / "acme_crm_connector").mkdir(parents=True)
    (site / "acme_crm_connector" / "__init__.py").write_text(THIRD_PARTY)
    dist = site / "acme_crm_connector-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-crm-connector\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[taskmine.extractors]\ncrm_notes = acme_crm_connector:CrmNotes\n")
    listing = subprocess.run([sys.executable, "-m", "pipelines.cli", "extractors", "list"], capture_output=True,
                             text=True, env=_env(site), timeout=120)
    line = next(x for x in listing.stdout.splitlines() if x.startswith("crm_notes"))
    assert "entry-point:acme-crm-connector" in line
    export = tmp_path / "exports" / "acme"
    export.mkdir(parents=True)
    (export / "notes.crmnotes").write_text("called the customer\nsent the quote\n")
    check = subprocess.run([sys.executable, "-m", "pipelines.cli", "extractors", "check", str(export)],
                           capture_output=True, text=True, env=_env(site), timeout=120)
    assert check.returncode == 0, check.stderr
    assert "crm      note" in check.stdout and "2 events would be ingested" in check.stdout
