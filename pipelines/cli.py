"""`taskmine`: the one command-line entry point.

Every error a user can cause prints one line that says what is wrong and what to do, and exits 2;
set TASKMINE_DEBUG=1 to see the traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from core.config import load_config
from core.hosts import HOSTS_ENV, hosts_from
from core.paths import contain_caches, dagster_home, default_exports, home
from core.registry import registry as plugins

EXAMPLES = """examples:
  taskmine run                              # the bundled sample company, end to end
  taskmine run --exports ~/exports          # every folder under ~/exports is a dataset
  taskmine run --exports ~/exports --dataset acme --sandbox local
  taskmine run --exports ~/exports --executor docker   # every step in its own container (docker_executor)
  taskmine ui --exports ~/exports           # Dagster UI on http://127.0.0.1:3000
  taskmine sample --out /tmp/exports --seed 7 --scale 5
  taskmine replay --task 3f2a --agent oracle
  taskmine replay --task 3f2a --agent "company answer --sha deadbeef"
  taskmine audit --dataset acme
  taskmine query "select family, count(*) from tasks group by 1"   # DuckDB on the warehouse
  taskmine extractors list
  taskmine extractors new zendesk_json      # scaffold a connector + contract test + entry point
  taskmine extractors check ~/exports/acme
  taskmine families list                    # task families; also: checks list, sandboxes list
  taskmine serve --published .taskmine/published/acme --task 3f2a   # one task's tools over MCP (stdio)
  taskmine serve --openenv --port 8000 --published .taskmine/published/acme   # OpenEnv reset/step/state
  taskmine export harbor --dataset acme --out harbor-tasks/   # Harbor task folders
  taskmine review --dataset acme --n 50 --out review/   # an audit sheet for people; --read verdicts back
  taskmine difficulty --dataset acme       # per family: difficulty bands, baseline solve rate, grader FP/FN
  taskmine bench ingest --scale 50
  taskmine bench embed --scale 10          # cached embeddings vs plain sentence-transformers
  taskmine bench worlds --scale 5          # one world per dataset vs a full copy per task
  taskmine bench code --exports ~/exports --dataset mit --limit 40   # environments, test sets, validation
  taskmine --home H bench pool --dataset acme   # validation over one Docker daemon vs two (H: a built home)
  taskmine run --sandbox-hosts 'unix:///var/run/docker.sock*2' --sandbox-hosts 'ssh://ci@build-2*4'
  taskmine bench scale --scale 1 --scale 10 --scale 50   # per stage cost and growth; a whole company extrapolated
"""


class UserError(Exception):
    """A problem the user can fix; printed as one line."""


def _env(args, *, dagster: bool = False) -> None:
    """Settings every command shares. Only the commands that run Dagster (`dagster`) create anything, and
    only under TASKMINE_HOME: `taskmine --home /nowhere audit` must not make folders."""
    if getattr(args, "home", None):
        os.environ["TASKMINE_HOME"] = str(Path(args.home).resolve())
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
    contain_caches()
    os.environ["DAGSTER_HOME"] = str(dagster_home(create=dagster))


def _exports(args) -> Path:
    if args.exports:
        path = Path(args.exports).expanduser().resolve()
        if not path.is_dir():
            raise UserError(f"--exports {args.exports}: no such folder; pass the folder that holds one "
                            "sub-folder per dataset")
        return path
    path = default_exports()
    if not (path / "acme").exists() and not os.environ.get("TASKMINE_EXPORTS"):
        # on demand: `taskmine --help` loads neither Dagster nor the stages
        from sample.company import write_sample

        print(f"writing the bundled sample company to {path} ...", flush=True)
        write_sample(path, seed=0, scale=1, dataset="acme")
    return path


def cmd_run(args) -> int:
    _env(args, dagster=True)
    exports = _exports(args)
    os.environ["TASKMINE_EXPORTS"] = str(exports)
    if args.sandbox:
        os.environ["TASKMINE_SANDBOX"] = args.sandbox
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from extractors.stages import dataset_folders

    if args.sandbox_hosts:
        os.environ[HOSTS_ENV] = ",".join(args.sandbox_hosts)
    hosts_from()  # a bad TASKMINE_SANDBOX_HOSTS entry is one line now, not a failed validation later

    names = args.dataset or dataset_folders(exports)
    if not names:
        raise UserError(f"{exports}: no dataset folders; put each export in its own sub-folder "
                        "(e.g. exports/acme/jira/*.json and exports/acme/repo/)")
    missing = [n for n in names if not (exports / n).is_dir()]
    if missing:
        raise UserError(f"--dataset {missing[0]}: no folder {exports / missing[0]}")
    for n in names:
        load_config(exports / n)  # a bad taskmine.toml is one line now, not a failed run later
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from pipelines.runner import run_datasets

    return run_datasets(names, repeats=args.repeats, executor=args.executor, parallel=args.parallel)


def cmd_ui(args) -> int:
    _env(args, dagster=True)
    os.environ["TASKMINE_EXPORTS"] = str(_exports(args))
    # the `dagster` of this interpreter's environment: `.venv/bin/taskmine ui` runs without the venv on PATH
    beside = Path(sys.executable).parent / "dagster"
    cmd = [str(beside) if beside.exists() else "dagster", "dev", "-m", "pipelines.definitions", "-h", args.host,
           "-p", str(args.port)]
    print(f"Dagster UI on http://{args.host}:{args.port} (exports: {os.environ['TASKMINE_EXPORTS']})", flush=True)
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from pipelines.runner import run_forwarding_signals

    return run_forwarding_signals(cmd)


def cmd_sample(args) -> int:
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from sample.company import write_sample

    if args.scale < 1:
        raise UserError("--scale must be 1 or more (1 is small enough for tests, 50 is a benchmark)")
    t0 = time.perf_counter()
    s = write_sample(Path(args.out).resolve(), seed=args.seed, scale=args.scale, dataset=args.dataset)
    print(f"wrote the sample company {s.dataset!r} to {s.out / s.dataset} in {time.perf_counter() - t0:.1f}s")
    rows = [("people", s.people), ("jira issues", f"{s.issues} ({s.issue_files} files, {s.search_pages} search "
                                                    f"pages; {s.untriaged} untriaged)"),
            ("git commits", f"{s.commits} ({s.fixing_commits} fixing an issue, {s.merges} merges)"),
            ("mails", s.mails), ("slack messages", s.slack_messages), ("cross-source links", s.links),
            ("planted personal data", s.pii_items), ("ground truth", s.truth_path)]
    for name, value in rows:
        print(f"  {name:<22} {value}")
    print(f"next: taskmine run --exports {s.out}")
    return 0


def cmd_query(args) -> int:
    """`taskmine query SQL`: DuckDB on the warehouse's tables (views over its Parquet files) or on any Parquet
    file a query names (a published version's `tasks/*/*.parquet`), printed as a table; no DuckDB CLI needed."""
    _env(args)
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    import duckdb

    from warehouse.store import Store

    store = Store()
    if not store.home.is_dir():
        raise UserError(f"{store.home} does not exist: pass the --home (or TASKMINE_HOME) that `taskmine run` used")
    try:
        with store.connect() as con:
            rel = con.sql(args.sql)
            if rel is None:
                return 0
            print(rel.limit(args.limit) if args.limit else rel)
    except duckdb.Error as exc:
        raise UserError(f"query failed: {str(exc).splitlines()[0]}") from None
    return 0


def cmd_replay(args) -> int:
    _env(args)
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from taskmine.ops import replay_task

    return replay_task(args.task, args.agent, dataset=args.dataset, sandbox_kind=args.sandbox or "auto",
                       timeout_s=args.timeout)


def cmd_difficulty(args) -> int:
    """Per family difficulty and grader error of datasets in the warehouse (what the manifest and card publish)."""
    _env(args)
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from graders.difficulty import markdown
    from graders.stages import difficulty_report
    from warehouse.store import Store

    store = Store()
    if not store.home.is_dir():
        raise UserError(f"{store.home} does not exist: pass the --home (or TASKMINE_HOME) that `taskmine run` used")
    names = args.dataset or store.datasets("tasks")
    if not names:
        raise UserError(f"no task in {store.home}; run `taskmine run` first")
    for ds in names:
        config = load_config(Path(args.exports) / ds if args.exports else None)
        report = difficulty_report(store, ds, config)
        runs = store.read("validations", ds)
        base = [v for v in runs if v.run_kind.startswith("baseline:")]
        print(f"{ds}: {len(runs)} runs, {len(base)} baseline runs "
              f"({sum(1 for v in base if v.error_class in ('infra', 'timeout'))} infrastructure failures)")
        print(markdown(report.get("difficulty_table") or []))
        print("\nhack resistance (every attack class: tasks tried, passing, best and mean on published tasks):")
        print(markdown(report.get("resistance_table") or []))
        if report.get("difficulty_plot_path"):
            print(f"plot: {report['difficulty_plot_path']}")
    return 0


def cmd_audit(args) -> int:
    _env(args)
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from privacy import audit
    from privacy.stages import audit_rules
    from publishing.loader import DatasetError, resolve
    from warehouse.store import Store

    store = Store()
    if not store.home.is_dir():
        raise UserError(f"{store.home} does not exist: pass the --home (or TASKMINE_HOME) that `taskmine run` used")
    names = args.dataset or sorted(p.name for p in store.published_root().glob("*") if p.is_dir())
    if not names:
        raise UserError(f"nothing published under {store.published_root()}; run `taskmine run` first")
    bad = 0
    for ds in names:
        try:
            root = resolve(store.published_root() / ds)
        except DatasetError as exc:
            raise UserError(str(exc)) from None
        report = audit.audit(root, audit_rules(store, ds), manifest=True)
        print(f"{ds} {root.name}: {report.summary()} (audited {report.texts} texts, {report.chars:,} chars, NER read "
              f"{report.ner_read} changed paragraphs, {report.seconds:.1f}s)")
        for h in report.hits[:20]:
            print(f"  {h.file}: {h.where} ({h.kind} #{h.index})")
        bad += not report.ok
    return 1 if bad else 0


def cmd_extractors(args) -> int:
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from extractors.base import registry

    if args.action == "list":
        head = ("name", "source", "medium", "patterns", "origin")
        rows = [(name, reg.cls.source, reg.cls.medium or "(none)", ",".join(reg.cls.patterns) or "(folders)",
                 reg.origin) for name, reg in registry().items()]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        for r in [head, *rows]:
            print("  ".join(f"{v:<{w}}" for v, w in zip(r, widths)) + "  " + r[4])
        return 0
    if args.action == "new":
        if not args.path:
            raise UserError("extractors new needs a NAME, e.g. `taskmine extractors new zendesk_json`")
        # on demand: `taskmine --help` loads neither Dagster nor the stages
        import extractors
        from extractors.scaffold import ScaffoldError, scaffold

        try:
            written = scaffold(args.path, Path(extractors.__file__).resolve().parent.parent)
        except ScaffoldError as exc:
            raise UserError(str(exc)) from None
        for p in written:
            print(f"wrote {p}")
        print(f"next: uv run pytest tests/extractors/test_{args.path}_extractor.py   (green already: `uv run` installs "
              f"the new entry point of pyproject.toml), then edit extractors/{args.path}.py for the real format; see "
              "CONTRIBUTING.md")
        return 0
    if not args.path:
        raise UserError("extractors check needs a PATH: the folder of one dataset's export, or one export file "
                        "(a Slack .zip, an .mbox, a Jira or GitHub JSON)")
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from taskmine.ops import check_export

    return check_export(Path(args.path))


def cmd_plugins(args) -> int:
    """`taskmine families|checks|sandboxes list`: the registered plug-ins of one kind, where each comes from,
    and the arguments it takes."""
    _env(args)
    kind = {"families": "family", "checks": "check", "sandboxes": "sandbox"}[args.command]
    rows = []
    for name, reg in plugins(kind).all().items():
        args_model = ", ".join(f"{k}{'' if f.is_required() else '?'}" for k, f in reg.args.model_fields.items()) \
            if reg.args else ""
        extra = getattr(reg.obj, "check_kind", "") or ", ".join(getattr(reg.obj, "kinds", ()) or ())
        rows.append((name, extra, args_model, reg.origin, reg.summary))
    head = ("name", "kind" if kind == "check" else ("reads" if kind == "family" else ""), "arguments", "origin")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    for r in [head, *rows]:
        print("  ".join(f"{v:<{w}}" for v, w in zip(r[:4], widths)).rstrip())
        if r is not head and r[4]:
            print(f"    {r[4][:110]}")
    return 0


def cmd_serve(args) -> int:
    """`taskmine serve`: one published task's tools as an MCP server on stdio, for a lab's agent harness (the
    tools its family uses, the cutoff and hidden events enforced as in the sandbox; a task with repositories
    gets a sandbox session where they stand as at the cutoff, for the git, shell and file tools). Its `submit`
    tool (or the client leaving) grades the task (a code task: its hidden tests) and writes the action log to
    --log, the grade to --result. `--openenv`: every task of the dataset over HTTP with OpenEnv's reset/step/state."""
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    import json

    import anyio

    _env(args)
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from publishing.loader import DatasetError, load_dataset

    try:
        ds = load_dataset(args.published)
    except (DatasetError, FileNotFoundError) as exc:
        raise UserError(str(exc)) from None
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from llm import LLM

    if args.openenv:
        # on demand: `taskmine --help` loads neither Dagster nor the stages
        from taskmine import openenv_server

        print(f"OpenEnv server for {ds.path} ({len(ds.tasks())} tasks) on http://{args.host}:{args.port} "
              "(WebSocket /ws: reset(task_id=...), step({tool, arguments}), state)", file=sys.stderr, flush=True)
        openenv_server.serve(ds.path, host=args.host, port=args.port, sandbox=args.sandbox, home=home(),
                             llm=LLM.from_env())
        return 0
    if not args.task:
        raise UserError("serve: give --task ID (one task over MCP on stdio), or --openenv --port P (every task)")
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from environments.tools import mcp_server
    from taskmine.serving import TaskSession

    try:
        session = TaskSession(ds, args.task, sandbox=args.sandbox, home=home(), llm=LLM.from_env())
    except DatasetError as exc:
        raise UserError(str(exc)) from None

    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from environments.tools import Result

    def finish() -> Result:      # the `submit` tool, or the client leaving: the log first (it is quick), the grade
        if args.log:
            Path(args.log).write_text("".join(e.model_dump_json() + "\n" for e in session.actions))
        g = session.grade()
        if args.result:
            Path(args.result).write_text(json.dumps({"task_id": session.task.task_id, **g.to_json()}, indent=1)
                                         + "\n")
        line = (f"{session.task.task_id} ({session.task.family}): score {g.score} ({g.summary})" if g.score is not None
                else f"{session.task.task_id}: not graded ({g.error_class}): {g.message}")
        print(f"taskmine serve: {line}", file=sys.stderr, flush=True)
        return Result(f"graded: {line}", g.to_json(), error=g.score is None)

    async def main() -> None:
        # on demand: `taskmine --help` loads neither Dagster nor the stages
        from mcp.server.stdio import stdio_server

        server = mcp_server(session.tools, submit=finish)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    with session:
        try:
            anyio.run(main)
        finally:
            if session.graded is None:    # the client left without submitting (an MCP SDK client gives 2 s)
                finish()
    return 0


def cmd_export(args) -> int:
    """`taskmine export harbor`: a published dataset's tasks as Harbor task folders (taskmine.harbor)."""
    _env(args)
    if not (args.published or args.dataset):
        raise UserError("export: give --dataset NAME (published under TASKMINE_HOME) or --published DIR")
    published = Path(args.published) if args.published else home() / "published" / args.dataset
    if not published.exists():
        raise UserError(f"no published dataset at {published}; run `taskmine run` first, or give --published DIR")
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from environments.docker_cli import SandboxError
    from publishing.loader import DatasetError
    from taskmine import harbor

    started = time.monotonic()
    try:
        done = harbor.export(published, Path(args.out), tasks=args.task or None, home=home(),
                             progress=lambda m: print(f"  {m}", flush=True))
    except (DatasetError, SandboxError) as exc:
        raise UserError(str(exc)) from None
    print(f"{len(done)} Harbor task folders in {args.out} ({time.monotonic() - started:.0f}s); run one with "
          "`harbor run -p <folder> -a oracle`")
    return 0


def cmd_review(args) -> int:
    """`taskmine review`: write the audit sheet of a sample of a dataset's tasks, or read reviewers' verdicts
    back into the agreement between reviewers and the grader (stored in reports/<dataset>/review.json)."""
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    import json

    _env(args)
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from graders.review import VerdictError, read_verdicts, sample, write_sheet
    from warehouse.store import Store

    store = Store()
    tasks = store.read("tasks", args.dataset)
    if not tasks:
        raise UserError(f"dataset {args.dataset!r} has no tasks in {store.home}; run `taskmine run` first")
    if args.read:
        try:
            result = read_verdicts([Path(f) for f in args.read], args.dataset, {t.task_id for t in tasks})
        except VerdictError as exc:
            raise UserError(str(exc)) from None
        out = store.home / "reports" / args.dataset / "review.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1, sort_keys=True))
        g = result["grader"]
        ci = f" (95% CI {g['low']:.2f}-{g['high']:.2f})" if g["rate"] is not None else ""
        print(f"{args.dataset}: {len(result['reviewers'])} reviewers, {g['reviewed']} verdicts, grader agreement "
              f"{g['rate']}{ci}, {g['unsure']} unsure")
        for fam, a in result["per_family"].items():
            print(f"  {fam:<16} {a['reviewed']:>4} verdicts  agreement {a['rate']}")
        if result["between_reviewers"]["pairs"]:
            b = result["between_reviewers"]
            print(f"  between reviewers: {b['alike']} of {b['pairs']} answered alike")
        print(f"stored: {out}")
        return 0
    if not args.out:
        raise UserError("review needs --out DIR to write the sheet, or --read VERDICTS.json ... to read verdicts")
    chosen = sample(tasks, args.n, seed=args.dataset)
    page = write_sheet(chosen, store.read("validations", args.dataset), args.dataset, Path(args.out))
    print(f"wrote {page} ({len(chosen)} tasks); reviewers open it, answer, and send back their verdicts-*.json; then: "
          f"taskmine review --dataset {args.dataset} --read verdicts-*.json")
    return 0


def cmd_bench(args) -> int:
    _env(args)
    # on demand: `taskmine --help` loads neither Dagster nor the stages
    from bench import run as bench_run
    from bench.scale import bench_scale

    if args.what == "scale":
        return bench_scale(args.scale or [1, 5, 10], args.out, code_candidates=args.code_candidates,
                           validate_per_family=args.validate_per_family, sandbox=args.sandbox or "auto",
                           cores=args.cores, deadline_hours=args.deadline_hours, reuse=args.reuse,
                           settings={k: v for k, v in (("workers", args.workers),
                                                       ("chunk_events", args.chunk_events)) if v is not None})
    scale = args.scale[-1] if args.scale else (1 if args.what == "code" else 50)
    return bench_run(args.what, scale=scale, out=args.out, memory=args.memory, real=args.real, show=args.show,
                     input=args.input, exports=args.exports, dataset=args.dataset, limit=args.limit,
                     families=args.families, repeats=args.repeats, slots=args.slots, second=args.second)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="taskmine", description="Mine a company's record into validated RL tasks.",
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", help="warehouse folder (default: $TASKMINE_HOME or ./.taskmine)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("run", help="run every stage on every dataset (default: the bundled sample)",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--exports",
                   help="folder with one sub-folder per dataset (Jira, git, mail, Slack or GitHub exports)")
    r.add_argument("--dataset", action="append", help="only this dataset (repeatable)")
    r.add_argument("--sandbox", choices=["auto", "docker", "local", "kubernetes"],
                   help="where tasks are replayed (default auto; kubernetes: docs/architecture.md)")
    r.add_argument("--sandbox-hosts", action="append", metavar="URL*N",
                   help="a Docker daemon to spread validation over, N sessions at once (repeatable; sets "
                        "TASKMINE_SANDBOX_HOSTS; e.g. unix:///var/run/docker.sock*2)")
    r.add_argument("--repeats", type=int, default=0, help="oracle/null repeats per task (default: dataset config, 3)")
    r.add_argument("--executor", choices=["auto", "multiprocess", "in_process", "docker"], default="auto",
                   help="where steps run: datasets at once, each in its own process (auto, the default); also each "
                        "step in its own process (multiprocess); everything here, one dataset after the other "
                        "(in_process); each step in its own container (docker: docker_executor, see "
                        "docs/architecture.md)")
    r.add_argument("--parallel", type=int, default=0,
                   help="datasets and steps at once (default: this machine's cores)")
    r.set_defaults(fn=cmd_run)

    u = sub.add_parser("ui", help="open the Dagster UI on the same definitions")
    u.add_argument("--exports")
    u.add_argument("--host", default="127.0.0.1")
    u.add_argument("--port", type=int, default=3000)
    u.set_defaults(fn=cmd_ui)

    s = sub.add_parser("sample", help="write the synthetic sample company export and its ground truth")
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--scale", type=int, default=1)
    s.add_argument("--dataset", default="acme")
    s.set_defaults(fn=cmd_sample)

    rp = sub.add_parser("replay", help="run one task with an agent: oracle, null, or a shell command")
    rp.add_argument("--task", required=True, help="task id (a unique prefix is enough)")
    rp.add_argument("--agent", required=True, help='oracle | null | "<shell command run in the task container>"')
    rp.add_argument("--dataset")
    rp.add_argument("--sandbox", choices=["auto", "docker", "local", "kubernetes"])
    rp.add_argument("--timeout", type=float, default=120.0)
    rp.set_defaults(fn=cmd_replay)

    q = sub.add_parser("query", help="run SQL (DuckDB) on the warehouse's tables or published Parquet files",
                       epilog="examples:\n  taskmine query \"select task_id, family from tasks\"\n"
                              "  taskmine query \"select family, split, count(*) from "
                              "'.taskmine/published/acme/*/tasks/*/*.parquet' group by all\"",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("sql")
    q.add_argument("--limit", type=int, default=0, help="print at most this many rows (0: DuckDB's default)")
    q.set_defaults(fn=cmd_query)

    a = sub.add_parser("audit", help="scan published datasets for known real identities")
    a.add_argument("--dataset", action="append")
    a.set_defaults(fn=cmd_audit)

    d = sub.add_parser("difficulty", help="difficulty and grader error per family of datasets in the warehouse",
                       epilog="examples:\n  taskmine difficulty --dataset acme\n"
                              "  taskmine difficulty --exports ~/exports --dataset acme   # its taskmine.toml band",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("--dataset", action="append", help="only this dataset (repeatable; default: every one)")
    d.add_argument("--exports", help="the export folder, for the datasets' taskmine.toml (band_min, band_max)")
    d.set_defaults(fn=cmd_difficulty)

    e = sub.add_parser("extractors", help="list extractors, scaffold a new one, or check an export",
                       epilog="examples:\n  taskmine extractors list\n  taskmine extractors new zendesk_json\n"
                              "  taskmine extractors check ~/exports/acme\n"
                              "  taskmine extractors check ~/Downloads/slack-export.zip",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("action", choices=["list", "check", "new"])
    e.add_argument("path", nargs="?", metavar="PATH|NAME",
                   help="export folder or file (check) or connector name (new)")
    e.set_defaults(fn=cmd_extractors)

    rv = sub.add_parser("review", help="an audit sheet of sampled tasks for people, and their verdicts read back",
                        epilog="examples:\n  taskmine review --dataset acme --n 50 --out review/\n"
                               "  taskmine review --dataset acme --read review/verdicts-*.json",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rv.add_argument("--dataset", required=True)
    rv.add_argument("--n", type=int, default=50, help="tasks to sample, stratified by family (default 50)")
    rv.add_argument("--out", help="folder for index.html")
    rv.add_argument("--read", nargs="+", metavar="VERDICTS", help="verdict files downloaded from the sheet")
    rv.set_defaults(fn=cmd_review)

    sv = sub.add_parser("serve", help="serve a published task's tools over MCP (stdio), or every task over "
                                      "OpenEnv's HTTP API (--openenv)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="examples:\n"
                               "  taskmine serve --published .taskmine/published/acme --task 3f2a --result grade.json\n"
                               "  taskmine serve --openenv --port 8000 --published .taskmine/published/acme")
    sv.add_argument("--published", required=True, help="published/<dataset>[/<version>]")
    sv.add_argument("--task", help="task id (a unique prefix is enough); MCP on stdio")
    sv.add_argument("--log", help="write the episode's action log here (JSON lines) when the client disconnects")
    sv.add_argument("--result", help="write the task's grade here (JSON) when the client disconnects")
    sv.add_argument("--sandbox", choices=["auto", "docker", "local"], default="auto",
                    help="where a task's repositories live for git, shell and the file tools (default auto)")
    sv.add_argument("--openenv", action="store_true", help="serve every task over HTTP with OpenEnv's "
                                                           "reset/step/state (openenv-core)")
    sv.add_argument("--host", default="127.0.0.1", help="--openenv: the address to listen on")
    sv.add_argument("--port", type=int, default=8000, help="--openenv: the port (default 8000)")
    sv.set_defaults(fn=cmd_serve)

    ex = sub.add_parser("export", help="export a published dataset's tasks in another format (harbor)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="examples:\n  taskmine export harbor --dataset acme --out harbor-tasks/\n"
                               "  taskmine export harbor --published .taskmine/published/acme --out h/ --task 3f2a")
    ex.add_argument("format", choices=["harbor"])
    ex.add_argument("--dataset", help="a dataset published under TASKMINE_HOME (its LATEST version)")
    ex.add_argument("--published", help="or a published dataset folder")
    ex.add_argument("--out", required=True, help="the folder for the task folders")
    ex.add_argument("--task", action="append", help="only this task (a unique id prefix; repeatable)")
    ex.set_defaults(fn=cmd_export)

    for plural, what in (("families", "task families"), ("checks", "grader checks"),
                         ("sandboxes", "sandbox backends")):
        pl = sub.add_parser(plural, help=f"list the registered {what}")
        pl.add_argument("action", choices=["list"])
        pl.set_defaults(fn=cmd_plugins)

    b = sub.add_parser("bench", help="benchmarks: ingest, anonymize, embed, worlds, privacy, code, pool, scale",
                       epilog="examples:\n  taskmine bench ingest --scale 50\n"
                              "  taskmine bench scale --scale 1 --scale 5 --scale 10   # per stage cost, growth, "
                              "and a whole company extrapolated",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("what", choices=["ingest", "anonymize", "embed", "worlds", "privacy", "code", "pool", "scale"])
    b.add_argument("--scale", type=int, action="append",
                   help="sample size (default 50; code: 1); scale: repeat it, one run per scale (default 1, 5, 10)")
    b.add_argument("--out", help="folder for the generated input (default: a temp folder)")
    b.add_argument("--memory", action="store_true", help="also peak RSS per extractor at --scale and 10x it")
    b.add_argument("--input", choices=["sample", "real-mail"], default="sample",
                   help="anonymize: the sample company at --scale, or the real mail archives of --real")
    b.add_argument("--real", help="privacy, anonymize --input real-mail: the folder of real exports "
                                  "(default ../shared/data/real)")
    b.add_argument("--show", action="store_true",
                   help="privacy: print every miss and changed word with its context (real names: terminal only)")
    b.add_argument("--exports", help="code: a folder of datasets to measure instead of the sample")
    b.add_argument("--dataset", help="code: the dataset folder under --exports")
    b.add_argument("--limit", type=int, default=0, help="code: measure at most this many candidates; pool: "
                                                        "validate at most this many tasks (0: all)")
    b.add_argument("--families", help="pool: the families of the home's tasks to validate, comma-separated "
                                      "(default code_change,email_reply,chat_answer)")
    b.add_argument("--repeats", type=int, default=1, help="pool: oracle and null runs per task (default 1)")
    b.add_argument("--slots", type=int, default=1, help="pool: sessions at once per daemon (default 1)")
    b.add_argument("--second", metavar="URL", help="pool: the second Docker daemon (default: a private dockerd the "
                                                   "bench starts and removes; needs root)")
    b.add_argument("--code-candidates", type=int, default=2,
                   help="scale: code_change candidates measured per scale (each takes minutes; default 2)")
    b.add_argument("--validate-per-family", type=int, default=2,
                   help="scale: tasks validated per family per scale, the cost per task scaled to all (default 2)")
    b.add_argument("--sandbox", choices=["auto", "docker", "local"],
                   help="scale: where tasks are replayed (default auto)")
    b.add_argument("--cores", type=int, default=16, help="scale: cores per machine in the extrapolation")
    b.add_argument("--deadline-hours", type=float, default=24.0,
                   help="scale: the extrapolation counts the machines that finish within this many hours")
    b.add_argument("--workers", type=int, help="scale: worker processes of the chunked stages (taskmine.toml's "
                                               "`workers`; default the dataset's: 0 = every core)")
    b.add_argument("--chunk-events", type=int, help="scale: events per chunk (taskmine.toml's `chunk_events`); a "
                                                    "run with --workers 1 --chunk-events 1000000 is one chunk")
    b.add_argument("--reuse", action="store_true",
                   help="scale: read a scale's numbers from --out/scale-N.json when there (run the big one apart)")
    b.set_defaults(fn=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except KeyboardInterrupt:
        print("taskmine: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("TASKMINE_DEBUG"):
            raise
        # on demand: `taskmine --help` loads neither Dagster nor the stages
        from pipelines.errors import USER_ERRORS, one_line

        hint = "" if type(exc).__name__ in USER_ERRORS else " (set TASKMINE_DEBUG=1 for the traceback)"
        print(f"taskmine: error: {one_line(exc)}{hint}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
