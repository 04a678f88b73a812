"""Text of an e-mail body: HTML to text, format=flowed, and the new text of a reply.

Formats followed: RFC 3676 (format=flowed, DelSp, space-stuffing, the "-- " signature line), RFC 3676
section 4.3 / Usenet convention for the signature delimiter "-- ", and the quoting conventions of mail
clients (">" prefixes; "On <date>, <name> wrote:" attributions, also wrapped over two lines by Gmail and
in German, French, Spanish, Italian, Dutch, Scandinavian clients; Outlook's "-----Original Message-----"
and "From:/Sent:/To:" header blocks; forwarded messages (Lotus Notes' "--- Forwarded by ... ---", Gmail's
"--- Forwarded message ---", Apple Mail's "Begin forwarded message:"); mobile "Sent from my ..." lines;
Mailman list footers and
pipermail's "next part" attachment notes).

Invariants:
- Pure functions on str, no I/O; they never raise on any input (the HTML converter falls back to
  dropping tags with a regex when the stdlib parser gives up on a malformed declaration), and their
  time stays linear in the input on hostile text too (stray "<" escaped before html.parser sees them,
  look-aheads bounded by LOOK_AHEAD lines).
- `html_to_text` drops script/style/title content, keeps line breaks for block elements and <br>, and
  renders <blockquote> as "> " lines so that `new_text` strips quoted HTML replies like plain ones.
- `new_text` only removes: it never rewrites a kept line.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

_SKIP = {"script", "style", "title", "template"}
_BLOCK = {"p", "div", "tr", "table", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "pre", "section",
          "article", "header", "footer", "dl", "dt", "dd", "address", "center", "form", "blockquote", "li",
          "body", "html", "tbody", "thead"}
_WS = re.compile(r"\s+")
_BLANKS = re.compile(r"\n{3,}")
_TAG = re.compile(r"<[^<>]*>")
# "<" that opens no tag (no ">" before the next "<"): html.parser rescans the rest of the input for
# each of them, which is quadratic ("<a" * 100000 takes minutes), so they are escaped first
_STRAY_LT = re.compile(r"<(?![^<>]*>)")


class _HtmlText(HTMLParser):
    """Text runs with whitespace collapsed; a block boundary starts a new line (once), <br> always
    does; a line inside n <blockquote>s is prefixed with "> " n times when its first text arrives; a
    link's http(s) target follows its text as " <url>" unless the text already shows it (links to
    issues and commits are what later stages mine)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = self.pre = self.quote = 0
        self.at_start = True
        self.links: list[tuple[str | None, int]] = []  # (href, len(out) at <a>) of the open links

    def _newline(self, hard: bool = False) -> None:
        if hard or not self.at_start:
            self.out.append("\n")
            self.at_start = True

    def handle_starttag(self, tag, attrs):
        if tag in _SKIP:
            self.skip += 1
        elif tag == "br":
            self._newline(hard=True)
        elif tag in _BLOCK:
            self._newline()
            self.quote += tag == "blockquote"
            self.pre += tag == "pre"
            if tag == "li":
                self._text("- ")
        elif tag in ("td", "th"):
            self.out.append(" ")
        elif tag == "a":
            href = next((v for k, v in attrs if k == "href" and v), None)
            self.links.append((href if href and href.lower().startswith(("http://", "https://")) else None,
                               len(self.out)))

    def handle_startendtag(self, tag, attrs):
        if tag == "br":
            self._newline(hard=True)
        elif tag in _BLOCK:
            self._newline()

    def handle_endtag(self, tag):
        if tag == "a" and self.links:
            href, at = self.links.pop()
            if href and href not in "".join(self.out[at:]):
                self._text(f" <{href}>")
        elif tag in _SKIP:
            self.skip = max(self.skip - 1, 0)
        elif tag in _BLOCK:
            self._newline()
            if tag == "blockquote":
                self.quote = max(self.quote - 1, 0)
            elif tag == "pre":
                self.pre = max(self.pre - 1, 0)
            elif tag == "p":
                self._newline(hard=True)  # a blank line between paragraphs

    def handle_data(self, data):
        if self.skip:
            return
        if self.pre:
            for n, line in enumerate(data.split("\n")):
                if n:
                    self._newline(hard=True)
                self._text(line)
        else:
            self._text(_WS.sub(" ", data))

    def _text(self, text: str) -> None:
        if self.at_start:
            text = text if self.pre else text.lstrip()
            if not text:
                return
            self.out.append("> " * self.quote)
            self.at_start = False
        self.out.append(text)


def html_to_text(markup: str) -> str:
    """Readable text of an HTML body (stdlib html.parser; see the module docstring)."""
    parser = _HtmlText()
    markup = _STRAY_LT.sub("&lt;", markup)
    try:
        parser.feed(markup)
        parser.close()
        text = "".join(parser.out)
    except Exception:  # _markupbase raises AssertionError on some malformed declarations
        return " ".join(html.unescape(_TAG.sub(" ", markup)).split())
    return _squeeze(text)


def _squeeze(text: str) -> str:
    """`text` without trailing spaces on its lines, at most one blank line in a row, no blank ends."""
    if " \n" in text or "\t\n" in text or text.endswith((" ", "\t")):
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    if "\n\n\n" in text:
        text = _BLANKS.sub("\n\n", text)
    return text.strip("\n")


def unflow(text: str, delsp: bool) -> str:
    """Undo RFC 3676 format=flowed: join soft-broken lines (ending in a space) of one quote depth."""
    out: list[str] = []
    depth, para = 0, []  # the pieces of the paragraph being joined (a list: joining stays linear)
    for line in text.split("\n"):
        d = len(line) - len(line.lstrip(">"))
        content = line[d:]
        if content.startswith(" "):
            content = content[1:]  # space-stuffing (and the space after a quote marker)
        if para and d != depth:
            out.append(_quoted(depth, "".join(para)))
            para = []
        if content.endswith(" ") and content != "-- ":
            para.append(content[:-1] if delsp else content)
            depth = d
        else:
            out.append(_quoted(d, "".join(para) + content))
            para = []
    if para:
        out.append(_quoted(depth, "".join(para)))
    return "\n".join(out)


def _quoted(depth: int, text: str) -> str:
    return ">" * depth + (" " if depth and text else "") + text


# --- the new text of a reply ------------------------------------------------------------------------

_WROTE = (r"(wrote|writes|said|schrieb|a écrit|escribió|ha scritto|skrev|schreef|napisał|kirjoitti|"
          r"написал|написала|escreveu)")
_ATTRIBUTION = re.compile(r"^(.{0,300}\b" + _WROTE + r"(\s.{0,100})?|quoting\b.{0,200}|"
                          r".{0,200}\bzitat von\b.{0,200})\s*:\s*$", re.I)
_ATTRIBUTION_START = re.compile(r"^(on|am|le|el|il|op|den)\s", re.I)
_ATTRIBUTION_END = re.compile(r"\b" + _WROTE + r"(\s.{0,100})?\s*:\s*$", re.I)
_ORIGINAL = re.compile(r"^-{2,}\s*(original message|ursprüngliche nachricht|message d'origine|"
                       r"mensaje original|messaggio originale|oorspronkelijk bericht)\s*-{2,}\s*$", re.I)
_NEXT_PART = re.compile(r"^-{5,} next part -{5,}$")
# a forwarded message: Lotus Notes' "----- Forwarded by Name/OU/ORG on date -----", Gmail's "---------- Forwarded
# message ---------", Apple Mail's "Begin forwarded message:", Outlook's "-----Forwarded Message-----"
_FORWARD = re.compile(r"^(-{3,}\s*forwarded (by\b.{0,200}|message)\s*-{3,}|begin forwarded message:|"
                      r"-{3,}\s*(weitergeleitete nachricht|message transféré|mensaje reenviado)\s*-{3,})\s*$", re.I)
_HEADER_BLOCK = re.compile(r"^\*?(from|von|de|da|van|från|fra)\s*:\*?\s", re.I)
_HEADER_BLOCK_NEXT = re.compile(r"^\*?(sent|date|gesendet|datum|envoyé|enviado|inviato|to|an|à|para|a|"
                                r"subject|betreff|objet|asunto|oggetto)\s*:", re.I)
_MOBILE = re.compile(r"^(sent from (my |the )?\S.{0,60}|sent (via|with|using) \S.{0,60}|"
                     r"get outlook for \S.{0,40}|envoyé de mon \S.{0,40}|von meinem \S.{0,60} gesendet\.?|"
                     r"enviado desde mi \S.{0,40}|inviato da(l)? (mio )?\S.{0,40}|"
                     r"verzonden (vanaf|met) (mijn )?\S.{0,40}|skickat från min \S.{0,40})$", re.I)
_ELISION = re.compile(r"^\[(\.\.\.?|…|snip|snipped|cut)\]$", re.I)  # marks a cut in quoted text
MAX_SIGNATURE_LINES = 15
LOOK_AHEAD = 200  # lines a test looks past the current one
# a stripped line any of the above can match starts with one of these marks or words (or ends with ":")
_CANDIDATE = re.compile(r"(?:--|__|>|\*|\[(?:\.|…|snip|cut)|(from|von|de|da|van|från|fra|sent|get|envoy|enviado|"
                        r"inviato|verzonden|skickat|on|am|le|el|il|op|den|begin)\b)", re.I)


def _next_text(lines: list[str], i: int) -> str | None:
    """The first non-blank line at or after index i, stripped, elision marks ("[...]") passed over
    as part of a quote; None at the end; "" when LOOK_AHEAD lines hold none (hostile input must not
    make this quadratic)."""
    for j in range(i, min(len(lines), i + LOOK_AHEAD)):
        s = lines[j].strip()
        if s and not _ELISION.match(s):
            return s
    return None if i + LOOK_AHEAD >= len(lines) else ""


def _short_tail(lines: list[str], i: int) -> bool:
    """Whether at most MAX_SIGNATURE_LINES non-blank lines, and the end within LOOK_AHEAD lines,
    follow index i (a signature is short)."""
    if len(lines) - i > LOOK_AHEAD:
        return False
    return sum(bool(x.strip()) for x in lines[i + 1:]) <= MAX_SIGNATURE_LINES


def _judge(lines: list[str], j: int) -> str:
    """What to do with candidate line j: "keep", "drop", "drop2" (it and the next line) or "cut" (it and
    everything after)."""
    line = lines[j]
    s = line.strip()
    if s[0] == ">" or _ELISION.match(s):
        return "drop"
    if _ORIGINAL.match(s) or _NEXT_PART.match(s) or _FORWARD.match(s):
        return "cut"
    if line.rstrip("\r") == "-- " or (s == "--" and _short_tail(lines, j)):
        return "cut"
    if len(s) >= 10 and s.strip("_") == "":
        following = _next_text(lines, j + 1) or ""
        if "mailing list" in following.lower() or _HEADER_BLOCK.match(following):
            return "cut"
    if _HEADER_BLOCK.match(s) and any(_HEADER_BLOCK_NEXT.match(x.strip()) for x in lines[j + 1:j + 3]):
        return "cut"
    if s[-1] == ":" and len(s) < 400 and _ATTRIBUTION.match(s):
        after = _next_text(lines, j + 1)
        if after is None or after.startswith(">"):
            return "drop"
    if (j + 1 < len(lines) and _ATTRIBUTION_START.match(s) and lines[j + 1].rstrip().endswith(":")
            and len(s) + len(lines[j + 1]) < 400 and _ATTRIBUTION_END.search(lines[j + 1])):
        after = _next_text(lines, j + 2)
        if after is None or after.startswith(">"):
            return "drop2"
    return "drop" if _MOBILE.match(s) else "keep"


def new_text(body: str | None) -> str | None:
    """`body` without quoted replies, attributions, forwarded-original blocks, signatures and list
    footers: what the sender wrote in this message."""
    if body is None:
        return None
    lines = body.split("\n")
    out: list[str] = []
    j, n = 0, len(lines)
    while j < n:
        line = lines[j]
        if line[:1] == ">":  # a quoted line, the most common case in list archives
            j += 1
            continue
        s = line.strip()
        if s and (s[-1] == ":" or _CANDIDATE.match(s)):  # most other lines are plain text: no tests
            verdict = _judge(lines, j)
            if verdict == "cut":
                break
            if verdict != "keep":
                j += 2 if verdict == "drop2" else 1
                continue
        out.append(line)
        j += 1
    return _squeeze("\n".join(out))


# --- subjects ---------------------------------------------------------------------------------------

# all leading prefixes in one match (stripping them one by one is quadratic on "Re: " * 100000)
_SUBJECT_PREFIXES = re.compile(r"^(?:\s*(?:(?:re|fwd?|aw|wg|sv|vs|antw|ref|tr|rif|odp|r|res|enc)\s*"
                               r"(?:\[\d+\]|\(\d+\)|\^\d+)?\s*[:：]|\[[^\]]{0,80}\]|\((?:fwd|fw)\)))+", re.I)
_SUBJECT_SUFFIX = re.compile(r"\s*\((?:fwd|fw)\)\s*$", re.I)


_REPLY_PREFIX = re.compile(r"^\s*(?:\[[^\]]{0,80}\]\s*)*(?:re|fwd?|aw|wg|sv|vs|antw|ref|tr|rif|odp|r|res|enc)\s*"
                           r"(?:\[\d+\]|\(\d+\)|\^\d+)?\s*[:：]", re.I)


def is_reply_subject(subject: str | None) -> bool:
    """Does the subject say it answers or forwards another message (Re:, AW:, Fwd:, after any [list] tag)?"""
    return bool(_REPLY_PREFIX.match(subject or ""))


def thread_subject(subject: str | None) -> str:
    """The subject as threads share it: without Re:/Fwd:/AW:/[list] prefixes, case-folded."""
    s = " ".join((subject or "").split())
    s = _SUBJECT_SUFFIX.sub("", _SUBJECT_PREFIXES.sub("", s, count=1))
    return s.strip().casefold()
