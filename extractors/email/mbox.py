"""Split an mbox byte stream into messages, one at a time.

Format followed: the mbox family as described in RFC 4155 (application/mbox) and qmail's mbox(5):
each message starts with a `From ` line (`From <envelope-sender> <asctime date>`), a body line starting
with `From ` is escaped as `>From ` (mboxo) or `>>From ` (mboxrd). Apache mod_mbox monthly archives and
Mailman/pipermail `YYYY-Month.txt` archives (envelope sender obfuscated as `user at host`) are both
this format; pipermail also serves them gzipped (`.txt.gz`).

Separator heuristic (real archives break the rule that a `From ` line follows a blank line, and hold
unescaped `From ` lines in bodies): a line is a separator when it is a whole line starting with
`From ` and either it is the first line of the stream, or it ends in a date (asctime such as
`Wed Nov  1 06:04:52 2017`, optionally with a zone, or an RFC 5322 date) *and* the next line looks like
a header field (`Name:`). The look-ahead is what lets a separator without the blank line before it be
found while a quoted `From me, Mon Jan 1 ...` sentence followed by prose is not one. The blank line
before a separator belongs to the framing and is not part of the previous message.

Invariants:
- The stream is read in `CHUNK` blocks and only lines starting with `From ` are examined one by one
  (found with `bytes.find`); a line longer than `LINE_CAP` is never a separator, so a 10 MB line or a
  file without any newline costs a block of buffer, never the whole line. Memory is one message,
  capped at `max_bytes`: past it only the first `EXCERPT` bytes are kept, the message is reported
  with error "too_large" and reading goes on at the next separator.
- Offsets are byte offsets in the (decompressed) stream of the message's `From ` line (or of its first
  byte when the stream does not start with one).
- A read error (a truncated or corrupt gzip stream, an I/O error) ends the stream with one message
  marked "truncated" holding what was read of the current message; earlier messages stand.
- `>From ` escaping is undone the mboxrd way (one `>` is removed from `>+From `), which also restores
  mboxo's single escape.
"""

from __future__ import annotations

import datetime as dt
import gzip
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from extractors.email.message import parse_date

LINE_CAP = 1 << 16   # a longer line is never a separator
CHUNK = 1 << 20
LOOK = 256  # bytes of the line after a candidate that are enough to tell a header field
EXCERPT = 2048
GZIP_MAGIC = b"\x1f\x8b"

_ASCTIME = (rb"(?:[A-Za-z]{3},?\s+)?[A-Za-z]{3}\s+\d{1,2}\s+\d{1,2}:\d{2}(?::\d{2})?"
            rb"(?:\s+(?:[A-Za-z]{1,5}|[+-]\d{4}))?\s+\d{4}(?:\s+(?:[+-]\d{4}|[A-Za-z]{1,5}))?")
_RFC5322 = (rb"(?:[A-Za-z]{3},?\s+)?\d{1,2}\s+[A-Za-z]{3}\s+\d{4}\s+\d{1,2}:\d{2}(?::\d{2})?"
            rb"(?:\s+(?:[+-]\d{4}|[A-Za-z]{1,5}))?")
DATE_TAIL = re.compile(rb"\s(" + _ASCTIME + rb"|" + _RFC5322 + rb")\s*$")
HEADER_LINE = re.compile(rb"[^\s:]{1,200}:")
_ESCAPED = re.compile(rb"(?m)^>(>*From )")


@dataclass(slots=True)
class RawMessage:
    offset: int                 # byte offset of the message in the stream
    data: bytes                 # the message without its `From ` line (the first EXCERPT bytes if error)
    from_line: bytes | None     # the separator line, when there was one
    size: int                   # bytes of the message (From line excluded), counted even past the cap
    error: str | None = None    # "too_large" | "truncated"
    detail: str = ""


def is_separator(line: bytes, next_line: bytes, at_start: bool) -> bool:
    """Whether `line` (a whole line starting with b"From ") opens a message; see the module docstring."""
    if at_start:
        return True
    return bool(HEADER_LINE.match(next_line)) and DATE_TAIL.search(line) is not None


def from_line_date(line: bytes | None) -> dt.datetime | None:
    """The date at the end of a `From ` line, with its zone when it has one, else taken as UTC (mod_mbox
    and pipermail write it in UTC); None when there is none or it is not a plausible date (see
    `message.parse_date`)."""
    m = DATE_TAIL.search(line) if line else None
    return parse_date(m.group(1).decode("ascii", "replace"))[0] if m else None


def open_stream(path: Path) -> BinaryIO:
    """The file's bytes, decompressed on the fly when it is gzip (by magic number, not by name)."""
    with open(path, "rb") as f:
        gz = f.read(2) == GZIP_MAGIC
    return gzip.open(path, "rb") if gz else open(path, "rb")  # the caller closes it


def iter_mbox(f: BinaryIO, max_bytes: int) -> Iterator[RawMessage]:
    """Messages of the mbox stream `f`, in order (see the module docstring for what a separator is).

    The stream is read in CHUNK blocks and only candidate lines (b"\\nFrom ") are looked at in Python:
    `buf[lo:]` is the unconsumed data, `base` the stream offset of `buf[0]`, `scan` where the next
    candidate may start; `mid` says `buf[lo]` is not at a line start (an endless line was cut)."""
    state = _Message(max_bytes)
    buf, lo, base, scan, mid, eof, error = b"", 0, 0, 0, False, False, ""
    while True:
        if not eof and (len(buf) - lo < LOOK or scan >= len(buf)):
            buf, lo, base, scan, eof, error = _refill(f, buf, lo, base, scan)
        if scan == lo and not mid and buf.startswith(b"From ", lo):
            c = lo
        else:
            h = buf.find(b"\nFrom ", max(scan - 1, lo))
            c = h + 1 if h >= 0 else -1
        if c < 0:
            if eof:
                state.add(buf[lo:])
                break
            cut = buf.rfind(b"\n", lo) + 1  # keep the last, partial line: it may become a candidate
            if cut == 0:
                cut = len(buf) if len(buf) - lo > LINE_CAP else lo
            if cut > lo:
                state.add(buf[lo:cut])
                mid, lo = buf[cut - 1] != 0x0A, cut
            scan = lo
            buf, lo, base, scan, eof, error = _refill(f, buf, lo, base, scan)
            continue
        j = buf.find(b"\n", c)
        if j < 0 and (eof or len(buf) - c > LINE_CAP):
            scan = c + 1  # no newline (at the end, or an endless line): not a separator
            continue
        if j < 0 or (not eof and len(buf) - j - 1 < LOOK and buf.find(b"\n", j + 1) < 0):
            state.add(buf[lo:c])  # the candidate and the start of the next line are not all read yet
            lo = scan = c
            mid = False
            buf, lo, base, scan, eof, error = _refill(f, buf, lo, base, scan)
            continue
        line = buf[c:j + 1]
        if is_separator(line, buf[j + 1:j + 1 + LOOK], base + c == 0):
            state.add(buf[lo:c])
            if state.started or state.has_text():
                yield state.message()
            state = _Message(max_bytes, base + c, line)
            lo = scan = j + 1
            mid = False
        else:
            scan = c + 1
    if error:
        yield state.message("truncated", f"the stream ends early at byte {base + len(buf)}: {error}")
    elif state.started or state.has_text():
        yield state.message()


def _refill(f: BinaryIO, buf: bytes, lo: int, base: int, scan: int):
    """Drop the consumed `buf[:lo]` and append the next block: (buf, lo, base, scan, eof, error)."""
    try:
        # read1: one decompression step at a time, so a truncated gzip gives its data up to the damage
        chunk = getattr(f, "read1", f.read)(CHUNK)
        error = ""
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        chunk, error = b"", f"{type(e).__name__}: {e}"
    return buf[lo:] + chunk, 0, base + lo, scan - lo, not chunk, error


class _Message:
    """The message being read: its parts up to the cap, its full size, where it started."""

    __slots__ = ("max_bytes", "start", "from_line", "parts", "size", "over", "started")

    def __init__(self, max_bytes: int, start: int = 0, from_line: bytes | None = None):
        self.max_bytes, self.start, self.from_line = max_bytes, start, from_line
        self.parts: list[bytes] = []
        self.size, self.over, self.started = 0, False, from_line is not None

    def add(self, data: bytes) -> None:
        if not data:
            return
        self.size += len(data)
        if not self.over:
            self.parts.append(data)
            if self.size > self.max_bytes:
                self.over = True
                self.parts = [b"".join(self.parts)[:EXCERPT]]

    def has_text(self) -> bool:
        return any(p.strip() for p in self.parts)

    def message(self, error: str | None = None, detail: str = "") -> RawMessage:
        data = b"".join(self.parts)
        if self.over and error is None:
            error = "too_large"
            detail = f"message of {self.size} bytes is larger than max_message_bytes={self.max_bytes}"
        if error:
            return RawMessage(self.start, data[:EXCERPT], self.from_line, self.size, error, detail)
        if data.endswith(b"\n\n"):  # the blank line before the next separator is framing (RFC 4155)
            data = data[:-1]
        elif data.endswith(b"\r\n\r\n"):
            data = data[:-2]
        if b">From " in data:
            data = _ESCAPED.sub(rb"\1", data)
        return RawMessage(self.start, data, self.from_line, self.size)
