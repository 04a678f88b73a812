"""E-mail archives (mbox, maildir, .eml) -> one `email` event per message.

Formats followed: mbox (RFC 4155; Apache mod_mbox monthly archives, Mailman/pipermail `YYYY-Month.txt`
and `.txt.gz`; see `mbox.py` for the separator heuristic), maildir (the qmail maildir(5) layout:
messages are the files of `cur/` and `new/`, `tmp/` holds deliveries in progress and is not read;
Maildir++ sub-folders `.<name>/cur|new` of a claimed maildir are read with it), and a folder of
`.eml` files (one RFC 5322 message per file). Message parsing is `message.py`, body text `text.py`,
threading `threads.py`.

Event mapping (kind "email", source "email"):
- native_id: the Message-ID without <>; when missing, "sha256-<hex>@taskmine.invalid" from a hash of
  sender, recipients, date, subject and body (attrs.message_id_synthesized = true).
- ts: the Date header with its zone; unparseable/missing -> the mbox `From ` line date
  (attrs.date_source = "from_line"); neither -> quarantined ("bad_date"); never the time of ingest.
  A Date without zone is taken as UTC (attrs.date_zone_assumed).
- actor "email:<address lower-cased>" ("email:name:<display name>" when there is no address),
  actor_name the display name; recipients: To/Cc/Bcc addresses lower-cased, in order, unique;
  attrs.people: sender and every recipient with role from/to/cc/bcc.
- title: the decoded Subject; body: text/plain (else HTML converted to text); attrs.new_text: the body
  without quotes, attributions, signatures and list footers.
- thread_key (see threads.py) and parent_id = event_id of In-Reply-To (else the last References id),
  computable without having seen that message.
- provenance: {"file": input relative to the dataset, "offset": byte offset of the message (0 for a
  file per message), "member": the message file inside a maildir/.eml folder}.

Invariants:
- Streaming: an mbox is read block by block, one message in memory, at most `max_message_bytes`; a
  larger message is quarantined ("too_large") with its offset and reading goes on at the next one.
  Memory does not grow with the file: the threading maps are bounded (`thread_memory`).
- Every message is accounted for: it is an event or one `Quarantine` row (not_a_message, bad_date,
  undecodable, duplicate_message_id, invalid_event, too_large, truncated, unreadable); its neighbours
  are kept. A repeated Message-ID (the same mail archived twice) keeps the first copy.
- Threading state belongs to the extractor instance (one ingest run; `detect.plan` gives an
  extractor's inputs in path order), so threads continue across the monthly archives of one list;
  it is reset when one instance reads an input a second time, so re-reading gives the same rows.
  References-based keys (the root's id) need no state and agree across extractors and runs.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from extractors.base import Extractor, ExtractorConfig, Row, register_extractor
from extractors.email.mbox import HEADER_LINE, from_line_date, is_separator, iter_mbox, open_stream
from extractors.email.message import Mail, Unusable, read_message
from extractors.email.text import is_reply_subject, new_text, thread_subject
from extractors.email.threads import ThreadIndex
from warehouse.ids import content_hash, event_id

PEEK_BYTES = 8192
_MAIL_HEADERS = re.compile(rb"(?im)^(from|date|message-id|received|return-path|subject|to):")
_LIST_ID = re.compile(r"<([^<>\s]+)>")


class EmailConfig(ExtractorConfig):
    max_message_bytes: int = Field(50 * 1024 * 1024, gt=0)  # larger messages are quarantined
    thread_window_days: float = Field(30, ge=0)  # subject threading joins messages at most this far apart
    thread_memory: int = Field(100_000, gt=0)  # entries in each threading LRU map (see threads.py)


def looks_like_mail(head: bytes) -> bool:
    """Whether the first bytes of a file are an mbox (`From ` + date, or `From ` + a header line) or an
    RFC 5322 message (a block of at least two header lines naming mail headers)."""
    lines = head.lstrip(b"\r\n").split(b"\n", 8)
    if len(lines) < 2:
        return False
    if lines[0].startswith(b"From "):
        return is_separator(lines[0] + b"\n", lines[1], at_start=False) or bool(HEADER_LINE.match(lines[1]))
    block = []
    for line in lines[:-1]:
        if not line.strip():
            break
        if not (HEADER_LINE.match(line) or line[:1] in (b" ", b"\t")):
            return False
        block.append(line)
    return len(block) >= 2 and bool(_MAIL_HEADERS.search(b"\n".join(block)))


def _peek(path: Path) -> bytes | None:
    try:
        with open_stream(path) as f:
            return f.read(PEEK_BYTES)
    except (OSError, EOFError, zlib.error):
        return None


def _person(name: str, addr: str, role: str) -> dict:
    handle = f"email:{addr}" if addr else f"email:name:{name}"
    return {"handle": handle, "display_name": name or None, "email": addr or None, "username": None,
            "role": role}


def _split_envelope(data: bytes) -> tuple[bytes | None, bytes]:
    """A message file that starts with an mbox `From ` line (some tools save .eml that way)."""
    if data.startswith(b"From "):
        line, _, rest = data.partition(b"\n")
        return line + b"\n", rest
    return None, data


class _MailExtractor(Extractor):
    source: ClassVar[str] = "email"
    medium: ClassVar[str] = "mail"
    Config: ClassVar[type[ExtractorConfig]] = EmailConfig

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._index: ThreadIndex | None = None
        self._inputs: set[Path] = set()

    def _index_for(self, path: Path) -> ThreadIndex:
        key = Path(path).absolute()
        if self._index is None or key in self._inputs:
            self._index = ThreadIndex(self.config.thread_memory, dt.timedelta(days=self.config.thread_window_days))
            self._inputs = set()
        self._inputs.add(key)
        return self._index

    # -- one message -------------------------------------------------------------------------------
    def _rows(self, data: bytes, index: ThreadIndex, *, file: str, offset: int, member: str | None = None,
              from_line: bytes | None = None) -> Iterator[Row]:
        def bad(error_class: str, message: str) -> Row:
            message = message.encode("utf-8", "surrogatepass").decode("utf-8", "replace")  # stdlib errors
            return self.quarantine(file=file, offset=offset, member=member, error_class=error_class,
                                   message=message, excerpt=data)

        try:
            mail = read_message(data)
        except Unusable as e:
            yield bad(e.error_class, str(e))
            return
        ts, date_source = mail.date, "header"
        if ts is None:
            ts, date_source = from_line_date(from_line), "from_line"
            if ts is None:
                yield bad("bad_date", f"no usable Date header ({mail.date_raw!r}) and no mbox From line date: "
                                      "the message cannot be placed in time")
                return
        native, synthesized = mail.message_id, mail.message_id is None
        if native is None:
            native = f"sha256-{_content_key(mail)}@taskmine.invalid"
        if index.seen(native):
            yield bad("duplicate_message_id", f"Message-ID <{native}> was already read; the first copy was kept")
            return
        refs = [r for r in mail.references if r != native]
        irt = mail.in_reply_to if mail.in_reply_to != native else None
        thread_key, how = index.assign(native, refs, irt, thread_subject(mail.subject), ts,
                                       reply=is_reply_subject(mail.subject))
        parent = irt or (refs[-1] if refs else None)
        try:
            event = self.event(kind="email", native_id=native, thread_key=thread_key,
                               parent_id=event_id(self.dataset, self.source, parent) if parent else None,
                               ts=ts, **_actor(mail), recipients=_recipients(mail), title=mail.subject,
                               body=mail.body, attrs=_attrs(mail, native, synthesized, irt, refs, how, ts, date_source),
                               automated=_automated(mail.headers),
                               provenance={"file": file, "offset": offset, **({"member": member} if member else {})})
        except Exception as e:  # a value the schema refuses: this message only, never the rest of the input
            yield bad("invalid_event", f"the message does not fit the events schema: {type(e).__name__}: {e}")
            return
        yield event

    def _file_rows(self, path: Path, index: ThreadIndex, file: str, member: str | None) -> Iterator[Row]:
        """Rows of one file holding one message (maildir, .eml)."""
        try:
            size = path.stat().st_size
            if size > self.config.max_message_bytes:
                with open(path, "rb") as f:
                    head = f.read(2048)
                yield self.quarantine(file=file, offset=0, member=member, error_class="too_large", excerpt=head,
                                      message=f"message of {size} bytes is larger than max_message_bytes="
                                              f"{self.config.max_message_bytes}; raise it in the extractor settings")
                return
            data = path.read_bytes()
        except OSError as e:
            yield self.quarantine(file=file, offset=0, member=member, error_class="unreadable",
                                  message=f"cannot read {member or file}: {e}")
            return
        from_line, data = _split_envelope(data)
        yield from self._rows(data, index, file=file, offset=0, member=member, from_line=from_line)


def _content_key(mail: Mail) -> str:
    return content_hash("email", mail.sender, mail.recipients, mail.date_raw, mail.subject, mail.body)


def _actor(mail: Mail) -> dict:
    if mail.sender is None:
        return {}
    name, addr = mail.sender
    return {"actor": _person(name, addr, "from")["handle"], "actor_name": name or None}


def _recipients(mail: Mail) -> list[str]:
    return list(dict.fromkeys(addr for role in ("to", "cc", "bcc") for _, addr in mail.recipients.get(role, [])
                              if addr))


def _automated(headers: dict[str, str]) -> str:
    """Event.automated of a message whose headers say software sent it (RFC 3834 Auto-Submitted, Precedence)."""
    auto = (headers.get("auto-submitted") or "").strip().lower()
    if auto and auto != "no":
        return f"auto-submitted: {auto}"
    if (headers.get("precedence") or "").strip().lower() in ("auto_reply", "auto-reply", "junk"):
        return "precedence: auto_reply"
    return ""


def _attrs(mail: Mail, native: str, synthesized: bool, irt: str | None, refs: list[str], how: str,
           ts: dt.datetime, date_source: str) -> dict:
    people = [_person(*mail.sender, "from")] if mail.sender else []
    people += [_person(name, addr, role) for role in ("to", "cc", "bcc") for name, addr in
               mail.recipients.get(role, [])]
    list_id = mail.headers.get("list-id")
    if list_id and (m := _LIST_ID.search(list_id)):
        list_id = m.group(1)
    attrs = {
        "message_id": native, "message_id_synthesized": synthesized, "in_reply_to": irt, "references": refs,
        "list_id": list_id, "thread_by": how, "date": ts.isoformat(), "date_source": date_source,
        "date_header": mail.date_raw, "people": people, "new_text": new_text(mail.body),
        "body_format": mail.body_format, "charset": mail.charset, "charset_used": mail.charset_used,
        "charset_fallback": mail.charset_fallback, "attachments": mail.attachments, "headers": mail.headers,
    }
    if mail.date_zone_assumed and date_source == "header":
        attrs["date_zone_assumed"] = "UTC"
    if mail.obfuscated:
        attrs["address_obfuscated"] = True
    if mail.defects:
        attrs["defects"] = mail.defects
    return attrs


@register_extractor("mbox")
class MboxExtractor(_MailExtractor):
    """An mbox file (mod_mbox, pipermail, any mboxo/mboxrd; gzip streams too) -> one event per message."""

    patterns: ClassVar[tuple[str, ...]] = ("*.mbox", "*.mbx", "*.mbox.gz", "*.mbx.gz", "*.txt", "*.txt.gz",
                                           "mbox")
    label: ClassVar[str] = "mbox archive"
    expects: ClassVar[str] = "mbox archives (*.mbox, *.mbx, pipermail YYYY-Month.txt[.gz])"

    @classmethod
    def detect(cls, root: Path) -> list[Path]:
        """Files named as mbox, and *.txt[.gz] whose first bytes are mail (so notes.txt stays unclaimed)."""
        return [p for p in super().detect(root) if _named_mbox(p) or looks_like_mail(_peek(p) or b"")]

    def iter_records(self, path: Path) -> Iterator[Row]:
        file, index = self.rel(path), self._index_for(path)
        try:
            f = open_stream(path)
        except OSError as e:
            yield self.quarantine(file=file, error_class="unreadable", message=f"cannot read {file}: {e}")
            return
        with f:
            for raw in iter_mbox(f, self.config.max_message_bytes):
                if raw.error:
                    fix = "; raise max_message_bytes in the extractor settings" if raw.error == "too_large" else ""
                    yield self.quarantine(file=file, offset=raw.offset, error_class=raw.error,
                                          message=raw.detail + fix, excerpt=raw.data)
                else:
                    yield from self._rows(raw.data, index, file=file, offset=raw.offset, from_line=raw.from_line)


def _named_mbox(path: Path) -> bool:
    name = path.name.lower()
    return name == "mbox" or name.endswith((".mbox", ".mbx", ".mbox.gz", ".mbx.gz"))


@register_extractor("maildir")
class MaildirExtractor(_MailExtractor):
    """A maildir folder (cur/ and new/, plus Maildir++ sub-folders) -> one event per message file."""

    label: ClassVar[str] = "maildir"
    expects: ClassVar[str] = "maildir folders (holding cur/ and new/)"

    @classmethod
    def detect(cls, root: Path) -> list[Path]:
        """Folders holding cur/ and new/ (or one of them with a mail file in it); not descended into."""
        found = []
        for dirpath, dirnames, _ in os.walk(root):
            here = Path(dirpath)
            if _is_maildir(here):
                found.append(here)
                dirnames[:] = []
            else:
                dirnames[:] = sorted(d for d in dirnames if d != ".git")
        return found

    def iter_records(self, path: Path) -> Iterator[Row]:
        file, index = self.rel(path), self._index_for(path)
        if not path.is_dir():
            yield self.quarantine(file=file, error_class="unreadable", message=f"{file} is not a maildir folder")
            return
        folders = [path, *(d for d in sorted(path.iterdir()) if d.name.startswith(".") and _is_maildir(d))]
        messages = []
        for folder in folders:
            for sub in ("cur", "new"):
                if (folder / sub).is_dir():
                    messages += [(f.name, f.relative_to(path).as_posix(), f) for f in (folder / sub).iterdir()
                                 if not f.name.startswith(".") and f.is_file()]
        for _, member, f in sorted(messages):  # maildir names start with the delivery time
            yield from self._file_rows(f, index, file, member)


def _is_maildir(path: Path) -> bool:
    cur, new = path / "cur", path / "new"
    if cur.is_dir() and new.is_dir():
        return True
    for sub in (cur, new):
        if sub.is_dir():
            first = next((f for f in sorted(sub.iterdir()) if f.is_file() and not f.name.startswith(".")), None)
            return first is not None and looks_like_mail(_peek(first) or b"")
    return False


@register_extractor("eml")
class EmlExtractor(_MailExtractor):
    """.eml files -> one event each; a folder holding only .eml files is one input (threads across files)."""

    patterns: ClassVar[tuple[str, ...]] = ("*.eml",)
    label: ClassVar[str] = ".eml files"
    expects: ClassVar[str] = "a folder of .eml messages"

    @classmethod
    def detect(cls, root: Path) -> list[Path]:
        """A folder whose visible entries are all .eml files; the .eml files themselves elsewhere (a
        folder input owns everything under it, so a mixed folder is not claimed whole)."""
        if Path(root).is_file():
            return [Path(root)] if _is_eml(Path(root).name) else []
        found = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            visible = [f for f in sorted(filenames) if not f.startswith(".")]
            emls = [f for f in visible if _is_eml(f)]
            if not emls:
                continue
            if len(emls) == len(visible) and not any(not d.startswith(".") for d in dirnames):
                found.append(Path(dirpath))
            else:
                found += [Path(dirpath) / f for f in emls]
        return found

    def iter_records(self, path: Path) -> Iterator[Row]:
        file, index = self.rel(path), self._index_for(path)
        if not path.is_dir():
            yield from self._file_rows(path, index, file, None)
            return
        for f in sorted(p for p in path.iterdir() if _is_eml(p.name) and not p.name.startswith(".") and p.is_file()):
            yield from self._file_rows(f, index, file, f.name)


def _is_eml(name: str) -> bool:
    return name.lower().endswith(".eml")
