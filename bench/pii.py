"""Throughput of `privacy.pii.find` on mixed realistic text, and that pathological inputs stay linear.

The corpus is generated (seeded) from templates of what the exports hold: Jira-style comments, e-mails
with headers, application logs, YAML/.env configs with a few secrets, git diffs, plus real Python source
from the standard library (read in place, never copied). Most documents hold no PII at all, as in real
data; the rest hold one or two findings. Each measurement is the best of `REPEATS` runs (the least
disturbed by the machine). If `presidio_analyzer` is importable its AnalyzerEngine is timed on a sample of
the same documents for comparison; nothing is installed or downloaded here.
"""

from __future__ import annotations

import random
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path

from privacy.pii import find

REPEATS = 3

_FIRST = "Ana Ben Chloe Dev Erin Farid Gus Hana Ivo Jun Kemal Lea Mo Nia Omar Pia Raj Sol Tae Uma".split()
_LAST = "Abara Bjorn Costa Dlamini Eze Fujita Garcia Haddad Ito Jensen Kowal Lind Mensah Novak Okafor".split()
_WORDS = ("the build fails when the cache is cold and the retry loop never backs off so requests pile up until "
          "the worker is killed we should add a timeout and log the payload size before parsing it also the "
          "migration runs twice on deploy because the lock is not held across restarts").split()


def _sentence(rng: random.Random, n: int = 14) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + "."


def _doc(rng: random.Random, stdlib: list[str]) -> str:
    kind = rng.random()
    name = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    if kind < 0.30:  # Jira comment
        lines = [_sentence(rng) for _ in range(rng.randint(2, 8))]
        lines.insert(1, f"Seen on PROJ-{rng.randint(1, 9999)} since 2.{rng.randint(0, 20)}.{rng.randint(0, 9)} "
                        f"(commit {rng.getrandbits(160):040x}), build {rng.randint(1000, 9999)} at 2021-03-04 12:30.")
        if rng.random() < 0.25:
            lines.append(rng.choice([f"Ping {name.split()[0].lower()}@customer.example or call +1 415 555 "
                                     f"{rng.randint(1000, 9999)}.", f"Repro host 10.{rng.randint(0, 255)}.3.7, "
                                     f"see https://wiki.example/users/{name.split()[1].lower()}.",
                                     "Customer card 4111 1111 1111 1111 was charged twice."]))
        return "\n".join(lines)
    if kind < 0.45:  # e-mail
        return (f"From: {name} <{name.replace(' ', '.').lower()}@acme.example>\nTo: team@acme.example\n"
                f"Date: Thu, 4 Mar 2021 12:30:45 +0000\nSubject: Re: {_sentence(rng, 5)}\n\n"
                + "\n".join(_sentence(rng) for _ in range(rng.randint(3, 10)))
                + f"\n\n--\n{name}\nAcme Corp | +44 20 7946 {rng.randint(1000, 9999)}\n")
    if kind < 0.60:  # logs
        out = []
        for _ in range(rng.randint(10, 40)):
            out.append(f"2021-03-04T12:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z "
                       f"{rng.choice(['INFO', 'WARN', 'ERROR'])} req={rng.getrandbits(128):032x} "
                       f"worker-{rng.randint(1, 16)} took {rng.randint(1, 999)}ms from 10.0.{rng.randint(0, 255)}."
                       f"{rng.randint(1, 254)} status={rng.choice([200, 201, 404, 500])}")
        out.append('  File "/home/runner/work/app/app/db.py", line 42, in connect')
        return "\n".join(out)
    if kind < 0.70:  # config
        secret = rng.random() < 0.3
        return "\n".join([
            "service:", f"  name: api-{rng.randint(1, 9)}", f"  replicas: {rng.randint(1, 8)}",
            f"  image: registry.example/api:1.{rng.randint(0, 40)}.{rng.randint(0, 9)}",
            "  timeout_ms: 3000", "  password: ${DB_PASSWORD}", "  max_tokens: 1024",
            f"  api_key: {rng.getrandbits(128):032x}" if secret else "  api_key: <set in vault>",
            f"DATABASE_URL=postgres://app:{rng.getrandbits(64):016x}@db:5432/app" if secret else "LOG_LEVEL=info",
        ])
    if kind < 0.85:  # git diff
        src = rng.choice(stdlib)
        a = rng.randrange(0, max(1, len(src) - 1500))
        body = "\n".join(("+" if i % 7 == 0 else " ") + line for i, line in enumerate(src[a:a + 1500].splitlines()))
        return (f"commit {rng.getrandbits(160):040x}\nAuthor: {name} <{name.split()[0].lower()}@acme.example>\n"
                f"Date:   Thu Mar 4 12:30:45 2021 +0100\n\n    {_sentence(rng, 8)}\n\ndiff --git a/x.py b/x.py\n"
                f"@@ -{rng.randint(1, 500)},7 +{rng.randint(1, 500)},8 @@\n{body}")
    src = rng.choice(stdlib)  # plain source
    a = rng.randrange(0, max(1, len(src) - 4000))
    return src[a:a + 4000]


def corpus(megabytes: float = 10.0, seed: int = 1) -> list[str]:
    """Deterministic documents of mixed kinds totalling about `megabytes` million characters."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    stdlib = [p.read_text(errors="replace") for p in sorted(lib.glob("*.py"))[:200]]
    rng = random.Random(seed)
    docs, total = [], 0
    while total < megabytes * 1e6:
        docs.append(_doc(rng, stdlib))
        total += len(docs[-1])
    return docs


def _best(fn) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _pathological(n: int = 2_000_000) -> dict[str, str]:
    return {"letters": "a" * n, "digits": "1" * n, "digit groups": "12 " * (n // 3), "at signs": "ab@" * (n // 3),
            "base64": "QUJDRGVmZ2g0NTY3" * (n // 16), "jwt-ish": "eyJabcdefgh." * (n // 12),
            "colons": "fe80:" * (n // 5), "assignments": "token: " * (n // 7), "urls": "http://a/~b " * (n // 12),
            "state+zip": "IL 62704 " * (n // 9), "key blocks": "-----BEGIN PRIVATE KEY-----\n" * (n // 28)}


def bench_pii(megabytes: float = 10.0, big_mb: int = 50) -> int:
    docs = corpus(megabytes)
    chars = sum(map(len, docs))
    t_docs = _best(lambda: [find(d) for d in docs])
    joined = "\n\n".join(docs)
    t_joined = _best(lambda: find(joined))
    kinds = Counter(sp.kind for d in docs for sp in find(d))
    print(f"pii.find on {len(docs)} documents, {chars / 1e6:.1f}M chars, best of {REPEATS}")
    print(f"  per document : {t_docs:6.2f}s  {chars / t_docs / 1e6:6.2f}M chars/s")
    print(f"  one text     : {t_joined:6.2f}s  {len(joined) / t_joined / 1e6:6.2f}M chars/s")
    print("  findings     : " + ", ".join(f"{k}={n}" for k, n in kinds.most_common()))
    try:
        # Presidio is a dev dependency: loaded only for the comparison
        from presidio_analyzer import AnalyzerEngine
    except ImportError:
        print("  presidio     : not installed (pip install presidio-analyzer and a spaCy model to compare)")
    else:
        engine = AnalyzerEngine()
        sample = docs[: max(1, len(docs) // 20)]
        n = sum(map(len, sample))
        t0 = time.perf_counter()
        for d in sample:
            engine.analyze(d, language="en")
        t_p = time.perf_counter() - t0
        print(f"  presidio     : {t_p:6.2f}s  {n / t_p / 1e6:6.2f}M chars/s on {len(sample)} documents "
              f"-> pii.find is {(chars / t_docs) / (n / t_p):.1f}x faster")
    worst = max((time.perf_counter() - t0, name) for name, text in _pathological().items()
                for t0 in [time.perf_counter()] if find(text) is not None)
    print(f"  2 MB pathological lines: slowest {worst[1]!r} {worst[0]:.2f}s")
    big = (joined * (big_mb * 1_000_000 // len(joined) + 1))[: big_mb * 1_000_000]
    t0 = time.perf_counter()
    n_big = len(find(big))
    print(f"  {big_mb} MB text  : {time.perf_counter() - t0:6.2f}s, {n_big} spans")
    return 0


if __name__ == "__main__":
    sys.exit(bench_pii(*(float(a) for a in sys.argv[1:2])))
