"""The world stage: a dataset's company, built once for every task (environments.world, environments.gitworld).

- Its repositories are the anonymized histories rewritten once more without issue keys in commit messages
  (and URLs naming one), so no task can find its answer with `git log --grep KEY`; one copy per repository,
  cached by (anonymized HEAD, the dataset's keys).
- Its text is every anonymized issue, comment, change, mail and chat message in `world.sqlite`, with SHAs
  named in text translated to the world's repositories.
- `worlds/<dataset>/world.json` records what was built (repositories by name with their slug and path).
- A world repository is one delta-compressed pack: tasks record their refs, episodes pack their views.

Invariants: reads anonymized events and rewritten repositories only; idempotent (content keys).
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from environments.gitworld import optimize
from environments.world import build_world, world_key
from privacy import gitrewrite
from task_builders.mining import KEY
from warehouse.ids import content_hash
from warehouse.store import Store

_URL_WITH_KEY = re.compile(r"https?://\S*?/(?:browse|issues?)/[A-Z][A-Z0-9_]*-\d+\S*")


def strip_keys(message: str, keys: set[str]) -> str:
    """Remove issue keys (and URLs naming them) from a commit message, tidying what is left."""
    message = _URL_WITH_KEY.sub("", message)
    message = KEY.sub(lambda m: "" if m.group(1) in keys else m.group(0), message)
    lines = []
    for line in message.split("\n"):
        line = re.sub(r"[\[({]\s*[\])}]", "", line)  # brackets the key stood in
        line = re.sub(r"\b(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?|refs?|see)\b[\s:#,]*(?:and[\s,]*)*$", "",
                      line, flags=re.IGNORECASE)  # a trailing "Fixes" that only named keys
        line = re.sub(r"^[\s:\-\u2013,]+", "", line)
        line = re.sub(r"\s+(?:and|,)\s*$", "", line)
        lines.append(re.sub(r"[ \t]{2,}", " ", line).rstrip())
    return "\n".join(lines).strip() + "\n"


@dataclass
class WorldBuild:
    path: Path                     # world.sqlite
    repos: dict[str, dict]         # name -> {"path": world repository, "sha_map": raw -> world SHA}
    docs: int
    bytes: int


def world_dir(store: Store, dataset: str) -> Path:
    return store.worlds(dataset)


def build(store: Store, dataset: str) -> WorldBuild:
    root = world_dir(store, dataset)
    index_file = root / "repos" / "index.json"
    anon = json.loads(index_file.read_text()) if index_file.exists() else {}
    keys = {e.native_id for e in store.iter("anonymized_events", dataset) if e.kind == "issue_created"}
    repos: dict[str, dict] = {}
    for name, info in sorted(anon.items()):
        repos[name] = _linkfree(root, name, info, keys)
    sha_map = {raw: w for info in repos.values() for raw, w in info["sha_map"].items()}
    key = world_key(store.content_digest("anonymized_events", dataset), sha_map)
    # a withheld event (privacy.withhold) is a stub that only keeps its place: the world leaves it out
    path = build_world((e for e in store.iter("anonymized_events", dataset) if not e.withheld), root / "world.sqlite",
                       key, sha_map)

    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        docs = con.execute("SELECT COUNT(*) FROM docs").fetchone()[0]
    (root / "world.json").write_text(json.dumps({"key": key, "repos": {
        n: {"path": str(r["path"]), "slug": r["slug"], "absent": anon[n].get("absent"),
            "equivalent": anon[n].get("equivalent") or {}} for n, r in repos.items()}}, indent=1))
    return WorldBuild(path, repos, docs, path.stat().st_size)


def _linkfree(root: Path, name: str, info: dict, keys: set[str]) -> dict:
    """The anonymized repository without issue keys in messages (built once per input, cached)."""
    slug = name.replace("/", "_") or "repo"
    dst = root / "git" / f"{slug}.git"
    state = root / "git" / f"{slug}.json"
    key = content_hash("linkfree/2", info.get("key"), sorted(keys), sorted((info.get("equivalent") or {}).items()))
    if state.exists() and dst.exists():
        cached = json.loads(state.read_text())
        if cached.get("key") == key:
            return {"path": dst, "sha_map": cached["sha_map"], "slug": slug}
    if dst.exists():
        shutil.rmtree(dst)
    result = gitrewrite.rewrite(Path(info["path"]), dst, identity=lambda n, e: (n, e),
                                message=lambda m: strip_keys(m, keys))
    optimize(dst)  # one delta-compressed pack: what views are packed from (environments.gitworld)
    sha_map = {raw: result.sha_map[a] for raw, a in info["sha_map"].items() if a in result.sha_map}
    # a commit only a dropped ref reaches (a pull request's own commit) is its copy on a kept branch
    # (gitrewrite.equivalents): a SHA of it named in text, or a fix linked to it, is that copy's
    sha_map.update({raw: sha_map[kept] for raw, kept in (info.get("equivalent") or {}).items() if kept in sha_map})
    state.write_text(json.dumps({"key": key, "sha_map": sha_map}, sort_keys=True))
    return {"path": dst, "sha_map": sha_map, "slug": slug}


def load(store: Store, dataset: str) -> dict[str, dict]:
    """The world repositories of a built world: name -> {"path", "sha_map", "slug", "equivalent", "absent",
    "touched"}: `equivalent` maps a commit only a dropped ref reaches to its kept copy (original SHAs); `absent`
    and `touched` are, by world SHA, how many files the commit lacks and how many files it changes are absent
    before or after it, by why ("unreadable": git could not read them; "withheld": the leak audit refused them)."""
    root = world_dir(store, dataset)
    out = {}
    meta = json.loads((root / "world.json").read_text()) if (root / "world.json").exists() else {"repos": {}}
    for name, r in meta["repos"].items():
        path = Path(r["path"])
        state = path.with_suffix(".json")
        sha_map = json.loads(state.read_text())["sha_map"]
        side = Path(r["absent"]) if r.get("absent") else None
        counts = json.loads(side.read_text()) if side is not None and side.exists() else {}
        out[name] = {"path": path, "sha_map": sha_map, "slug": path.stem, "equivalent": r.get("equivalent") or {},
                     **{k: {sha_map[raw]: n for raw, n in (counts.get(k) or {}).items() if raw in sha_map}
                        for k in ("absent", "touched")}}
    return out
