"""Try a published version as a lab would, with the lab's own tools, and print what each check found:

  uv run python scripts/lab_check.py --published .taskmine/published/acme/<version> [--home H] [--skip harbor]

- `datasets.load_dataset(dir, config)`: every config of the card gives the splits its tasks are in;
- the agent view (tasks/*.parquet) holds no string of any reference, probe, hidden event or requester script;
- the `trajectories` config loads and each communication trajectory replays to a full score;
- per family, one task: an MCP-only scripted agent (the `mcp` client on `taskmine serve`) doing the oracle's work
  scores 1; an OpenEnv client (`openenv-core`'s own, on `taskmine serve --openenv`) scores 1, doing nothing 0;
  its Harbor folder (`taskmine export harbor`) run as Harbor runs it (Docker) scores oracle 1, nothing 0.

The same checks run on the sample in tests/test_end_to_end.py (they live in tests/lab_surfaces.py). Exit status 1
when any check fails. Needs a Docker daemon for the Harbor and code-task checks.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--published", required=True, type=Path, help="a published version folder (or its dataset folder)")
    ap.add_argument("--home", type=Path, help="taskmine home for serving caches (default: a temporary one)")
    ap.add_argument("--skip", action="append", default=[], choices=["mcp", "openenv", "harbor"])
    ap.add_argument("--keep", action="store_true", help="keep the work folder (Harbor folders, caches)")
    args = ap.parse_args()

    import lab_surfaces as L

    from publishing.loader import load_dataset, resolve

    pub = resolve(args.published)
    work = Path(tempfile.mkdtemp(prefix="lab-check-"))
    home = args.home or work / "home"
    ds = load_dataset(pub)
    tasks = L.one_per_family(pub)
    failed = []

    def report(name: str, ok: bool, detail) -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
        if not ok:
            failed.append(name)

    print(f"{pub}: {len(ds.tasks())} tasks, families {sorted(tasks)}", flush=True)
    # the work folder holds what the checks exported from the dataset (real data for a real export): removed
    # whatever happens, a check that raises included (its failure is reported, not a traceback)
    try:
        splits = L.config_splits(pub, work / "hf")
        report("load_dataset", all(g == w for g, w in splits.values()),
               ", ".join(f"{n} {sorted(g)}" + ("" if g == w else f" (want {sorted(w)})")
                         for n, (g, w) in splits.items()))
        leaks = L.agent_leaks(pub)
        report("agent view holds no reference string", not leaks, leaks[:5] or "0 found")
        rows, wrong = L.trajectory_problems(pub, work)
        report("trajectories", not wrong, f"{rows} rows loaded" + (f"; {wrong[:5]}" if wrong else ", every replay 1.0"))
        if "mcp" not in args.skip:
            for family, task in tasks.items():
                t0 = time.time()
                got = L.mcp_agent(pub, task, home, work)
                errors = [a for a in got["answers"] if a[1]]
                score = got["result"].get("score")
                report(f"mcp {family}", score == 1.0 and not errors,
                       f"score {score}, tools {sorted(got['tools'])}, {time.time() - t0:.0f}s" + (f"; errors {errors}"
                                                                                                  if errors else ""))
        if "openenv" not in args.skip:
            with L.OpenEnvServer(pub, home) as server:
                for family, task in tasks.items():
                    ep, null = L.openenv_episode(server.url, task), L.openenv_episode(server.url, task, act=False)
                    report(f"openenv {family}", ep["last"].reward == 1.0 and null["last"].reward == 0.0,
                           f"oracle {ep['last'].reward}, nothing {null['last'].reward}, {len(ep['steps'])} steps")
        if "harbor" not in args.skip:
            got = L.harbor_trials(pub, home, work / "harbor", tasks)
            for family in tasks:
                oracle, null = got[family]
                report(f"harbor {family}", (oracle, null) == (1.0, 0.0), f"oracle {oracle}, nothing {null}"
                       + (f"; {json.dumps(got[family + ':output'])[:800]}" if family + ":output" in got else ""))
    except AssertionError as exc:
        report("a check's own assertion", False, str(exc)[:800] or "assertion failed")
    finally:
        if args.keep:
            print(f"work files: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("FAILED: " + ", ".join(failed) if failed else "every check passed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
