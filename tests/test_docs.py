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
    from publishing import card

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


def test_the_difficulty_table_is_split_into_tables_that_fit():
    """The per-family table (11 columns, rates with n and interval) was wider than the Dagster UI shows: split."""
    from graders import difficulty
    from graders.difficulty import MAX_TABLE_CHARS, narrow_tables

    rate = {"k": 16, "n": 128, "rate": 0.125}
    st = {f: {"tasks": 120, "valid": 100, "published": 90, "retired": 10, "flaky": 2,
              "difficulty": {"in_band": 50, "too_easy": 30, "too_hard": 10, "unmeasured": 10},
              "probe_pass": rate, "baseline_solved": rate, "rollout_pass": rate, "false_negative": rate}
          for f in ("ticket_triage", "resolution_note", "code_change")}
    rows = difficulty.table(st)
    assert max(len(line) for line in difficulty.markdown(rows).splitlines()) > MAX_TABLE_CHARS
    tables = narrow_tables(rows)
    assert len(tables) > 1 and all(max(len(line) for line in t.splitlines()) <= MAX_TABLE_CHARS for t in tables)
    shown = [c.strip() for t in tables for c in t.splitlines()[0].strip("|").split("|")]
    assert set(shown) == set(rows[0]) and shown.count("family") == len(tables)   # every column, each table keyed
