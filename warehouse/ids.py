"""Content-addressed ids.

Invariant: an id is the sha256 of canonical JSON (sorted keys, no whitespace, UTF-8, no NaN) of the
parts that identify the thing, so the same inputs give the same id on every machine and every run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Serialize `value` the one way ids and manifests depend on."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                      default=_default)


def _default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"not JSON-serializable for an id: {type(value).__name__}")


def content_hash(*parts: Any) -> str:
    """sha256 hex of the canonical JSON of `parts`."""
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()


def event_id(dataset: str, source: str, native_id: str) -> str:
    """DESIGN.md: event_id is sha256 of dataset + source + native id."""
    return content_hash("event", dataset, source, native_id)


def sha256_file(path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
