"""`taskmine bench privacy`: how anonymization holds on real records, beside Presidio, in one run.

Input: the real exports in ../shared/data/real (or `--real PATH`), read in place; nothing of them is written
anywhere but a temporary TASKMINE_HOME that is deleted afterwards.

1. The dev set (`bench/data/real_mail_devset.json`; and `real_mail_heldout.json`, labelled the same way after
   the anonymizer was tuned on the dev set): real messages of the Apache, LKML and numpy archives with every
   person name, e-mail address and phone number marked by hand. It stores locations, offsets and short hashes, never
   text: each message is found again by its file, offset or maildir member, and refused when its body or any labelled
   span no longer hashes the same (the extractor changed: relabel). Our side is the anonymize stage as the pipeline
   runs it on the whole dataset the message belongs to (identities from every header, NER and routing-line discovery
   over every message, then `Anonymizer.plan_all` on the body: the replacements the stage makes, its last passes
   included, NER on the paragraphs anonymization changed). Presidio's side is
   `AnalyzerEngine` with its default recognizers on the same spaCy model (`bench.anonymize.presidio_engine`), every
   body analyzed; its anonymizer replaces every result, so a result of any type counts.
   - person recall: labelled person spans whose every letter and digit is inside a replacement (a first name replaced
     and the surname kept is a miss); Presidio: inside results of any type (and, beside it, PERSON results only);
   - contact recall: the same for e-mail addresses and phone numbers;
   - ordinary words changed: words of the English lexicon (`privacy.names.is_english`: spaCy's WordNet tables and
     stop words) outside every labelled span, that a replacement (a result, for Presidio) overlaps, over all such
     words.
   The same for the invented corporate-mail sets (`bench/corporate.py`: `bench/data/corporate_mail/devset.txt`,
   and `heldout.txt`, written and labelled after tuning on the dev set): each written as an mbox, ingested and
   anonymized as a dataset of its own (its headers are the identity graph), its messages found by Message-ID.
2. The real Jira, GitHub, Slack and git exports: titles and bodies (commit messages) after anonymization, words (a
   letter, then letters, digits and `_'-`, two characters or more) that are no part of a known identity or accepted
   outsider (their names, user names, addresses and the handles made of their names) nor of an e-mail address or
   phone number: the share the stage changed, split into ordinary words (English lexicon) and technical ones (the
   rest: identifiers, product names, commands). Words changed that are still a person's (a user name in a home path,
   a profile URL or a merge message that the identity graph does not know) count as changed.
3. NER candidates on every real export: how many NER "persons" there were and how many the evidence rules accepted
   (each with its evidence); `--show` prints them for review (real names: the terminal only).

`--show` also prints, for every dev-set miss and every changed word, the text around it: real names, so only to the
terminal, never to a file.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench import corporate
from bench.anonymize import _STATE, _presidio_chunk, presidio_engine, real_root
from core.config import DatasetConfig
from privacy import pii
from privacy.anonymize import _INVISIBLE, NER_MAX_CHARS
from privacy.audit import Rules, _digest
from privacy.identity import fold
from privacy.names import handle_forms, is_english, name_parts
from privacy.ner import load_ner, ner_status, paragraphs
from privacy.stages import anonymizer, entities_path
from taskmine import flow
from warehouse.store import Store

DEVSET = Path(__file__).resolve().parent / "data" / "real_mail_devset.json"
# labelled after the anonymizer was tuned on the dev set, and scored as it is: a check the tuning did not overfit
HELDOUT = Path(__file__).resolve().parent / "data" / "real_mail_heldout.json"
WORDS_EXPORTS = ("jira-appcelerator-tidev", "jira-finos-perceval-fixture", "github-issues-rust-archive",
                 "slack-r-contributors", "slack-export-viewer-fixture", "git-more-itertools")
_WORD = re.compile(r"[^\W\d_][\w'\u2019-]*\w")
_ALNUM = re.compile(r"\w")


class DevSetError(RuntimeError):
    """The dev set does not match the real exports any more (a message or a span hashes differently)."""


def _h(text: str, n: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


def _prepare(home: Path, root: Path, name: str, ner_model: str = "en_core_web_sm"):
    """Ingest, identities and anonymize of one real export, as the pipeline runs them: (store, dataset, anonymizer).
    A folder holding only git bundles is cloned first (its SOURCES.md tells users to `git clone` it)."""
    store = Store(home)
    ds = name.replace("-", "_")
    src = root / name
    bundles = sorted(src.glob("*.bundle"))
    if bundles and all(p.suffix == ".bundle" for p in src.iterdir()):
        src = home.parent / "clones" / name
        for b in bundles:
            if not (src / b.stem).exists():
                subprocess.run(["git", "clone", "-q", str(b), str(src / b.stem)], check=True, capture_output=True)
    ctx = flow.context(store, ds, src, config=DatasetConfig(ner_model=ner_model), run_id="bench")
    flow.prepare(ctx, links_too=False)
    return store, ds, anonymizer(store, ds)


def load_devset(store, root: Path, datasets: dict[str, str], path: Path = DEVSET) -> list[dict]:
    """The labelled messages of `path` with their bodies, each checked against its hashes."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    by_place: dict[tuple, str] = {}
    for name, ds in datasets.items():
        for e in store.iter("events", ds):
            p = e.provenance
            by_place[(name, p.get("file"), p.get("offset"), p.get("member"))] = e.body or ""
    out = []
    for m in doc["messages"]:
        key = (m["dataset"], m["file"], m["offset"], m["member"])
        body = by_place.get(key)
        if body is None:
            raise DevSetError(f"dev set: no message at {key[0]}/{key[1]} offset {key[2]} {key[3] or ''}")
        if _h(body, 16) != m["body_sha256"]:
            raise DevSetError(f"dev set: the body at {key[0]}/{key[1]} offset {key[2]} {key[3] or ''} changed "
                              "(the e-mail extractor reads it differently now): relabel that message")
        for s, e, kind, h in m["spans"]:
            if _h(body[s:e], 12) != h:
                raise DevSetError(f"dev set: span {s}-{e} ({kind}) of {key[0]}/{key[1]} no longer hashes the same")
        out.append({**m, "body": body})
    return out


def _covered(spans: list[tuple[int, int]], s: int, e: int, text: str) -> bool:
    """Whether every letter and digit of text[s:e] lies inside one of `spans`."""
    return all(any(a <= i < b for a, b in spans) for i in range(s, e) if _ALNUM.match(text[i]))


def _overlaps(spans: list[tuple[int, int]], s: int, e: int) -> bool:
    return any(a < e and b > s for a, b in spans)


def score(messages: list[dict], edits: list[list[tuple[int, int]]], show: bool = False,
          label: str = "") -> dict:
    """{person: [caught, total], contact: [...], words: [changed, total]} of one side."""
    out = {"person": [0, 0], "email": [0, 0], "phone": [0, 0], "words": [0, 0]}
    for m, spans in zip(messages, edits):
        body = m["body"]
        for s, e, kind, _ in m["spans"]:
            out[kind][1] += 1
            hit = _covered(spans, s, e, body)
            out[kind][0] += hit
            if show and not hit:
                print(f"  {label} missed {kind:<6} {m['dataset']} @{m['offset']}{m['member'] or ''}: "
                      f"{body[max(0, s - 30):s]!r} [[{body[s:e]}]] {body[e:e + 30]!r}")
        labelled = [(s, e) for s, e, _, _ in m["spans"]]
        for w in re.finditer(r"[A-Za-z]+(?:['\u2019][a-z]+)?", body):
            if _overlaps(labelled, w.start(), w.end()) or not is_english(w.group(0)):
                continue
            out["words"][1] += 1
            if _overlaps(spans, w.start(), w.end()):
                out["words"][0] += 1
                if show:
                    print(f"  {label} changed word {w.group(0)!r}: {body[max(0, w.start() - 30):w.end() + 30]!r}")
    out["contact"] = [out["email"][0] + out["phone"][0], out["email"][1] + out["phone"][1]]
    return out


def _ours(anon, body: str, rules=None) -> list[tuple[int, int]]:
    """The stage's replacements on `body`, as spans of the body (invisible characters the scrubber drops first
    are mapped back): the first pass, the detector's last pass and, with `rules` (`people_rules`), the last pass
    for people in prose (`Anonymizer.plan_all`)."""
    keep = [i for i, c in enumerate(body) if not _INVISIBLE.match(c)]
    clean = "".join(body[i] for i in keep)
    keep.append(len(body))
    if rules is not None:
        rules.seen = set(rules.base_seen)  # each message as if it were the first the last pass read
    return [(keep[e.start], keep[e.end - 1] + 1 if e.end > e.start else keep[e.start])
            for e in anon.plan_all(clean, rules)]


def people_rules(store, ds: str, anon, ner):
    """The leak audit's rules with NER for a prepared dataset, whose known paragraphs (`base_seen`) are those of
    the raw titles and bodies, as discovery read them: the last pass for people reads what anonymization
    changed, as the anonymize stage does."""
    base = {_digest(p) for e in store.iter("events", ds) for t in (e.title, e.body) if t
            for p in paragraphs(t[:NER_MAX_CHARS])}
    rules = Rules.of(anon, ner=ner, seen=set(base))
    rules.base_seen = base
    return rules


def _score_set(key: str, messages: list[dict], ours: list, show: bool) -> dict:
    results = _presidio_chunk([m["body"] for m in messages])
    theirs = [[(s, e) for _, s, e in r] for r in results]
    typed = [[(s, e) for t, s, e in r if t in ("PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER")] for r in results]
    return {"messages": len(messages), "spans": sum(len(m["spans"]) for m in messages),
            "taskmine": score(messages, ours, show, f"{key} taskmine"),
            "presidio": score(messages, theirs, show, f"{key} presidio"),
            "presidio_person_email_phone_types": score(messages, typed)}


def corporate_sets(home: Path, ner, show: bool = False) -> dict:
    """The invented corporate-mail sets (`bench.corporate`), each ingested and anonymized as its own dataset
    (identity graph from its headers, NER on), scored like the real sets."""
    out = {}
    for key, path in (("corporate_devset", corporate.DEVSET), ("corporate_heldout", corporate.HELDOUT)):
        if not path.exists():
            continue
        msgs = corporate.parse(path)
        export = home.parent / "corporate" / key
        corporate.write_mbox(msgs, export / "mailbox.mbox")
        store = Store(home)
        ctx = flow.context(store, key, export, config=DatasetConfig(ner_model="en_core_web_sm"), run_id="bench")
        flow.prepare(ctx, links_too=False)
        anon = anonymizer(store, key)
        messages = corporate.labelled(store, key, msgs, key)
        rules = people_rules(store, key, anon, ner)
        out[key] = _score_set(key, messages, [_ours(anon, m["body"], rules) for m in messages], show)
    return out


def words_changed(store, ds: str, anon, show: bool = False) -> dict:
    """Share of words outside every identity string that the anonymize stage changed in titles and bodies."""
    identity_words: set[str] = set()
    for p in anon.people + anon.outsiders:
        for s in (*p.names, *p.usernames, *p.emails):
            identity_words.update(fold(w) for w in re.split(r"[\s@.,_+-]+", s) if w)
        for n in p.names:
            parts = name_parts(n)
            if parts:  # the handles people make of their names ("jroe", "jane-roe") are theirs too
                identity_words.update(h for h, _ in handle_forms(parts[0], parts[2]))
    counts = Counter()
    changed_words: Counter = Counter()
    for e in store.iter("events", ds):
        for text in (e.title, e.body):
            if not text:
                continue
            spans = _ours(anon, text)
            contacts = [(sp.start, sp.end) for sp in pii.find(text) if sp.kind in ("email", "phone")]
            for w in _WORD.finditer(text):
                word = w.group(0)
                if _overlaps(contacts, w.start(), w.end()):
                    continue  # a word of an address is the address's
                parts = [fold(x) for x in re.split(r"['\u2019_-]+", word) if x]
                if any(p in identity_words for p in parts):
                    continue
                kind = "ordinary" if is_english(word) else "technical"
                counts[kind] += 1
                if _overlaps(spans, w.start(), w.end()):
                    counts[f"{kind}_changed"] += 1
                    changed_words[word] += 1
                    if show:
                        print(f"  {ds}: changed {kind} word {word!r}: {text[max(0, w.start() - 40):w.end() + 40]!r}")
    return {"ordinary": [counts["ordinary_changed"], counts["ordinary"]],
            "technical": [counts["technical_changed"], counts["technical"]],
            "distinct_changed": len(changed_words)}


def candidates(store, ds: str) -> dict:

    found = json.loads(entities_path(store, ds).read_text())
    cands = found.get("candidates", [])
    ner = [c for c in cands if c.get("source") != "routing" and c.get("evidence") != "known person"]
    return {"ner_candidates": len(ner), "ner_accepted": sum(1 for c in ner if c["accepted"]),
            "known_people_tagged": sum(1 for c in cands if c.get("evidence") == "known person"),
            "routing_accepted": sum(1 for c in cands if c.get("source") == "routing" and c["accepted"]),
            "list": cands}


def bench_privacy(real: str | None = None, show: bool = False) -> int:
    root = real_root(real)
    report: dict = {"real": str(root)}
    with tempfile.TemporaryDirectory(prefix="taskmine-bench-privacy-") as tmp:
        home = Path(tmp) / "home"
        names = sorted(p.name for p in root.iterdir() if p.is_dir())
        prepared = {}
        t0 = time.perf_counter()
        for name in names:
            try:
                prepared[name] = _prepare(home, root, name)
            except Exception as exc:  # an export no extractor reads (a bare git bundle) is reported, not fatal
                report.setdefault("skipped", {})[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        report["prepare_s"] = round(time.perf_counter() - t0, 1)
        store = next(iter(prepared.values()))[0] if prepared else None
        if store is None:
            raise SystemExit("bench privacy: no real export could be read")

        _STATE["presidio"] = presidio_engine()
        ner = load_ner("en_core_web_sm")
        if ner is None:
            raise SystemExit(f"bench privacy: {ner_status()}")
        for key, path in (("devset", DEVSET), ("heldout", HELDOUT)):
            mail = {n: prepared[n][1] for n in {m["dataset"] for m in json.loads(path.read_text())["messages"]}}
            messages = load_devset(store, root, mail, path)
            rules = {n: people_rules(store, prepared[n][1], prepared[n][2], ner) for n in mail}
            ours = [_ours(prepared[m["dataset"]][2], m["body"], rules[m["dataset"]]) for m in messages]
            report[key] = _score_set(key, messages, ours, show)
        report.update(corporate_sets(home, ner, show))
        report["exports"] = {}
        for name in names:
            if name in prepared:
                st, ds, anon = prepared[name]
                entry = candidates(st, ds)
                if show:
                    for c in entry["list"]:
                        print(f"  {name}: candidate {c['name']!r} seen {c.get('seen')} -> "
                              f"{'ACCEPTED' if c['accepted'] else 'rejected'} ({c.get('evidence')})")
                entry.pop("list")
                if name in WORDS_EXPORTS:
                    entry["words"] = words_changed(st, ds, anon, show)
                report["exports"][name] = entry
    _print(report)
    print(json.dumps(report, sort_keys=True, separators=(",", ":")))
    return 0


def _pct(pair: list[int]) -> str:
    return f"{pair[0] / pair[1]:.3f} ({pair[0]}/{pair[1]})" if pair[1] else "n/a"


def _print(r: dict) -> None:
    print(f"\nprivacy benchmark on the real exports in {r['real']} (prepared in {r['prepare_s']}s)")
    for key, name in (("devset", "dev set"), ("heldout", "held-out set"),
                      ("corporate_devset", "corporate dev set"), ("corporate_heldout", "corporate held-out set")):
        d = r.get(key)
        if d is None:
            continue
        what = "invented corporate" if key.startswith("corporate") else "hand-labelled real"
        print(f"{name}: {d['messages']} {what} messages, {d['spans']} spans")
        print(f"{'':<34} {'taskmine':>22} {'presidio (any type)':>22} {'presidio (typed)':>22}")
        for k, title in (("person", "person-name recall"), ("email", "e-mail recall"), ("phone", "phone recall"),
                         ("contact", "contact recall (e-mail + phone)"), ("words", "ordinary words changed")):
            print(f"{title:<34} {_pct(d['taskmine'][k]):>22} {_pct(d['presidio'][k]):>22} "
                  f"{_pct(d['presidio_person_email_phone_types'][k]):>22}")
    print("\nreal exports: NER candidates (persons NER tagged that no identity carries) and words changed")
    print(f"{'export':<30} {'ner cand.':>9} {'accepted':>9} {'routing':>8} {'ordinary changed':>22} "
          f"{'technical changed':>22}")
    for name, e in r["exports"].items():
        w = e.get("words")
        print(f"{name:<30} {e['ner_candidates']:>9} {e['ner_accepted']:>9} {e['routing_accepted']:>8} "
              f"{_pct(w['ordinary']) if w else '':>22} {_pct(w['technical']) if w else '':>22}")
    for name, why in r.get("skipped", {}).items():
        print(f"{name:<30} skipped: {why}")
