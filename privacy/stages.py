"""The privacy stages: `identities` (who is who across sources) and `anonymize` (consistent pseudonyms, PII and
secrets scrubbed, git histories rewritten, and what the leak audit still refuses withheld), with the dataset's
privacy state they keep under `private/`: the vault, the entities discovery found, the paragraphs NER read.

`audit_rules` is what the leak audit looks for in a dataset: every gate (the anonymized_leaks check, the publish
stage, the published leak audit, `taskmine audit`) uses these rules, and `anonymize` runs them as its last pass
(DESIGN.md, convention 20).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from core import parallel
from core.config import DatasetConfig
from core.stage import CheckResult, RunContext, StageResult, preview
from extractors.stages import GIT_OBJECT
from privacy import identity
from privacy.anonymize import Anonymizer, Vault, discover, message_ids, settle_secret_literals
from privacy.audit import Rules
from privacy.ner import load_ner, ner_status
from privacy.repos import anonymize_repos
from privacy.withhold import Check, record_withheld, withheld_problem, withheld_summary, withhold_events
from warehouse.ids import content_hash
from warehouse.schemas import Quarantine, Withheld
from warehouse.store import Store

# --- identities --------------------------------------------------------------------------------------------

def identities(ctx: RunContext) -> StageResult:
    """Handles from every source resolved to persons, with the evidence of each merge (privacy.identity)."""
    store, dataset = ctx.store, ctx.dataset
    rows = identity.resolve(dataset, store.iter("events", dataset))
    store.replace("identities", dataset, rows)
    people = {r.person_id for r in rows}
    merged = sum(1 for r in rows if any("same" in e for e in r.evidence))
    return StageResult({"handles": len(rows), "persons": len(people), "merged_handles": merged})


# --- anonymize ----------------------------------------------------------------------------------------------

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


def find_entities(store: Store, dataset: str, config: DatasetConfig, workers: int = 1) -> str:
    """Read the raw text once for what no structured field says: NER's people and places (each person only
    with evidence), the people of mail routing lines, and how often words occur in lower case. Keeps it under
    private/ (every candidate with its evidence, for review). Returns NER's status line. NER reads in `workers`
    processes (`Ner.found`: the same spans for any number)."""
    ner = load_ner(config.ner_model) if config.ner_model else None
    status = ner_status() if config.ner_model else "NER off (ner_model = \"\" in taskmine.toml)"
    people = identity.persons(store.iter("identities", dataset))
    found = discover(store.iter("events", dataset), ner, config.allow, workers=workers, people=people)
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


def anonymize(ctx: RunContext) -> StageResult:
    """Pseudonymize every event and rewrite every git repository of the dataset; withhold what the leak audit
    still refuses afterwards (`withhold_events`, and the rewrite's blobs, paths and messages), so the rest goes
    on (DESIGN.md, Convention 19).

    In chunks (at most `config.chunk_events` events, `parallel.chunk_size`) over `config.workers` processes
    (core.parallel), with the output of one process: what is global runs here first and the workers are forked after
    it (discovery, the identities and the vault's pseudonyms, then the last pass for people and the leak audit's
    rules); the per-event work in between (`Anonymizer.event`; the audit's verdicts, `withhold_events`) depends on
    nothing but that and the event. Three passes over the chunks, each kept on disk between them (`parallel.Spill`)
    so memory holds a few chunks and never the dataset: (1) scrubbed in the workers, the secret values each found
    merged here; (2) here, in the dataset's order, every diff given the literals of every secret found
    (`settle_secret_literals`) and the last pass for people in prose (`settle_people`, a stream: a person it finds
    is replaced wherever the paragraph recurs); (3) the leak audit's verdicts in the workers, with the rules the
    last pass left, written as their chunks come back (`Store.replace_sorted`)."""
    store, dataset, config, run_id = ctx.store, ctx.dataset, ctx.config, ctx.run_id
    n = parallel.workers(config.workers)
    status = find_entities(store, dataset, config, n)
    anon = anonymizer(store, dataset, with_message_ids=True)
    candidates = json.loads(entities_path(store, dataset).read_text()).get("candidates", [])
    size = parallel.chunk_size(store.count("events", dataset), n, config.chunk_events)
    _ = anon.scrub.detector  # the scrubber's last pass, built once here for every worker to inherit
    failed: list[Quarantine] = []
    withheld: list[Withheld] = []
    checked = Counter({"event": 0, "commit_file": 0, "git": 0})
    shown: list = []
    settled: dict[str, int] = {}
    spills = store.private / "spill"
    with parallel.Spill(spills) as scrubbed, parallel.Spill(spills) as people_settled:
        # 1. every chunk scrubbed (in the workers), kept on disk: the secret values of every chunk are known after
        for done, lost, secrets in parallel.fork_map(_scrub, parallel.chunked(store.iter("events", dataset), size),
                                                     n, anon):
            scrubbed.put(done)
            failed += lost
            anon.scrub.code_secrets.update(secrets)

        # 2. here, in the dataset's order: every diff given the literals of every secret found, then the last pass
        #    for people in prose (a stream: a person it finds is replaced wherever the paragraph recurs after)
        def literals_settled() -> Iterator:
            if not anon.scrub.has_secret_literals():   # nothing to settle: the raw events are not read again
                for rows in scrubbed.drain():
                    yield from rows
                return
            raw = parallel.chunked(store.iter("events", dataset), size)   # chunk k of the raw gave chunk k above
            for rows, events in zip(scrubbed.drain(), raw, strict=True):
                settle_secret_literals(anon, events, rows)
                yield from rows

        for chunk in parallel.chunked(settle_people(store, dataset, anon, literals_settled(), config, n, settled),
                                      size):
            people_settled.put(chunk)

        # 3. the leak audit's verdicts (in the workers, with the rules as the last pass left them), written as the
        #    chunks come back
        check = Check(audit_rules(store, dataset, anon))

        def judged() -> Iterator:
            for out, held, seen, secrets in parallel.fork_map(_withhold, people_settled.drain(), n,
                                                              (dataset, check, run_id)):
                withheld.extend(held)
                checked.update(seen)
                anon.scrub.code_secrets.update(secrets)
                shown.extend([r for r in out if r.body][:5 - len(shown)])
                yield from out

        written = store.replace_sorted("anonymized_events", dataset, judged())
    if failed:
        store.merge("quarantine", dataset, failed)
    repos = anonymize_repos(store, dataset, ctx.dataset_dir, anon, check, run_id)
    for info in repos.values():
        withheld += [Withheld(**w) for w in info.get("withheld", [])]
        checked["git"] += info.get("checked", 0)
    record_withheld(store, dataset, "anonymize", withheld, checked)
    quarantine = store.read("quarantine", dataset)
    unreadable = sum(1 for q in quarantine if q.error_class == "git_unreadable")
    objects = sum(1 for q in quarantine if q.error_class.startswith(GIT_OBJECT))
    summary = withheld_summary(store, dataset)
    return StageResult({"events": written, "quarantined": len(failed), "persons": len(anon.people),
                        "repositories_quarantined": unreadable, "git_objects_unreadable": objects,
                        "withheld": summary["total"], "withheld_rate": summary["rate"],
                        **{f"withheld_{k}": n for k, n in summary["by_kind"].items()},
                        "outsiders": len(anon.outsiders), "person_candidates": len(candidates),
                        "person_candidates_accepted": sum(1 for c in candidates if c.get("accepted")),
                        "last_pass_persons": settled.get("persons_found", 0),
                        "repositories": len(repos), "ner": status, "workers": n},
                       preview(shown, ("kind", "actor_name", "title")),
                       extra={"withheld": summary})


def _scrub(anon: Anonymizer, events: list) -> tuple[list, list[Quarantine], dict[str, str]]:
    """A chunk of events anonymized (in a worker): the events, those that failed as quarantine rows, and the
    secret values the scrubber knows (found in this chunk or before; merged by the caller)."""
    rows, failed = [], []
    for e in events:
        try:
            rows.append(anon.event(e))
        except Exception as exc:  # an event we cannot scrub is kept out, never published raw
            failed.append(Quarantine(
                quarantine_id=content_hash("anonymize", e.dataset, e.event_id), dataset=e.dataset, source=e.source,
                file=str(e.provenance.get("file", "")), offset=e.provenance.get("offset"), member=e.native_id,
                error_class="anonymize_failed", message=f"{type(exc).__name__}: {exc}"[:500]))
    return rows, failed, dict(anon.scrub.code_secrets)


def _withhold(state: tuple, rows: list) -> tuple[list, list[Withheld], Counter, dict[str, str]]:
    """A chunk of anonymized events judged by the leak audit (in a worker; `withhold_events`), with the secret
    values the audit's detector met (merged by the caller, as `_scrub`'s)."""
    dataset, check, run_id = state
    out, withheld, checked = withhold_events(dataset, rows, check, run_id)
    return out, withheld, checked, dict(check.rules.scrub.code_secrets)


def settle_people(store: Store, dataset: str, anon: Anonymizer, rows: Iterable, config: DatasetConfig,
                  workers: int = 1, stats: dict[str, int] | None = None) -> Iterator:
    """The anonymizer's last pass for people in prose over a stream of anonymized events
    (`Anonymizer.settle_people_stream`: NER and the leak audit's evidence rules on every paragraph anonymization
    changed), with the model discovery used, NER reading in `workers` processes (`Ner.spread`). The paragraphs it
    read join the audit's skip list (`paragraphs_path`: their verdict is known), and the vault keeps the pseudonyms
    of the people it found, once the stream is exhausted. `stats` gets its counts. Without a model: `rows`."""
    ner = load_ner(config.ner_model) if config.ner_model else None
    if ner is None:
        yield from rows
        return
    p = paragraphs_path(store, dataset)
    raw = p.read_bytes() if p.exists() else b""
    seen = {raw[i:i + 16] for i in range(0, len(raw), 16)}
    with ner.spread(workers):
        yield from anon.settle_people_stream(rows, ner, seen, stats=stats)
    anon.vault.save()
    p.write_bytes(b"".join(sorted(seen)))


# --- the leak audit's rules and the gate ---------------------------------------------------------------

def audit_rules(store: Store, dataset: str, anon: Anonymizer | None = None):
    """What the leak audit (`privacy.audit.audit`) looks for in this dataset: every gate uses these rules. NER is
    the model anonymization used (none when it ran without), with the digests of the paragraphs it read. `anon`:
    the dataset's anonymizer when the caller has it already."""
    f = entities_path(store, dataset)
    found = json.loads(f.read_text()) if f.exists() else {}
    ner = load_ner(found["ner_model"]) if found.get("ner_model") else None
    p = paragraphs_path(store, dataset)
    raw = p.read_bytes() if ner is not None and p.exists() else b""
    seen = {raw[i:i + 16] for i in range(0, len(raw), 16)}
    return Rules.of(anon or anonymizer(store, dataset), ner=ner, seen=seen)


def check_withheld(ctx: RunContext) -> CheckResult:
    """Gate: what the leak audit still found after anonymization was withheld; the share withheld stays under the
    dataset's max_withheld_rate."""
    s = withheld_summary(ctx.store, ctx.dataset, stages=("anonymize",))
    problem = withheld_problem(ctx, stages=("anonymize",))
    why = problem or ("nothing withheld: the leak audit finds nothing in the anonymized records" if not s["total"]
                      else f"{s['total']} of {s['records']} records withheld ({s['rate']:.2%}; "
                           f"{', '.join(f'{n} {k}' for k, n in list(s['by_reason'].items())[:4])}); the rest goes on")
    return CheckResult(problem is None, why, {
        "withheld": s["total"], "records": s["records"], "rate": s["rate"], "limit": ctx.config.max_withheld_rate,
        "by_kind": ", ".join(f"{k} {n}" for k, n in s["by_kind"].items()) or "none",
        "by_reason": ", ".join(f"{k} {n}" for k, n in s["by_reason"].items()) or "none"})
