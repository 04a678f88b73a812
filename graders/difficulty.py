"""How hard each task is and how far its grader can be trusted, read from its validation rows.

Every measurement is a Validation row of the task, told apart by its run kind: `oracle`, `null`, `probe:<name>`
(a cheap or wrong outcome that must fail: a pass is a grader false positive), `alt:<name>` (a valid different
outcome that must pass: a failure is a grader false negative), `baseline:<name>` (graders.baselines: retrieval
without a model) and `rollout:<model>` (graders.agent: a model agent). This module only reads them:

- per task (`of`): probe scores, the flaky flag (oracle scores differ across repeats), baseline scores and whether
  one solved the task (easy), the model's pass@1 and pass@k, and a difficulty band: with rollouts the pass rate
  decides (`in_band` inside [band_min, band_max], else `too_easy` / `too_hard`, retired from publishing with the
  reason); without, the task is kept, `easy` when a baseline solves it, `unmeasured` otherwise;
- per dataset (`stats`): per family the band histogram, probe pass rates (the false-positive estimate), baseline
  solve rates, rollout pass rates and the false-negative estimate, each with its sample size n; `plot` draws them.

Infrastructure failures (error_class infra or timeout) are no score and are never counted in any n.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from warehouse.schemas import Task, Validation

SOLVED = 0.99        # the score from which a run counts as solving the task (the oracle's bar, graders.agent.PASS)
ALT_MIN = 0.99       # the score a valid alternative must reach unless the task states its own (reference
                     #   ["alternatives"][i]["min"])
BANDS = ("too_hard", "in_band", "too_easy", "easy", "unmeasured")


def _scored(rows: Iterable[Validation], prefix: str) -> list[Validation]:
    return [r for r in rows if r.run_kind.startswith(prefix) and r.error_class not in ("infra", "timeout")]


def probe_limits(task: Task) -> dict[str, float]:
    return {p["name"]: float(p.get("max", 0.5)) for p in task.reference.get("probes") or []}


def alt_limits(task: Task) -> dict[str, float]:
    return {a["name"]: float(a.get("min", ALT_MIN)) for a in task.reference.get("alternatives") or []
            if isinstance(a, dict) and a.get("name")}


@dataclass
class Difficulty:
    """One task's measurements (see the module docstring)."""

    probes: dict[str, float | None] = field(default_factory=dict)
    probes_passed: list[str] = field(default_factory=list)
    oracle: list[float | None] = field(default_factory=list)
    flaky: bool = False
    baselines: dict[str, float | None] = field(default_factory=dict)
    easy: bool = False
    rollouts: int = 0            # graded rollouts
    solved: int = 0              # of them, those scoring >= SOLVED
    alts: dict[str, float | None] = field(default_factory=dict)
    alts_failed: list[str] = field(default_factory=list)
    band: str = "unmeasured"
    retire: str = ""             # why the band keeps the task from publishing ("" = published)

    @property
    def pass_at_1(self) -> float | None:
        return self.solved / self.rollouts if self.rollouts else None

    @property
    def pass_at_k(self) -> float | None:
        """pass@k with k = the number of rollouts (solved at least once)."""
        from graders.agent import pass_at_k

        return pass_at_k(self.rollouts, self.solved, self.rollouts) if self.rollouts else None

    @property
    def best_probe(self) -> tuple[str | None, float | None]:
        """(name, score) of the probe that scored highest on the task (ties: the first name), or (None, None)."""
        scored = [(s, n) for n, s in self.probes.items() if s is not None]
        if not scored:
            return None, None
        score = max(s for s, _ in scored)
        return min(n for s, n in scored if s == score), score

    def columns(self) -> dict:
        """The published columns of the task (warehouse.publish): what the agent view carries, and the probes'
        scores, which only the grader view does (GRADER_COLUMNS: a policy must not read the grader's weak spots)."""
        import json

        name, score = self.best_probe
        return {"probe_scores": json.dumps(self.probes, sort_keys=True), "probes_passed": len(self.probes_passed),
                "best_probe": name, "best_probe_score": score,
                "flaky": self.flaky, "baseline_scores": json.dumps(self.baselines, sort_keys=True),
                "baseline_solved": self.easy, "rollouts": self.rollouts,
                "pass_at_1": self.pass_at_1, "pass_at_k": self.pass_at_k, "difficulty": self.band}


GRADER_COLUMNS = ("probe_scores", "probes_passed", "best_probe", "best_probe_score")


def of(task: Task, rows: Iterable[Validation], band_min: float = 0.02, band_max: float = 0.7) -> Difficulty:
    """The task's measurements and band from its validation rows."""
    rows = [r for r in rows if r.task_id == task.task_id]
    d = Difficulty()
    limits = probe_limits(task)
    for r in _scored(rows, "probe:"):
        name = r.run_kind[6:]
        d.probes[name] = r.score
        if r.score is None or r.score >= limits.get(name, 0.5):
            d.probes_passed.append(name)
    d.oracle = [r.score for r in sorted(_scored(rows, "oracle"), key=lambda r: r.attempt)]
    d.flaky = len(set(d.oracle)) > 1
    for r in _scored(rows, "baseline:"):
        d.baselines[r.run_kind[9:]] = r.score
    d.easy = any(s is not None and s >= SOLVED for s in d.baselines.values())
    runs = [r for r in _scored(rows, "rollout:") if r.score is not None]
    d.rollouts, d.solved = len(runs), sum(1 for r in runs if r.score >= SOLVED)
    alt_min = alt_limits(task)
    for r in _scored(rows, "alt:"):
        name = r.run_kind[4:]
        d.alts[name] = r.score
        if r.score is None or r.score < alt_min.get(name, ALT_MIN):
            d.alts_failed.append(name)
    if d.rollouts:
        p = d.pass_at_1
        if p < band_min:
            d.band, d.retire = "too_hard", f"difficulty: pass@1 {p:.2f} of {d.rollouts} rollouts below band_min " \
                                           f"{band_min:g}"
        elif p > band_max:
            d.band, d.retire = "too_easy", f"difficulty: pass@1 {p:.2f} of {d.rollouts} rollouts above band_max " \
                                           f"{band_max:g}"
        else:
            d.band = "in_band"
    else:
        d.band = "easy" if d.easy else "unmeasured"
    return d


def _rate(k: int, n: int) -> dict:
    return {"n": n, "k": k, "rate": round(k / n, 4) if n else None}


def stats(tasks: list[Task], rows: list[Validation], valid: set[str], published: set[str],
          band_min: float = 0.02, band_max: float = 0.7) -> dict[str, dict]:
    """Per family: tasks, valid, published, retired by band, flaky, the band histogram of valid tasks, probe pass
    rate (false-positive estimate; probes of every task), baseline solve rate and rollout pass rate (valid tasks),
    false-negative rate (alt runs of every task), each as {"n", "k", "rate"}."""
    from graders import baselines as B

    by_task: dict[str, list[Validation]] = {}
    for r in rows:
        by_task.setdefault(r.task_id, []).append(r)
    out: dict[str, dict] = {}
    for t in sorted(tasks, key=lambda t: (t.family, t.task_id)):
        f = out.setdefault(t.family, {"tasks": 0, "valid": 0, "published": 0, "retired": 0, "flaky": 0,
                                      "bands": Counter(), "probes": [0, 0], "baseline": [0, 0],
                                      "rollouts": [0, 0], "alts": [0, 0],
                                      "baseline_applicable": B.applicable(t.family)})
        d = of(t, by_task.get(t.task_id, []), band_min, band_max)
        f["tasks"] += 1
        f["flaky"] += d.flaky
        f["probes"][0] += len(d.probes)
        f["probes"][1] += len(d.probes_passed)
        f["alts"][0] += len(d.alts)
        f["alts"][1] += len(d.alts_failed)
        if t.task_id not in valid:
            continue
        f["valid"] += 1
        f["published"] += t.task_id in published
        f["retired"] += bool(d.retire)
        f["bands"][d.band] += 1
        if d.baselines:
            f["baseline"][0] += 1
            f["baseline"][1] += d.easy
        f["rollouts"][0] += d.rollouts
        f["rollouts"][1] += d.solved
    return {fam: {"tasks": f["tasks"], "valid": f["valid"], "published": f["published"], "retired": f["retired"],
                  "flaky": f["flaky"], "difficulty": {b: f["bands"][b] for b in BANDS if f["bands"][b]},
                  "probe_pass": _rate(f["probes"][1], f["probes"][0]),
                  "baseline_solved": _rate(f["baseline"][1], f["baseline"][0]) if f["baseline_applicable"]
                  else "no baseline for this family",
                  "rollout_pass": _rate(f["rollouts"][1], f["rollouts"][0]),
                  "false_negative": _rate(f["alts"][1], f["alts"][0])}
            for fam, f in out.items()}


PROBE_REJECTED = "a probe passes the rubric"     # the reason task_builders.families.seal rejects a draft with
_SCORED = re.compile(r"(\w+) scored ([0-9.]+|None)")


def resistance(tasks: list[Task], rows: list[Validation], published: set[str], rejections: Iterable = ()
               ) -> dict[str, dict]:
    """The hack-resistance table: per family, per class of attack (every probe name of its tasks, `probe:<name>`,
    and every no-model baseline, `baseline:<name>`; generic over names, so a family's own probes join without
    code here): how many tasks it was tried on, how many it made invalid (it reached its threshold: the task is
    not published), and the best and mean score it reached on the published tasks, beside the oracle's lowest and
    the null's highest score on them. `rejections` (the tasks stage's): drafts a probe rejected when they were
    sealed (graded in process, never validated) count as tried and passing too. Infrastructure failures are not
    scores and count nowhere."""
    by_task: dict[str, list[Validation]] = {}
    for r in rows:
        by_task.setdefault(r.task_id, []).append(r)
    out: dict[str, dict] = {}
    for r in rejections:
        if getattr(r, "reason", "") != PROBE_REJECTED or not r.family:
            continue
        fam = out.setdefault(r.family, {"published": 0, "oracle": None, "null": None, "attacks": {}})
        for name, _ in _SCORED.findall(r.detail or ""):
            a = fam["attacks"].setdefault(f"probe:{name}", {"tried": set(), "passing": set(), "scores": [],
                                                             "limit": None})
            a["tried"].add(f"draft:{r.subject_id}")
            a["passing"].add(f"draft:{r.subject_id}")
    for t in sorted(tasks, key=lambda t: (t.family, t.task_id)):
        fam = out.setdefault(t.family, {"published": 0, "oracle": None, "null": None, "attacks": {}})
        mine = [r for r in by_task.get(t.task_id, []) if r.error_class not in ("infra", "timeout")]
        limits = probe_limits(t)
        pub = t.task_id in published
        if pub:
            fam["published"] += 1
        for r in mine:
            if r.run_kind in ("oracle", "null") and pub and r.score is not None:
                key = r.run_kind
                worst = min if key == "oracle" else max
                fam[key] = r.score if fam[key] is None else worst(fam[key], r.score)
                continue
            if not r.run_kind.startswith(("probe:", "baseline:")):
                continue
            a = fam["attacks"].setdefault(r.run_kind, {"tried": set(), "passing": set(), "scores": [],
                                                       "limit": None})
            a["tried"].add(t.task_id)
            if r.run_kind.startswith("probe:"):
                limit = limits.get(r.run_kind[6:], 0.5)
                a["limit"] = limit if a["limit"] is None else min(a["limit"], limit)
                if r.score is None or r.score >= limit:
                    a["passing"].add(t.task_id)
            elif r.score is not None and r.score >= SOLVED:
                a["passing"].add(t.task_id)      # a baseline that solves a task makes it easy, not invalid
            if pub and r.score is not None:
                a["scores"].append(r.score)
    for fam in out.values():
        fam["attacks"] = {k: {"tried": len(a["tried"]), "passing": len(a["passing"]),
                              "best": max(a["scores"]) if a["scores"] else None,
                              "mean": round(sum(a["scores"]) / len(a["scores"]), 4) if a["scores"] else None,
                              "limit": a["limit"]}
                          for k, a in sorted(fam["attacks"].items())}
    return out


def resistance_table(res: dict[str, dict]) -> list[dict[str, str]]:
    """One row per family and attack (the card, Dagster metadata, `taskmine difficulty`); the oracle and the null
    first, then probes, then baselines (whose "passing" are the tasks they solve: easy, not invalid)."""
    def num(x) -> str:
        return "-" if x is None else f"{x:.3f}"

    rows = []
    for fam, f in res.items():
        rows.append({"family": fam, "attack": "oracle (lowest)", "tried": str(f["published"]), "passing": "-",
                     "best on published": num(f["oracle"]), "mean on published": "-", "limit": ">= 0.99"})
        rows.append({"family": fam, "attack": "null (highest)", "tried": str(f["published"]), "passing": "-",
                     "best on published": num(f["null"]), "mean on published": "-", "limit": "<= 0.05"})
        for kind, a in sorted(f["attacks"].items(), key=lambda kv: (kv[0].startswith("baseline:"), kv[0])):
            rows.append({"family": fam, "attack": kind, "tried": str(a["tried"]),
                         "passing": f"{a['passing']} {'solved (easy)' if kind.startswith('baseline:') else 'rejected'}",
                         "best on published": num(a["best"]), "mean on published": num(a["mean"]),
                         "limit": "(difficulty)" if kind.startswith("baseline:") else
                         f"< {a['limit']:g}" if a["limit"] is not None else "-"})
    return rows


def _show(r) -> str:
    if not isinstance(r, dict):
        return str(r)
    return f"{r['k']}/{r['n']} ({r['rate']:.0%})" if r["n"] else "n=0"


def table(st: dict[str, dict]) -> list[dict[str, str]]:
    """One row per family for a markdown table (the card, Dagster metadata, the report)."""
    return [{"family": fam, "tasks": str(s["tasks"]), "valid": str(s["valid"]), "kept by band": str(s["published"]),
             "retired (band)": str(s["retired"]), "flaky": str(s["flaky"]),
             "difficulty": ", ".join(f"{b} {n}" for b, n in s["difficulty"].items()) or "-",
             "probes passing (FP)": _show(s["probe_pass"]), "baseline solves": _show(s["baseline_solved"]),
             "rollouts solving": _show(s["rollout_pass"]), "alternatives failing (FN)": _show(s["false_negative"])}
            for fam, s in st.items()]


def markdown(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(no task)"
    cols = list(rows[0])
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(r[c].replace("|", "/") for c in cols) + " |" for r in rows])


def plot(st: dict[str, dict], title: str) -> bytes:
    """PNG bytes: left, the difficulty histogram per family (stacked bands of valid tasks); right, per family the
    probe pass rate (false positives), baseline solve rate and false-negative rate, each labelled with its n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fams = list(st)
    colors = {"too_hard": "#d62728", "in_band": "#2ca02c", "too_easy": "#ff7f0e", "easy": "#bcbd22",
              "unmeasured": "#9e9e9e"}
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 0.6 * max(3, len(fams)) + 1.5), dpi=90)
    y = np.arange(len(fams))
    left = np.zeros(len(fams))
    for band in BANDS:
        vals = np.array([st[f]["difficulty"].get(band, 0) for f in fams], dtype=float)
        if vals.any():
            a.barh(y, vals, left=left, color=colors[band], label=band)
            left += vals
    a.set_yticks(y, fams, fontsize=8)
    a.set_xlabel("valid tasks", fontsize=8)
    a.set_title("difficulty band per family", fontsize=9)
    a.legend(fontsize=7, frameon=False)
    width = 0.27
    for i, (key, label, color) in enumerate((("probe_pass", "probes passing (FP)", "#d62728"),
                                             ("baseline_solved", "baseline solves", "#bcbd22"),
                                             ("false_negative", "alternatives failing (FN)", "#1f77b4"))):
        vals, ns = [], []
        for f in fams:
            r = st[f][key]
            vals.append((r["rate"] or 0.0) if isinstance(r, dict) else 0.0)
            ns.append((f"{r['rate']:.0%} of n={r['n']}" if r["n"] else "n=0") if isinstance(r, dict)
                      else "no baseline")
        bars = b.barh(y + (1 - i) * width, vals, height=width, color=color, label=label)   # legend order, top down
        for bar, n in zip(bars, ns):
            b.annotate(n, (bar.get_width(), bar.get_y() + bar.get_height() / 2), fontsize=6, va="center",
                       xytext=(2, 0), textcoords="offset points")
    b.set_yticks(y, fams, fontsize=8)
    b.set_xlim(0, 1.15)
    b.set_xlabel("share of runs", fontsize=8)
    b.set_title("grader error and baseline", fontsize=9)
    b.legend(fontsize=7, frameon=False, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
