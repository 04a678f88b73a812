"""Helpers for connectors that stream JSON from something they open (a file, a zip member).

`extractors.jsonstream` quarantines a value nested too deeply for Python's JSON parser itself
(`too_deep`), so one hostile element never ends a document; this module only adapts the opener-style
call the Slack and GitHub connectors use, and gives a bounded repr for quarantine excerpts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, BinaryIO

from extractors.jsonstream import JsonItem, iter_json_items

Opener = Callable[[], AbstractContextManager[BinaryIO]]


def safe_repr(value: Any, limit: int = 512) -> str:
    """A bounded repr for a quarantine excerpt; a parsed value can still be too deep for repr."""
    try:
        return repr(value)[:limit]
    except RecursionError:
        return "<nested too deeply to show>"


def iter_items(open_stream: Opener, *, array_keys: tuple[str, ...] = (), max_item_bytes: int = 50 << 20,
               ) -> Iterator[JsonItem]:
    """`iter_json_items` over the stream `open_stream()` opens."""
    with open_stream() as f:
        yield from iter_json_items(f, array_keys=array_keys, max_item_bytes=max_item_bytes)
