"""The e-mail extractors (mbox, maildir, .eml). Every person, address and text here is invented; the real
archives in ../shared/data/real are read in place (skipped when absent), never copied."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import re
import tempfile
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from extractors.base import registry
from extractors.detect import plan
from extractors.email import EmlExtractor, MaildirExtractor, MboxExtractor, looks_like_mail
from extractors.email.mbox import iter_mbox
from extractors.email import message as message_module
from extractors.email.message import Unusable, decode_bytes, decode_words, parse_addresses, read_message
from extractors.email.text import html_to_text, new_text, thread_subject, unflow
from extractors.email.threads import ThreadIndex
from extractors.testing import ExtractorContract
from warehouse.ids import event_id
from warehouse.schemas import Event, Quarantine, to_table

UTC = dt.UTC
SEP = b"From ann@example.com Mon Jan  1 09:00:00 2018\n"


def msg(i: int = 0, *, mid: str | None = "auto", subject: str | None = None,
        date: str | None = "Mon, 01 Jan 2018 10:00:00 +0100", frm: str | None = '"Ann Example" <Ann@Example.com>',
        to: str | None = "dev@lists.example.org", headers: tuple[str, ...] = (), body: str | bytes | None = None,
        ctype: str | None = 'text/plain; charset="utf-8"', cte: str | None = None) -> bytes:
    """One RFC 5322 message (LF line ends) ending with a newline."""
    lines = []
    for name, value in (("From", frm), ("To", to), ("Date", date),
                        ("Subject", f"Topic {i}" if subject is None else subject),
                        ("Message-ID", f"<m{i}-abcdef@example.com>" if mid == "auto" else mid),
                        ("Content-Type", ctype), ("Content-Transfer-Encoding", cte)):
        if value is not None:
            lines.append(f"{name}: {value}")
    lines += headers
    head = ("\n".join(lines) + "\n\n").encode()
    body = f"Body of message {i}.\n" if body is None else body
    body = body if isinstance(body, bytes) else body.encode()
    return head + body if body.endswith(b"\n") else head + body + b"\n"


def mbox(*messages: bytes, sep: bytes = SEP) -> bytes:
    return b"".join(sep + m + b"\n" for m in messages)


def undecodable(i: int) -> bytes:
    """A text/plain message whose body is binary in every charset tried."""
    return msg(i, mid=f"<bad{i}-zzzz@example.com>", cte="8bit", body=bytes(range(256)) * 4 + b"\n")


def run(ex_cls, path: Path, root: Path | None = None, **config) -> tuple[list[Event], list[Quarantine]]:
    rows = list(ex_cls("ds", config, "r", root=root or path.parent).iter_records(path))
    return [r for r in rows if isinstance(r, Event)], [r for r in rows if isinstance(r, Quarantine)]


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def make_maildir(root: Path, messages: list[bytes]) -> Path:
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for i, m in enumerate(messages):
        name = f"15147972{i:02d}.M{i}P1.host" + (":2,S" if i % 2 == 0 else "")
        write(root / ("cur" if i % 2 == 0 else "new") / name, m)
    return root


def make_eml_folder(root: Path, messages: list[bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, m in enumerate(messages):
        write(root / f"{i:03d}.eml", m)
    return root


# --- contracts --------------------------------------------------------------------------------------

def contract_msg(i: int) -> bytes:
    return msg(i, headers=("Cc: Di Dev <di@example.com>", "Bcc: eve@example.com"))


class TestMboxContract(ExtractorContract):
    extractor = MboxExtractor
    record_kind = "email"

    def make_input(self, tmp_path, n_records):
        return write(tmp_path / "list.mbox", mbox(*[contract_msg(i) for i in range(n_records)]))

    def make_bad_input(self, tmp_path):
        return write(tmp_path / "bad.mbox", mbox(msg(0), msg(1), undecodable(9), msg(2))), 3


class TestMaildirContract(ExtractorContract):
    extractor = MaildirExtractor
    record_kind = "email"

    def make_input(self, tmp_path, n_records):
        return make_maildir(tmp_path / "Maildir", [contract_msg(i) for i in range(n_records)])

    def make_bad_input(self, tmp_path):
        return make_maildir(tmp_path / "Maildir", [msg(0), b"\x00\xff garbage, not mail\n", msg(2)]), 2


class TestEmlContract(ExtractorContract):
    extractor = EmlExtractor
    record_kind = "email"

    def make_input(self, tmp_path, n_records):
        return make_eml_folder(tmp_path / "inbox", [contract_msg(i) for i in range(n_records)])

    def make_bad_input(self, tmp_path):
        return make_eml_folder(tmp_path / "inbox", [msg(0), undecodable(1), msg(2)]), 2


def test_registered_names():
    reg = registry()
    assert {reg[n].cls for n in ("mbox", "maildir", "eml")} == {MboxExtractor, MaildirExtractor, EmlExtractor}
    assert {MboxExtractor.source, MaildirExtractor.source, EmlExtractor.source} == {"email"}


# --- the event mapping ------------------------------------------------------------------------------

def test_event_fields(tmp_path):
    m = msg(1, frm="=?utf-8?q?J=C3=BCrgen_M=C3=BCller?= <Juergen@Example.COM>",
            to='"Bo, Dev" <bo@example.com>, cy@example.com', subject="=?utf-8?b?R3LDvMOfZQ==?= again",
            headers=("Cc: Di <di@example.com>", "Bcc: eve@example.com", "In-Reply-To: <root-1@example.com>",
                     "References: <root-1@example.com> <mid-2@example.com>",
                     'List-Id: "Dev list" <dev.lists.example.org>', "X-Mailer: Mutt"),
            date="Tue, 02 Jan 2018 10:00:00 +0530", body="Sure, done.\n\n> old\n-- \nJ\n")
    events, quarantined = run(MboxExtractor, write(tmp_path / "a.mbox", mbox(m)))
    assert quarantined == []
    (e,) = events
    assert (e.kind, e.source, e.native_id) == ("email", "email", "m1-abcdef@example.com")
    assert e.event_id == event_id("ds", "email", "m1-abcdef@example.com")
    assert e.ts == dt.datetime(2018, 1, 2, 4, 30, tzinfo=UTC) and e.attrs["date"] == "2018-01-02T10:00:00+05:30"
    assert (e.actor, e.actor_name) == ("email:juergen@example.com", "Jürgen Müller")
    assert e.recipients == ["bo@example.com", "cy@example.com", "di@example.com", "eve@example.com"]
    assert {(p["handle"], p["display_name"], p["role"]) for p in e.attrs["people"]} == {
        ("email:juergen@example.com", "Jürgen Müller", "from"), ("email:bo@example.com", "Bo, Dev", "to"),
        ("email:cy@example.com", None, "to"), ("email:di@example.com", "Di", "cc"),
        ("email:eve@example.com", None, "bcc")}
    assert e.title == "Grüße again"
    assert e.body == "Sure, done.\n\n> old\n-- \nJ\n" and e.attrs["new_text"] == "Sure, done."
    assert e.attrs["in_reply_to"] == "root-1@example.com"
    assert e.attrs["references"] == ["root-1@example.com", "mid-2@example.com"]
    assert e.parent_id == event_id("ds", "email", "root-1@example.com")
    assert e.thread_key == "root-1@example.com" and e.attrs["thread_by"] == "references"
    assert e.attrs["list_id"] == "dev.lists.example.org" and e.attrs["headers"]["x-mailer"] == "Mutt"
    assert e.provenance == {"file": "a.mbox", "offset": 0}
    assert e.attrs["message_id_synthesized"] is False and e.attrs["date_source"] == "header"


def test_offsets_point_at_each_separator(tmp_path):
    data = mbox(*[msg(i) for i in range(4)])
    events, _ = run(MboxExtractor, write(tmp_path / "a.mbox", data))
    assert [data[e.provenance["offset"]:].split(b"\n", 1)[0] for e in events] == [SEP.strip()] * 4
    assert [e.native_id for e in events] == [f"m{i}-abcdef@example.com" for i in range(4)]


def test_missing_message_id_is_synthesized_from_content(tmp_path):
    data = mbox(msg(1, mid=None), msg(2, mid="<>"), msg(1, mid=None))
    events, quarantined = run(MboxExtractor, write(tmp_path / "a.mbox", data))
    assert all(re.fullmatch(r"sha256-[0-9a-f]{64}@taskmine\.invalid", e.native_id) for e in events)
    assert [e.attrs["message_id_synthesized"] for e in events] == [True, True]
    assert events[0].native_id != events[1].native_id
    assert [q.error_class for q in quarantined] == ["duplicate_message_id"]  # the same content twice
    again, _ = run(MboxExtractor, tmp_path / "a.mbox")
    assert [e.native_id for e in again] == [e.native_id for e in events]


def test_date_falls_back_to_the_from_line_never_to_now(tmp_path):
    data = mbox(msg(1, date=None), msg(2, date="not a date"), msg(3, date="Mon, 01 Jan 2018 10:00:00"),
                msg(4, date="Thu, 01 Jan 1970 00:00:00 +0000"))
    events, _ = run(MboxExtractor, write(tmp_path / "a.mbox", data))
    assert [(e.attrs["date_source"], e.ts) for e in events] == [
        ("from_line", dt.datetime(2018, 1, 1, 9, tzinfo=UTC)), ("from_line", dt.datetime(2018, 1, 1, 9, tzinfo=UTC)),
        ("header", dt.datetime(2018, 1, 1, 10, tzinfo=UTC)), ("from_line", dt.datetime(2018, 1, 1, 9, tzinfo=UTC))]
    assert events[2].attrs["date_zone_assumed"] == "UTC"
    # without a From line (maildir, .eml) a message without a usable date is quarantined
    folder = make_eml_folder(tmp_path / "inbox", [msg(1, date="garbage"), msg(2)])
    events, quarantined = run(EmlExtractor, folder, root=tmp_path)
    assert [e.native_id for e in events] == ["m2-abcdef@example.com"]
    assert [(q.error_class, q.member) for q in quarantined] == [("bad_date", "000.eml")]


def test_an_address_without_at_and_a_missing_from(tmp_path):
    data = mbox(msg(1, frm="Nobody Known", to="undisclosed-recipients:;"), msg(2, frm=None))
    events, _ = run(MboxExtractor, write(tmp_path / "a.mbox", data))
    assert (events[0].actor, events[0].actor_name, events[0].recipients) == (
        "email:name:Nobody Known", "Nobody Known", [])
    assert events[1].actor is None and events[1].attrs["people"][0]["role"] == "to"


# --- From-line quirks ---------------------------------------------------------------------------------

def test_from_line_quirks(tmp_path):
    body1 = ("Intro\n>From the escaped line\n>>From doubly escaped\n\nFrom here on, prose starts a line.\n"
             "\nFrom me Mon Jan  1 09:00:00 2018\nand the next line is prose, not a header.\n")
    data = (SEP + msg(1, body=body1)  # no blank line before the next separator:
            + SEP + msg(2) + b"\n" + SEP + msg(3))
    events, quarantined = run(MboxExtractor, write(tmp_path / "a.mbox", data))
    assert quarantined == []
    assert [e.native_id for e in events] == [f"m{i}-abcdef@example.com" for i in (1, 2, 3)]
    assert events[0].body == body1.replace(">From", "From", 1).replace(">>From", ">From")
    assert events[1].provenance["offset"] == len(SEP + msg(1, body=body1))


def test_pipermail_archive_with_obfuscated_addresses(tmp_path):
    def piper(i, irt=""):
        return (f"From ann at example.org  Thu Nov  {i} 11:19:12 2001\nFrom: ann at example.org (Ann Example)\n"
                f"Date: Thu Nov  {i} 11:19:12 2001\nSubject: [Py-dev] Re: arrays\n{irt}"
                f"Message-ID: <p{i}@example.org>\n\nText {i}\n\n\n").encode()

    path = write(tmp_path / "2001-November.txt", piper(1) + piper(2, "In-Reply-To: <p1@example.org>\n"))
    assert MboxExtractor.detect(tmp_path) == [path]
    events, quarantined = run(MboxExtractor, path)
    assert quarantined == [] and len(events) == 2
    assert (events[0].actor, events[0].actor_name) == ("email:ann@example.org", "Ann Example")
    assert events[0].attrs["address_obfuscated"] is True
    assert events[0].ts == dt.datetime(2001, 11, 1, 11, 19, 12, tzinfo=UTC)
    assert events[0].attrs["date_zone_assumed"] == "UTC" and events[1].body.strip() == "Text 2"
    assert events[1].thread_key == "p1@example.org"


def test_gzip_stream_and_a_truncated_one(tmp_path):
    def noise(i):  # text gzip cannot shrink much, so that cutting the stream loses the last messages only
        return "".join(hashlib.sha256(b"%d-%d" % (i, n)).hexdigest() + "\n" for n in range(50))

    data = mbox(*[msg(i, body=noise(i)) for i in range(5)])
    path = write(tmp_path / "2001-November.txt.gz", gzip.compress(data))
    assert MboxExtractor.detect(tmp_path) == [path]
    events, quarantined = run(MboxExtractor, path)
    assert len(events) == 5 and quarantined == []
    cut = write(tmp_path / "cut.mbox.gz", gzip.compress(data)[:-2000])
    events, quarantined = run(MboxExtractor, cut)
    assert [e.native_id for e in events] == [f"m{i}-abcdef@example.com" for i in range(len(events))]
    assert len(events) >= 3 and [q.error_class for q in quarantined] == ["truncated"]


def test_message_over_the_size_cap_is_quarantined_with_its_offset(tmp_path):
    data = mbox(msg(1), msg(2, body="y" * 5000), msg(3))
    events, quarantined = run(MboxExtractor, write(tmp_path / "a.mbox", data), max_message_bytes=2000)
    assert [e.native_id for e in events] == ["m1-abcdef@example.com", "m3-abcdef@example.com"]
    (q,) = quarantined
    assert q.error_class == "too_large" and data[q.offset:].startswith(SEP + b"From: ")
    assert q.offset == len(SEP + msg(1) + b"\n") and "max_message_bytes" in q.message
    folder = make_eml_folder(tmp_path / "inbox", [msg(1), msg(2, body="y" * 5000)])
    events, quarantined = run(EmlExtractor, folder, root=tmp_path, max_message_bytes=2000)
    assert len(events) == 1 and [(q.error_class, q.member) for q in quarantined] == [("too_large", "001.eml")]


def test_the_reader_streams():
    data = mbox(*[msg(i, body="z" * 2000 + "\n") for i in range(3000)])  # ~6.5 MB
    f = io.BytesIO(data)
    first = next(iter_mbox(f, 50 << 20))
    assert first.offset == 0 and f.tell() < len(data) / 3


def test_reader_memory_is_flat_as_the_stream_grows():
    one = SEP + msg(1, body="w" * 1000 + "\n") + b"\n"

    class Endless(io.RawIOBase):  # n messages produced on the fly, never all in memory
        def __init__(self, n):
            self.left, self.buf = n, b""

        def readable(self):
            return True

        def readinto(self, b):
            while len(self.buf) < len(b) and self.left:
                k = min(self.left, 256)
                self.left -= k
                self.buf += one * k
            n = min(len(b), len(self.buf))
            b[:n], self.buf = self.buf[:n], self.buf[n:]
            return n

    peaks = []
    for n in (3_000, 12_000):  # ~3.5 MB and ~14 MB of mbox: several blocks each
        tracemalloc.start()
        count = sum(1 for _ in iter_mbox(io.BufferedReader(Endless(n)), 50 << 20))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert count == n
    assert peaks[1] < peaks[0] * 1.25 and peaks[1] < 8 << 20, peaks


def test_a_line_without_end_and_a_10mb_line(tmp_path):
    big = "a" * (10 << 20)
    data = mbox(msg(1), msg(2, body=big + "\n"), msg(3)) + b"From x@y " + b"b" * (3 << 20)
    events, quarantined = run(MboxExtractor, write(tmp_path / "a.mbox", data))
    assert [e.native_id for e in events] == [f"m{i}-abcdef@example.com" for i in (1, 2, 3)]
    assert len(events[1].body) == len(big) + 1 and quarantined == []


def test_text_before_the_first_separator(tmp_path):
    events, quarantined = run(MboxExtractor, write(tmp_path / "a.mbox", b"\n\nstray words\n\n" + mbox(msg(1))))
    assert [e.native_id for e in events] == ["m1-abcdef@example.com"]
    assert [(q.error_class, q.offset) for q in quarantined] == [("not_a_message", 0)]
    events, _ = run(MboxExtractor, write(tmp_path / "one.mbox", msg(5)))  # a single message, no From line
    assert [e.native_id for e in events] == ["m5-abcdef@example.com"]


# --- charsets and MIME --------------------------------------------------------------------------------

@pytest.mark.parametrize("header, expected", [
    ("=?utf-8?q?J=C3=BCrgen?= =?utf-8?b?w7w=?= x", "Jürgenü x"),       # adjacent words: no space between
    ("=?utf-8?B?4oK=?= =?utf-8?B?rA==?=", "€"),                          # a character split over two words
    ("=?iso-8859-1?q?caf=E9?=", "café"),
    ("=?x-bogus?Q?caf=E9?=", "café"),                                   # unknown charset: fallback
    ("=?utf-8*en?Q?hello_world?=", "hello world"),                       # RFC 2231 language
    ("=?utf-8?Q?a b?=", "a b"),                                          # space inside (broken)
    ("=?utf-8?B?w7w?=", "ü"),                                            # missing padding
    ("pre =?utf-8?Q?trunc", "pre trunc"),                                # missing ?=
    ("=?utf-8?B?!!!?=", "=?utf-8?B?!!!?="),                              # not base64 at all: kept
    ("plain text", "plain text"),
])
def test_encoded_words(header, expected):
    assert decode_words(header) == expected


def test_raw_8bit_headers_and_bodies(tmp_path):
    m = (b"From: Ren\xe9e <renee@example.com>\nSubject: caf\xc3\xa9 cr\xc3\xa8me\nDate: Mon, 01 Jan 2018 "
         b"10:00:00 +0000\nMessage-ID: <r1@example.com>\nContent-Type: text/plain; charset=us-ascii\n\n"
         b"na\xefve\n")
    events, _ = run(EmlExtractor, write(tmp_path / "a.eml", m))
    (e,) = events
    assert (e.title, e.actor_name) == ("café crème", "Renée")  # undeclared 8-bit: utf-8, else cp1252
    assert e.body == "naïve\n" and e.attrs["charset"] == "us-ascii" and e.attrs["charset_fallback"] is True
    assert e.attrs["charset_used"] == "cp1252"
    assert e.provenance == {"file": "a.eml", "offset": 0}


@pytest.mark.parametrize("raw, charset, expected", [
    (b"caf\xc3\xa9", "utf-8", ("café", "utf-8", False)),
    (b"caf\xe9", None, ("café", "cp1252", True)),                        # undeclared: utf-8, then cp1252
    (b"caf\xe9", "utf-8", ("café", "cp1252", True)),                     # wrong: declared fails
    (b"caf\xc3\xa9", "iso-8859-1", ("café", "utf-8", True)),             # mislabelled UTF-8
    (b"caf\xe9", "no-such-charset", ("café", "cp1252", True)),
    (b"\x81\x8d", None, ("\x81\x8d", "latin-1", True)),
    (b"plain", "base64", ("plain", "utf-8", True)),                     # a bytes codec is not a charset
])
def test_decode_bytes(raw, charset, expected):
    assert decode_bytes(raw, charset) == expected


def test_transfer_encodings_and_attachments(tmp_path):
    qp = msg(1, cte="quoted-printable", body="caf=C3=A9 and a soft =\nbreak\n")
    b64 = msg(2, cte="base64", body="Y2Fmw6kK\n")
    mixed = msg(3, ctype='multipart/mixed; boundary="XX"', body=(
        "--XX\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\n"
        "Hall=F6\n--XX\nContent-Type: application/pdf; name=\"r.pdf\"\nContent-Disposition: attachment; "
        "filename*=utf-8''r%C3%A9sum%C3%A9.pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0xLjQK\n"
        "--XX\nContent-Type: message/rfc822\n\nFrom: x@example.com\nSubject: fwd\n\ninner\n--XX--\n"))
    events, quarantined = run(MboxExtractor, write(tmp_path / "a.mbox", mbox(qp, b64, mixed)))
    assert quarantined == []
    assert [e.body for e in events] == ["café and a soft break\n", "café\n", "Hallö"]
    assert events[2].attrs["attachments"] == [
        {"name": "résumé.pdf", "content_type": "application/pdf", "size": 9},
        {"name": None, "content_type": "message/rfc822", "size": events[2].attrs["attachments"][1]["size"]}]
    assert events[2].attrs["charset"] == "iso-8859-1" and events[2].attrs["body_format"] == "plain"


def test_html_only_message(tmp_path):
    html = ("<html><head><style>p {color: red}</style><title>T</title></head><body><p>Hello&nbsp;<b>world</b></p>"
            "<script>alert('x')</script>line one<br>line two<ul><li>a</li><li>b</li></ul>"
            "<div class=gmail_quote>On Mon, 1 Jan 2018, Bo wrote:<blockquote>old text<br>more</blockquote></div>"
            "</body></html>")
    alt = msg(2, ctype='multipart/alternative; boundary="B"', body=(
        f"--B\nContent-Type: text/plain\n\nplain wins\n--B\nContent-Type: text/html\n\n{html}\n--B--\n"))
    events, _ = run(MboxExtractor, write(tmp_path / "a.mbox", mbox(msg(1, ctype="text/html", body=html), alt)))
    e = events[0]
    assert e.attrs["body_format"] == "html"
    assert e.body == "Hello world\n\nline one\nline two\n- a\n- b\nOn Mon, 1 Jan 2018, Bo wrote:\n> old text\n> more"
    assert e.attrs["new_text"] == "Hello world\n\nline one\nline two\n- a\n- b"
    # the newline before a boundary belongs to the boundary
    assert (events[1].body, events[1].attrs["body_format"]) == ("plain wins", "plain")


def test_html_converter():
    assert html_to_text("<p>a<![bogus[ x ]]>b<p>c") == "a b c"  # the stdlib parser gives up: tags dropped
    assert html_to_text("<b>x</b> &amp; &lt;y&gt;<br><br>z") == "x & <y>\n\nz"
    assert html_to_text('See <a href="https://git.example/c/abc">commit abc</a>, <a href="https://x.example">'
                        'https://x.example</a>, <a href="#top">top</a>') == \
        "See commit abc <https://git.example/c/abc>, https://x.example, top"  # link targets are kept
    assert html_to_text("<a" * 50_000 + "<p>end") == "<a" * 50_000 + "\nend"  # html.parser alone: minutes
    assert html_to_text("<pre>  code\n    indented</pre><blockquote>q<blockquote>qq</blockquote></blockquote>") == \
        "  code\n    indented\n> q\n> > qq"


def test_undecodable_message_is_quarantined_and_neighbours_kept(tmp_path):
    events, quarantined = run(MboxExtractor, write(tmp_path / "a.mbox", mbox(msg(1), undecodable(2), msg(3))))
    assert [e.native_id for e in events] == ["m1-abcdef@example.com", "m3-abcdef@example.com"]
    assert [q.error_class for q in quarantined] == ["undecodable"] and quarantined[0].offset > 0


def test_format_flowed():
    assert unflow("This is a \nflowed line.\n> quoted \n> more\n-- \nsig", delsp=False) == \
        "This is a flowed line.\n> quoted more\n-- \nsig"
    assert unflow("Hel\nlo", delsp=True) == "Hel\nlo" and unflow("Hel \nlo", delsp=True) == "Hello"


# --- reply text -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, expected", [
    ("Thanks!\n\nOn Mon, 1 Jan 2018, Bo <b@x.org> wrote:\n> hi\n> there\n\n-- \nAnn\n", "Thanks!"),
    ("Yes.\nOn Mon, Jan 1, 2018 at 10:00 AM Bo Dev <\nb@x.org> wrote:\n\n> hi\n", "Yes."),   # Gmail wrap
    ("Top.\n\nSent from my iPhone\n\n-----Original Message-----\nFrom: x\nhello\n", "Top."),
    ("Answer\n\nFrom: Bo\nSent: Monday\nTo: Al\nSubject: x\n\nold\n", "Answer"),                # Outlook block
    ("inline\n> q1\nmine\n> q2\nmine2\n--\nsig\n", "inline\nmine\nmine2"),
    ("Am 01.01.2018 um 10:00 schrieb Bo:\n> alt\nneu\n", "neu"),
    ("On Tue, 30 Oct 2001, Bo wrote:\n[...]\n> x\n[...]\n\nWhat does it do?\n", "What does it do?"),
    ("Text\n_______________________________________________\nDev mailing list\ndev@x.org\n", "Text"),
    ("Here is what I wrote:\nthe plan\n", "Here is what I wrote:\nthe plan"),  # not an attribution
    ("a\n--\n" + "line\n" * 30, "a\n--\n" + "\n".join(["line"] * 30)),          # "--" before a long text
])
def test_new_text(body, expected):
    assert new_text(body) == expected


# --- threading ----------------------------------------------------------------------------------------------

def test_threading_by_references_and_subject(tmp_path):
    d = "Mon, {:02d} Jan 2018 10:00:00 +0000".format
    data = mbox(
        msg(1, subject="Build broken", date=d(1)),
        msg(2, subject="Re: Build broken", date=d(2), headers=("In-Reply-To: <m1-abcdef@example.com>",)),
        msg(3, subject="AW: [dev] RE: build BROKEN", date=d(3)),                     # no refs: by subject
        msg(4, subject="Re: other", date=d(4), headers=("References: <m3-abcdef@example.com>",)),
        msg(5, subject="Build broken", date="Mon, 05 Mar 2018 10:00:00 +0000"),      # outside the window
        msg(6, subject="Re: x", date=d(6), headers=("References: <gone@example.com> <m2-abcdef@example.com>",)),
        msg(7, subject="Re: y", date=d(7), headers=("In-Reply-To: <never-seen@example.com>", "In-Reply-To: <yes>")),
    )
    events, _ = run(MboxExtractor, write(tmp_path / "a.mbox", data))
    root = "m1-abcdef@example.com"
    assert [(e.thread_key, e.attrs["thread_by"]) for e in events] == [
        (root, "self"), (root, "references"), (root, "subject"), (root, "references"),
        ("m5-abcdef@example.com", "self"), (root, "references"), ("never-seen@example.com", "references")]
    assert events[1].parent_id == events[0].event_id
    assert events[2].parent_id is None and events[3].parent_id == events[2].event_id
    assert events[5].parent_id == events[1].event_id  # the last reference when there is no In-Reply-To
    assert events[6].parent_id == event_id("ds", "email", "never-seen@example.com")


def test_threads_continue_across_monthly_archives_of_one_run(tmp_path):
    a = write(tmp_path / "2018-January.txt", mbox(msg(1, subject="Plan")))
    b = write(tmp_path / "2018-February.txt", mbox(msg(2, subject="Re: Plan", date="Wed, 03 Jan 2018 10:00:00 +0000")))
    ex = MboxExtractor("ds", None, "r", root=tmp_path)
    rows = [r for p in (a, b) for r in ex.iter_records(p)]
    assert [r.thread_key for r in rows] == ["m1-abcdef@example.com"] * 2
    again = list(ex.iter_records(a))  # the same input read again by one instance: the same rows
    assert [r.to_row() for r in again] == [rows[0].to_row()]


def test_thread_memory_is_bounded():
    index = ThreadIndex(capacity=100, window=dt.timedelta(days=30))
    t = dt.datetime(2018, 1, 1, tzinfo=UTC)
    for i in range(10_000):
        index.assign(f"id{i}@x", [], None, f"subject {i}", t)
    assert len(index._ids) == len(index._subjects) == 100
    assert index.seen("id9999@x") and not index.seen("id0@x")


def test_thread_subject():
    assert thread_subject("Re: AW: [dev] Fwd: Re:  Hello   World (fwd)") == "hello world"
    assert thread_subject("RE[2]: [PATCH 1/3] Foo") == "foo" and thread_subject(None) == ""


# --- addresses -------------------------------------------------------------------------------------------

def test_parse_addresses():
    assert parse_addresses(["jjl at example.org (J. Lee)"]) == ([("J. Lee", "jjl@example.org")], True)
    assert parse_addresses(['"Doe, J" <J@X.org>, =?utf-8?q?J=C3=BCrgen?= <jj@x.de>']) == (
        [("Doe, J", "j@x.org"), ("Jürgen", "jj@x.de")], False)
    assert parse_addresses(["Foo Bar"]) == ([("Foo Bar", "")], False)
    assert parse_addresses(["undisclosed-recipients:;"]) == ([], False)


@pytest.mark.parametrize("junk", [b"", b"\x00" * 100, b"\n\nbody only\n", b":::\n\n", b" folded first\nA: b\n\n"])
def test_junk_is_not_a_message(junk):
    with pytest.raises(Unusable) as err:
        read_message(junk)
    assert err.value.error_class == "not_a_message"


def test_deep_multipart_nesting_is_one_unusable_message():
    nested = b"".join(b'Content-Type: multipart/mixed; boundary="b%d"\n\n--b%d\n' % (i, i) for i in range(3000))
    try:
        mail = read_message(b"From: a@example.com\nSubject: deep\n" + nested)
    except Unusable as e:
        assert e.error_class == "undecodable"
    else:
        assert mail.subject == "deep"


HEADER_CASES = [
    msg(1),
    msg(2, headers=("X-Folded: one\n two\n\tthree", "To: second@example.com")).replace(b"\n", b"\r\n"),
    b"From: Ren\xe9e <r@example.com>\nSubject:no space\nX-Odd_Name.1: v \nDate: Mon, 01 Jan 2018 10:00:00 +0000\n"
    b"Content-Type: text/plain; charset=\"iso-8859-1\"; format=flowed; delsp=yes\n"
    b"Content-Transfer-Encoding: quoted-printable\n\nsoft =\nbreak caf=E9 \nflowed\n",
    msg(3, ctype="text/html", cte="base64", body="PHA+aGk8L3A+\n"),
    msg(4, ctype=None, headers=("Content-Disposition: inline; filename*=utf-8''n%C3%A4me.txt",)),
    b"From: a@example.com\nSubject: x\nMessage-ID:\n <split@example.com>\n\n\n\nbody after blank lines\n",
]


@pytest.mark.parametrize("data", HEADER_CASES)
def test_the_header_fast_path_reads_what_the_stdlib_parser_reads(data, monkeypatch):
    assert message_module._header_block(data) is not None  # the fast path is taken
    fast = read_message(data)
    monkeypatch.setattr(message_module, "_header_block", lambda data: None)
    assert read_message(data) == fast


_header_line = st.tuples(st.sampled_from(["From", "To", "Cc", "Subject", "Date", "Message-ID", "References",
                                          "Content-Type", "X-Any", "list-id"]),
                         st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b),
                         st.sampled_from([b"", b"\n cont", b"\r\n\tcont"]))


@settings(max_examples=30, deadline=None)
@given(st.lists(_header_line, min_size=1, max_size=8), st.binary(max_size=200))
def test_the_header_fast_path_matches_the_stdlib_on_random_headers(lines, body):
    data = b"".join(b"%s: %s%s\n" % (name.encode(), value, cont) for name, value, cont in lines) + b"\n" + body
    outcomes = []
    for block in (message_module._header_block, lambda data: None):
        original, message_module._header_block = message_module._header_block, block
        try:
            outcomes.append(read_message(data))
        except Unusable as e:
            outcomes.append(e.error_class)
        finally:
            message_module._header_block = original
    assert outcomes[0] == outcomes[1]


# --- detection ---------------------------------------------------------------------------------------------

def test_detect(tmp_path):
    mb = write(tmp_path / "lists" / "dev.mbox", mbox(msg(1)))
    mbx = write(tmp_path / "lists" / "empty.mbx", b"")
    piper = write(tmp_path / "lists" / "2001-November.txt", mbox(msg(2)))
    single = write(tmp_path / "lists" / "saved.txt", msg(3))
    write(tmp_path / "notes.txt", b"From the start we said:\nnothing\n")
    write(tmp_path / "todo.txt", b"Subject: just a note\n\nbuy milk\n")
    md = make_maildir(tmp_path / "mail" / "Maildir", [msg(4)])
    only_cur = tmp_path / "mail" / "lkml"
    write(only_cur / "cur" / "1.host:2,", msg(5))
    write(tmp_path / "code" / "cur" / "main.c", b"int main() {}\n")  # a cur/ folder that is not mail
    pure = make_eml_folder(tmp_path / "saved", [msg(6), msg(7)])
    mixed = write(tmp_path / "misc" / "one.eml", msg(8))
    write(tmp_path / "misc" / "readme.md", b"# notes\n")
    assert MboxExtractor.detect(tmp_path) == sorted([mb, mbx, piper, single])
    assert MaildirExtractor.detect(tmp_path) == [md, only_cur]
    assert EmlExtractor.detect(tmp_path) == [mixed, pure]
    assert ("maildir", md) in plan(tmp_path) and ("eml", pure) in plan(tmp_path)


def test_looks_like_mail():
    assert looks_like_mail(SEP + b"Return-Path: <a@b>\n")
    assert looks_like_mail(b"Received: from x\n\tby y\nFrom: a@b.c\n\nbody")
    assert not looks_like_mail(b"From the start\nwe said\n")
    assert not looks_like_mail(b"Subject: only one header\n\ntext")


def test_maildir_reads_cur_and_new_and_maildirplusplus_folders(tmp_path):
    md = make_maildir(tmp_path / "Maildir", [msg(1), msg(2)])
    write(md / "tmp" / "999.partial", b"From: half")                     # a delivery in progress: not read
    write(md / ".Sent" / "cur" / "1514797299.M9P1.host:2,S", msg(9))
    (md / ".Sent" / "new").mkdir()
    events, quarantined = run(MaildirExtractor, md, root=tmp_path)
    assert quarantined == []
    assert sorted((e.native_id, e.provenance["member"]) for e in events) == [
        ("m1-abcdef@example.com", "cur/1514797200.M0P1.host:2,S"),
        ("m2-abcdef@example.com", "new/1514797201.M1P1.host"),
        ("m9-abcdef@example.com", ".Sent/cur/1514797299.M9P1.host:2,S")]
    assert {e.provenance["file"] for e in events} == {"Maildir"}


def test_eml_with_an_envelope_line_and_a_missing_folder(tmp_path):
    events, _ = run(EmlExtractor, write(tmp_path / "a.eml", SEP + msg(1, date=None)))
    assert events[0].attrs["date_source"] == "from_line"
    _, quarantined = run(MaildirExtractor, tmp_path / "absent")
    assert [q.error_class for q in quarantined] == ["unreadable"]
    _, quarantined = run(MboxExtractor, tmp_path / "absent.mbox")
    assert [q.error_class for q in quarantined] == ["unreadable"]


def test_bad_settings_are_refused():
    for bad in ({"max_message_bytes": 0}, {"thread_memory": -1}, {"max_message_byte": 5}):
        with pytest.raises(ValueError):
            MboxExtractor("ds", bad)


# --- fuzz: damage one message, its neighbours survive -----------------------------------------------------

# the 10 MB line costs ~0.5 s a message in the stdlib parser alone: it is one explicit example per format,
# not a random draw that could repeat it a dozen times
DAMAGE = st.sampled_from(["truncate", "insert", "flip", "charset", "huge_headers"])
FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG_LINE = example(kind="long_line", where=0, junk=b"x", flips=[0])


def _good(i: int) -> bytes:
    return msg(i, mid=f"<good-{i}-qwerty@example.com>", subject=f"Good {i}",
               headers=(f"In-Reply-To: <good-{i - 1}-qwerty@example.com>",) if i else ())


def _damaged(kind: str, where: int, junk: bytes, flips: list[int]) -> bytes:
    m = msg(99, mid="<damaged-zzzzzz@example.com>", subject="=?utf-8?q?d=C3=A4maged?=",
            body="caf\u00e9 body line\n" * 20)
    if kind == "charset":
        return m.replace(b'charset="utf-8"', [b"charset=utf-16", b"charset=us-ascii", b"charset=bogus-9",
                                               b"charset=base64"][where % 4])
    if kind == "long_line":
        return m + b"L" * (10 << 20) + b"\n"
    if kind == "huge_headers":
        extra = b"".join(b"X-Junk-%d: %s\n" % (n, b"v" * 50) for n in range(5_000)) if where % 2 else \
            b"Subject: " + b"s" * (1 << 20) + b"\n"
        return extra + m
    if kind == "insert":
        p = where % (len(m) - 1)
        return m[:p] + junk + m[p:]
    if kind == "flip":
        b = bytearray(m)
        for f in flips:
            b[f % (len(b) - 1)] ^= 1 << (f % 8)
        return bytes(b)
    return m[:where % len(m)]  # truncate


def _fuzz_ids(events: list[Event]) -> set[str]:
    return {e.native_id for e in events}


@FUZZ
@given(kind=DAMAGE, where=st.integers(0, 1 << 30), junk=st.binary(min_size=1, max_size=64),
       flips=st.lists(st.integers(0, 1 << 30), min_size=1, max_size=20), place=st.integers(0, 4))
@example(kind="long_line", where=0, junk=b"x", flips=[0], place=2)
def test_fuzz_mbox(kind, where, junk, flips, place):
    good = [_good(i) for i in range(4)]
    parts = [SEP + g + b"\n" for g in good]
    damaged = SEP + _damaged(kind, where, junk, flips)
    # the damage stays inside the damaged message: the blank line after it and the next separator are kept
    parts.insert(place, (damaged if damaged.endswith(b"\n") else damaged + b"\n") + b"\n")
    data = b"".join(parts)
    expected = {f"good-{i}-qwerty@example.com" for i in range(4)}
    if kind == "truncate":  # the whole file cut at a random point: the messages wholly before it survive
        cut = where % (len(data) + 1)
        data = data[:cut]
        ends, pos = [], 0
        for p in parts:
            pos += len(p)
            ends.append(pos)
        kept = [p for p, end in zip(parts, ends, strict=True) if end <= cut]
        expected = {f"good-{i}-qwerty@example.com" for i, g in enumerate(good) if SEP + g + b"\n" in kept}
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d) / "fuzz.mbox", data)
        events, _ = run(MboxExtractor, path)
    assert expected <= _fuzz_ids(events)


def _fuzz_folder(ex_cls, make, kind, where, junk, flips):
    good = [_good(i) for i in range(4)]
    damaged = _damaged(kind, where, junk, flips)
    with tempfile.TemporaryDirectory() as d:
        folder = make(Path(d) / "box", [good[0], good[1], damaged, good[2], good[3]])
        events, quarantined = run(ex_cls, folder, root=Path(d))
    assert {f"good-{i}-qwerty@example.com" for i in range(4)} <= _fuzz_ids(events)
    assert len(events) + len(quarantined) == 5


@FUZZ
@given(kind=DAMAGE, where=st.integers(0, 1 << 30), junk=st.binary(min_size=1, max_size=64),
       flips=st.lists(st.integers(0, 1 << 30), min_size=1, max_size=20))
@LONG_LINE
def test_fuzz_maildir(kind, where, junk, flips):
    _fuzz_folder(MaildirExtractor, make_maildir, kind, where, junk, flips)


@FUZZ
@given(kind=DAMAGE, where=st.integers(0, 1 << 30), junk=st.binary(min_size=1, max_size=64),
       flips=st.lists(st.integers(0, 1 << 30), min_size=1, max_size=20))
@LONG_LINE
def test_fuzz_eml(kind, where, junk, flips):
    _fuzz_folder(EmlExtractor, make_eml_folder, kind, where, junk, flips)


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=2000))
def test_fuzz_any_bytes_never_raise(data):
    with tempfile.TemporaryDirectory() as d:
        for ex_cls, path in ((MboxExtractor, write(Path(d) / "x.mbox", data)),
                             (EmlExtractor, write(Path(d) / "x.eml", data))):
            events, quarantined = run(ex_cls, path)
            assert to_table(Event, events).num_rows == len(events)
            assert to_table(Quarantine, quarantined).num_rows == len(quarantined)
            if ex_cls is EmlExtractor:  # one file, one message: an event or a quarantine row
                assert len(events) + len(quarantined) == 1
            elif data.strip():
                assert events or quarantined


# --- real archives (read in place) -------------------------------------------------------------------------

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "real"
MBOXES = ["mbox-apache-ponymail/maven-dev-2017-11-mailarchivesao.mbox",
          "mbox-apache-ponymail/asterix-dev-201709-mailarchivesao.mbox",
          "mbox-apache-ponymail/httpd-users-200606-part.mbox",
          "pipermail-numpy-bigbang/Numpy-discussion-2001-November.txt"]
LKML = "maildir-lkml-notmuch/test/corpora/lkml"
real = pytest.mark.skipif(not REAL.is_dir(), reason=f"real exports not present at {REAL}")


def _separators(data: bytes) -> int:
    """Independently of the extractor: `From ` lines at the start of the file or after a blank line."""
    return len(re.findall(rb"(?:\A|\n\r?\n)From ", data))


def _check_accounted(events, quarantined, expected_count):
    assert len(events) + len(quarantined) == expected_count
    ids = {e.native_id for e in events}
    assert len(ids) == len(events)
    for q in quarantined:  # the only losses in these archives are repeated copies of a kept message
        assert q.error_class == "duplicate_message_id" and re.search(r"<(.+?)> was already", q.message)[1] in ids
    assert to_table(Event, events).num_rows == len(events)
    assert all(e.actor and e.actor.startswith("email:") and e.thread_key and e.ts.tzinfo for e in events)


@pytest.mark.parametrize("rel, n_events, n_duplicates", [
    (MBOXES[0], 317, 0), (MBOXES[1], 53, 0), (MBOXES[2], 12, 0), (MBOXES[3], 82, 82)],
    ids=["maven", "asterix", "httpd", "numpy-pipermail"])
@pytest.mark.real
@real
def test_real_mbox_every_message_accounted_for(rel, n_events, n_duplicates):
    path = REAL / rel
    events, quarantined = run(MboxExtractor, path, root=REAL)
    _check_accounted(events, quarantined, _separators(path.read_bytes()))
    assert (len(events), len(quarantined)) == (n_events, n_duplicates)
    by_id = {e.native_id for e in events}
    replies = [e for e in events if e.attrs["in_reply_to"] in by_id]
    assert replies and all(e.parent_id == event_id("ds", "email", e.attrs["in_reply_to"]) for e in replies)


@pytest.mark.real
@real
def test_real_maildir_every_file_accounted_for():
    folder = REAL / LKML
    files = [f for sub in ("cur", "new") if (folder / sub).is_dir() for f in (folder / sub).iterdir()]
    events, quarantined = run(MaildirExtractor, folder, root=REAL)
    _check_accounted(events, quarantined, len(files))
    assert (len(events), len(quarantined)) == (46, 14)
    assert {e.provenance["member"].split("/")[0] for e in events} == {"cur"}
    assert Counter(e.attrs["thread_by"] for e in events)["references"] > 20


@pytest.mark.real
@real
def test_real_exports_are_claimed_by_the_mail_extractors():
    claimed = {(name, p.relative_to(REAL).as_posix()) for name, p in plan(REAL) if name in ("mbox", "maildir", "eml")}
    assert claimed == {*(("mbox", m) for m in MBOXES), ("maildir", LKML)}


def test_a_message_the_schema_refuses_is_quarantined_alone(tmp_path, monkeypatch):
    import extractors.email as email_extractors

    original = email_extractors._recipients

    def refuse_one(mail):
        if mail.subject == "Topic 2":
            raise ValueError("refused")
        return original(mail)

    monkeypatch.setattr(email_extractors, "_recipients", refuse_one)
    events, quarantined = run(MboxExtractor, write(tmp_path / "a.mbox", mbox(msg(1), msg(2), msg(3))))
    assert [e.native_id for e in events] == ["m1-abcdef@example.com", "m3-abcdef@example.com"]
    assert [q.error_class for q in quarantined] == ["invalid_event"] and "refused" in quarantined[0].message


def test_ingest_a_dataset_with_every_mail_format(tmp_path):
    from extractors.detect import ingest

    # mod_mbox names (YYYYMM) sort in time order, which is the order `plan` reads them in
    write(tmp_path / "lists" / "201801.mbox.gz", gzip.compress(mbox(msg(1, subject="Release plan"))))
    write(tmp_path / "lists" / "201802.mbox", mbox(msg(4, subject="Re: Release plan",
                                                       date="Thu, 25 Jan 2018 10:00:00 +0000")))
    make_maildir(tmp_path / "Maildir", [msg(2, subject="Re: Release plan", headers=(
        "In-Reply-To: <m1-abcdef@example.com>",))])
    make_eml_folder(tmp_path / "saved", [msg(3, subject="Unrelated")])
    rows = list(ingest("ds", tmp_path, "run-1"))
    assert not [r for r in rows if isinstance(r, Quarantine)]
    threads = {r.native_id: (r.thread_key, r.attrs["thread_by"]) for r in rows}
    assert threads == {
        "m1-abcdef@example.com": ("m1-abcdef@example.com", "self"),
        "m2-abcdef@example.com": ("m1-abcdef@example.com", "references"),  # a root id needs no shared state
        "m3-abcdef@example.com": ("m3-abcdef@example.com", "self"),
        "m4-abcdef@example.com": ("m1-abcdef@example.com", "subject")}     # the next month's archive
    assert {r.provenance["file"] for r in rows} == {"lists/201801.mbox.gz", "lists/201802.mbox", "Maildir", "saved"}


@pytest.fixture(scope="module")
def sample_company(tmp_path_factory):
    """The invented sample company (sample/company.py) and its ground truth."""
    import json

    from sample.company import write_sample

    out = tmp_path_factory.mktemp("sample")
    write_sample(out, seed=3, scale=1, dataset="acme")
    return out / "acme", json.loads((out / ".truth" / "acme.json").read_text())


def test_sample_company_mail_matches_its_ground_truth(sample_company):
    root, truth = sample_company
    ex = MboxExtractor("acme", None, "r", root=root)
    events = {}
    for source in truth["sources"]["mail"]:
        path = root.parent / source["file"]
        rows = list(ex.iter_records(path))
        assert not [r for r in rows if isinstance(r, Quarantine)]
        assert len(rows) == source["messages"], path.name
        events.update({r.native_id: r for r in rows})
    keys = []
    for thread in truth["threads"]["email"]:  # one thread_key per true thread, a different one per thread
        got = {events[mid].thread_key for mid in thread["messages"]}
        assert len(got) == 1, thread["subject"]
        keys += got
        assert events[thread["messages"][0]].title.endswith(thread["subject"])
    assert len(keys) == len(set(keys))
    spans = [p for p in truth["pii"] if p["location"].startswith("mbox:")]
    assert spans
    for p in spans:  # the decoded body is exactly the text the writer put there (QP, charsets)
        e = events[p["location"][len("mbox:"):].rsplit(":", 1)[0]]
        if e.attrs["body_format"] == "html":  # the truth indexes the HTML source; the body is its text
            assert p["value"] in e.body, p
            continue
        # the truth indexes the body as stored, with mboxo's ">From " escapes; the event has them undone
        stored = re.sub(r"(?m)^(>*From )", r">\1", e.body)
        assert stored[p["start"]:p["end"]] == p["value"], p
    assert any("\nFrom a first look" in e.body for e in events.values())
