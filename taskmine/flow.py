"""The stages of the pipeline as plain functions: what each Dagster asset calls, and what tests call
without Dagster.

Every stage reads its inputs from the warehouse, writes its outputs there, and returns a `StageResult`
(counts and a small preview) for the caller to show. Every stage is idempotent: unchanged inputs give
the same rows and no new work (validations and rewritten repositories are cached by content).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from extractors import detect
from extractors.git import GitError
from extractors.git import repository as git_repository
from environments.gitworld import optimize
from graders import replay
from privacy import identity
from privacy.anonymize import Anonymizer, Vault, message_ids
from task_builders import gitrewrite, mining
from task_builders.config import DatasetConfig
from task_builders.families import BuildContext, families
from warehouse import publish as publishing
from warehouse.ids import content_hash
from warehouse.schemas import Event, Quarantine, Rejection, Task, Validation, Withheld
from warehouse.store import Store

Progress = Callable[[str], None]


@dataclass
class StageResult:
    counts: dict[str, int | float | str] = field(default_factory=dict)
    preview: list[dict] = field(default_factory=list)
    extra: dict = field(default_factory=dict)   # richer metadata for the asset (tables, images)


def _preview(rows: Iterable, fields: tuple[str, ...], n: int = 5) -> list[dict]:
    out = []
    for r in rows:
        out.append({f: "" if getattr(r, f) is None else str(getattr(r, f))[:120] for f in fields})
        if len(out) >= n:
            break
    return out


def record_rejections(store: Store, dataset: str, stage: str, rows: list[Rejection]) -> None:
    """Replace this stage's rejections for the dataset, keeping the other stages' rows."""
    kept = [r for r in store.read("rejections", dataset) if r.stage != stage]
    store.replace("rejections", dataset, kept + rows)


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


def run_config(store: Store, dataset: str, dataset_dir: Path | None, run_id: str = "") -> DatasetConfig:
    """The dataset's config for one run: read from its taskmine.toml once, by the run's first stage that asks, and
    kept in state/configs/<dataset>.json under the run id; every later stage of that run (each Dagster step may
    be its own process) gets the same snapshot, so an edit of taskmine.toml during a run never changes half of
    it. Without a run id (scripts, tests) the file is read."""
    from task_builders.config import load_config

    snap = store.home / "state" / "configs" / f"{dataset}.json"
    if run_id and snap.exists():
        try:
            saved = json.loads(snap.read_text())
        except ValueError:
            saved = {}
        if saved.get("run_id") == run_id:
            return DatasetConfig(**saved["config"])
    config = load_config(dataset_dir)
    if run_id:
        snap.parent.mkdir(parents=True, exist_ok=True)
        tmp = snap.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"run_id": run_id, "config": config.model_dump(mode="json")}, sort_keys=True))
        os.replace(tmp, snap)
    return config


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


# --- 1. ingest ---------------------------------------------------------------------------------------

def ingest(store: Store, dataset: str, dataset_dir: Path, run_id: str = "") -> StageResult:
    """Run every extractor that recognises something in `dataset_dir`; events and quarantine are private."""
    events: list[Event] = []
    quarantined: list[Quarantine] = []
    for row in detect.ingest(dataset, dataset_dir, run_id):
        (events if isinstance(row, Event) else quarantined).append(row)
    ev = store.merge("events", dataset, events)
    q = store.merge("quarantine", dataset, quarantined)
    f = _fingerprints(store)
    seen = json.loads(f.read_text()) if f.exists() else {}
    seen[dataset] = fingerprint(dataset_dir)
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
    }, _preview(quarantined, ("file", "offset", "error_class", "message")))


# --- 2. identities -----------------------------------------------------------------------------------

def identities(store: Store, dataset: str) -> StageResult:
    rows = identity.resolve(dataset, store.iter("events", dataset))
    store.replace("identities", dataset, rows)
    people = {r.person_id for r in rows}
    merged = sum(1 for r in rows if any("same" in e for e in r.evidence))
    return StageResult({"handles": len(rows), "persons": len(people), "merged_handles": merged})


# --- 3. anonymize ------------------------------------------------------------------------------------

def vault_path(store: Store, dataset: str) -> Path:
    return store.private / "vault" / f"{dataset}.json"


def entities_path(store: Store, dataset: str) -> Path:
    return store.private / "entities" / f"{dataset}.json"


def paragraphs_path(store: Store, dataset: str) -> Path:
    """Digests of the raw paragraphs NER read while anonymizing (private: the leak audit's skip list)."""
    return store.private / "entities" / f"{dataset}.paragraphs"


def anonymizer(store: Store, dataset: str, with_message_ids: bool = False) -> Anonymizer:
    """The dataset's anonymizer: identities, vault, and the outsiders/places NER found (private)."""
    vault = Vault.load(vault_path(store, dataset), salt=os.environ.get("TASKMINE_SALT"))
    ids = message_ids(store.iter("events", dataset)) if with_message_ids else ()
    f = entities_path(store, dataset)
    found = json.loads(f.read_text()) if f.exists() else {}
    a = Anonymizer(store.read("identities", dataset), vault, ids, found.get("outsiders", ()),
                   found.get("places", ()), found.get("allow", ()), found.get("lower", {}), found.get("lists", ()),
                   found.get("orgs", ()))
    vault.save()
    return a


def find_entities(store: Store, dataset: str, config: DatasetConfig) -> str:
    """Read the raw text once for what no structured field says: NER's people and places (each person only
    with evidence), the people of mail routing lines, and how often words occur in lower case. Keeps it under
    private/ (every candidate with its evidence, for review). Returns NER's status line."""
    from privacy.anonymize import discover
    from privacy.ner import load_ner, ner_status

    ner = load_ner(config.ner_model) if config.ner_model else None
    status = ner_status() if config.ner_model else "NER off (ner_model = \"\" in taskmine.toml)"
    people = identity.persons(store.iter("identities", dataset))
    found = discover(store.iter("events", dataset), ner, config.allow, people=people)
    known = {identity.fold(w) for p in people for n in p.names for w in n.split()}
    places = [p for p in found.places if not {identity.fold(w) for w in p.split()} & known]
    f = entities_path(store, dataset)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({"ner": status, "ner_model": config.ner_model if ner else "",
                             "outsiders": found.outsiders, "places": places,
                             "allow": list(config.allow), "candidates": found.candidates, "lower": found.lower,
                             "lists": found.lists, "orgs": found.orgs},
                            indent=1, ensure_ascii=False))
    paragraphs_path(store, dataset).write_bytes(b"".join(sorted(ner.seen_digests())) if ner else b"")
    return status


def anonymize(store: Store, dataset: str, dataset_dir: Path, config: DatasetConfig | None = None,
              run_id: str = "") -> StageResult:
    """Pseudonymize every event and rewrite every git repository of the dataset; withhold what the leak audit
    still refuses afterwards (`withhold_events`, and the rewrite's blobs, paths and messages), so the rest goes
    on (DESIGN.md, Convention 19)."""
    from privacy.withhold import Check
    from task_builders.config import load_config

    config = config or load_config(dataset_dir)
    status = find_entities(store, dataset, config)
    anon = anonymizer(store, dataset, with_message_ids=True)
    candidates = json.loads(entities_path(store, dataset).read_text()).get("candidates", [])
    rows, failed = [], []
    for e in store.iter("events", dataset):
        try:
            rows.append(anon.event(e))
        except Exception as exc:  # an event we cannot scrub is kept out, never published raw
            failed.append(Quarantine(
                quarantine_id=content_hash("anonymize", dataset, e.event_id), dataset=dataset, source=e.source,
                file=str(e.provenance.get("file", "")), offset=e.provenance.get("offset"), member=e.native_id,
                error_class="anonymize_failed", message=f"{type(exc).__name__}: {exc}"[:500]))
    rows, settled = settle_people(store, dataset, anon, rows, config)
    check = Check(audit_rules(store, dataset, anon))
    rows, withheld, checked = withhold_events(dataset, rows, check, run_id)
    store.replace("anonymized_events", dataset, rows)
    if failed:
        store.merge("quarantine", dataset, failed)
    repos = anonymize_repos(store, dataset, dataset_dir, anon, check, run_id)
    for info in repos.values():
        withheld += [Withheld(**w) for w in info.get("withheld", [])]
        checked["git"] += info.get("checked", 0)
    record_withheld(store, dataset, "anonymize", withheld, checked)
    quarantine = store.read("quarantine", dataset)
    unreadable = sum(1 for q in quarantine if q.error_class == "git_unreadable")
    objects = sum(1 for q in quarantine if q.error_class.startswith(GIT_OBJECT))
    summary = withheld_summary(store, dataset)
    return StageResult({"events": len(rows), "quarantined": len(failed), "persons": len(anon.people),
                        "repositories_quarantined": unreadable, "git_objects_unreadable": objects,
                        "withheld": summary["total"], "withheld_rate": summary["rate"],
                        **{f"withheld_{k}": n for k, n in summary["by_kind"].items()},
                        "outsiders": len(anon.outsiders), "person_candidates": len(candidates),
                        "person_candidates_accepted": sum(1 for c in candidates if c.get("accepted")),
                        "last_pass_persons": settled.get("persons_found", 0),
                        "repositories": len(repos), "ner": status},
                       _preview((r for r in rows if r.body), ("kind", "actor_name", "title")),
                       extra={"withheld": summary})


# --- withholding what the audit still refuses -----------------------------------------------------------

_DIFF_FILE = re.compile(r"^(?=diff --git )", re.M)
STUB_FIELDS = ("event_id", "dataset", "source", "kind", "native_id", "thread_key", "parent_id", "ts", "actor",
               "medium", "automated", "ingest_run_id")


def withhold_events(dataset: str, rows: list[Event], check, run_id: str = ""
                    ) -> tuple[list[Event], list[Withheld], Counter]:
    """The anonymized events with what the leak audit (`check`, privacy.withhold.Check) still refuses withheld:
    a commit's diff loses the files that hold a hit (`commit_file`); any other hit makes the event a stub
    (`event`: its ids, thread, time, kind and actor, `attrs.withheld` = the reason, no text), so mining sees that
    something was there and builds no task on it, and the world leaves it out. Returns (events, withheld rows,
    records checked by kind)."""
    verdicts = check.rows((e.event_id, {k: v for k, v in e.to_row().items() if k != "diff"}) for e in rows)
    sections = {e.event_id: _DIFF_FILE.split(e.diff) for e in rows if e.diff and e.event_id not in verdicts}
    dirty = check.rows(((eid, i), {"diff": part}) for eid, parts in sections.items() for i, part in enumerate(parts)
                       if part)
    out, withheld = [], []
    checked = Counter({"event": len(rows), "commit_file": sum(len(p) for p in sections.values()), "git": 0})
    for e in rows:
        reason = verdicts.get(e.event_id)
        if reason:
            withheld.append(Withheld(dataset=dataset, stage="anonymize", record_kind="event", record_id=e.event_id,
                                     reason=reason, run_id=run_id))
            out.append(_stub(e, reason, check))
            continue
        parts = sections.get(e.event_id)
        cut = [i for i in range(len(parts or ())) if (e.event_id, i) in dirty]
        if cut:
            withheld += [Withheld(dataset=dataset, stage="anonymize", record_kind="commit_file",
                                  record_id=f"{e.event_id}#{i}", reason=dirty[(e.event_id, i)], run_id=run_id)
                         for i in cut]
            e = e.model_copy(update={"diff": "".join(p for i, p in enumerate(parts) if i not in cut) or None,
                                     "attrs": {**e.attrs, "diff_files_withheld": len(cut)}})
        out.append(e)
    return out, withheld, checked


def _stub(e: Event, reason: str, check) -> Event:
    """What is left of a withheld event: its place and nothing of its text (a field of it the audit still refuses,
    an id made of a name, is replaced by a neutral one)."""
    kept = {f: getattr(e, f) for f in STUB_FIELDS}
    # a commit keeps the issue keys its message named, so its issue knows one of its fixes is gone
    attrs = {"withheld": reason, **({"keys": keys} if e.kind == "commit" and (keys := mining.find_keys(
        f"{e.title or ''}\n{e.body or ''}")) else {})}
    fields = {**{f: kept[f] for f in ("native_id", "thread_key", "actor", "parent_id")}, "attrs": attrs}
    bad = check.rows((f, {f: v}) for f, v in fields.items() if v)
    for f in bad:
        if f == "attrs":
            attrs = {"withheld": reason}
        else:
            kept[f] = None if f in ("actor", "parent_id") else f"withheld-{e.event_id[:16]}"
    return Event(**kept, attrs=attrs)


def _withheld_state(store: Store, dataset: str) -> Path:
    return store.home / "state" / "withheld" / f"{dataset}.json"


def record_withheld(store: Store, dataset: str, stage: str, rows: list[Withheld], checked: dict[str, int]) -> None:
    """Replace this stage's withheld rows for the dataset (keeping the other stages') and what it checked (the
    share's denominator)."""
    kept = [w for w in store.read("withheld", dataset) if w.stage != stage]
    store.replace("withheld", dataset, kept + sorted({(w.record_kind, w.record_id): w for w in rows}.values(),
                                                     key=lambda w: (w.record_kind, w.record_id)))
    f = _withheld_state(store, dataset)
    state = json.loads(f.read_text()) if f.exists() else {}
    state[stage] = dict(checked)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(state, sort_keys=True))


def withheld_summary(store: Store, dataset: str, stages: Iterable[str] | None = None) -> dict:
    """What was withheld (by `stages`, default all): total, share of the records checked, and counts by kind, by
    reason and by stage."""
    rows = store.read("withheld", dataset) if store.count("withheld", dataset) else []
    f = _withheld_state(store, dataset)
    state = json.loads(f.read_text()) if f.exists() else {}
    if stages is not None:
        rows = [w for w in rows if w.stage in stages]
        state = {k: v for k, v in state.items() if k in stages}
    records = sum(n for checked in state.values() for n in checked.values())
    return {"total": len(rows), "records": records, "rate": round(len(rows) / records, 5) if records else 0.0,
            "by_kind": dict(Counter(w.record_kind for w in rows).most_common()),
            "by_reason": dict(Counter(w.reason for w in rows).most_common()),
            "by_stage": dict(Counter(w.stage for w in rows).most_common())}


def withheld_problem(store: Store, dataset: str, config: DatasetConfig, stages: Iterable[str] | None = None
                     ) -> str | None:
    """One line saying why the withheld share blocks the dataset (and how to fix it), or None."""
    s = withheld_summary(store, dataset, stages)
    if s["rate"] <= config.max_withheld_rate:
        return None
    reasons = ", ".join(f"{n} {k}" for k, n in list(s["by_reason"].items())[:4])
    return (f"{s['total']} of {s['records']} records ({s['rate']:.1%}) withheld because the leak audit still found "
            f"personal data in them after anonymization ({reasons}), over max_withheld_rate "
            f"{config.max_withheld_rate:g}: see the withheld table for kinds and records; add reviewed public names "
            f"to `allow`, or raise max_withheld_rate in {dataset}/taskmine.toml")


def settle_people(store: Store, dataset: str, anon: Anonymizer, rows: list, config: DatasetConfig) -> tuple[list, dict]:
    """The anonymizer's last pass for people in prose (`Anonymizer.settle_people`: NER and the leak audit's
    evidence rules on every paragraph anonymization changed), with the model discovery used. The paragraphs it
    read join the audit's skip list (`paragraphs_path`: their verdict is known), and the vault keeps the
    pseudonyms of the people it found."""
    from privacy.ner import load_ner

    ner = load_ner(config.ner_model) if config.ner_model else None
    if ner is None:
        return rows, {}
    p = paragraphs_path(store, dataset)
    raw = p.read_bytes() if p.exists() else b""
    seen = {raw[i:i + 16] for i in range(0, len(raw), 16)}
    rows, stats = anon.settle_people(rows, ner, seen)
    anon.vault.save()
    p.write_bytes(b"".join(sorted(seen)))
    return rows, stats


def prepare(store: Store, dataset: str, dataset_dir: Path, config: DatasetConfig | None = None, *,
            run_id: str = "", links_too: bool = True) -> None:
    """Ingest, identities and anonymize (and links): the stages every later one reads, in order, without
    Dagster (benchmarks, tests, scripts)."""
    ingest(store, dataset, dataset_dir, run_id)
    identities(store, dataset)
    anonymize(store, dataset, dataset_dir, config, run_id)
    if links_too:
        links(store, dataset)


def repos_index(store: Store, dataset: str) -> Path:
    return store.worlds(dataset) / "repos" / "index.json"


GIT_OBJECT = "git_object_"   # quarantine classes of one object a repository lacks (the rest of it is rewritten)


def anonymize_repos(store: Store, dataset: str, dataset_dir: Path, anon: Anonymizer, check=None,
                    run_id: str = "") -> dict[str, dict]:
    """Rewrite each repository once per (source HEAD, pseudonym set, audit rules); reuse the rewrite otherwise.

    What git cannot read is left out of the rewrite, not the repository (task_builders.gitrewrite): each missing or
    corrupt object is a quarantine row (`git_object_missing`, `git_object_corrupt`, `git_object_left_out` for a
    commit cut out with its unreadable tree; file, object id, reason), a missing blob an absent file. With
    `check` (privacy.withhold.Check), blobs, paths and messages the leak audit still refuses after scrubbing are
    withheld the same way. A repository that cannot be rewritten at all (no readable branch) is quarantined whole
    (`git_unreadable`): its commits stay events, the tasks that need it are rejected with the reason.

    The index entry of a repository records its SHA map, its absent files (`absent`: a side file with, per
    original commit, how many files it lacks and how many of those it changes are absent, by why: counts, never a
    path), the copies of commits only a dropped ref reaches (`equivalent`: original -> original commit a rewritten
    branch holds, gitrewrite.equivalents), its unreadable objects and withheld records."""
    sources: dict[str, str] = {}
    shas: dict[str, set[str]] = {}
    for e in store.iter("events", dataset):
        if e.kind == "commit" and e.attrs.get("repo") is not None:
            sources.setdefault(str(e.attrs["repo"]), e.provenance.get("file") or "")
            shas.setdefault(str(e.attrs["repo"]), set()).add(e.native_id)
    index_file = repos_index(store, dataset)
    index = json.loads(index_file.read_text()) if index_file.exists() else {}
    fingerprint = content_hash("pseudonyms", sorted((k, v.full_name) for k, v in anon.vault.pseudonyms.items()),
                               sorted(check.rules.strings + check.rules.handles) if check is not None else None)
    out, broken = {}, []
    for name, src in sorted(sources.items()):
        src_path = dataset_dir / src
        slug = name.replace("/", "_") or "repo"
        dst = store.worlds(dataset) / "repos" / f"{slug}.git"
        try:
            src_path = git_repository(src_path)  # a bundle file: its unpacked copy
            head = gitrewrite.head(src_path)
            # /3: partial histories, withheld records; the object store's packs and loose objects: a repository
            # whose missing objects were fetched since is rewritten again
            key = content_hash("anon-repo/3", head, fingerprint, gitrewrite.object_store(src_path))
            remote = public_remote(src_path, anon)
            if index.get(name, {}).get("key") == key and dst.exists():
                out[name] = {**index[name], "remote": remote}
                continue
            _remove_rewrites(dst, slug)
            result = gitrewrite.rewrite(src_path, dst, identity=anon.git_identity, message=anon.prose,
                                        blob=_blob_scrubber(anon), residue=check.git if check is not None else None)
            optimize(dst)  # fast-import writes barely compressed packs: one delta-compressed pack instead
        except (gitrewrite.GitRewriteError, GitError) as exc:
            _remove_rewrites(dst, slug)
            broken.append(Quarantine(
                quarantine_id=content_hash("git-rewrite", dataset, name), dataset=dataset, source="git", file=src,
                error_class="git_unreadable", message=f"{exc}; its commits are kept as events, tasks that need "
                "this repository are rejected"[:500]))
            continue
        absent = dst.parent / f"{slug}.absent.json"
        absent.write_text(json.dumps({"touched": result.touched, "absent": {
            sha: dict(Counter(paths.values())) for sha, paths in result.absent.items()}}, sort_keys=True))
        dropped = shas.get(name, set()) - set(result.sha_map)
        out[name] = {"key": key, "path": str(dst), "sha_map": result.sha_map, "remote": remote,
                     "absent": str(absent), "dropped_refs": list(result.dropped_refs),
                     "equivalent": gitrewrite.equivalents(src_path, dropped, result.sha_map),
                     "unreadable": [{**u.__dict__, "path": _clean_path(u.path, check)} for u in result.unreadable],
                     "checked": result.checked,
                     "withheld": [{"dataset": dataset, "stage": "anonymize", "record_kind": w.kind,
                                   "record_id": f"{slug}:{w.id}", "reason": w.reason, "run_id": run_id}
                                  for w in result.withheld]}
    index_file.parent.mkdir(parents=True, exist_ok=True)
    index_file.write_text(json.dumps(out, sort_keys=True))
    objects = [Quarantine(quarantine_id=content_hash("git-object", dataset, name, u["object"]), dataset=dataset,
                          source="git", file=sources[name], member=u["object"],
                          error_class=GIT_OBJECT + ("left_out" if u["reason"] not in ("missing", "corrupt")
                                                    else u["reason"]),
                          message=_unreadable_message(u))
               for name, info in sorted(out.items()) for u in info.get("unreadable", [])]
    before = store.read("quarantine", dataset)
    kept = [q for q in before if q.error_class != "git_unreadable" and not q.error_class.startswith(GIT_OBJECT)]
    if len(kept) != len(before) or broken or objects:
        store.replace("quarantine", dataset, kept + broken + objects)
    return out


def _clean_path(path: str, check) -> str:
    """A path of the source repository as the index may keep it: "" when the audit would refuse it (the index is
    no private file)."""
    return path if check is None or not path or check.text(path) is None else ""


def _unreadable_message(u: dict) -> str:
    """One line on an object a rewritten repository lacks and what the rewrite did without it."""
    if u["type"] == "blob":
        return (f"blob {u['object']} {u['reason']}: {u['path'] or 'its file'} is absent in the rewritten history "
                f"where {u['commits']} commits wrote it; code tasks whose fix or tests need it are rejected")[:500]
    if u["type"] == "commit":
        return (f"commit {u['object']} left out ({u['reason']}): its children start the rewritten history as root "
                "commits; a branch whose tip it was is dropped")[:500]
    return (f"tree {u['object']} {u['reason']}: the commits whose tree holds it are left out of the rewritten "
            "history")[:500]


def public_remote(repo: Path, anon: Anonymizer) -> str | None:
    """The repository's `origin` URL when anonymization leaves it as it is (a project's public address, e.g.
    https://host/owner/name.git: SWE-bench's `repo` is its owner/name); None when there is none or it names a
    person (the scrubber changed it)."""
    r = subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", "config", "--get", "remote.origin.url"],
                       capture_output=True, text=True)
    url = r.stdout.strip() if r.returncode == 0 else ""
    if not url or "://" not in url and "@" not in url:
        return None                      # none, or a local path (a clone of a bundle)
    return url if anon.scrub(url) == url else None


def repo_remotes(store: Store, dataset: str) -> dict[str, str | None]:
    """World repository slug -> its public remote (public_remote), from the anonymize stage's index."""
    index_file = repos_index(store, dataset)
    index = json.loads(index_file.read_text()) if index_file.exists() else {}
    return {(name.replace("/", "_") or "repo"): info.get("remote") for name, info in index.items()}


def _remove_rewrites(dst: Path, slug: str) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    for stale in dst.parent.glob(f"{slug}.linkfree.*"):
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()


def _blob_scrubber(anon: Anonymizer):
    def scrub(data: bytes) -> bytes:
        if len(data) > 2_000_000 or b"\0" in data[:8192]:
            return data  # binary or huge: left as is (the leak audit still scans it)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        return anon.scrub(text, code=True).encode("utf-8")

    return scrub


# --- 4. links and work items -------------------------------------------------------------------------

def links(store: Store, dataset: str) -> StageResult:
    from task_builders.links import find_links

    rows = find_links(store.iter("anonymized_events", dataset))
    store.replace("links", dataset, rows)
    kinds = Counter(r.kind for r in rows)
    return StageResult({"links": len(rows), **{f"links_{k}": v for k, v in sorted(kinds.items())}},
                       _preview(rows, ("kind", "evidence")))



def work_items(store: Store, dataset: str, config: DatasetConfig | None = None) -> StageResult:
    events = store.read("anonymized_events", dataset)
    items, rejections = mining.build_work_items(dataset, events, store.read("links", dataset), config)
    store.replace("work_items", dataset, items)
    record_rejections(store, dataset, "work_items", rejections)
    kinds = Counter(i.kind for i in items)
    with_fix = sum(1 for i in items if i.kind == "issue" and i.attrs.get("fix_shas"))
    counts = {"work_items": len(items), "with_fix": with_fix,
              "skipped": len(rejections), **{f"kind_{k}": v for k, v in sorted(kinds.items())}}
    per_source = mining.funnel_by_source(events, items, rejections)
    rows = [{"source": src, "events": str(f["events"]),
             "work items": ", ".join(f"{k} {v}" for k, v in f["work_items"].items()) or "0",
             "skipped": "; ".join(f"{r} {n}" for r, n in f["skipped"].items()) or "0"}
            for src, f in per_source.items()]
    return StageResult(counts, rows)


def clusters(store: Store, dataset: str, config: DatasetConfig | None = None) -> StageResult:
    """Near-duplicate groups, families and splits of the work items (task_builders.cluster)."""
    from task_builders.cluster import organize

    config = config or DatasetConfig()
    items = store.read("work_items", dataset)
    wanted = {i.request_event_id for i in items}   # only the requests are read: keep only those in memory
    events = {e.event_id: e for e in store.iter("anonymized_events", dataset) if e.event_id in wanted}
    result = organize.organize(store, dataset, items, events, config)
    store.replace("clusters", dataset, result.rows)
    report = store.home / "reports" / dataset
    report.mkdir(parents=True, exist_ok=True)
    if result.map_png:
        (report / "families.png").write_bytes(result.map_png)
    return StageResult(result.counts, result.preview, extra={"families": result.families, "map": result.map_png,
                                                              "map_path": str(report / "families.png")})


# --- 5. world and tasks ------------------------------------------------------------------------------

def world(store: Store, dataset: str) -> StageResult:
    """The dataset's company world, built once for every task (task_builders.world)."""
    from task_builders import world as worldbuild

    w = worldbuild.build(store, dataset)
    repo_bytes = sum(_tree_bytes(Path(r["path"])) for r in w.repos.values())
    return StageResult({"documents": w.docs, "world_bytes": w.bytes, "repositories": len(w.repos),
                        "repository_bytes": repo_bytes})


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


NEAR_DUPLICATE = "near-duplicate of another work item"


def tasks(store: Store, dataset: str, config: DatasetConfig, sandbox=None, llm=None) -> StageResult:
    """Every enabled family's drafts, sealed into tasks. `sandbox` lets families that run code while they
    build (code_change measures its tests) do so; without it they reject those candidates with the reason.
    `llm` (the run's llm.LLM, optional) rewrites instructions and grades the judge checks of the self-check;
    without one the families take their no-model path."""
    from environments.world import World
    from task_builders import world as worldbuild
    from task_builders.families import seal

    if not (store.worlds(dataset) / "world.json").exists():
        world(store, dataset)
    events = {e.event_id: e for e in store.iter("anonymized_events", dataset)}
    repos = worldbuild.load(store, dataset)
    items = store.read("work_items", dataset)
    placed = {c.item_id: c for c in store.read("clusters", dataset)}
    rejected: list[Rejection] = []
    enabled = config.enabled()
    used = {k for name, f in families().items() if name in enabled for k in f.kinds}
    if placed:   # one task per near-duplicate group and kind: the group's earliest item of that kind (an issue
        #          and its resolution item share a request and a group, and make tasks of different families;
        #          the group keeps one split, so neither crosses train/test)
        first: dict[tuple[str, str], str] = {}
        for i in sorted(items, key=lambda i: (not (placed.get(i.item_id) and placed[i.item_id].representative),
                                              i.ts, i.item_id)):
            if i.item_id in placed:
                first.setdefault((placed[i.item_id].dup_group, i.kind), i.item_id)
        leads = set(first.values())
        for i in items:
            c = placed.get(i.item_id)
            if c is not None and i.item_id not in leads and i.kind in used:
                rejected.append(Rejection(dataset=dataset, stage="candidates", family=i.kind, subject_id=i.thread_key,
                                          reason=NEAR_DUPLICATE,
                                          detail=f"group {c.dup_group[:12]} of {c.dup_count}"))
        items = [i for i in items if i.item_id not in placed or i.item_id in leads]
    splits = {k: (c.split, c.canary) for k, c in placed.items()}
    wf = store.worlds(dataset) / "world.sqlite"
    built: list[Task] = []
    per_family: Counter = Counter()
    for name, family in families().items():
        if name not in enabled:
            continue
        mine = [i for i in items if i.kind in family.kinds]
        ctx = BuildContext(dataset, events, mine, store.worlds(dataset), config, repos, splits,
                           World(wf) if wf.exists() else None, sandbox=sandbox, llm=llm)
        drafts = []
        for out in family.build(ctx):
            per_family[(name, "candidates")] += 1
            if isinstance(out, Rejection):
                rejected.append(out)
            else:
                drafts.append(out)
        for out in seal(ctx, family, drafts):
            if isinstance(out, Task):
                built.append(out)
                per_family[(name, "tasks")] += 1
            else:
                rejected.append(out.model_copy(update={"family": name}) if not out.family else out)
    store.replace("tasks", dataset, built)
    record_rejections(store, dataset, "candidates", rejected)
    # candidates = every (work item, family) considered plus the near-duplicates dropped before: the tasks built
    # and every rejection of this stage, as `funnel` counts them (one definition for the run log and the UI)
    near = sum(1 for r in rejected if r.reason == NEAR_DUPLICATE)
    counts = {"candidates": len(built) + len(rejected), "near_duplicates": near, "tasks": len(built)}
    counts.update({f"{f}_{k}": v for (f, k), v in sorted(per_family.items())})
    counts["world_bytes"] = world_bytes(store, dataset)
    reasons = Counter(r.reason for r in rejected)
    return StageResult(counts, [{"rejected because": k, "candidates": str(v)} for k, v in reasons.most_common(8)])


def world_bytes(store: Store, dataset: str) -> int:
    """Bytes on disk of every world of the dataset together (hard links counted once)."""
    seen, total = set(), 0
    for p in store.worlds(dataset).rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


# --- 6. validations ----------------------------------------------------------------------------------

def validations(store: Store, dataset: str, sandbox, repeats: int = 3, progress: Progress | None = None,
                only: Iterable[str] | None = None, llm=None, config: DatasetConfig | None = None,
                parallel: int = 1) -> StageResult:
    """Oracle and null runs (and every probe) for every task not yet validated in this kind of sandbox; then,
    for every valid task, what measures its difficulty and is still missing: one run of each retrieval baseline
    (`config.baselines`, graders.baselines) and `config.rollouts` model-agent rollouts (graders.agent; only when
    `llm` has a model).

    Each task's runs are stored as soon as its verdict is in, so a run killed at task 6 of 20 keeps the
    first five and the re-run replays only what is missing. `parallel` tasks are validated at once (each
    episode is its own sandbox session; a code-change task's eleven episodes each run its test modules, minutes
    a task, so a machine with cores to spare finishes sooner); verdicts are stored by this thread alone."""
    config = config or DatasetConfig()
    all_tasks = store.read("tasks", dataset)
    current = {t.task_id for t in all_tasks}
    wanted = set(only) if only else None
    existing = store.read("validations", dataset)
    done = {v.task_id for v in existing if v.sandbox == sandbox.kind and v.error_class not in ("infra", "timeout")}
    todo = [t for t in all_tasks if t.task_id not in done and (wanted is None or t.task_id in wanted)]
    redo = {t.task_id for t in todo}
    rows = [v for v in existing if v.task_id in current and v.task_id not in redo]
    if len(rows) != len(existing):
        store.replace("validations", dataset, rows)

    def stored(i: int, task: Task, verdict) -> None:
        rows.extend(verdict.validations)
        store.replace("validations", dataset, rows)
        if progress:
            progress(f"validated {i}/{len(todo)} {task.family} {task.task_id[:10]}: "
                     f"{'ok' if verdict.valid else verdict.reason}")

    validate_tasks(todo, store.worlds(dataset), sandbox, repeats, parallel=parallel, llm=llm, on_verdict=stored)
    verdicts = verdicts_by_task(rows, all_tasks)
    measuring = [t for t in all_tasks
                 if verdicts.get(t.task_id, (False,))[0] and (wanted is None or t.task_id in wanted)]
    rows, measured = measure(store, dataset, sandbox, rows, measuring, config, llm, progress)
    # images no current task (of any dataset in this home) uses any more
    # (and environment images no current task names: world["env"]["key"])
    pruned = sandbox.prune({k for ds in store.datasets("tasks") for t in store.iter("tasks", ds)
                            for k in (t.world_hash, (t.world.get("env") or {}).get("key")) if k})
    rejected = [Rejection(dataset=dataset, stage="validated", family=t.family, subject_id=t.task_id,
                          reason=verdicts[t.task_id][1].split(":")[0], detail=verdicts[t.task_id][1])
                for t in all_tasks if t.task_id in verdicts and not verdicts[t.task_id][0]]
    record_rejections(store, dataset, "validated", rejected)
    valid = sum(1 for t in all_tasks if verdicts.get(t.task_id, (False,))[0])
    report = difficulty_report(store, dataset, config, all_tasks, rows)
    return StageResult({"tasks": len(all_tasks), "validated_now": len(todo), "valid": valid,
                        "rejected": len(rejected), "runs": len(rows), "images_pruned": len(pruned),
                        "infra_errors": sum(1 for v in rows if v.error_class in ("infra", "timeout")),
                        **measured},
                       [{"task": r.subject_id[:12], "reason": r.detail[:100]} for r in rejected[:5]],
                       extra=report)


def validate_tasks(tasks: list[Task], worlds: Path, sandbox, repeats: int, *, parallel: int = 1, llm=None,
                   on_verdict: Callable[[int, Task, replay.Verdict], None] | None = None) -> list[replay.Verdict]:
    """`replay.validate` of every task, `parallel` at once (at least the sandbox's capacity: a pool of Docker
    hosts runs as many tasks as it has slots, environments.pool), each task's episodes on one `sandbox.call` (a
    pool's lease of one host). `on_verdict(i, task, verdict)` runs in this thread, in the order tasks finish."""
    verdicts = []
    for i, (task, verdict) in enumerate(each_task(tasks, lambda box, t: replay.validate(t, worlds, box, repeats,
                                                                                          llm=llm),
                                                  sandbox, parallel), 1):
        verdicts.append(verdict)
        if on_verdict:
            on_verdict(i, task, verdict)
    return verdicts


def each_task(tasks: list[Task], work: Callable, sandbox, parallel: int = 1):
    """(task, `work(box, task)`) for every task, in the order they finish: each on one `sandbox.call`,
    `parallel` at once (at least the sandbox's capacity). One at a time, a task's result is yielded (and stored by
    the caller) before the next task starts."""
    parallel = max(parallel, getattr(sandbox, "capacity", 1))
    if parallel <= 1:
        for task in tasks:
            yield task, sandbox.call(lambda box, t=task: work(box, t))
        return
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        running = {pool.submit(sandbox.call, lambda box, t=task: work(box, t)): task for task in tasks}
        for done_now in as_completed(running):
            yield running[done_now], done_now.result()


MEASURE_KINDS = ("baseline:", "rollout:")


def measure(store: Store, dataset: str, sandbox, rows: list[Validation], tasks: list[Task], config: DatasetConfig,
            llm=None, progress: Progress | None = None) -> tuple[list[Validation], dict[str, int]]:
    """The difficulty runs of valid `tasks` still missing in this kind of sandbox (a run that failed on
    infrastructure is redone): every baseline once, `config.rollouts` rollouts with a model. Stored per task."""
    from graders import agent, baselines

    def kept(v: Validation) -> bool:
        return v.sandbox == sandbox.kind and v.error_class not in ("infra", "timeout")

    counts = {"baseline_runs_now": 0, "rollouts_now": 0}
    if config.baselines:
        have = Counter(v.task_id for v in rows if v.run_kind.startswith("baseline:") and kept(v))
        # a task misses a baseline when it has fewer runs than its family has baselines (one added later)
        todo = [t for t in tasks if baselines.applicable(t.family)
                and have[t.task_id] < len(baselines.of(t.family))]
        runs = each_task(todo, lambda box, t: replay.baseline_runs(t, store.worlds(dataset), box, llm=llm), sandbox)
        for i, (t, new) in enumerate(runs, 1):
            rows = [v for v in rows if not (v.task_id == t.task_id and v.run_kind.startswith("baseline:"))] + new
            store.replace("validations", dataset, rows)
            counts["baseline_runs_now"] += len(new)
            if progress:
                progress(f"baseline {i}/{len(todo)} {t.family} {t.task_id[:10]}: "
                         + ", ".join(f"{v.run_kind[9:]} {v.score}" for v in new))
    n = config.rollouts if llm is not None and getattr(llm, "enabled", False) else 0
    if n:
        kind = f"rollout:{llm.config.model}"
        for t in tasks:
            done = {v.attempt for v in rows if v.task_id == t.task_id and v.run_kind == kind and kept(v)}
            for attempt in (a for a in range(n) if a not in done):
                v, _ = sandbox.call(lambda box, t=t, a=attempt: agent.rollout(t, store.worlds(dataset), box, llm,
                                                                              attempt=a))
                rows = [r for r in rows if not (r.task_id == t.task_id and r.run_kind == kind
                                                 and r.attempt == attempt)] + [v]
                store.replace("validations", dataset, rows)
                counts["rollouts_now"] += 1
                if progress:
                    progress(f"rollout {attempt + 1}/{n} {t.family} {t.task_id[:10]}: {v.score} {v.status}")
    return rows, counts


def difficulty_report(store: Store, dataset: str, config: DatasetConfig, all_tasks: list[Task] | None = None,
                      rows: list[Validation] | None = None, published: set[str] | None = None) -> dict:
    """Difficulty and grader error per family (graders.difficulty.stats) as stats, a table and a PNG plot
    (also written to reports/<dataset>/difficulty.png). `published` defaults to the valid tasks the band keeps."""
    from graders import difficulty

    all_tasks = store.read("tasks", dataset) if all_tasks is None else all_tasks
    rows = store.read("validations", dataset) if rows is None else rows
    verdicts = verdicts_by_task(rows, all_tasks)
    valid = {t.task_id for t in all_tasks if verdicts.get(t.task_id, (False,))[0]}
    if published is None:
        kept = retired(all_tasks, rows, config)
        published = valid - set(kept)
    st = difficulty.stats(all_tasks, rows, valid, published, config.band_min, config.band_max)
    res = difficulty.resistance(all_tasks, rows, published,
                                [r for r in store.read("rejections", dataset) if r.stage == "candidates"])
    out = {"difficulty": st, "difficulty_table": difficulty.table(st), "resistance": res,
           "resistance_table": difficulty.resistance_table(res)}
    if st:
        png = difficulty.plot(st, f"{dataset}: difficulty and grader error")
        report = store.home / "reports" / dataset
        report.mkdir(parents=True, exist_ok=True)
        (report / "difficulty.png").write_bytes(png)
        out.update(difficulty_plot=png, difficulty_plot_path=str(report / "difficulty.png"))
    return out


def retired(tasks: list[Task], rows: list[Validation], config: DatasetConfig) -> dict[str, str]:
    """task id -> why its difficulty band keeps it from publishing (rollouts put it outside [band_min, band_max])."""
    from graders import difficulty

    by_task: dict[str, list[Validation]] = {}
    for v in rows:
        by_task.setdefault(v.task_id, []).append(v)
    out = {}
    for t in tasks:
        d = difficulty.of(t, by_task.get(t.task_id, []), config.band_min, config.band_max)
        if d.retire:
            out[t.task_id] = d.retire
    return out


def verdicts_by_task(rows: list[Validation], tasks: Iterable[Task] = ()) -> dict[str, tuple[bool, str]]:
    """task id -> (valid, reason) from its stored runs (`tasks` give the probes' thresholds)."""
    limits = {t.task_id: replay.probe_limits(t) for t in tasks}
    by_task: dict[str, list[Validation]] = {}
    for v in rows:
        by_task.setdefault(v.task_id, []).append(v)
    return {tid: replay.judge(vs, limits.get(tid)) for tid, vs in by_task.items()}


# --- 7. publish --------------------------------------------------------------------------------------

def audit_rules(store: Store, dataset: str, anon: Anonymizer | None = None):
    """What the leak audit (`privacy.audit.audit`) looks for in this dataset: every gate uses these rules. NER is
    the model anonymization used (none when it ran without), with the digests of the paragraphs it read. `anon`:
    the dataset's anonymizer when the caller has it already."""
    from privacy.audit import Rules
    from privacy.ner import load_ner

    f = entities_path(store, dataset)
    found = json.loads(f.read_text()) if f.exists() else {}
    ner = load_ner(found["ner_model"]) if found.get("ner_model") else None
    p = paragraphs_path(store, dataset)
    raw = p.read_bytes() if ner is not None and p.exists() else b""
    seen = {raw[i:i + 16] for i in range(0, len(raw), 16)}
    return Rules.of(anon or anonymizer(store, dataset), ner=ner, seen=seen)


def funnel(store: Store, dataset: str) -> dict[str, int]:
    all_tasks = store.read("tasks", dataset)
    verdicts = verdicts_by_task(store.read("validations", dataset), all_tasks)
    rej = Counter(r.stage for r in store.read("rejections", dataset))
    return {"events": store.count("anonymized_events", dataset), "work_items": store.count("work_items", dataset),
            "candidates": len(all_tasks) + rej.get("candidates", 0), "tasks": len(all_tasks),
            "validated": sum(1 for t in all_tasks if verdicts.get(t.task_id, (False,))[0])}


def nothing_valid(store: Store, dataset: str) -> str | None:
    """Why the dataset has no valid task, in one line that names the commonest reasons (the rejections of the
    candidates, or the verdicts of the validated tasks), or None when one is valid. What the gate and publish
    say when a dataset gives nothing: the user sees what to change without opening a table."""
    all_tasks = store.read("tasks", dataset)
    verdicts = verdicts_by_task(store.read("validations", dataset), all_tasks)
    if any(verdicts.get(t.task_id, (False,))[0] for t in all_tasks):
        return None
    if all_tasks:
        # a verdict's kind: its words before the first score ("oracle scored", "probe passes: listing_url scored")
        why = Counter(re.split(r"[\d(\[]", verdicts.get(t.task_id, (False, "not replayed"))[1])[0].strip(" :")[:80]
                      for t in all_tasks)
        return (f"none of its {len(all_tasks)} tasks passed validation ("
                + ", ".join(f"{n} {k}" for k, n in why.most_common(3)) + "; see the rejections table)")
    rejected = [r for r in store.read("rejections", dataset) if r.stage == "candidates"]
    if not rejected:
        return "no task was built from it: no work item is a candidate of an enabled family (see the funnel)"
    why = Counter(f"{r.family}: {r.reason}" for r in rejected)
    return (f"no task was built from it: all {len(rejected)} candidates rejected ("
            + ", ".join(f"{n} {k}" for k, n in why.most_common(3)) + "; see the rejections table)")


def provenance(store: Store, dataset: str, config: DatasetConfig) -> list[publishing.Provenance]:
    """Per source of the dataset's anonymized events: how many, the first and last date, its licence (config)."""
    import duckdb

    path = store.partition("anonymized_events", dataset)
    if not path.exists():
        return []
    with duckdb.connect() as con:
        rows = con.execute("select source, count(*), min(ts), max(ts) from read_parquet(?) group by 1 order by 1",
                           [str(path)]).fetchall()
    return [publishing.Provenance(src, int(n), first.date().isoformat(), last.date().isoformat(),
                                  config.source_licenses.get(src, config.license if config.license != "other"
                                                             else "unknown"))
            for src, n, first, last in rows]


class PublishRefused(RuntimeError):
    """The run must not publish (no validated task, too much quarantined): LATEST stays where it was."""


def is_duplicate(error_class: str) -> bool:
    """A quarantined second copy of a record that was read (same Message-ID, key, member name, ts): kept in the
    quarantine table for lineage, but nothing was lost, so it does not count as unreadable."""
    return error_class.startswith("duplicate")


PARTLY_READ = ("git_diff_unreadable",)   # a commit read from its message, people and files; its patch was not


def unreadable_record(error_class: str) -> bool:
    """Whether a quarantine row is a record that could not be read: not a second copy of one that was
    (`is_duplicate`), not a commit that became an event without its patch (a partial clone's missing blobs), not
    an object a repository lacks (rewritten without it, anonymize_repos)."""
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


def quarantine_problem(store: Store, dataset: str, config: DatasetConfig) -> str | None:
    """One line saying why the quarantine rate blocks the dataset, or None when it does not."""
    rate, quarantined, total = quarantine_rate(store, dataset)
    if rate <= config.max_quarantine_rate:
        return None
    return (f"{quarantined} of {total} records ({rate:.0%}) could not be read, over max_quarantine_rate "
            f"{config.max_quarantine_rate:g}: see the quarantine table for file, offset and reason, fix the "
            f"export, or raise max_quarantine_rate in {dataset}/taskmine.toml")


def latest_version(store: Store, dataset: str) -> str | None:
    f = store.published_root() / dataset / "LATEST"
    return f.read_text().strip() or None if f.exists() else None


def publish(store: Store, dataset: str, config: DatasetConfig | None = None
            ) -> tuple[publishing.Published, dict[str, int]]:
    """Publish the validated tasks, under the dataset's lock; refuse (PublishRefused) when there is no
    validated task or the quarantine rate is over the limit, so LATEST keeps pointing at the last good one."""
    from warehouse.locks import dataset_lock

    config = config or DatasetConfig()
    with dataset_lock(store.home, dataset, "publish"):
        all_tasks = store.read("tasks", dataset)
        vals = store.read("validations", dataset)
        verdicts = verdicts_by_task(vals, all_tasks)
        valid = [t for t in all_tasks if verdicts.get(t.task_id, (False,))[0]]
        latest = latest_version(store, dataset)
        keep = f"nothing published, LATEST stays at {latest}" if latest else "nothing published"
        problem = quarantine_problem(store, dataset, config) or withheld_problem(store, dataset, config)
        if problem:
            raise PublishRefused(f"{dataset}: {problem}; {keep}")
        if not valid:
            raise PublishRefused(f"{dataset}: {nothing_valid(store, dataset)}; {keep}")
        out_of_band = retired(valid, vals, config)
        record_rejections(store, dataset, "published", [
            Rejection(dataset=dataset, stage="published", family=t.family, subject_id=t.task_id,
                      reason=out_of_band[t.task_id].split(":")[0], detail=out_of_band[t.task_id])
            for t in valid if t.task_id in out_of_band])
        if len(out_of_band) == len(valid):
            raise PublishRefused(f"{dataset}: every one of its {len(valid)} valid tasks is outside the difficulty "
                                 f"band [{config.band_min:g}, {config.band_max:g}] of its rollouts (see the "
                                 f"rejections table, stage published); {keep}")
        valid = [t for t in valid if t.task_id not in out_of_band]
        measured = per_task_difficulty(valid, vals, config)
        report = difficulty_report(store, dataset, config, all_tasks, vals, {t.task_id for t in valid})
        summary: dict[str, dict] = {}
        for v in vals:
            s = summary.setdefault(v.task_id, {"sandbox": v.sandbox, "oracle": [], "null": []})
            if v.run_kind in ("oracle", "null"):
                s[v.run_kind].append(v.score)
        counts = funnel(store, dataset)
        if out_of_band:
            counts["retired_by_difficulty"] = len(out_of_band)
        counts["published"] = len(valid)
        result = publishing.publish(valid, store.worlds(dataset), store.published_root(), dataset, funnel=counts,
                                    validation=summary, rules=audit_rules(store, dataset), difficulty=measured,
                                    stats=report["difficulty"], resistance=report["resistance"],
                                    provenance=provenance(store, dataset, config),
                                    license=config.license, remotes=repo_remotes(store, dataset),
                                    withheld=withheld_summary(store, dataset, stages=("anonymize",)))
        counts["published"] = result.tasks
        if result.withheld:
            counts["withheld_at_publish"] = len(result.withheld)
        record_withheld(store, dataset, "publish", [
            Withheld(dataset=dataset, stage="publish", record_kind="task", record_id=tid, reason=why)
            for tid, why in result.withheld.items()], {"task": len(valid)})
    return result, counts


def per_task_difficulty(tasks: list[Task], rows: list[Validation], config: DatasetConfig) -> dict[str, dict]:
    """task id -> its published difficulty columns (graders.difficulty)."""
    from graders import difficulty

    by_task: dict[str, list[Validation]] = {}
    for v in rows:
        by_task.setdefault(v.task_id, []).append(v)
    return {t.task_id: difficulty.of(t, by_task.get(t.task_id, []), config.band_min, config.band_max).columns()
            for t in tasks}
