"""Which extractor reads which input of a dataset folder, and the chained ingest of all of them.

Invariants:
- `plan` is deterministic: extractors in registry (name) order, each one's inputs sorted.
- An input that is a folder (a git repository) owns everything under it: files inside it are neither
  claimed by file extractors nor reported as unclaimed (a repository's JSON is code, not an export).
- `ingest` never lets one input stop the others: an extractor that raises becomes one `Quarantine`
  row (error_class "extractor_error") for that input and the next input is read.
- Hidden files and folders (".name") are never inputs.
- A dataset may be one file (a Slack .zip, an .mbox, a Jira JSON as downloaded): it is planned as a folder
  holding only that file, and rows name it relative to its folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import ValidationError

from extractors.base import Extractor, Row, get_extractor, registry


class NothingToIngest(Exception):
    """The dataset folder holds nothing any registered extractor recognises. The message is one line."""


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def plan(dataset_dir: Path) -> list[tuple[str, Path]]:
    """(extractor name, input path) for every input a registered extractor claims under `dataset_dir`."""
    root = Path(dataset_dir)
    claims = [(name, p) for name, reg in registry().items() for p in reg.cls.detect(root)
              if p == root or not _hidden(p, root)]
    folders = [p for _, p in claims if p.is_dir()]
    return [(name, p) for name, p in claims
            if p.is_dir() or not any(f in p.parents for f in folders)]


def unclaimed(dataset_dir: Path) -> list[Path]:
    """Files under `dataset_dir` no extractor claims (hidden files and files inside claimed folders aside)."""
    root = Path(dataset_dir)
    claimed = plan(root)
    files = {p for _, p in claimed}
    folders = {p for p in files if p.is_dir()}
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and here / d not in folders)
        if here in folders:
            dirnames[:] = []
            continue
        out += [here / f for f in sorted(filenames) if not f.startswith(".") and here / f not in files]
    return out


def _nothing_message(root: Path) -> str:
    classes = [reg.cls for reg in registry().values()]
    found = " or ".join(getattr(c, "label", c.name) for c in classes)
    expected = " or ".join(getattr(c, "expects", f"inputs of {c.name}") for c in classes)
    if root.is_file():
        return f"{root}: not a {found}; expected {expected}"
    return f"{root}: no {found} found; expected {expected} under this folder"


def ingest(dataset: str, dataset_dir: Path, run_id: str,
           config: Mapping[str, Mapping | None] | None = None) -> Iterator[Row]:
    """Every row of every input of `dataset_dir`, extractor after extractor (see `plan`).

    `config` maps an extractor name to its settings. Raises `NothingToIngest` when the folder is missing
    or nothing in it is recognised, and ValueError for settings an extractor rejects, both before the
    first row."""
    root = Path(dataset_dir)
    if not root.exists():
        raise NothingToIngest(f"{root}: no such folder or file; point at the export (a folder, or one file)")
    inputs = plan(root)
    if not inputs:
        raise NothingToIngest(_nothing_message(root))
    config = config or {}
    extractors: dict[str, Extractor] = {}
    base = root.parent if root.is_file() else root
    for name in dict.fromkeys(name for name, _ in inputs):
        try:
            extractors[name] = get_extractor(name)(dataset, config.get(name), run_id, root=base)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
            raise ValueError(f"settings of extractor {name!r}: {problems}") from None
    return _chain(extractors, inputs)


def _chain(extractors: dict[str, Extractor], inputs: list[tuple[str, Path]]) -> Iterator[Row]:
    for name, path in inputs:
        ex = extractors[name]
        try:
            yield from ex.iter_records(path)
        except Exception as e:
            yield ex.quarantine(file=ex.rel(path), error_class="extractor_error",
                                message=f"{name} failed on this input: {type(e).__name__}: {e}")
