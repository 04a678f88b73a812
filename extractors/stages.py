"""The ingest stage and its gates: every extractor that recognises something in the dataset's export folder, its
events and quarantine stored (private), the export's fingerprint kept for the daily re-run, and how much of the
export could not be read (`quarantine_rate`, the gate before anything is mined or published).

A quarantine row is an unreadable record unless it is a second copy of one that was read (`duplicate*`), a commit
read without its patch (PARTLY_READ) or an object a repository lacks (GIT_OBJECT: the anonymize stage rewrites the
repository without it); `unreadable_record` is the one definition the gate, the stage's counts and publishing use.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pyarrow.parquet as pq

from core.stage import CheckResult, FilePath, RunContext, StageResult, preview
from extractors import detect
from warehouse.ids import content_hash
from warehouse.schemas import Event, Quarantine, arrow_schema
from warehouse.store import Store

GIT_OBJECT = "git_object_"   # quarantine classes of one object a repository lacks (the rest of it is rewritten)
PARTLY_READ = ("git_diff_unreadable",)   # a commit read from its message, people and files; its patch was not


# --- datasets and their fingerprints ------------------------------------------------------------------

def dataset_folders(exports: Path) -> list[str]:
    """Every non-hidden folder directly under `exports` is a dataset."""
    if not exports.is_dir():
        return []
    return sorted(p.name for p in exports.iterdir() if p.is_dir() and not p.name.startswith("."))


def fingerprint(dataset_dir: Path) -> str:
    """A cheap hash of what the export holds: every file's path, size and mtime (git objects skipped)."""
    parts = []
    for p in sorted(dataset_dir.rglob("*")):
        if p.is_file() and "objects" not in p.relative_to(dataset_dir).parts:
            st = p.stat()
            parts.append((str(p.relative_to(dataset_dir)), st.st_size, st.st_mtime_ns))
    return content_hash("fingerprint", parts)


def _fingerprints(store: Store) -> Path:
    return store.home / "state" / "fingerprints.json"


def changed_datasets(exports: Path, known: Iterable[str], store: Store | None = None) -> list[tuple[str, str]]:
    """(dataset, fingerprint) for every known dataset whose export changed since its last ingest."""
    store = store or Store()
    f = _fingerprints(store)
    seen = json.loads(f.read_text()) if f.exists() else {}
    out = []
    for ds in known:
        if (exports / ds).is_dir():
            fp = fingerprint(exports / ds)
            if seen.get(ds) != fp:
                out.append((ds, fp))
    return out


# --- the stage -----------------------------------------------------------------------------------------------

def ingest(ctx: RunContext) -> StageResult:
    """Run every extractor that recognises something in the dataset's folder; events and quarantine are private."""
    store, dataset = ctx.store, ctx.dataset
    events: list[Event] = []
    quarantined: list[Quarantine] = []
    for row in detect.ingest(dataset, ctx.dataset_dir, ctx.run_id):
        (events if isinstance(row, Event) else quarantined).append(row)
    ev = store.merge("events", dataset, events)
    q = store.merge("quarantine", dataset, quarantined)
    f = _fingerprints(store)
    seen = json.loads(f.read_text()) if f.exists() else {}
    seen[dataset] = fingerprint(ctx.dataset_dir)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(seen, sort_keys=True))
    by_source = Counter(e.source for e in events)
    unreadable = sum(1 for x in quarantined if unreadable_record(x.error_class))
    total = len(events) + unreadable
    return StageResult({
        "events": ev.total, "events_added": ev.added, "events_changed": ev.changed,
        "quarantined": q.total, "duplicates": len(quarantined) - unreadable,
        "quarantine_rate": round(unreadable / total, 4) if total else 0.0,
        **{f"events_{k}": v for k, v in sorted(by_source.items())},
    }, preview(quarantined, ("file", "offset", "error_class", "message")),
        shown={"dataset_dir": FilePath(str(ctx.dataset_dir))})


# --- what is unreadable, and the gate ------------------------------------------------------------------------

def is_duplicate(error_class: str) -> bool:
    """A quarantined second copy of a record that was read (same Message-ID, key, member name, ts): kept in the
    quarantine table for lineage, but nothing was lost, so it does not count as unreadable."""
    return error_class.startswith("duplicate")


def unreadable_record(error_class: str) -> bool:
    """Whether a quarantine row is a record that could not be read: not a second copy of one that was
    (`is_duplicate`), not a commit that became an event without its patch (a partial clone's missing blobs), not
    an object a repository lacks (rewritten without it, privacy.repos.anonymize_repos)."""
    return not is_duplicate(error_class) and error_class not in PARTLY_READ and not error_class.startswith(GIT_OBJECT)


def quarantine_rate(store: Store, dataset: str) -> tuple[float, int, int]:
    """(share of records that could not be read, those records, all records) of the dataset's ingest; second
    copies of records already read, commits read without their patch and objects a repository lacks
    (`unreadable_record`) are neither."""
    events = store.count("events", dataset)
    # an object a repository lacks is not a record: the repository is rewritten without it (anonymize_repos)
    quarantined = sum(1 for q in store.read("quarantine", dataset) if unreadable_record(q.error_class)) \
        if store.count("quarantine", dataset) else 0
    total = events + quarantined
    return (quarantined / total if total else 0.0), quarantined, total


def quarantine_problem(ctx: RunContext) -> str | None:
    """One line saying why the quarantine rate blocks the dataset, or None when it does not."""
    rate, quarantined, total = quarantine_rate(ctx.store, ctx.dataset)
    if rate <= ctx.config.max_quarantine_rate:
        return None
    return (f"{quarantined} of {total} records ({rate:.0%}) could not be read, over max_quarantine_rate "
            f"{ctx.config.max_quarantine_rate:g}: see the quarantine table for file, offset and reason, fix the "
            f"export, or raise max_quarantine_rate in {ctx.dataset}/taskmine.toml")


def check_quarantine(ctx: RunContext) -> CheckResult:
    """Gate: the share of unreadable records stays under the dataset's max_quarantine_rate."""
    rate, quarantined, total = quarantine_rate(ctx.store, ctx.dataset)
    problem = quarantine_problem(ctx)
    return CheckResult(problem is None, problem or f"{quarantined} of {total} records quarantined",
                       {"quarantined": quarantined, "records": total, "rate": round(rate, 4),
                        "limit": ctx.config.max_quarantine_rate})


def check_schema(ctx: RunContext) -> CheckResult:
    """Events and quarantine as stored match their declared schema (warehouse.schemas)."""
    bad = []
    for table, model in (("events", Event), ("quarantine", Quarantine)):
        path = ctx.store.partition(table, ctx.dataset)
        if path.exists() and not pq.read_schema(path).remove_metadata().equals(arrow_schema(model).remove_metadata()):
            bad.append(table)
    return CheckResult(not bad, f"{', '.join(bad)} differ from their schema" if bad else "events and quarantine "
                       "match their schema", {"mismatched_tables": ", ".join(bad) or "none"})
