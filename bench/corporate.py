"""The corporate-mail fixture sets of `taskmine bench privacy`: invented messages in the style of a company's
executive mailbox (Lotus Notes routing blocks with wrapped recipient lists, Outlook "-----Original Message-----"
headers with "Last, First; Last, First", attendee and distribution lists, signatures with nicknames, forwarded news
with bylines and middle initials, "Mr. X", surnames that are ordinary words), labelled inline.

Why: the labelled real sets (`bench/data/real_mail_*.json`) are list mail (Apache, LKML, numpy), where people sign
with their full name; a company's mailbox is where the identity graph knows "Steven" and the text says "Steve".
Every name, company, address and number in them is invented (domains under .example, phones in 555-01xx).

Format (`bench/data/corporate_mail/*.txt`): messages separated by a line "=====" (lines starting with "#" before the
first one are comments), each an RFC 5322 header block, a blank line and the body. In the body `[[text]]` marks a
person's name or part of one (full name, first name, surname, nickname; titles and single initials are left out
of a mark, as in the real sets), `[[text|email]]` and `[[text|phone]]` a person's address or number. `parse`
removes the marks and keeps them as labels; `write_mbox` writes the messages as an mbox the e-mail extractor reads
(headers, MIME headers for UTF-8 text, the body); `labelled` finds each message again among the ingested events by
its Message-ID and gives its body with the labels as offsets into it, in the shape `bench.privacy.score` reads.

The dev set was written and labelled before the anonymizer was tuned on it; the held-out set (other people, other
nicknames, the same phenomena) after tuning, and scored once. When the held-out set shows a phenomenon the dev set
lacks, new invented examples of it go in the dev set (messages c48-c52: team mailboxes whose name starts with a
given name, people in forwarded news whose names no list knows), the anonymizer is tuned on those, and the held-out
set is scored once more, its labels untouched.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "data" / "corporate_mail"
DEVSET = FIXTURES / "devset.txt"
HELDOUT = FIXTURES / "heldout.txt"
_MARK = re.compile(r"\[\[(.+?)(?:\|(person|email|phone))?\]\]", re.S)
_SEPARATOR = re.compile(r"^=====[ \t]*$", re.M)


class FixtureError(ValueError):
    """A fixture file that does not parse (a message without a Message-ID, a mark left open)."""


@dataclass
class Message:
    headers: str
    body: str
    spans: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, kind) into `body`
    message_id: str = ""


def parse(path: Path) -> list[Message]:
    """The messages of a fixture file, marks removed, labels kept (see the module docstring)."""
    text = Path(path).read_text(encoding="utf-8")
    chunks = _SEPARATOR.split(text)[1:]
    out = []
    for n, chunk in enumerate(chunks, 1):
        chunk = chunk.strip("\n")
        headers, sep, raw = chunk.partition("\n\n")
        if not sep:
            raise FixtureError(f"{path.name}: message {n} has no blank line after its headers")
        m = re.search(r"(?im)^message-id:[ \t]*<([^<>\s]+)>", headers)
        if m is None:
            raise FixtureError(f"{path.name}: message {n} has no Message-ID header")
        body, spans, pos = [], [], 0
        length = 0
        for mark in _MARK.finditer(raw):
            before = raw[pos:mark.start()]
            body.append(before)
            length += len(before)
            value = mark.group(1)
            spans.append((length, length + len(value), mark.group(2) or "person"))
            body.append(value)
            length += len(value)
            pos = mark.end()
        body.append(raw[pos:])
        clean = "".join(body)
        if "[[" in clean or "]]" in clean:
            raise FixtureError(f"{path.name}: message {n} has a mark left open")
        out.append(Message(headers, clean + "\n", spans, m.group(1)))
    return out


def write_mbox(messages: list[Message], path: Path) -> Path:
    """The messages as an mbox (mboxrd "From " lines escaped), UTF-8 plain text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for m in messages:
            f.write("From fixture@example Thu Jun 14 09:02:00 2001\n")
            f.write(m.headers.rstrip("\n") + "\n")
            f.write("MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n")
            f.write(re.sub(r"(?m)^(>*From )", r">\1", m.body))
            f.write("\n")
    return path


def _h(text: str, n: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


def labelled(store, dataset: str, messages: list[Message], name: str) -> list[dict]:
    """Each fixture message as the ingested event's body with the labels as offsets into it (the shape of
    `bench.privacy.load_devset`); a message the extractor did not give back, or gave with another body, is a
    FixtureError."""
    bodies = {}
    for e in store.iter("events", dataset):
        if e.medium == "mail":
            bodies[e.native_id.strip("<>")] = e.body or ""
    out = []
    for m in messages:
        body = bodies.get(m.message_id)
        if body is None:
            raise FixtureError(f"{name}: the e-mail extractor gave no message <{m.message_id}>")
        core = m.body.strip("\n")
        at = body.find(core)
        if at < 0:
            raise FixtureError(f"{name}: the body of <{m.message_id}> reads differently after ingest")
        spans = [[s + at, e + at, kind, _h(body[s + at:e + at], 12)] for s, e, kind in m.spans]
        out.append({"dataset": name, "file": "mailbox.mbox", "offset": None, "member": m.message_id,
                    "body": body, "spans": spans})
    return out
