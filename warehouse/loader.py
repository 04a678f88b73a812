"""The consumer side: load a published dataset in one call, verifying it against its manifest.

    from warehouse.loader import load_dataset
    ds = load_dataset(".taskmine/published/acme")       # the LATEST version
    for task in ds.tasks(split="train"): print(task["prompt"], ds.world(task["task_id"]))

Invariant: with `verify=True` (the default) every file's sha256 must match the manifest, and no file
may exist that the manifest does not list; a mismatch is an error naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.ids import sha256_file

_JSON_COLUMNS = ("world_manifest", "reference", "rubric", "validation")


class DatasetError(ValueError):
    pass


@dataclass
class PublishedDataset:
    path: Path
    manifest: dict
    table: pa.Table

    @property
    def version(self) -> str:
        return self.manifest["version"]

    def tasks(self, split: str | None = None, family: str | None = None) -> list[dict]:
        out = []
        for row in self.table.to_pylist():
            if (split and row["split"] != split) or (family and row["family"] != family):
                continue
            for c in _JSON_COLUMNS:
                row[c] = json.loads(row[c])
            out.append(row)
        return out

    def world(self, task_id: str) -> Path:
        return self.path / "worlds" / task_id


def resolve(path: Path | str) -> Path:
    path = Path(path)
    if (path / "manifest.json").exists():
        return path
    latest = path / "LATEST"
    if latest.exists():
        return path / latest.read_text().strip()
    raise DatasetError(f"{path}: no manifest.json and no LATEST file; point at published/<dataset>[/<version>]")


def load_dataset(path: Path | str, verify: bool = True) -> PublishedDataset:
    root = resolve(path)
    manifest = json.loads((root / "manifest.json").read_text())
    if verify:
        listed = manifest["files"]
        present = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} - {"manifest.json"}
        if present - set(listed):
            raise DatasetError(f"{root}: files not in the manifest: {sorted(present - set(listed))[:3]}")
        for rel, digest in listed.items():
            p = root / rel
            if not p.exists():
                raise DatasetError(f"{root}: {rel} is missing")
            if sha256_file(p) != digest:
                raise DatasetError(f"{root}: {rel} does not match its sha256 in manifest.json")
    return PublishedDataset(root, manifest, pq.read_table(root / "tasks.parquet"))
