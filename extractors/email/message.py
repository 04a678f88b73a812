"""One raw RFC 5322 message (bytes) -> the fields an e-mail event needs.

Formats followed: RFC 5322 (header fields, addresses, Message-ID/In-Reply-To/References), RFC 2045-2049
(MIME structure, quoted-printable and base64, charsets), RFC 2047 (encoded words in headers), RFC 2231
(parameter encoding, through the stdlib), RFC 3676 (format=flowed), RFC 2369/2919 (List-* headers).

Why the stdlib parser with `policy.compat32` and our own header decoding, not `policy.default`:
`policy.default` builds a structured header object on every access, which costs ~7x the whole compat32
parse on real archives and raises on some broken headers; the feed parser itself never raises on bad
input (it records defects). Header values are taken raw, so undeclared 8-bit bytes are decoded here
(utf-8, else cp1252) and RFC 2047 encoded words are decoded leniently (bad padding, unknown charsets,
a multibyte character split over two words, spaces inside a word, a missing `?=`). Addresses, dates,
MIME parameters (RFC 2231), transfer encodings and multipart trees are the stdlib's
(`email.utils`, `Message.get_params`/`get_payload`, the feed parser).

Speed (the extractor must stay within ~2x of `mailbox.mbox` + `email.message_from_bytes`): the feed
parser spends most of its time on header lines, and every `Message.get` scans all headers (dozens of
Received lines in list archives). So a single-part message with a clean header block is split here
(`_header_block`, which yields exactly the values the parser's `raw_items` would, a test holds it to
that) and its body is read through a small `Message` holding only its Content-* headers; multipart
messages and any message whose header block is not clean go through the feed parser.

Invariants:
- `read_message` never raises on bad input: it returns a `Mail` or raises `Unusable` (with the
  quarantine error class); anything else escaping the stdlib is turned into `Unusable("undecodable")`.
- Text is decoded with the declared charset; when it is missing, unknown or fails, utf-8 then cp1252
  then latin-1 are tried and `charset_fallback` is set. Declared latin-1/ascii bytes that are valid
  multi-byte UTF-8 are read as UTF-8 (the common mislabelling). A body that still reads as binary
  (more than 10% control characters) is `Unusable("undecodable")`.
- Addresses are lower-cased; the pipermail obfuscation `user at host` is undone (flagged).
- No content of attachments is kept, only name, content type and decoded size.
"""

from __future__ import annotations

import binascii
import codecs
import datetime as dt
import email.utils
import functools
import re
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesParser
from email.policy import compat32

from extractors.email.text import html_to_text, unflow

_PARSER = BytesParser(policy=compat32)
_EW = re.compile(r"=\?([^?\s]+)\?([bBqQ])\?([^?]*)(?:\?=|$)")
_EW_GAP = re.compile(r"(\?=)\s+(?==\?)")
_B64_JUNK = re.compile(r"[^A-Za-z0-9+/]")
_MSGID = re.compile(r"<([^<>\s]+)>")
_AT = re.compile(r"(?<![\w.@+-])([\w.+-]+) at ([\w-]+(?:\.[\w-]+)+)(?![\w@])")
_CTRL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]")
_SINGLE_BYTE = {"ascii", "iso8859-1", "iso8859-15", "cp1252"}  # codecs.lookup names
_NO_SURROGATES = {*_SINGLE_BYTE, "utf-8"}  # codecs that cannot yield a lone surrogate (utf-7 and
_SURROGATE = re.compile("[\ud800-\udfff]")  # unicode_escape can: such text is not valid Unicode)
_NO_CHARSET = {"", "unknown-8bit", "x-unknown", "unknown", "default", "x-user-defined", "8bit", "7bit",
               "binary", "none"}
ADDRESS_HEADERS = ("from", "to", "cc", "bcc")
KEPT_HEADERS = ("reply-to", "sender", "list-id", "list-post", "mailing-list", "precedence", "auto-submitted",
                "x-mailer", "user-agent", "organization", "content-type", "x-mailman-version")
CONTENT_HEADERS = ("content-type", "content-disposition", "content-transfer-encoding")
_FIELD_NAME = re.compile(r"[\x21-\x39\x3b-\x7e]+")  # RFC 5322 field name (printable ASCII but ":")
_READ = {*ADDRESS_HEADERS, *KEPT_HEADERS, *CONTENT_HEADERS, "subject", "date", "message-id", "in-reply-to",
         "references"}
MIN_YEAR, MAX_YEAR = 1971, 2100  # 1970-01-01 is the zero of broken clocks


class Unusable(Exception):
    """The message cannot become an event; `error_class` names why (a quarantine error class)."""

    def __init__(self, error_class: str, message: str):
        super().__init__(message)
        self.error_class = error_class


@dataclass(slots=True)
class Mail:
    message_id: str | None
    subject: str | None
    sender: tuple[str, str] | None           # (display name, address lower-cased) of From
    recipients: dict[str, list[tuple[str, str]]]  # role (to/cc/bcc) -> [(name, address)]
    date: dt.datetime | None
    date_raw: str | None
    date_zone_assumed: bool
    in_reply_to: str | None
    references: list[str]
    headers: dict[str, str]
    body: str | None
    body_format: str | None                  # "plain" | "html" | None (no text part)
    charset: str | None                      # declared charset of the body part
    charset_used: str | None
    charset_fallback: bool
    attachments: list[dict]
    obfuscated: bool                         # an address was written "user at host"
    defects: list[str] = field(default_factory=list)


# --- charsets -------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=512)
def codec_name(charset: str | None) -> str | None:
    """The Python codec of a MIME charset name, None when absent or unknown (or not a text codec)."""
    name = (charset or "").strip().strip("\"'").lower()
    if name in _NO_CHARSET:
        return None
    try:
        "a".encode(name)  # LookupError for unknown names and for bytes-to-bytes codecs (base64, zlib)
    except LookupError:
        return None
    except Exception:  # a text codec that cannot encode "a" is still a charset
        pass
    return codecs.lookup(name).name


def decode_bytes(raw: bytes, charset: str | None) -> tuple[str, str, bool]:
    """(text, codec used, fell back) for `raw` labelled `charset` (see the module docstring)."""
    codec = codec_name(charset)
    if codec is not None:
        try:
            text = raw.decode(codec)
        except (UnicodeDecodeError, LookupError, ValueError):  # LookupError: a bytes codec (base64)
            pass
        else:
            if codec in _SINGLE_BYTE and not raw.isascii():
                try:
                    return raw.decode("utf-8"), "utf-8", True  # mislabelled UTF-8
                except UnicodeDecodeError:
                    pass
            if codec in _NO_SURROGATES or not _SURROGATE.search(text):
                return text, codec, False
    declared = (charset or "").strip().strip("\"'").lower() not in _NO_CHARSET  # but unknown or failing
    fell_back = declared or not raw.isascii()
    for name in ("utf-8", "cp1252"):
        try:
            return raw.decode(name), name, fell_back
        except UnicodeDecodeError:
            pass
    return raw.decode("latin-1"), "latin-1", True


# --- headers --------------------------------------------------------------------------------------

def _b_decode(text: str) -> bytes | None:
    s = _B64_JUNK.sub("", text)
    if not s and text:
        return None
    if len(s) % 4 == 1:
        s = s[:-1]
    try:
        return binascii.a2b_base64(s + "=" * (-len(s) % 4))
    except binascii.Error:
        return None


def _q_decode(text: str) -> bytes:
    return binascii.a2b_qp(text.encode("utf-8", "surrogateescape"), header=True)


def decode_words(text: str) -> str:
    """RFC 2047 encoded words in `text` decoded, leniently (see the module docstring)."""
    if "=?" not in text:
        return text
    text = _EW_GAP.sub(r"\1", text)  # whitespace between two encoded words is not shown (RFC 2047 6.2)
    out: list[str] = []
    pending, pending_cs, pos = b"", None, 0

    def flush() -> None:
        nonlocal pending, pending_cs
        if pending_cs is not None:
            out.append(decode_bytes(pending, pending_cs)[0])
        pending, pending_cs = b"", None

    for m in _EW.finditer(text):
        if m.start() > pos:
            flush()
            out.append(text[pos:m.start()])
        charset = m.group(1).split("*", 1)[0].lower()  # RFC 2231 language suffix: utf-8*en
        raw = _b_decode(m.group(3)) if m.group(2) in "bB" else _q_decode(m.group(3))
        if raw is None:
            flush()
            out.append(m.group(0))
        else:
            if pending_cs is not None and pending_cs != charset:
                flush()
            pending += raw  # joined per charset: a multibyte character may be split over two words
            pending_cs = charset
        pos = m.end()
    flush()
    out.append(text[pos:])
    return " ".join("".join(out).split())


def _unescape(value: str) -> str:
    """A string from the parser (undeclared 8-bit bytes kept as surrogate escapes) as valid text."""
    if value.isascii():
        return value
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate decoded from an RFC 2231 parameter
        raw = value.encode("utf-8", "surrogatepass")
    return decode_bytes(raw, None)[0]


def header_text(value: str) -> str:
    """A raw header value as display text: unfolded, undeclared 8-bit decoded, encoded words decoded,
    whitespace collapsed."""
    return decode_words(_raw_text(value))


def _raw_text(value: str) -> str:
    return " ".join(_unescape(value).split())


def parse_addresses(values: list[str]) -> tuple[list[tuple[str, str]], bool]:
    """[(display name, address lower-cased)] of address header values, and whether `user at host`
    obfuscation was undone. Entries without an address keep their display name and address ""."""
    pairs, obfuscated = _addresses(", ".join(_raw_text(v) for v in values))
    return list(pairs), obfuscated


@functools.lru_cache(maxsize=4096)  # list archives repeat the same senders and list addresses
def _addresses(text: str) -> tuple[tuple[tuple[str, str], ...], bool]:
    obfuscated = False
    if "@" not in text and " at " in text:
        text, n = _AT.subn(r"\1@\2", text)
        obfuscated = n > 0
    out = []
    try:
        pairs = email.utils.getaddresses([text])
    except Exception:  # the stdlib address parser on hostile input
        pairs = []
    if "@" not in text:  # no address at all: a display name alone, or an empty group
        name = decode_words(text).strip(" ,;")
        return (((name, ""),) if name and not name.endswith(":") else ()), obfuscated
    for name, addr in pairs:
        name, addr = decode_words(name).strip().strip("\"'").strip(), addr.strip()
        if addr and "@" not in addr:  # a bare word next to real addresses: keep it as a name
            name, addr = " ".join(x for x in (name, addr) if x), ""
        addr = addr.lower()
        if name or addr:
            out.append((name, addr))
    return tuple(out), obfuscated


def message_ids(value: str | None) -> list[str]:
    """The ids in a References / In-Reply-To value, without <>; junk without "@" (e.g. "<yes>") is not an id."""
    if not value:
        return []
    ids = _MSGID.findall(value) or [t.strip("<>\"'") for t in value.split()]
    return [i for i in ids if "@" in i]


def own_message_id(value: str | None) -> str | None:
    """The Message-ID without <> (the first bracketed id, else the bare token), None when absent."""
    if not value:
        return None
    found = _MSGID.search(value)
    if found:
        return found.group(1)
    token = value.strip().strip("<>").strip()
    return token if token and not any(c.isspace() for c in token) else None


def parse_date(value: str | None) -> tuple[dt.datetime | None, bool]:
    """(aware datetime, zone assumed) of a Date value; a date without zone (or "-0000") is taken as UTC;
    None when unparseable or outside 1971-2100 (epoch-zero and far-future dates are clock errors)."""
    if not value:
        return None, False
    try:
        ts = email.utils.parsedate_to_datetime(value)
    except Exception:  # ValueError, TypeError, IndexError, OverflowError on hostile input
        return None, False
    assumed = ts.tzinfo is None
    if assumed:
        ts = ts.replace(tzinfo=dt.UTC)
    try:
        year = ts.astimezone(dt.UTC).year
    except (OverflowError, ValueError):
        return None, False
    return (ts, assumed) if MIN_YEAR <= year <= MAX_YEAR else (None, False)


# --- body -----------------------------------------------------------------------------------------

def _leaves(msg: Message) -> list[Message]:
    """Leaf parts in order; a message/* part is a leaf (a forwarded message is an attachment)."""
    out, stack = [], [msg]
    while stack:
        part = stack.pop()
        payload = part.get_payload()
        if part.is_multipart() and isinstance(payload, list) and part.get_content_maintype() == "multipart":
            stack.extend(reversed(payload))
        else:
            out.append(part)
    return out


def _content_view(raw: dict[str, list[str]], payload: str) -> Message:
    """A single-part message as a `Message` holding only its Content-* headers and its body (as the
    parser stores it): the stdlib reads the body through it without scanning every header."""
    view = Message()
    for key in CONTENT_HEADERS:
        if key in raw:
            view[key] = raw[key][0]
    view.set_payload(payload)
    return view


@dataclass(slots=True)
class _Part:
    """What the body and attachment logic needs of one leaf part, each header parsed once (the stdlib
    re-parses the whole Content-Type for every `get_param`)."""

    part: Message
    ctype: str
    params: dict[str, str]
    disposition: str | None
    filename: str | None


def _param(value) -> str:
    return _raw_text(email.utils.collapse_rfc2231_value(value)) if value else ""


def _part(part: Message) -> _Part:
    ctype = _raw_text(part.get_content_type())
    params = {k.strip().lower(): v for k, v in part.get_params([])[1:]}
    disp = part.get_params([], header="content-disposition") if "content-disposition" in part else []
    disp_params = {k.strip().lower(): v for k, v in disp[1:]}
    name = _param(disp_params.get("filename") or params.get("name"))
    return _Part(part, ctype, {k: _param(v) for k, v in params.items()},
                 disp[0][0].strip().lower() if disp else None, decode_words(name) if name else None)


def _payload_bytes(part: Message) -> bytes:
    if part.is_multipart():
        return bytes(part.get_payload(0)) if part.get_payload() else b""
    raw = part.get_payload(decode=True)
    return raw if isinstance(raw, bytes) else b""


def _text_of(info: _Part, kind: str) -> tuple[str, str | None, str, bool]:
    charset = info.params.get("charset") or None
    raw = _payload_bytes(info.part)
    text, used, fell_back = decode_bytes(raw, charset)
    sample = text[:1 << 20] if fell_back else ""  # binary shows in its first MB
    if sample and len(sample) - len(_CTRL.sub("", sample)) > len(sample) // 10:
        raise Unusable("undecodable", f"the {kind} body is not text in {charset or 'any charset tried'} "
                                      f"(utf-8, cp1252, latin-1): it reads as binary")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if kind == "plain" and info.params.get("format", "").lower() == "flowed":
        text = unflow(text, info.params.get("delsp", "").lower() == "yes")
    elif kind == "html":
        text = html_to_text(text)
    return text, charset, used, fell_back


def read_message(data: bytes) -> Mail:
    """Parse one message; raises `Unusable` when it is not a message or its text cannot be decoded."""
    try:
        return _read(data)
    except Unusable:
        raise
    except (Exception, RecursionError) as e:  # a stdlib corner we did not foresee: this message only
        raise Unusable("undecodable", f"the message cannot be parsed: {type(e).__name__}: {e}") from None


def _header_block(data: bytes) -> tuple[dict[str, list[str]], str] | None:
    """(raw header values by lower-cased name, the body as the parser would store it) of a message whose
    header block is clean: every line a `Name: value` field or a continuation, ended by a blank line.
    None otherwise, and the stdlib parser reads the message (it records defects and decides where a
    broken header block ends). For a clean block this gives exactly the values `raw_items` would
    (compat32 `header_source_parse`: value left-stripped, continuation lines kept, line ends removed)
    at a fraction of the cost: the feed parser takes most of its time on header lines."""
    ends = [(i, i + 2) for i in (data.find(b"\n\n"),) if i > 0] + \
        [(i, i + 3) for i in (data.find(b"\n\r\n"),) if i > 0]
    if not ends:
        return None
    end, start = min(ends)
    raw: dict[str, list[str]] = {}
    name = value = None
    for line in data[:end].decode("ascii", "surrogateescape").split("\n"):
        if line[:1] in (" ", "\t"):
            if name is None:
                return None
            value += "\n" + line.rstrip("\r")
            continue
        if name is not None and name in _READ:
            raw.setdefault(name, []).append(value)
        name, colon, value = line.partition(":")
        if not colon or not _FIELD_NAME.fullmatch(name):
            return None
        name, value = name.lower(), value.lstrip(" \t").rstrip("\r")
    if name is not None and name in _READ:
        raw.setdefault(name, []).append(value)
    return raw, data[start:].decode("ascii", "surrogateescape")


def _raw_headers(msg: Message) -> dict[str, list[str]]:
    raw: dict[str, list[str]] = {}
    for name, value in msg.raw_items():
        key = name.strip().lower()
        if key in _READ and isinstance(value, str):
            raw.setdefault(key, []).append(value)
    return raw


def _read(data: bytes) -> Mail:
    # The stdlib parser reads multipart (and message/*) messages and any message whose header block is
    # not clean; a clean single-part message is split here (see `_header_block`).
    head = _header_block(data)
    raw, body_str = head if head else ({}, None)
    msg = None  # the stdlib's parse, when it is needed
    if head is None or raw.get("content-type", [""])[0].lstrip().lower().startswith(("multipart/", "message/")):
        msg = _PARSER.parsebytes(data)
        raw = _raw_headers(msg)
    if not raw.keys() & {"from", "date", "message-id", "subject", "to"}:
        raise Unusable("not_a_message", "no From, To, Date, Subject or Message-ID header: not an e-mail message")

    def first(key: str) -> str | None:
        return raw[key][0] if key in raw else None

    obfuscated = False
    people: dict[str, list[tuple[str, str]]] = {}
    for key in ADDRESS_HEADERS:
        if key in raw:
            people[key], hidden = parse_addresses(raw[key])
            obfuscated |= hidden
    date_raw = _raw_text(first("date")) if "date" in raw else None
    date, assumed = parse_date(date_raw)
    irt = message_ids(_raw_text(first("in-reply-to") or ""))
    refs = list(dict.fromkeys(message_ids(_raw_text(" ".join(raw.get("references", []))))))

    body = body_format = charset = used = None
    fell_back = False
    attachments, defects = [], {type(d).__name__ for d in msg.defects} if msg is not None else set()
    plain = html = None
    for leaf in [_content_view(raw, body_str)] if msg is None else _leaves(msg):
        defects.update(type(d).__name__ for d in leaf.defects)
        part = _part(leaf)
        if part.ctype in ("text/plain", "text/html") and part.disposition != "attachment" and not part.filename:
            # the first inline plain and html parts are the body candidates; further unnamed inline
            # text parts (an html alternative, a list footer) are neither body nor attachment
            if part.ctype == "text/plain" and plain is None:
                plain = part
            elif part.ctype == "text/html" and html is None:
                html = part
            continue
        try:
            size: int | None = len(_payload_bytes(leaf))
        except Exception:
            size = None
        attachments.append({"name": part.filename, "content_type": part.ctype, "size": size})
    if plain is not None or html is not None:
        body_format = "plain" if plain is not None else "html"
        body, charset, used, fell_back = _text_of(plain if plain is not None else html, body_format)

    senders = people.pop("from", [])
    return Mail(
        message_id=own_message_id(_raw_text(first("message-id") or "")),
        subject=header_text(first("subject")) if "subject" in raw else None,
        sender=senders[0] if senders else None, recipients=people, date=date, date_raw=date_raw,
        date_zone_assumed=assumed,
        in_reply_to=irt[0] if irt else None, references=refs,
        headers={k: header_text(raw[k][0]) for k in KEPT_HEADERS if k in raw},
        body=body, body_format=body_format, charset=charset, charset_used=used, charset_fallback=fell_back,
        attachments=attachments, obfuscated=obfuscated, defects=sorted(defects))
