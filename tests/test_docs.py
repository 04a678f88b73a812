"""What the README and the dataset card tell a person to run, and the tables they show, match the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_family_table_lists_every_registered_family():
    from task_builders.families import families

    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Task families", 1)[1].split("\n\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", table, re.M))
    assert listed == set(families())


def test_no_document_tells_a_person_to_run_the_duckdb_cli():
    """No DuckDB CLI is installed (only the Python package): `duckdb -c ...` and `duckdb FILE` fail."""
    from warehouse import card

    texts = {p.name: p.read_text() for p in (ROOT / "README.md", ROOT / "CONTRIBUTING.md",
                                             ROOT / "docs" / "architecture.md")}
    texts["card"] = card.render(dataset="d", version="v", files={"tasks/a/train.parquet"}, families=["a"],
                                counts={"a": {"train": 1, "test": 0}}, easy={}, funnel={}, stats={}, provenance=[],
                                license="other", canary="", swebench=False)
    for name, text in texts.items():
        assert not re.search(r"(^|[`\s(])duckdb\s+(-c\b|\S+\.duckdb)", text, re.M), name


def test_bench_real_mail_names_its_own_command_when_the_exports_are_missing(tmp_path):
    import pytest

    from bench.anonymize import bench_real_mail

    with pytest.raises(SystemExit) as err:
        bench_real_mail(str(tmp_path / "nowhere"))
    assert "taskmine bench anonymize --input real-mail" in str(err.value) and "--real" in str(err.value)
    assert "bench privacy" not in str(err.value)
