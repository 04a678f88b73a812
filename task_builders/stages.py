"""The mining and building stages: `links` (references across sources), `work_items` (units of real work),
`clusters` (near-duplicates, families, splits), `world` (the company once per dataset) and `tasks` (every enabled
family's drafts, one per near-duplicate group and kind, sealed), with the gates on what they write
(`check_lineage`, `check_splits`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from core.stage import CheckResult, Image, Markdown, RunContext, StageResult, preview, record_rejections
from environments.world import World
from task_builders import mining
from task_builders import world as worldbuild
from task_builders.cluster import organize
from task_builders.families import BuildContext, families, seal
from task_builders.links import find_links
from warehouse.schemas import Rejection, Task
from warehouse.store import Store

# --- links and work items ------------------------------------------------------------------------------------

def links(ctx: RunContext) -> StageResult:
    """Cross-source links: issue keys, commit SHAs, issue/commit URLs and Message-IDs in any text."""
    store, dataset = ctx.store, ctx.dataset
    rows = find_links(store.iter("anonymized_events", dataset))
    store.replace("links", dataset, rows)
    kinds = Counter(r.kind for r in rows)
    return StageResult({"links": len(rows), **{f"links_{k}": v for k, v in sorted(kinds.items())}},
                       preview(rows, ("kind", "evidence")))


def work_items(ctx: RunContext) -> StageResult:
    """Units of real work from every source (task_builders.mining); skipped candidates counted per source."""
    store, dataset, config = ctx.store, ctx.dataset, ctx.config
    events = store.read("anonymized_events", dataset)
    items, rejections = mining.build_work_items(dataset, events, store.read("links", dataset), config)
    store.replace("work_items", dataset, items)
    record_rejections(ctx, "work_items", rejections)
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


def clusters(ctx: RunContext) -> StageResult:
    """Near-duplicate groups, families and splits of the work items (task_builders.cluster)."""
    store, dataset, config = ctx.store, ctx.dataset, ctx.config
    items = store.read("work_items", dataset)
    wanted = {i.request_event_id for i in items}   # only the requests are read: keep only those in memory
    events = {e.event_id: e for e in store.iter("anonymized_events", dataset) if e.event_id in wanted}
    result = organize.organize(store, dataset, items, events, config)
    store.replace("clusters", dataset, result.rows)
    report = store.home / "reports" / dataset
    report.mkdir(parents=True, exist_ok=True)
    shown: dict = {"families_table": Markdown(families_md(result.families))} if result.families else {}
    if result.map_png:
        (report / "families.png").write_bytes(result.map_png)
        shown["family_map"] = Image(report / "families.png")
    return StageResult(result.counts, result.preview, extra={"families": result.families, "map": result.map_png,
                                                              "map_path": str(report / "families.png")},
                       shown=shown)


def families_md(fams: list[dict]) -> str:
    """The families of work items as a markdown table (the clusters stage's metadata)."""
    rows = ["| family | label | items | distinct | split | kinds | examples |", "|---|---|---|---|---|---|---|"]
    for f in fams[:40]:
        kinds = ", ".join(f"{k} {v}" for k, v in f["kinds"].items())
        ex = " · ".join(e.replace("|", "/") for e in f["examples"])
        rows.append(f"| {f['family']} | {f['label']} | {f['items']} | {f['groups']} | {f['split']} | {kinds} | {ex} |")
    return "\n".join(rows)


# --- 5. world and tasks ------------------------------------------------------------------------------

def world(ctx: RunContext) -> StageResult:
    """The dataset's company world, built once for every task (task_builders.world)."""
    w = worldbuild.build(ctx.store, ctx.dataset)
    repo_bytes = sum(_tree_bytes(Path(r["path"])) for r in w.repos.values())
    return StageResult({"documents": w.docs, "world_bytes": w.bytes, "repositories": len(w.repos),
                        "repository_bytes": repo_bytes})


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


NEAR_DUPLICATE = "near-duplicate of another work item"


def tasks(ctx: RunContext) -> StageResult:
    """Every enabled family's drafts, sealed into tasks. `sandbox` lets families that run code while they
    build (code_change measures its tests) do so; without it they reject those candidates with the reason.
    `llm` (the run's llm.LLM, optional) rewrites instructions and grades the judge checks of the self-check;
    without one the families take their no-model path."""
    store, dataset, config, sandbox, llm = ctx.store, ctx.dataset, ctx.config, ctx.sandbox, ctx.llm
    if not (store.worlds(dataset) / "world.json").exists():
        world(ctx)
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
        build = BuildContext(dataset, events, mine, store.worlds(dataset), config, repos, splits,
                             World(wf) if wf.exists() else None, sandbox=sandbox, llm=llm)
        drafts = []
        for out in family.build(build):
            per_family[(name, "candidates")] += 1
            if isinstance(out, Rejection):
                rejected.append(out)
            else:
                drafts.append(out)
        for out in seal(build, family, drafts):
            if isinstance(out, Task):
                built.append(out)
                per_family[(name, "tasks")] += 1
            else:
                rejected.append(out.model_copy(update={"family": name}) if not out.family else out)
    store.replace("tasks", dataset, built)
    record_rejections(ctx, "candidates", rejected)
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
    return disk_bytes(store.worlds(dataset))


def disk_bytes(path: Path) -> int:
    """Bytes on disk of a file, or of every file under a folder, hard links counted once (symlinks not)."""
    seen, total = set(), 0
    for p in [path] if path.is_file() else path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


# --- gates --------------------------------------------------------------------------------------------------

def check_lineage(ctx: RunContext) -> CheckResult:
    """Every work item's lineage names only anonymized events, its request among them."""
    store, ds = ctx.store, ctx.dataset
    known = {r[0] for r in store.query("SELECT event_id FROM anonymized_events WHERE dataset = ?", [ds])}
    bad = [i.item_id for i in store.read("work_items", ds)
           if i.request_event_id not in i.lineage or not set(i.lineage) <= known]
    return CheckResult(not bad, f"{len(bad)} work items name events that are not anonymized events" if bad else
                       "every work item's lineage is anonymized events", {"items_with_bad_lineage": len(bad),
                                                                          "examples": ", ".join(bad[:5]) or "none"})


def check_splits(ctx: RunContext) -> CheckResult:
    """No near-duplicate group crosses train/test; every test item carries the canary."""
    rows = ctx.store.read("clusters", ctx.dataset)
    splits: dict[str, set] = {}
    for r in rows:
        splits.setdefault(r.dup_group, set()).add(r.split)
    crossing = sorted(g for g, s in splits.items() if len(s) > 1)
    no_canary = sum(1 for r in rows if r.split == "test" and not r.canary)
    canary_on_train = sum(1 for r in rows if r.split == "train" and r.canary)
    ok = not crossing and not no_canary and not canary_on_train
    why = "no near-duplicate group crosses train/test" if ok else (
        f"{len(crossing)} near-duplicate groups cross train/test, {no_canary} test items lack the canary, "
        f"{canary_on_train} train items carry it")
    return CheckResult(ok, why, {
        "groups_crossing_splits": len(crossing), "test_without_canary": no_canary,
        "train_with_canary": canary_on_train, "test": sum(1 for r in rows if r.split == "test"), "items": len(rows)})
