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

EXAMPLES = """examples:
  taskmine run                              # the bundled sample company, end to end
  taskmine run --exports ~/exports          # every folder under ~/exports is a dataset
  taskmine run --exports ~/exports --dataset acme --sandbox local
  taskmine ui --exports ~/exports           # Dagster UI on http://127.0.0.1:3000
  taskmine sample --out /tmp/exports --seed 7 --scale 5
  taskmine replay --task 3f2a --agent oracle
  taskmine replay --task 3f2a --agent "company answer --sha deadbeef"
  taskmine audit --dataset acme
  taskmine extractors list
  taskmine extractors new zendesk_json      # scaffold a connector + fixture + contract test
  taskmine extractors check ~/exports/acme
  taskmine bench ingest --scale 50
  taskmine bench embed --scale 10          # cached embeddings vs plain sentence-transformers
  taskmine bench code --exports ~/exports --dataset mit --limit 40   # environments, test sets, validation
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
    from taskmine.paths import contain_caches, dagster_home

    contain_caches()
    os.environ["DAGSTER_HOME"] = str(dagster_home(create=dagster))


def _exports(args) -> Path:
    from taskmine.paths import default_exports

    if args.exports:
        path = Path(args.exports).expanduser().resolve()
        if not path.is_dir():
            raise UserError(f"--exports {args.exports}: no such folder; pass the folder that holds one "
                            "sub-folder per dataset")
        return path
    path = default_exports()
    if not (path / "acme").exists() and not os.environ.get("TASKMINE_EXPORTS"):
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
    from taskmine import flow

    names = args.dataset or flow.dataset_folders(exports)
    if not names:
        raise UserError(f"{exports}: no dataset folders; put each export in its own sub-folder "
                        "(e.g. exports/acme/jira/*.json and exports/acme/repo/)")
    missing = [n for n in names if not (exports / n).is_dir()]
    if missing:
        raise UserError(f"--dataset {missing[0]}: no folder {exports / missing[0]}")
    from task_builders.config import load_config

    for n in names:
        load_config(exports / n)  # a bad taskmine.toml is one line now, not a failed run later
    from pipelines.runner import run_datasets

    return run_datasets(names, repeats=args.repeats)


def cmd_ui(args) -> int:
    _env(args, dagster=True)
    os.environ["TASKMINE_EXPORTS"] = str(_exports(args))
    cmd = ["dagster", "dev", "-m", "pipelines.definitions", "-h", args.host, "-p", str(args.port)]
    print(f"Dagster UI on http://{args.host}:{args.port} (exports: {os.environ['TASKMINE_EXPORTS']})", flush=True)
    os.execvp(cmd[0], cmd)


def cmd_sample(args) -> int:
    from sample.company import write_sample

    if args.scale < 1:
        raise UserError("--scale must be 1 or more (1 is small enough for tests, 50 is a benchmark)")
    t0 = time.perf_counter()
    summary = write_sample(Path(args.out).resolve(), seed=args.seed, scale=args.scale, dataset=args.dataset)
    print(f"wrote {summary} in {time.perf_counter() - t0:.1f}s")
    return 0


def cmd_replay(args) -> int:
    _env(args)
    from taskmine.ops import replay_task

    return replay_task(args.task, args.agent, dataset=args.dataset, sandbox_kind=args.sandbox or "auto",
                       timeout_s=args.timeout)


def cmd_audit(args) -> int:
    _env(args)
    from taskmine import flow
    from warehouse import audit
    from warehouse.loader import DatasetError, resolve
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
        hits = audit.scan(root, flow.anonymizer(store, ds).known_strings(), detector=flow.secrets)
        print(f"{ds} {root.name}: {len(hits)} known identities found")
        for h in hits[:20]:
            print(f"  {h.file}: {h.where} ({h.kind} #{h.index})")
        bad += bool(hits)
    return 1 if bad else 0


def cmd_extractors(args) -> int:
    from extractors.base import registry

    if args.action == "list":
        rows = [(name, reg.cls.source, ",".join(reg.cls.patterns) or "(folders)", reg.origin)
                for name, reg in registry().items()]
        widths = [max(len(r[i]) for r in [("name", "source", "patterns", "origin"), *rows]) for i in range(3)]
        for r in [("name", "source", "patterns", "origin"), *rows]:
            print("  ".join(f"{v:<{w}}" for v, w in zip(r, widths)) + "  " + r[3])
        return 0
    if args.action == "new":
        if not args.path:
            raise UserError("extractors new needs a NAME, e.g. `taskmine extractors new zendesk_json`")
        import extractors
        from extractors.scaffold import ScaffoldError, scaffold

        try:
            written = scaffold(args.path, Path(extractors.__file__).resolve().parent.parent)
        except ScaffoldError as exc:
            raise UserError(str(exc)) from None
        for p in written:
            print(f"wrote {p}")
        print(f"next: uv run pytest tests/extractors/test_{args.path}_extractor.py   (green already), then edit "
              f"extractors/{args.path}.py for the real format; see CONTRIBUTING.md")
        return 0
    if not args.path:
        raise UserError("extractors check needs a PATH: the folder of one dataset's export, or one export file "
                        "(a Slack .zip, an .mbox, a Jira or GitHub JSON)")
    from taskmine.ops import check_export

    return check_export(Path(args.path))


def cmd_bench(args) -> int:
    _env(args)
    from bench import run as bench_run

    scale = args.scale if args.scale is not None else (1 if args.what == "code" else 50)
    return bench_run(args.what, scale=scale, out=args.out, memory=args.memory, exports=args.exports,
                     dataset=args.dataset, limit=args.limit)


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
    r.add_argument("--sandbox", choices=["auto", "docker", "local"], help="where tasks are replayed (default auto)")
    r.add_argument("--repeats", type=int, default=0, help="oracle/null repeats per task (default: dataset config, 3)")
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
    rp.add_argument("--sandbox", choices=["auto", "docker", "local"])
    rp.add_argument("--timeout", type=float, default=120.0)
    rp.set_defaults(fn=cmd_replay)

    a = sub.add_parser("audit", help="scan published datasets for known real identities")
    a.add_argument("--dataset", action="append")
    a.set_defaults(fn=cmd_audit)

    e = sub.add_parser("extractors", help="list extractors, scaffold a new one, or check an export",
                       epilog="examples:\n  taskmine extractors list\n  taskmine extractors new zendesk_json\n"
                              "  taskmine extractors check ~/exports/acme\n"
                              "  taskmine extractors check ~/Downloads/slack-export.zip",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("action", choices=["list", "check", "new"])
    e.add_argument("path", nargs="?", metavar="PATH|NAME",
                   help="export folder or file (check) or connector name (new)")
    e.set_defaults(fn=cmd_extractors)

    b = sub.add_parser("bench", help="benchmarks: ingest, anonymize, embed, code")
    b.add_argument("what", choices=["ingest", "anonymize", "embed", "code"])
    b.add_argument("--scale", type=int, default=None, help="sample size (default 50; code: 1)")
    b.add_argument("--out", help="folder for the generated input (default: a temp folder)")
    b.add_argument("--memory", action="store_true", help="also peak RSS per extractor at --scale and 10x it")
    b.add_argument("--exports", help="code: a folder of datasets to measure instead of the sample")
    b.add_argument("--dataset", help="code: the dataset folder under --exports")
    b.add_argument("--limit", type=int, default=0, help="code: measure at most this many candidates (0: all)")
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
        from pipelines.errors import USER_ERRORS, one_line

        hint = "" if type(exc).__name__ in USER_ERRORS else " (set TASKMINE_DEBUG=1 for the traceback)"
        print(f"taskmine: error: {one_line(exc)}{hint}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
