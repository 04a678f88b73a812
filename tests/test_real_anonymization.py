"""`audit(anonymize(x))` is empty: on every real export in ../shared/data/real and on the sample company, the
identities and anonymize stages (NER on, as a user runs them) leave nothing the leak audit refuses, with the same
rules the `anonymized_leaks` check uses (`audit_rules`): not in the anonymized events (every column, read as
the audit reads them), not in the rewritten repositories (every commit, patch and blob). The anonymizer's last pass
is the audit's own detector, so this holds by construction; these tests hold it to that on data nobody invented.

A folder that holds only a git bundle is cloned first, as its SOURCES.md says a user does. Hits are compared by
kind and place, never by the strings (real people's)."""

import subprocess
from pathlib import Path

import pytest

from core.config import DatasetConfig
from privacy.audit import audit
from privacy.stages import anonymizer, audit_rules
from taskmine import flow
from warehouse.store import Store

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "real"


def as_user_has_it(export: Path, tmp: Path) -> Path:
    """The export as its user runs it: a folder of only git bundles becomes a folder of their clones."""
    bundles = sorted(export.glob("*.bundle"))
    if not bundles or any(p for p in export.iterdir() if p.suffix != ".bundle"):
        return export
    out = tmp / "exports" / export.name
    out.mkdir(parents=True)
    for b in bundles:
        subprocess.run(["git", "clone", "-q", str(b), str(out / b.stem)], check=True, capture_output=True)
    return out


EXPORTS = sorted(p for p in REAL.iterdir() if p.is_dir()) if REAL.is_dir() else []


def anonymize_then_audit(store: Store, ds: str, export: Path) -> list[tuple[str, str, str]]:
    """(file, where, kind) of every audit hit on what the anonymize stage wrote for `export`."""
    ctx = flow.context(store, ds, export, config=DatasetConfig(ner_model="en_core_web_sm"), run_id="t")
    flow.prepare(ctx, links_too=False)
    rules = audit_rules(store, ds)
    hits = [(h.file, h.where, h.kind) for h in audit(store.partition("anonymized_events", ds), rules).hits]
    repos = store.worlds(ds) / "repos"
    for repo in sorted(repos.glob("*.git")) if repos.is_dir() else []:
        bundle = repo.with_suffix(".bundle")
        subprocess.run(["git", "-C", str(repo), "bundle", "create", "-q", str(bundle), "--all"], check=True,
                       capture_output=True)
        hits += [(repo.name, h.where, h.kind) for h in audit(bundle, rules).hits]
    return hits


@pytest.mark.real
@pytest.mark.skipif(not EXPORTS, reason=f"real exports not present at {REAL} (../shared/data/real)")
@pytest.mark.parametrize("export", EXPORTS, ids=lambda p: p.name)
def test_the_audit_finds_nothing_in_what_anonymization_wrote(export, tmp_path):
    store, ds = Store(tmp_path / "home"), export.name.replace("-", "_")
    hits = anonymize_then_audit(store, ds, as_user_has_it(export, tmp_path))
    assert anonymizer(store, ds).known_strings(), "the export names people; the identity stage must find them"
    assert hits == []  # (file, where, kind): the strings themselves are never printed, they are real people's


def test_the_audit_finds_nothing_in_the_anonymized_sample(sample_company, tmp_path):
    store = Store(tmp_path / "home")
    assert anonymize_then_audit(store, "acme", sample_company / "acme") == []


def test_the_audit_finds_nothing_in_the_anonymized_corporate_mail(tmp_path):
    """The invented corporate mailbox (bench/data/corporate_mail): Notes lists wrapped inside names, nicknames,
    forwarded news with middle initials, "Mr. X": the phenomena that made the audit refuse what anonymization let
    through on a real executive mailbox."""
    from bench import corporate

    export = tmp_path / "corp"
    corporate.write_mbox(corporate.parse(corporate.DEVSET) + corporate.parse(corporate.HELDOUT),
                         export / "mailbox.mbox")
    assert anonymize_then_audit(Store(tmp_path / "home"), "corp", export) == []
