"""`taskmine bench ingest`: events/s of each extractor against the bare parse of the same input, and
peak memory as the input grows.

Baselines (the least any reader of the same bytes must do):
- git: `git log --all -p --numstat` read to the end;
- Jira, GitHub, Slack JSON: `json.load` of every input file (for a Slack export, every JSON file in it);
- mbox: Python's `mailbox.mbox` iterating every message (it parses headers);
- maildir: `mailbox.Maildir` likewise; .eml: `email.message_from_binary_file`.
Each is run `REPEATS` times; the best time counts (the least disturbed by the machine).

Memory: each extractor runs alone in a fresh process on the sample at `scale` and at `10 * scale`
(`--memory`); the peak of what Python allocated while extracting (tracemalloc, imports excluded) is
reported for both, so a flat line means it streams.
"""

from __future__ import annotations

import datetime as dt
import email
import json
import mailbox
import os
import subprocess
import sys
import time
from pathlib import Path

from extractors import detect
from extractors.base import get_extractor
from sample.company import write_sample

REPEATS = 3


def _best(fn) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        n = fn()
        best = min(best, time.perf_counter() - t0)
    return best, n


def _files(p: Path, suffix: str = "") -> list[Path]:
    return [p] if p.is_file() else sorted(x for x in p.rglob(f"*{suffix}") if x.is_file() and ".git" not in x.parts)


def baseline(source: str, name: str, inputs: list[Path]) -> tuple[str, callable]:
    if source == "git":
        def run():
            total = 0
            for repo in inputs:
                proc = subprocess.Popen(["git", "-C", str(repo), "log", "--all", "-p", "--numstat"],
                                        stdout=subprocess.PIPE)
                while chunk := proc.stdout.read(1 << 20):
                    total += len(chunk)
                proc.wait()
            return total
        return "git log -p --numstat", run
    if name == "mbox":
        return "mailbox.mbox", lambda: sum(1 for p in inputs for _ in mailbox.mbox(str(p), create=False))
    if name == "maildir":
        return "mailbox.Maildir", lambda: sum(1 for p in inputs for _ in mailbox.Maildir(str(p), create=False))
    if name == "eml":
        def run():
            n = 0
            for p in inputs:
                for f in _files(p, ".eml"):
                    with open(f, "rb") as fh:
                        n += bool(email.message_from_binary_file(fh))
            return n
        return "email.message_from_file", run

    def run():
        n = 0
        for p in inputs:
            for f in _files(p, ".json"):
                with open(f, "rb") as fh:
                    n += bool(json.load(fh))
        return n
    return "json.load", run


def _extract(name: str, root: Path, inputs: list[Path]) -> int:
    ex = get_extractor(name)("bench", None, "bench", root=root)
    return sum(1 for p in inputs for r in ex.iter_records(p) if r.__class__.__name__ == "Event")


def _write(workdir: Path, scale: int) -> Path:
    ds_dir = workdir / f"scale{scale}" / "bench"
    if not ds_dir.exists():
        t0 = time.perf_counter()
        write_sample(ds_dir.parent, seed=1, scale=scale, dataset="bench")
        print(f"sample at scale {scale} written in {time.perf_counter() - t0:.1f}s to {ds_dir}", flush=True)
    return ds_dir


def _derive(ds_dir: Path) -> Path:
    """The formats the sample does not write, made from it: the mbox as a maildir and as .eml files, and
    the Jira issues as GitHub REST JSON (issues and comments arrays), so every extractor is measured."""
    out = ds_dir.parent / "derived"
    if out.exists():
        return out
    (out / "eml").mkdir(parents=True)
    md = mailbox.Maildir(str(out / "maildir"), create=True)
    n = 0
    for mbox_path in sorted((ds_dir / "mail").glob("*.mbox")):
        for msg in mailbox.mbox(str(mbox_path), create=False):
            md.add(msg)
            (out / "eml" / f"{n:06d}.eml").write_bytes(msg.as_bytes())
            n += 1
    issues, comments = [], []
    for i, f in enumerate(sorted((ds_dir / "jira").glob("*.json"))):
        data = json.loads(f.read_text())
        for issue in data.get("issues", [data]):
            fields, number = issue["fields"], len(issues) + 1
            url = f"https://github.com/acme/app/issues/{number}"
            user = {"login": (fields.get("reporter") or {}).get("name") or "ghost", "id": i}
            issues.append({"url": url.replace("github.com", "api.github.com/repos"), "html_url": url,
                           "node_id": f"I_{number}", "number": number, "title": fields["summary"],
                           "body": fields.get("description") or "", "user": user, "state": "open",
                           "labels": [], "comments": len(fields["comment"]["comments"]),
                           "created_at": _iso(fields["created"]), "updated_at": _iso(fields["updated"])})
            for c in fields["comment"]["comments"]:
                comments.append({"id": int(c["id"]), "node_id": f"IC_{c['id']}", "issue_url": issues[-1]["url"],
                                 "html_url": f"{url}#issuecomment-{c['id']}", "body": c["body"],
                                 "user": {"login": c["author"]["name"], "id": 0}, "created_at": _iso(c["created"]),
                                 "updated_at": _iso(c["created"])})
    (out / "github").mkdir()
    (out / "github" / "issues.json").write_text(json.dumps(issues))
    (out / "github" / "comments.json").write_text(json.dumps(comments))
    return out


def _iso(jira_ts: str) -> str:
    """Jira "2021-03-04T10:15:30.000+0000" -> GitHub "2021-03-04T10:15:30Z" (UTC)."""
    return dt.datetime.strptime(jira_ts, "%Y-%m-%dT%H:%M:%S.%f%z").astimezone(dt.UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def _plan(ds_dir: Path) -> list[tuple[str, Path, Path]]:
    """(extractor, input, dataset root) over the sample and the formats derived from it."""
    derived = _derive(ds_dir)
    return [(n, p, ds_dir) for n, p in detect.plan(ds_dir)] + [(n, p, derived) for n, p in detect.plan(derived)]


def bench_ingest(workdir: Path, scale: int, memory: bool = False) -> int:
    ds_dir = _write(workdir, scale)
    plan = _plan(ds_dir)
    rows = []
    for name in sorted({n for n, _, _ in plan}):
        inputs = [p for n, p, _ in plan if n == name]
        root = next(r for n, _, r in plan if n == name)
        t_ex, n_events = _best(lambda name=name, inputs=inputs, root=root: _extract(name, root, inputs))
        label, base = baseline(get_extractor(name).source, name, inputs)
        t_base, _ = _best(base)
        rows.append((name, n_events, t_ex, n_events / t_ex if t_ex else 0, label, t_base,
                     t_ex / t_base if t_base else float("nan")))
    print(f"\ningest benchmark, sample scale {scale}, best of {REPEATS}")
    head = ("extractor", "events", "time s", "events/s", "baseline", "time s", "slower")
    print(f"{head[0]:<12} {head[1]:>8} {head[2]:>8} {head[3]:>10}  {head[4]:<24} {head[5]:>8} {head[6]:>7}")
    for name, n, t, rate, label, tb, ratio in rows:
        print(f"{name:<12} {n:>8} {t:>8.2f} {rate:>10.0f}  {label:<24} {tb:>8.3f} {ratio:>6.1f}x")
    if memory:
        big = _write(workdir, scale * 10)
        print(f"\npeak memory allocated while extracting (tracemalloc), each extractor alone in a fresh "
              f"process, scale {scale} vs {scale * 10}")
        print(f"{'extractor':<12} {'events':>8} {'peak MB':>8}   {'events':>8} {'peak MB':>8}  growth")
        for name in sorted({n for n, _, _ in plan}):
            small = _measure(name, ds_dir)
            large = _measure(name, big)
            print(f"{name:<12} {small[0]:>8} {small[1]:>8.0f}   {large[0]:>8} {large[1]:>8.0f}  "
                  f"{large[1] / small[1]:.2f}x for {large[0] / max(small[0], 1):.0f}x the events")
    return 0


def _measure(name: str, ds_dir: Path) -> tuple[int, float]:
    """(events, peak MB of Python allocations while extracting) of one extractor, in a fresh interpreter."""
    code = ("import sys, tracemalloc; from pathlib import Path; "
            "from extractors.base import registry; from bench.ingest import _extract, _plan; registry(); "
            "plan = [(p, r) for k, p, r in _plan(Path(sys.argv[2])) if k == sys.argv[1]]; "
            "tracemalloc.start(); n = _extract(sys.argv[1], plan[0][1], [p for p, _ in plan]); "
            "print(n, tracemalloc.get_traced_memory()[1] / 2**20)")
    out = subprocess.run([sys.executable, "-c", code, name, str(ds_dir)], capture_output=True, text=True,
                         env=os.environ, check=True).stdout.split()
    return int(out[0]), float(out[1])

