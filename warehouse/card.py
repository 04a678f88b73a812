"""The dataset card (README.md of a published version): Hugging Face YAML front matter, then what a lab reads.

The YAML declares one config per family plus `all` (the default) and `easy`, each with `train` and `test`
Parquet files; the default configs leave out the easy tasks (a no-model baseline solves them), which the `easy`
config holds. `grading`, `trajectories` and `swebench` are configs too: grader-side files that must never reach
a policy. `datasets.load_dataset(<version folder>, <config>)` reads the card and returns those splits.
"""

from __future__ import annotations

from typing import Any

import yaml

SPLITS = ("train", "test")


def configs(files: set[str], families: list[str], swebench: bool) -> list[dict[str, Any]]:
    """The `configs` list of the card's YAML (paths relative to the version folder), from the split files that
    exist: `datasets` refuses a split without rows, so a split no task falls in is left out of its config, and a
    config without any split is left out of the card."""
    def entry(name: str, paths: dict[str, list[str]], default: bool = False) -> dict[str, Any] | None:
        data = [{"split": s, "path": [p for p in paths[s] if p in files]} for s in SPLITS]
        data = [{"split": d["split"], "path": d["path"][0] if len(d["path"]) == 1 else d["path"]}
                for d in data if d["path"]]
        if not data:
            return None
        return {"config_name": name, **({"default": True} if default else {}), "data_files": data}

    out = [entry("all", {s: [f"tasks/{f}/{s}.parquet" for f in families] for s in SPLITS}, default=True)]
    out += [entry(f, {s: [f"tasks/{f}/{s}.parquet"] for s in SPLITS}) for f in families]
    out.append(entry("easy", {s: [f"tasks/easy/{s}.parquet"] for s in SPLITS}))
    for name in ("grading", "trajectories", *(("swebench",) if swebench else ())):
        out.append(entry(name, {s: [f"{name}/{s}.parquet"] for s in SPLITS}))
    return [c for c in out if c is not None]


def front_matter(dataset: str, files: set[str], families: list[str], license: str, swebench: bool, total: int) -> str:
    meta = {
        "license": license,
        "pretty_name": f"taskmine: {dataset}",
        "tags": ["reinforcement-learning", "agents", "tool-use", "taskmine", *(["swe-bench"] if swebench else [])],
        "size_categories": [_size(total)],
        "configs": configs(files, families, swebench),
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, width=1000) + "---\n"


def _size(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return label
    return "100K<n<1M"


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *["| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows]]


MAX_TABLE_CHARS = 160    # a markdown table wider than this is cut or scrolls in the Dagster UI and on hubs


def narrow_tables(rows: list[dict[str, str]], head: str | tuple[str, ...] = "family") -> list[str]:
    """`rows` (graders.difficulty.table) as markdown tables each at most MAX_TABLE_CHARS wide where it can be:
    columns are taken in order until the next would make the widest line too long, each table led by `head`."""
    from graders import difficulty

    if not rows:
        return [difficulty.markdown(rows)]
    heads = [head] if isinstance(head, str) else list(head)
    cols = [c for c in rows[0] if c not in heads]
    out, group = [], []

    def width(cs: list[str]) -> int:
        table = difficulty.markdown([{k: r[k] for k in [*heads, *cs]} for r in rows])
        return max(len(line) for line in table.splitlines())

    for c in cols:
        if group and width([*group, c]) > MAX_TABLE_CHARS:
            out.append(difficulty.markdown([{k: r[k] for k in [*heads, *group]} for r in rows]))
            group = []
        group.append(c)
    out.append(difficulty.markdown([{k: r[k] for k in [*heads, *group]} for r in rows]))
    return out


def _withheld_lines(w: dict) -> list[str]:
    """The records left out because the leak audit still found something in them after anonymization."""
    if not w.get("total"):
        return ["No record was withheld: the audit found nothing left in any record after anonymization.", ""]
    return [f"{w['total']} of {w['records']} records ({w['rate']:.2%}) were withheld, left out of the world and of",
            "every task, because the audit still found personal data in them after anonymization:", "",
            *_table(["withheld", "count"], [*[[f"kind: {k}", n] for k, n in w.get("by_kind", {}).items()],
                                            *[[f"reason: {k}", n] for k, n in w.get("by_reason", {}).items()]]), ""]


def render(*, dataset: str, version: str, files: set[str], families: list[str], counts: dict[str, dict[str, int]],
           easy: dict[str, int], funnel: dict[str, int], stats: dict, provenance: list, license: str, canary: str,
           swebench: bool, withheld: dict | None = None, resistance: dict | None = None) -> str:
    from graders import difficulty

    total = sum(sum(c.values()) for c in counts.values())
    fam_rows = [[f, counts[f]["train"], counts[f]["test"]] for f in families]
    query = ("uv run python -c \"import duckdb; print(duckdb.sql(\\\"select family, split, count(*) from "
             "'tasks/*/*.parquet' group by all order by all\\\"))\"")
    lines = [
        front_matter(dataset, files, families, license, swebench, total),
        f"# {dataset} {version}", "",
        "Tasks mined by taskmine from a company's historical record, each validated in a sandbox: replaying",
        "the real outcome scores >= 0.99 and doing nothing scores <= 0.05, on every repeat.", "",
        "## Load", "",
        "```python", "import datasets",
        "tasks = datasets.load_dataset('.', 'all')            # train and test, without the easy tasks",
        f"triage = datasets.load_dataset('.', '{families[0] if families else 'all'}')",
        "easy = datasets.load_dataset('.', 'easy')           # tasks a no-model baseline solves",
        "sft = datasets.load_dataset('.', 'trajectories')    # oracle trajectories (chat messages with tool calls)",
        "```", "",
        "With taskmine, the tools of a task's world at its cutoff and one-call grading:", "",
        "```python", "from warehouse.loader import load_dataset",
        f"ds = load_dataset('published/{dataset}/{version}')",
        "task = ds.tasks(split='train')[0]                   # the agent view: no answer in it",
        "tools = ds.tools(task['task_id'])                   # the company's tools at the cutoff, in process",
        "# ... the agent calls tools.call(name, arguments) ...",
        "print(ds.grade(task['task_id'], tools.actions).score)",
        "```", "",
        f"or with DuckDB from Python (no CLI needed): `{query}`.", "",
        "## Configs and files", "",
        "Each config has a `train` and a `test` split; a split no task falls in is left out of its config (the",
        "`datasets` package refuses an empty one), and a config without any task (e.g. `easy` when no baseline",
        "solves a task) is not declared.", "",
        *_table(["config", "files", "what"], [
            ["`all` (default)", "`tasks/<family>/<split>.parquet`", "the agent view of every task but the easy ones"],
            ["`<family>`", "`tasks/<family>/<split>.parquet`", "one family, easy tasks left out"],
            ["`easy`", "`tasks/easy/<split>.parquet`", "tasks a retrieval baseline without a model solves"],
            ["`grading`", "`grading/<split>.parquet`", "grader only: reference, rubric, probes and their scores, "
             "hidden events and tests, requester script"],
            ["`trajectories`", "`trajectories/<split>.parquet`", "the oracle's tool calls and the tools' real "
             "answers, OpenAI chat format"],
            *([["`swebench`", "`swebench/<split>.parquet`", "code tasks as SWE-bench instances (patch, tests: "
                "grader side)"]] if swebench else []),
        ]), "",
        "Never give a policy the `grading`, `trajectories` (of tasks you evaluate on) or `swebench` files, nor the",
        "`world/` files: they hold the answers and the whole history.", "",
        "## Tasks", "",
        *_table(["family", "train", "test"], [*fam_rows, ["easy (every family)", easy.get("train", 0),
                                                          easy.get("test", 0)]]), "",
        "## Provenance", "",
        *(_table(["source", "events", "first", "last", "licence"],
                 [[p.source, p.events, p.first, p.last, p.license] for p in provenance])
          if provenance else ["(not recorded)"]), "",
        f"Dataset licence: `{license}`.", "",
        "## Funnel", "", *_table(["stage", "count"], [[k, v] for k, v in funnel.items()]), "",
        "## Privacy", "", "People are replaced by consistent pseudonyms; e-mail addresses and phone numbers are",
        "scrubbed; a leak audit found no known identity in any file of this version.", "",
        *_withheld_lines(withheld or {}),
        "## Worlds", "", "Every task is a moment of one company: `world/documents.jsonl` (issues, mail, chat) and",
        "`world/git/<repo>.bundle` hold its whole history, and a task's `world_manifest` says its cutoff, its",
        "persona and its repositories' refs. Serve a task's world through the company tools, which enforce the",
        "cutoff (`ds.tools(task_id)`, `ds.repositories(task_id, dest)` in `warehouse.loader`, or",
        "`taskmine serve --published DIR --task ID` for an MCP client); never hand the world files to an agent.", "",
        "## Canary", "",
        "Test-split rows (tasks, grading, trajectories) carry this canary string: do not train on them.", "",
        f"`{canary}`" if canary else "(no test task in this version)", "",
        "## Difficulty and grader error", "",
        "Columns of the task files: `easy` (a baseline solves it), `flaky`, `baseline_scores` (JSON: baselines",
        "without a model: a search, or a copy of the nearest earlier work in the world) and `baseline_solved`,",
        "`rollouts`, `pass_at_1` and `pass_at_k` (a model agent's rollouts, k =",
        "rollouts; null without), and `difficulty`: `in_band` (the rollouts' pass rate within the configured band),",
        "`easy` (no rollouts; a baseline solves it), `unmeasured` (no rollouts, no baseline solves it).", "",
        "Per family, over every task built (probes, alternatives) or every valid task (bands, baselines, rollouts):",
        "probes passing estimate the grader's false positives, valid alternative outcomes that fail its false",
        "negatives (n = runs; n=0: not measured).", "",
        *[t + "\n" for t in narrow_tables(difficulty.table(stats or {}))],
        "## Hack resistance", "",
        "Per family, every class of attack the graders were tried with: the probes (cheap or wrong outcomes that",
        "must score under their limit, e.g. a constant answer, a list of the commonest values, the prompt echoed,",
        "another task's answer) and the no-model baselines (a search or a copy of the nearest earlier work: a task",
        "one solves is `easy`). `tried`: tasks it ran on (validated, and drafts it rejected when they were built);",
        "`passing`: tasks it reached its limit on (a probe: the task was rejected; a baseline: the task is easy);",
        "best and mean score on the published tasks, beside the",
        "oracle's lowest and the null's highest. The per-task best probe is in the grader view (`best_probe`,",
        "`best_probe_score`).", "",
        *[t + "\n" for t in narrow_tables(difficulty.resistance_table(resistance or {}), ("family", "attack"))],
    ]
    return "\n".join(lines)
