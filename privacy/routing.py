"""People named by the routing and quoting lines that mail clients write into bodies.

Why: a forwarded or quoted message carries its own headers inside the body ("-----Original Message-----",
"From: Roe, Jane", "To: Jane Roe/HOU/XYZ@XYZ", "On <date>, Jane Roe <jane@...> wrote:"), and names there are
certainly names, in forms no full-name match sees ("Roe, Jane", "Jane Roe@XYZ"). Formats followed (as the clients
write them; every example in the tests is invented):
- header blocks of forwarded and quoted mail: Outlook/Exchange ("-----Original Message-----", From/Sent/To/Cc/
  Subject, "From: Last, First [mailto:addr]", "To: Last, First; Last, First"), Gmail ("---------- Forwarded
  message ---------", From/Date/Subject/To/Cc), Apple Mail ("Begin forwarded message:", "> From: ..."), Lotus
  Notes ("To: Name/OU/ORG@ORG, Name@ORG", "cc:", "Sent by: Name@ORG", lines wrapped without a key), and the
  German, French, Spanish and Portuguese keys of the same (Von/An/Kopie, De/A/Para/Cc);
- attribution lines: "On <date>, Name <addr> wrote:" (Gmail, Apple Mail, Thunderbird, mutt; wrapped over two
  lines too), "Name <addr> wrote:"/"writes:", "* Name <addr> [date]:", "Quoting Name (addr):", "Am <date> schrieb
  Name:", "Le <date>, Name a écrit :", and Lotus Notes' '"Name" <addr> on 06/14/2001 01:10 PM';
- Lotus Notes addresses anywhere: "Name/OU/ORG@ORG", "Name/OU/ORG", "Name@ORG" (an all-capitals domain without a
  dot is a Notes domain, not an Internet one), "Forwarded by Name/OU/ORG on <date>"; a name that starts a list
  item may be wrapped over one line break ("To: Jane \nRoe/HOU/XYZ@XYZ").

Invariants:
- `find(text)` returns non-overlapping `Routed` spans sorted by start, with `text[start:end] == name`; a name's
  e-mail address, when the line gives one, comes with it (`address`), so the caller can resolve the person by it.
- Only names in those positions are returned; a header-like line in prose ("To: be decided") is not a block
  (a block has two header lines, or one after a forwarding separator) and its value must read as a name list.
- Linear in the text: a cheap trigger search decides whether anything else runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Routed:
    start: int
    end: int
    name: str
    order: str  # "first-last", "last-first" ("Roe, Jane") or "single"
    address: str | None = None


_Q = r"(?:[ \t]*>)*[ \t]*"  # quote markers before a line
# git's own lines, pasted into mail (`git log`, format-patch, trailers): "Author: Name <addr>", "Signed-off-by: ..."
_GIT_KEYS = ("author", "committer", "signed-off-by", "reviewed-by", "acked-by", "tested-by", "reported-by",
             "suggested-by", "co-authored-by", "co-developed-by", "reported-and-tested-by")
_KEYS = (r"from|to|cc|bcc|sent|date|subject|reply-to|sent by|importance|von|an|kopie|gesendet|betreff|datum|"
         r"de|para|a|\u00e0|envoy\u00e9|objet|asunto|enviado|fecha|assunto|enviada|data|" + "|".join(_GIT_KEYS))
_NAME_KEYS = frozenset(("from", "to", "cc", "bcc", "sent by", "reply-to", "von", "an", "kopie", "de", "para", "a",
                        "\u00e0", *_GIT_KEYS))
_HEADER = re.compile(rf"(?im)^({_Q})({_KEYS})[ \t]*:[ \t]*(.*)$")
_SEPARATOR = re.compile(r"(?im)^[ \t>]*(?:-{2,}[ \t]*(?:original message|forwarded message|urspr\u00fcngliche "
                       r"nachricht|message d'origine|mensaje original|mensagem original)[ \t]*-{2,}|begin forwarded "
                       r"message:|-{3,}[ \t]*forwarded by .*|_{8,})[ \t]*$")
_TRIGGER = re.compile(r"(?im)^[ \t>]*(?:from|to|cc|von|an|de|para|" + "|".join(_GIT_KEYS) +
                      r")[ \t]*:|wrote:?[ \t]*$|writes:[ \t]*$|"
                      r"a \u00e9crit|schrieb|^[ \t>]*quoting |^[ \t>]*\* .*\]:[ \t]*$|"
                      r"[A-Za-z.]/[A-Z][\w&-]*[/@]|[a-z]@[A-Z][A-Z0-9-]*\b(?!\.)| on \d")

# A person's name as mail clients write it: capitalized words, initials, particles, hyphens and apostrophes;
# lower case too in attribution lines (people write their own name so).
_WORD = r"(?:[A-Z\u00c0-\u00de][\w'\u2019-]*\.?|(?:van|von|der|den|de|da|del|della|di|du|la|le|bin|al)\b)"
_CAPNAME = rf"{_WORD}(?:[ \t]+{_WORD}){{0,4}}"
_ANYNAME = r"[^\W\d_][\w'\u2019.-]*(?:[ \t]+[^\W\d_][\w'\u2019.-]*){0,4}"
_ADDR = r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,24}"

_ON_WROTE = re.compile(rf"(?im)^{_Q}(?:on|am|le|el|em|il|op)\b(.{{3,160}}?)(?:wrote|schrieb|a \u00e9crit|escribi\u00f3|"
                       r"escreveu|ha scritto|schreef)[ \t]*:?[ \t]*$")
_OBF = r"[A-Za-z0-9._%+-]{1,64} at [A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,6}"  # pipermail's "user at host.org"
_WROTE = re.compile(rf"(?im)^{_Q}(\"?)({_ANYNAME})\1[ \t]*(?:<({_ADDR}|{_OBF})>|\(({_ADDR}|{_OBF})\)|"
                    rf"\[mailto:({_ADDR})\])?[ \t]+(?:wrote|writes|said|a \u00e9crit|schrieb)[ \t]*:[ \t]*$")
_SCHRIEB = re.compile(rf"(?im)^{_Q}am\b[^\n]{{3,100}}?\bschrieb[ \t]+(\"?)({_ANYNAME})\1[ \t]*(?:<({_ADDR})>)?[ \t]*:"
                      r"[ \t]*$")
_MUTT = re.compile(rf"(?im)^{_Q}\*[ \t]+({_ANYNAME})[ \t]*(?:<({_ADDR})>)?[ \t]*\[[^\]\n]{{4,40}}\][ \t]*:[ \t]*$")
_QUOTING = re.compile(rf"(?im)^{_Q}quoting[ \t]+({_ANYNAME})[ \t]*(?:\(({_ADDR})\)|<({_ADDR})>)?[ \t]*:[ \t]*$")
_LOTUS_ON = re.compile(rf"(?m)^{_Q}(\"?)({_CAPNAME})\1[ \t]*<({_ADDR})>[ \t]+on[ \t]+\d")
# Two or more name words: "Jane Roe/HOU/XYZ@XYZ", "Jane Roe/XYZ", "Jane Roe@XYZ" (one word is too often a path)
_NAME2 = rf"{_WORD}(?:[ \t]+{_WORD}){{1,4}}"
# Notes' organisation units are short codes ("/HOU/XYZ"); without "@Domain" two of them are needed, so a path
# ("Docs/API/Reference") is not an address.
_LOTUS_ADDR = re.compile(rf"(?<![\w./@-])({_NAME2})(?=[ \t]*(?:/[A-Z][\w&-]*)+@[A-Z][\w-]*(?![\w.@-]|\.\w)|"
                         r"[ \t]*(?:/[A-Z][A-Z0-9&]{1,9}){2,}(?![\w/.@-]))")
_LOTUS_AT = re.compile(rf"(?<![\w./@-])({_NAME2})[ \t]*@[ \t]*[A-Z][A-Za-z0-9-]*(?![\w.@-]|\.\w)")
# Notes wraps a long recipient list anywhere, also between the words of a name ("Douglas \nCondon/HOU/ECT@ECT"):
# a name that starts a list item (after "To:", a comma or a semicolon, also one that ended the line before) may
# run over one line break.
_NAME2W = rf"{_WORD}(?:[ \t]+{_WORD}){{0,3}}[ \t]*\n(?:[ \t]*>)*[ \t]*{_WORD}(?:[ \t]+{_WORD}){{0,3}}"
_LOTUS_WRAPPED = re.compile(rf"(?:(?<=[,;:][ \t])|(?<=[,;][ \t]\n)|(?<=[,;]\n))({_NAME2W})(?=(?:/[A-Z][\w&-]*)+"
                            r"@[A-Z][\w-]*(?![\w.@-]|\.\w)|(?:/[A-Z][A-Z0-9&]{1,9}){2,}(?![\w/.@-]))", re.M)
_LOTUS_SENDER = re.compile(rf"(?m)^{_Q}({_NAME2})[ \t]*\n{_Q}\d{{1,2}}/\d{{1,2}}/\d{{2,4}}[ \t]+"
                           rf"\d{{1,2}}:\d\d(?::\d\d)?[ \t]*[AaPp][Mm][ \t]*\n{_Q}(?:[Tt][Oo]|[Cc][Cc])[ \t]*:")
# Words of the date part of an attribution line: the name is what comes after them.
_DATE_WORD = re.compile(r"(?i)\d|^(?:am|pm|a\.m\.|p\.m\.|at|um|\u00e0|a|las|utc|gmt|cet|cest|eet|eest|est|edt|cst|"
                        r"cdt|mst|mdt|pst|pdt|bst|ist|jst|msk|monday|tuesday|wednesday|thursday|friday|saturday|"
                        r"sunday|mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)\.?$")
_ITEM_ADDR = re.compile(rf"<[ \t]*({_ADDR}|{_OBF})[ \t]*>|\[(?:mailto|smtp):({_ADDR})\]|\(({_ADDR}|{_OBF})\)|"
                        rf"({_ADDR}|{_OBF})", re.I)
_JUNK_WORDS = frozenset("""all team everyone list users dev devel developers group undisclosed recipients
    recipient mailing the and or e-mail email business fax home mobile on behalf of via you he she i we they
    someone somebody anyone everybody who it this that""".split())
# Words that never sit inside a person's name: "Sebb on a different thread wrote:" is not a name.
_GLUE = frozenset("on a an the in of to for and or with at by from is was as if but not my your our".split())


def find(text: str) -> list[Routed]:
    """Every name in a routing or quoting position of `text` (see the module docstring)."""
    if not text or not _TRIGGER.search(text):
        return []
    out: list[Routed] = []
    low = text.lower()
    if any(w in low for w in ("wrote", "writes", "schrieb", "crit", "quoting", "]:", " on ", "scritto", "escrib",
                              "schreef", "escreveu")):
        _attributions(text, out)
    if ":" in text:
        _header_blocks(text, out)
    if "@" in text or "/" in text:
        _lotus(text, out)
    return _distinct(out)


def _distinct(found: list[Routed]) -> list[Routed]:
    found.sort(key=lambda r: (r.start, -(r.end - r.start)))
    out: list[Routed] = []
    end = -1
    for r in found:
        if r.start >= end:
            out.append(r)
            end = r.end
    return out


def _clean(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink [start, end) to the name: no quotes, blanks or trailing punctuation."""
    while start < end and text[start] in " \t\"'":
        start += 1
    while end > start and text[end - 1] in " \t\"',;:":
        end -= 1
    return start, end


def _add(out: list[Routed], text: str, start: int, end: int, address: str | None = None,
         order: str | None = None, strict: bool = False) -> None:
    """Keep text[start:end] as a routed name if it reads as one; `strict` (an item of a header list with no
    address): every word capitalized, an initial or a particle."""
    start, end = _clean(text, start, end)
    name = text[start:end]
    words = name.replace(",", " ").split()
    if strict and not all(re.fullmatch(_WORD, w.rstrip(",")) for w in words):
        return
    if not words or len(name) < 2 or len(words) > 5 or any(c.isdigit() or c in "<>()[]@=" for c in name):
        return
    junk = sum(w.casefold().strip(".") in _JUNK_WORDS for w in words)
    if junk * 2 >= len(words) or words[-1].casefold().strip(".") in _JUNK_WORDS \
            or any(w.casefold() in _GLUE for w in words) or re.search(r"\.[a-z]{2,}$", name):
        return
    if order is None:
        order = "last-first" if "," in name else ("single" if len(words) == 1 else "first-last")
    out.append(Routed(start, end, name, order, address))


# ------------------------------------------------------------------------------------------ attributions

def _attributions(text: str, out: list[Routed]) -> None:
    for m in _ON_WROTE.finditer(text):
        _on_wrote(text, m.start(1), m.end(1), out)
    # "On Thu, Jun 14, 2001 at 3:25 PM Jane Roe <" + next line "jane@x.example> wrote:" (a wrapped attribution)
    for m in re.finditer(rf"(?im)^{_Q}on\b([^\n]{{3,160}})\n{_Q}([^\n]{{0,120}}?)(?:wrote|schrieb|a \u00e9crit)"
                         r"[ \t]*:?[ \t]*$", text):
        joined_end = m.end(1)
        if not re.search(r"(?i)wrote|schrieb|a \u00e9crit", m.group(1)):
            _on_wrote(text, m.start(1), joined_end, out, tail=m.group(2))
    for m in _WROTE.finditer(text):
        address = m.group(3) or m.group(4) or m.group(5)
        _add(out, text, m.start(2), m.end(2), address.replace(" at ", "@") if address else None)
    for m in _SCHRIEB.finditer(text):
        _add(out, text, m.start(2), m.end(2), m.group(3))
    for m in _MUTT.finditer(text):
        _add(out, text, m.start(1), m.end(1), m.group(2))
    for m in _QUOTING.finditer(text):
        _add(out, text, m.start(1), m.end(1), m.group(2) or m.group(3))
    for m in _LOTUS_ON.finditer(text):
        _add(out, text, m.start(2), m.end(2), m.group(3))
    for m in _LOTUS_SENDER.finditer(text):
        _add(out, text, m.start(1), m.end(1))


def _on_wrote(text: str, start: int, end: int, out: list[Routed], tail: str = "") -> None:
    """The name in "On <date>[,] Name [<addr>]" (the part between "On" and "wrote"): the run of words at the
    end, back to a comma or a word of the date (a number, a weekday, AM/PM, a zone, "at")."""
    seg = text[start:end]
    found = re.search(rf"({_ADDR})", seg + tail)
    address = found.group(1) if found else None
    a = re.search(rf"[<(\[](?:mailto:)?(?:{_ADDR})?[>)\]]?[ \t]*$", seg)
    if a:
        seg = seg[:a.start()]
    seg = seg.rstrip(" \t")
    words = list(re.finditer(r"[^\s,]+", seg))
    name: list[re.Match] = []
    for w in reversed(words):
        if _DATE_WORD.search(w.group(0)) or (name and "," in seg[w.end():name[0].start()]):
            break
        name.insert(0, w)
    if not name or len(name) > 5 or (name and seg[name[-1].end():].strip(" \t") not in ("", ",")):
        return
    _add(out, text, start + name[0].start(), start + name[-1].end(), address)


# ------------------------------------------------------------------------------------------ header blocks

def _header_blocks(text: str, out: list[Routed]) -> None:
    lines = list(_HEADER.finditer(text))
    if not lines:
        return
    seps = [m.end() for m in _SEPARATOR.finditer(text)]
    for i, m in enumerate(lines):
        key = m.group(2).lower()
        if key not in _NAME_KEYS:
            continue
        near = [n for n in lines[max(0, i - 6):i + 7] if n is not m and abs(_line_no(text, n.start())
                                                                          - _line_no(text, m.start())) <= 8]
        after_sep = any(0 <= m.start() - s <= 3 for s in seps)
        # a git line names its person with the address ("Author: Name <addr>"): no block around it is needed
        git_line = key in _GIT_KEYS and re.search(rf"<{_ADDR}>", m.group(3))
        if not near and not after_sep and not git_line:
            continue
        start, end = m.start(3), m.end(3)
        # Lotus Notes and Outlook wrap long To/cc lists onto lines without a key
        if key in ("to", "cc", "bcc", "an", "kopie", "para", "a", "\u00e0"):
            end = _continuation(text, end)
        _name_list(text, start, end, out, key)


def _line_no(text: str, pos: int) -> int:
    return text.count("\n", 0, pos)


def _continuation(text: str, end: int) -> int:
    pos = end
    while pos < len(text):
        nl = text.find("\n", pos + 1)
        nxt = text[pos + 1: nl if nl >= 0 else len(text)]
        body = re.sub(rf"^{_Q}", "", nxt)
        if not body.strip() or _HEADER.match(nxt) or not re.search(r"[/@;,]", body) \
                or re.search(r"[.!?]$", body.strip()) or len(body) > 200:
            break
        pos = nl if nl >= 0 else len(text)
    return pos


def _name_list(text: str, start: int, end: int, out: list[Routed], key: str) -> None:
    value = text[start:end]
    if not value.strip():
        return
    bare = _ITEM_ADDR.sub(lambda m: " " * len(m.group(0)), value)
    if ";" not in value and bare.count(",") == 1 and "/" not in bare and "@" not in bare \
            and all(1 <= len(p.split()) <= 3 for p in bare.split(",")):
        _item(text, start, end, out, last_first=True)  # "From: Roe, Jane [mailto:...]" is one person
        return
    # "Roe, Jane; Doe, John": semicolons separate people, the comma is inside a name
    seps = ";" if ";" in value else ","
    pos = 0
    for part in _split(value, seps):
        s = start + value.index(part, pos)
        pos = s - start + len(part)
        _item(text, s, s + len(part), out)


def _split(value: str, seps: str) -> list[str]:
    """`value` cut at `seps` outside quotes, angle brackets and parentheses (the pieces keep their text)."""
    parts, depth, quote, cur = [], 0, False, []
    for c in value:
        if c == '"':
            quote = not quote
        elif c in "<([" and not quote:
            depth += 1
        elif c in ">)]" and not quote and depth:
            depth -= 1
        if c in seps and not quote and not depth:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


def _item(text: str, start: int, end: int, out: list[Routed], last_first: bool = False) -> None:
    item = text[start:end]
    address = None
    m = _ITEM_ADDR.search(item)
    name_end = end
    name_start = start
    if m:
        address = next(g for g in m.groups() if g).replace(" at ", "@")
        if m.group(4) and not item[:m.start()].strip(" \t\"'"):
            # "jane@x.example (Jane Roe)" or a bare address
            rest = item[m.end():]
            p = re.match(r"[ \t]*\(([^)]*)\)", rest)
            if p:
                s = start + m.end() + p.start(1)
                _add(out, text, s, s + len(p.group(1)), address)
            return
        name_end = start + m.start()
    piece = text[name_start:name_end]
    # Lotus Notes: "Name/OU/ORG@ORG", "Name@ORG"
    lotus = re.match(r"[ \t]*([^/@]+?)[ \t]*(?:/[\w&-]+)+(?:@[\w-]+)?[ \t]*$|[ \t]*([^/@]+?)[ \t]*@[ \t]*[A-Z][\w-]*"
                     r"[ \t]*$", piece)
    if lotus and not address:
        g = 1 if lotus.group(1) is not None else 2
        s = name_start + lotus.start(g)
        _add(out, text, s, s + len(lotus.group(g)))
        return
    # "(E-mail)", "(Business Fax)" and similar suffixes of Outlook's address book
    piece_clean = re.sub(r"\s*\((?:e-?mail|business fax|home|mobile)\)\s*$", "", piece, flags=re.I)
    _add(out, text, name_start, name_start + len(piece_clean), address, "last-first" if last_first else None,
         strict=address is None)


# ------------------------------------------------------------------------------------------ Lotus Notes

def _lotus(text: str, out: list[Routed]) -> None:
    if "/" in text:
        for m in _LOTUS_ADDR.finditer(text):
            _add(out, text, m.start(1), m.end(1))
        for m in _LOTUS_WRAPPED.finditer(text):
            if len(m.group(1).split()) <= 5:
                _add(out, text, m.start(1), m.end(1))
    if "@" in text:
        for m in _LOTUS_AT.finditer(text):
            _add(out, text, m.start(1), m.end(1))
