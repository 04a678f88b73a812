"""The audit sheet for people: a sample of a dataset's tasks on one self-contained HTML page, and the reviewers'
verdicts read back into the agreement between reviewers and the grader, with a confidence interval.

    taskmine review --dataset acme --n 50 --out review/          writes review/index.html
    (reviewers open it offline, answer, press "Download verdicts" -> verdicts-<name>.json)
    taskmine review --dataset acme --read review/verdicts-*.json  prints and stores the agreement

For each task the page shows what a reviewer needs to judge whether a high score means the task was solved:
the prompt, the world (cutoff, what it hides, its repositories' refs), the reference the grader accepts, the
rubric with each check's criterion and weight, how the oracle was graded check by check, and what the probes
(cheap or wrong outcomes) scored. A reviewer answers: is the reference a right answer to the prompt, could the
agent have known it at the cutoff, would the rubric reward a different right answer, and does it reject the
probes' answers — summarised as "the grader is right" (agree / disagree / unsure) with a comment.

Invariants:
- The page is one file with no network access (inline CSS and JavaScript, no CDN); it holds only published
  (anonymized) text.
- The sample is deterministic (seeded by the dataset) and stratified by family, so a re-run reviews the same
  tasks.
- Agreement counts only "agree" and "disagree" answers; "unsure" is reported apart. The interval is Wilson's
  95% score interval, which stays inside [0, 1] for small samples.
"""

from __future__ import annotations

import html
import json
import math
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warehouse.schemas import Task, Validation


def sample(tasks: list[Task], n: int, seed: str) -> list[Task]:
    """Up to `n` tasks, stratified by family (round robin over families, each shuffled by `seed`)."""
    by_family: dict[str, list[Task]] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: t.task_id):
        by_family[t.family].append(t)
    rng = random.Random(seed)
    for ts in by_family.values():
        rng.shuffle(ts)
    out: list[Task] = []
    while len(out) < n and any(by_family.values()):
        for fam in sorted(by_family):
            if by_family[fam] and len(out) < n:
                out.append(by_family[fam].pop())
    return out


def _pre(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, default=str)
    return f"<pre>{html.escape(text[:20_000])}</pre>"


def _reference(t: Task) -> str:
    """What the grader accepts: the reference's tool calls, or for a code task (no calls: its change is a patch)
    the gold patch, the tests the verifier adds and the test sets that must pass."""
    code = (t.reference or {}).get("code")
    if not code:
        return _pre(t.reference.get("actions", t.reference))
    sets = {"FAIL_TO_PASS (fail before the fix, must pass)": code.get("FAIL_TO_PASS") or [],
            "PASS_TO_PASS (pass before, must still pass)": code.get("PASS_TO_PASS") or [],
            "test modules run": code.get("run") or []}
    return (f"<p>the real fix ({html.escape(str(code.get('fix_commit', ''))[:12])} on "
            f"{html.escape(str(code.get('base_commit', ''))[:12])}): the gold patch, applied by the oracle</p>"
            f"{_pre(code.get('patch') or '(empty)')}<p>the fix's tests (written by the verifier after the agent "
            f"stops; never in the agent's repository)</p>{_pre(code.get('test_patch') or '(empty)')}{_pre(sets)}")


def _task_block(t: Task, runs: list[Validation]) -> str:
    oracle = next((r for r in sorted(runs, key=lambda r: r.attempt) if r.run_kind == "oracle"), None)
    probes = [(r.run_kind[6:], r.score) for r in runs if r.run_kind.startswith("probe:")]
    world = {k: v for k, v in t.world.items() if k not in ("world_key",)}
    world["hidden"] = f"{len(t.world.get('hidden') or [])} events withheld"
    rows = []
    for c in t.rubric.get("checks", []):
        g = next((x for x in (oracle.checks if oracle else []) if x.get("id") == c["id"]), None)
        graded = "" if g is None else ("not run" if g.get("score") is None else f"{g['score']:.2f}")
        rows.append(f"<tr><td>{html.escape(c['id'])}</td><td>{html.escape(c.get('kind', 'deterministic'))}</td>"
                    f"<td>{c.get('weight', 1):g}</td><td>{html.escape(c.get('criterion', '') or c.get('check', ''))}"
                    f"</td><td>{graded}</td><td>{html.escape(str((g or {}).get('explanation', ''))[:200])}</td></tr>")
    rows = "".join(rows)
    probe_rows = "".join(f"<li>{html.escape(n)}: {'' if s is None else round(s, 2)}</li>" for n, s in probes) or \
        "<li>none run</li>"
    name = html.escape(t.task_id)
    choices = "".join(f'<label><input type="radio" name="v-{name}" value="{v}"> {v}</label> '
                      for v in ("agree", "disagree", "unsure"))
    return f"""
<section class="task" data-task="{name}" data-family="{html.escape(t.family)}">
<h2>{html.escape(t.family)} <code>{name[:12]}</code> <small>{html.escape(t.split)}</small></h2>
<h3>Prompt</h3>{_pre(t.prompt)}
<h3>World</h3>{_pre(world)}
<h3>Reference (what the grader accepts)</h3>{_reference(t)}
<h3>Rubric, and how the oracle was graded</h3>
<table><tr><th>check</th><th>kind</th><th>weight</th><th>criterion</th><th>oracle</th><th>why</th></tr>{rows}</table>
<h3>Probes (must fail)</h3><ul>{probe_rows}</ul>
<div class="verdict"><b>Is the grader right?</b> (the reference is a right answer the agent could have known at
the cutoff, a different right answer would pass, and the probes' answers fail) {choices}
<textarea name="c-{name}" placeholder="why (optional)"></textarea></div>
</section>"""


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>taskmine review: {dataset}</title>
<style>body{{font:14px/1.4 sans-serif;max-width:1100px;margin:2em auto}}pre{{background:#f6f6f6;padding:.5em;
white-space:pre-wrap;max-height:24em;overflow:auto}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:2px 6px;vertical-align:top}}.task{{border-top:3px solid #888;margin-top:2em}}textarea{{width:100%;height:3em}}
.bar{{position:sticky;top:0;background:#fff;padding:.5em;border-bottom:1px solid #ccc}}</style></head><body>
<div class="bar"><b>{dataset}</b>: {count} tasks sampled ({families}). Reviewer:
<input id="reviewer" placeholder="your name"> <button onclick="save()">Download verdicts</button></div>
{blocks}
<script>
function save() {{
  const reviewer = document.getElementById('reviewer').value.trim() || 'anonymous';
  const verdicts = [];
  for (const s of document.querySelectorAll('section.task')) {{
    const id = s.dataset.task;
    const chosen = s.querySelector('input[name="v-' + id + '"]:checked');
    verdicts.push({{task_id: id, family: s.dataset.family, verdict: chosen ? chosen.value : null,
                   comment: s.querySelector('textarea').value}});
  }}
  const blob = new Blob([JSON.stringify({{dataset: {dataset_json}, reviewer: reviewer, verdicts: verdicts}}, null, 1)],
                        {{type: 'application/json'}});
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = 'verdicts-' + reviewer.replace(/[^A-Za-z0-9_-]/g, '_') + '.json';
  a.click();
}}
</script></body></html>
"""


def write_sheet(tasks: list[Task], validations: list[Validation], dataset: str, out: Path) -> Path:
    """Write the review page for `tasks` into `out` (index.html and the sample's ids); returns the page."""
    runs: dict[str, list[Validation]] = defaultdict(list)
    for v in validations:
        runs[v.task_id].append(v)
    families = ", ".join(f"{f} {n}" for f, n in sorted(_count(t.family for t in tasks).items()))
    page = PAGE.format(dataset=html.escape(dataset), dataset_json=json.dumps(dataset), count=len(tasks),
                       families=html.escape(families), blocks="".join(_task_block(t, runs[t.task_id]) for t in tasks))
    out.mkdir(parents=True, exist_ok=True)
    (out / "index.html").write_text(page, encoding="utf-8")
    (out / "sample.json").write_text(json.dumps({"dataset": dataset, "tasks": [t.task_id for t in tasks]}, indent=1))
    return out / "index.html"


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for v in values:
        out[v] += 1
    return dict(out)


@dataclass(frozen=True)
class Agreement:
    reviewed: int        # agree + disagree answers
    agree: int
    unsure: int
    rate: float | None
    low: float | None    # Wilson 95% interval
    high: float | None

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__ | {}


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson's score interval for a proportion (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def agreement(verdicts: list[dict]) -> Agreement:
    agree = sum(1 for v in verdicts if v.get("verdict") == "agree")
    disagree = sum(1 for v in verdicts if v.get("verdict") == "disagree")
    unsure = sum(1 for v in verdicts if v.get("verdict") == "unsure")
    n = agree + disagree
    low, high = wilson(agree, n) if n else (None, None)
    return Agreement(n, agree, unsure, round(agree / n, 4) if n else None,
                     None if low is None else round(low, 4), None if high is None else round(high, 4))


class VerdictError(ValueError):
    pass


def read_verdicts(files: list[Path], dataset: str, known: set[str]) -> dict[str, Any]:
    """The agreement between reviewers and the grader (overall, per family, per reviewer) and between
    reviewers (the share of tasks two reviewers answered alike), from downloaded verdict files."""
    by_reviewer: dict[str, dict[str, dict]] = {}
    for f in files:
        try:
            data = json.loads(Path(f).read_text())
        except (OSError, ValueError) as exc:
            raise VerdictError(f"{f}: not a verdicts file ({exc})") from None
        if data.get("dataset") != dataset:
            raise VerdictError(f"{f}: verdicts of dataset {data.get('dataset')!r}, not {dataset!r}")
        unknown = [v["task_id"] for v in data.get("verdicts", []) if v.get("task_id") not in known]
        if unknown:
            raise VerdictError(f"{f}: {len(unknown)} verdicts for tasks not in {dataset} (e.g. {unknown[0][:12]})")
        name = str(data.get("reviewer") or Path(f).stem)
        by_reviewer.setdefault(name, {}).update({v["task_id"]: v for v in data.get("verdicts", [])})
    every = [v for vs in by_reviewer.values() for v in vs.values()]
    families = sorted({v.get("family", "") for v in every})
    pairs, alike = 0, 0
    names = sorted(by_reviewer)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for tid, va in by_reviewer[a].items():
                vb = by_reviewer[b].get(tid)
                if vb and va.get("verdict") in ("agree", "disagree") and vb.get("verdict") in ("agree", "disagree"):
                    pairs += 1
                    alike += va["verdict"] == vb["verdict"]
    return {"dataset": dataset, "reviewers": names, "grader": agreement(every).as_dict(),
            "per_family": {f: agreement([v for v in every if v.get("family") == f]).as_dict() for f in families},
            "per_reviewer": {n: agreement(list(vs.values())).as_dict() for n, vs in by_reviewer.items()},
            "between_reviewers": {"pairs": pairs, "alike": alike,
                                  "rate": round(alike / pairs, 4) if pairs else None}}
