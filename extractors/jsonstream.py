"""Stream the records of a big JSON document one at a time, with byte offsets.

Format followed: RFC 8259 JSON, UTF-8. A document is read as one of three shapes:
- a top-level array: each element is one item;
- a top-level object holding a record array under one of `array_keys` (a paged API response such as
  Jira's `/rest/api/2/search` page `{"startAt":..,"issues":[...]}`): each element of that array is one
  item, the other members (paging metadata) are dropped;
- any other top-level value (an object without such a member, a scalar): one item.

Invariants:
- Memory is bounded by `max_item_bytes` plus one read chunk: the file is never loaded whole. An item
  larger than the cap is skipped as `too_large` without being held in memory.
- Each item carries the byte offset of its first byte, so a bad record can be found in the file.
- A bad item never hides its neighbours: an element that is not valid JSON (`json_decode`) or too big
  is reported as an error item and the next element is read. Only damage to the structure around the
  items (a file cut in the middle, `truncated`; a top-level object key that is not a string) stops
  the document, after everything before it has been yielded.
- Separators between elements are read leniently: a missing or doubled comma is not an error, since
  every element is still delimited by its own brackets.
- Invalid UTF-8 inside an item (an encoded surrogate included) and an unpaired surrogate escape
  ("\\ud800", which names no character) are decoded as U+FFFD and flagged (`encoding_error`), not
  dropped: every string read can be written out as UTF-8.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

CHUNK = 1 << 20
EXCERPT = 512

_WS = re.compile(rb"[ \t\r\n]*")
_STRUCT = re.compile(rb'[\[\]{}"]')
_STR_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)  # a string's body up to its closing quote
_SCALAR = re.compile(rb"[^,\]} \t\r\n]*")  # up to a delimiter or JSON whitespace (\f, \v are not)
_STRAY = re.compile(rb'[^,\]{[" \t\r\n]*')  # a stray '}' or ':' in an array, up to where an element may start
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
# JSON escapes, matched left to right (so in "\\\\ud800" the escape is the backslash): a surrogate pair, a
# lone surrogate (group 1), any other.
_ESCAPE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
                     rb"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})|\\.", re.DOTALL)


@dataclass(frozen=True)
class JsonItem:
    """One item of the document: a parsed `value`, or an `error_class` with a message and excerpt."""

    offset: int
    value: Any = None
    error_class: str | None = None   # json_decode, truncated, too_large, empty, trailing_data
    message: str = ""
    excerpt: bytes = b""
    encoding_error: bool = False


class _Stop(Exception):
    """The structure around the items is broken; nothing after this point can be delimited."""

    def __init__(self, item: JsonItem):
        self.item = item


class _Reader:
    """A growing byte buffer over a binary file; `base` is the file offset of `buf[0]`."""

    def __init__(self, f: BinaryIO):
        self.f, self.buf, self.pos, self.base, self.eof = f, bytearray(), 0, 0, False

    def fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.f.read(CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def compact(self) -> None:
        """Forget everything before `pos` (called between items, so memory stays bounded)."""
        if self.pos:
            del self.buf[:self.pos]
            self.base += self.pos
            self.pos = 0

    def offset(self, i: int | None = None) -> int:
        return self.base + (self.pos if i is None else i)

    def peek(self) -> int | None:
        """The next non-whitespace byte (not consumed), or None at end of file."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return None

    def stop(self, error_class: str, message: str, offset: int | None = None) -> _Stop:
        at = self.offset() if offset is None else offset
        excerpt = bytes(self.buf[max(at - self.base, 0):][:EXCERPT])
        return _Stop(JsonItem(at, error_class=error_class, message=message, excerpt=excerpt))

    def scan(self, cap: int, scalar_end: re.Pattern = _SCALAR) -> bytes | None:
        """Consume the value at `pos` and return its bytes, or None when it is larger than `cap`
        (it is then skipped without being kept). Raises `_Stop` when the file ends inside it."""
        start, kept, origin = self.pos, True, self.offset()
        first = self.buf[start]
        scalar = first not in b'{["'  # a number or literal; or junk, as long as a line, capped like the rest
        if scalar and scalar_end.match(self.buf, start).end() == start:
            raise self.stop("json_decode", f"unexpected character {chr(first)!r}")
        depth, in_str, i = 0, first == ord('"'), start + (first == ord('"'))
        while True:
            if scalar:
                i = scalar_end.match(self.buf, i).end()
                if i < len(self.buf):
                    break
            elif in_str:
                j = _STR_BODY.match(self.buf, i).end()
                if j < len(self.buf) and self.buf[j] == 0x22:
                    i, in_str = j + 1, False
                    if depth == 0:
                        break
                    continue
                i = j  # the buffer ends inside the string (maybe right after a backslash)
            else:
                m = _STRUCT.search(self.buf, i)
                if m is not None:
                    i, ch = m.end(), self.buf[m.start()]
                    if ch == 0x22:
                        in_str = True
                    elif ch in b"{[":
                        depth += 1
                    else:
                        depth -= 1
                        if depth == 0:
                            break
                    continue
                i = len(self.buf)
            if kept and i - start > cap:
                kept = False
            if not kept:  # drop what was scanned; keep only the unscanned tail
                self.base += i
                del self.buf[:i]
                start = i = 0
            if not self.fill():
                if scalar:
                    break
                raise self.stop("truncated", "the file ends inside a JSON value (cut download?)", origin)
        self.pos = i
        return bytes(self.buf[start:i]) if kept and i - start <= cap else None


def _loads(raw: bytes) -> tuple[Any, bool]:
    """`json.loads`, text that is not Unicode replaced by U+FFFD: (value, whether anything was replaced).
    Decoded strictly first: `json.loads(bytes)` lets an encoded surrogate through ("surrogatepass")."""
    fixed = _ESCAPE.sub(lambda m: b"\\ufffd" if m[1] else m[0], raw) if _SURROGATE.search(raw) else raw
    try:
        return json.loads(fixed.decode("utf-8")), fixed != raw
    except UnicodeDecodeError:
        return json.loads(fixed.decode("utf-8", "replace")), True


def _item(offset: int, raw: bytes | None, cap: int) -> JsonItem:
    if raw is None:
        return JsonItem(offset, error_class="too_large", message=f"record is larger than {cap} bytes")
    try:
        value, replaced = _loads(raw)
    except RecursionError:
        return JsonItem(offset, error_class="too_deep", message="record is nested too deeply to parse",
                        excerpt=raw[:EXCERPT])
    except ValueError as e:
        return JsonItem(offset, error_class="json_decode", message=str(e), excerpt=raw[:EXCERPT])
    return JsonItem(offset, value, encoding_error=replaced)


def _array(r: _Reader, cap: int) -> Iterator[JsonItem]:
    r.pos += 1  # the '['
    while True:
        r.compact()
        c = r.peek()
        if c is None:
            raise r.stop("truncated", "the file ends inside a JSON array (cut download?)")
        if c == ord("]"):
            r.pos += 1
            return
        if c == ord(","):
            r.pos += 1
            continue
        offset = r.offset()
        if c in b"}:":  # one bad element with the junk after it: a run of them is not a row per byte
            excerpt = bytes(r.buf[r.pos:r.pos + EXCERPT])
            r.scan(cap, _STRAY)
            yield JsonItem(offset, error_class="json_decode", message=f"unexpected {chr(c)!r} in array",
                           excerpt=excerpt)
            continue
        yield _item(offset, r.scan(cap), cap)


def _object(r: _Reader, cap: int, array_keys: tuple[str, ...]) -> Iterator[JsonItem]:
    start = r.offset()
    r.pos += 1  # the '{'
    members: dict[str, Any] = {}
    container, oversized, bad, replaced = False, False, None, False
    while True:
        r.compact()
        c = r.peek()
        if c is None:
            raise r.stop("truncated", "the file ends inside a JSON object (cut download?)")
        if c == ord("}"):
            r.pos += 1
            break
        if c == ord(","):
            r.pos += 1
            continue
        if c != ord('"'):
            raise r.stop("json_decode", f"expected an object key, found {chr(c)!r}")
        key_item = _item(r.offset(), r.scan(cap), cap)
        if r.peek() is None:
            raise r.stop("truncated", "the file ends inside a JSON object (cut download?)")
        if r.peek() != ord(":") or not isinstance(key_item.value, str):
            raise r.stop("json_decode", "expected ':' after an object key")
        r.pos += 1
        if r.peek() is None:
            raise r.stop("truncated", "the file ends inside a JSON object (cut download?)")
        key = key_item.value
        if key in array_keys and r.buf[r.pos] == ord("["):
            container = True
            yield from _array(r, cap)
            continue
        offset = r.offset()
        value = _item(offset, r.scan(cap), cap)
        if container or oversized:
            continue
        if r.offset() - start > cap or value.error_class == "too_large":
            oversized = True
            members.clear()
        elif value.error_class:
            bad = bad or value
        else:
            members[key] = value.value
            replaced = replaced or key_item.encoding_error or value.encoding_error
    if container:
        return
    if oversized:
        yield JsonItem(start, error_class="too_large", message=f"record is larger than {cap} bytes")
    elif bad:
        yield JsonItem(start, error_class=bad.error_class, message=f"at byte {bad.offset}: {bad.message}",
                       excerpt=bad.excerpt)
    else:
        yield JsonItem(start, members, encoding_error=replaced)


SMALL_DOCUMENT = 8 << 20


def _whole_document(f: BinaryIO, array_keys: tuple[str, ...], limit: int) -> JsonItem | None:
    """Fast path: a small document that is one record (an object with no record array) is parsed in one
    `json.loads`, its offset 0. Anything else (bigger, an array, a page, invalid) returns None and the
    file is streamed from where it was, so results are the same either way, only faster."""
    try:
        if not f.seekable():
            return None
        start = f.tell()
        head = f.read(limit + 1)
    except (OSError, ValueError, AttributeError):
        return None
    if len(head) > limit or not head.lstrip().startswith(b"{"):
        f.seek(start)
        return None
    offset = 3 if head.startswith(b"\xef\xbb\xbf") else 0
    try:
        value, replaced = _loads(head[offset:])
    except (ValueError, RecursionError):
        value, replaced = None, False
    if isinstance(value, dict) and not any(isinstance(value.get(k), list) for k in array_keys):
        return JsonItem(start + offset + len(head[offset:]) - len(head[offset:].lstrip()), value,
                        encoding_error=replaced)
    f.seek(start)
    return None


def iter_json_items(f: BinaryIO, *, array_keys: tuple[str, ...] = (), max_item_bytes: int = 50 << 20,
                    ) -> Iterator[JsonItem]:
    """Yield the items of the JSON document in binary file `f` (see the module docstring)."""
    small = _whole_document(f, array_keys, min(max_item_bytes, SMALL_DOCUMENT))
    if small is not None:
        yield small
        return
    r = _Reader(f)
    try:
        if r.peek() is None:
            yield JsonItem(0, error_class="empty", message="the file is empty")
            return
        if r.buf.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark
            r.pos = 3
        c = r.peek()
        if c == ord("["):
            yield from _array(r, max_item_bytes)
        elif c == ord("{"):
            yield from _object(r, max_item_bytes, array_keys)
        elif c is not None:
            offset = r.offset()
            yield _item(offset, r.scan(max_item_bytes), max_item_bytes)
        if r.peek() is not None:
            raise r.stop("trailing_data", "data after the end of the JSON document")
    except _Stop as stop:
        yield stop.item
