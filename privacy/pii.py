"""Pattern recognizers for PII and secrets that no identity graph knows; `find()` spans, `redact()` them.

Kinds and rules (one line each; the recognizer below holds the exact pattern):
- email: RFC-5322-ish `local@domain.tld` (patterns.EMAIL), plus obfuscations `user [at] host [dot] org` and
  `user at host dot org` (the unbracketed one only with a common TLD, so prose is not an address), and
  pipermail's `user at host.org` (a generic TLD or a country code, and a label of 3+ characters), and an
  address a quoting client wrapped after a dot of its domain (`jane.roe@mail.\n>>> com`).
  What `privacy.exceptions` excuses is no address: asset names (`icon@2x.png`) and Message-IDs.
- phone: `+CC ...`/`00CC ...` with separators (8-15 digits; a group may continue on the next line, after quote
  markers), compact `+E.164`, NANP `(415) 555-0134` / `415-555-0134` (one separator kind), national trunk
  `020 7946 0958` (starts with 0, 9-12 digits) and `(047) 3321-0660` (trunk code in parentheses).
  A number glued to word characters, dots or more digit groups (before or after) is not a phone, so
  dates, versions, IPs, SHAs, issue keys, UUIDs, timestamps, hex dumps and account numbers are left
  alone. Bare digit runs without + never count.
- postal_address: a numbered street line ending in a street-type word, then a city, a US state code and a
  ZIP (`123 Main St, Springfield, IL 62704`); or a UK street line, optional towns, then a postcode
  (`10 Downing Street, London SW1A 2AA`). A bare ZIP or postcode is not an address.
- ip: IPv4 dotted quads with every octet <= 255 that are not part of a longer dotted run and not preceded
  by a version word (v, version, ver, release, build, firmware, section, chapter); IPv6 accepted by
  `ipaddress` that has a decimal digit and either all 8 groups or `::` with a 4-digit first group or
  >= 3 groups (so `a[1::2]`, `dead::beef` and `12:30:45` are not IPs). Loopback, unspecified and
  broadcast addresses name no machine and are kept; a dotted quad that is a path segment (`/1.1.13.7/`) or
  the git version under a patch's `-- ` signature is a version.
- url_personal: a URL whose path names a person: a `/~name` segment; `/users|user|u|people|person|
  profile(s)|member(s)|author(s)|staff/<name>`; `/home/<name>` in file:// URLs; `linkedin.com/in|pub/...`;
  `medium.com/@name`; a one-segment profile path on github.com, gitlab.com, bitbucket.org, twitter.com,
  x.com, facebook.com, instagram.com, keybase.io (`github.com/<login>`, not `github.com/<org>/<repo>`).
  The span is the whole URL. Local home paths (`/home/<name>`, `/Users/<name>`, `C:\\Users\\<name>`)
  are reported as url_personal too, but only the name segment, so the rest of a stack trace survives.
  Generic names (root, runner, ubuntu, me, new, ...) and template slots (`{id}`, `:id`) are not people.
  An ISP's member pages (`members.<isp>/<user>/...`, also homepages., users., people., personal.) and gists
  (`gist.github.com/<user>/<id>`) name the user by their first segment. The login a forge's merge message
  names (`Merge pull request #12 from <login>/<branch>`) is url_personal too, the login alone.
- credit_card: 13-19 digits, no separators or one kind (space or dash) in 4-4-4-4(-3) / 4-6-5 / 4-6-4
  groups, a known issuer prefix for that length (Visa, Mastercard, Amex, Discover, JCB, Diners,
  UnionPay), Luhn-valid.
- iban: country code + 2 check digits + BBAN (optionally in groups of 4), exact length for the country,
  ISO 7064 mod-97 == 1.
- us_ssn: `AAA-GG-SSSS` with area not 000/666/9xx, group not 00, serial not 0000, and not the
  advertising numbers (078-05-1120, 219-09-9999).
- secret:<type>: private key blocks (BEGIN..END, or to the end of the base64 if END is missing);
  aws_access_key_id (AKIA/ASIA/ABIA/ACCA + 16); github_token (gh[pousr]_, github_pat_); gitlab_token;
  npm_token; slack_token (xox[abeoprs]-); slack_webhook / discord_webhook URLs; google_api_key (AIza);
  stripe_key (sk|rk_live|test_, pk_live_); openai_key; anthropic_key; jwt (3 base64url segments whose
  header decodes to a JSON object with "alg"); auth_header (`Authorization: Bearer|Basic|Token x`);
  url_password (`scheme://user:PASS@host`, also JSON-escaped `scheme:\\/\\/user:PASS@host`, and
  `?password=|token=|sig=...` query values);
  connection_string (the password of postgres/mysql/mongodb(+srv)/redis/amqp/mssql URLs, and of
  ADO-style `Server=..;Password=..;`); and assignments `name = value` / `name: value` / `"name": "value"`
  whose name has a word password|passwd|pwd|pass|passphrase (-> password), token (-> token),
  apikey|api_key (-> api_key), aws/access + secret with a 40-char value (-> aws_secret_key),
  secret|auth|credential(s)|access_key|private_key (-> generic), and whose last word is not a
  non-secret suffix (_name, _url, _id, _type, ...). Password values need >= 6 chars (bare ones a digit or
  symbol); other values >= 16 chars with a letter and a digit; Shannon entropy >= 2.0 / 3.0 bits per char;
  placeholders (changeme, xxx, <password>, ${VAR}, os.environ[...], a.b.c references, ***, our own
  [SECRET:...]) and bare values followed by `(` or `[` (code) never count.

Invariants:
- `find()` returns spans sorted by start, non-overlapping, with `text[start:end] == value`; offsets are
  str indices (code points), the same the caller slices with.
- Overlaps: a specific secret beats an assignment/URL secret, which beats a validated number (card,
  IBAN, SSN), which beats everything else; within a tier the longest span wins, then the earliest. A
  personal URL or address that loses to a span inside it keeps its uncovered remnants (same kind), so a
  token in a profile URL's query does not un-redact the profile.
- Every quantifier is bounded and every pattern asserts a start boundary inside the regex, so one match
  attempt costs a bounded amount and inside a run of token characters only the first position is tried:
  scanning is linear in the text, also for a 2 MB line. Rare anchors ('@', '://', 'ghp_') are found with
  str.find and the pattern is matched only there; case-insensitive keywords are searched in a lower-cased
  copy (when lower-casing keeps the length) because `re.IGNORECASE` alternations are ~7x slower.
- Placeholders are never found themselves (`[SECRET:PASSWORD]` is a placeholder value). A second redact
  pass finds more only where a replaced neighbour had supplied the context that vetoed a match (an IP
  glued to `.221B Baker Street` is a dotted run, not an IP, until the address becomes `[POSTAL_ADDRESS]`).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import NamedTuple

from privacy.exceptions import email_excused
from privacy.patterns import EMAIL


class Span(NamedTuple):
    start: int
    end: int
    kind: str
    value: str


# Overlap tiers (higher wins).
_SPECIFIC, _ASSIGNED, _NUMBER, _OTHER = 4, 3, 2, 1
_Cand = tuple[int, int, str, int]  # start, end, kind, tier


class _Text:
    """One input with the lazily computed views several recognizers share."""

    __slots__ = ("_low", "s")

    def __init__(self, s: str):
        self.s = s
        self._low: str | None = None

    @property
    def low(self) -> str:
        """ASCII-case-folded copy with the same offsets (falls back to the text itself if lower() would
        change the length; the keyword recognizers then only see lower-case spellings)."""
        if self._low is None:
            low = self.s.lower()
            self._low = low if len(low) == len(self.s) else self.s
        return self._low


def _anchored(s: str, hay: str, needle: str, back: re.Pattern | None, rx: re.Pattern,
              lo: int = 64) -> Iterator[re.Match]:
    """Matches of `rx` that start at or just before each occurrence of `needle` in `hay`.

    Why: str.find scans for a rare literal at memchr speed, while a regex whose first character is a
    common class ([A-Za-z]) is attempted at every word. `back` (a pattern ending in \\Z) gives how far
    before the needle the match may start; without it the match starts at the needle.
    """
    pos, i = 0, hay.find(needle)
    while i != -1:
        start = i
        if back is not None:
            b = back.search(s, max(pos, i - lo), i)
            start = b.start() if b else -1
        m = rx.match(s, start) if start >= 0 else None
        if m and m.end() > i:
            yield m
            pos = m.end()
            i = hay.find(needle, max(pos, i + 1))
        else:
            i = hay.find(needle, i + 1)


def _windows(hay: str, needles: tuple[str, ...], back: int, fwd: int) -> Iterator[tuple[int, int]]:
    """Merged [lo, hi) ranges around every occurrence of any needle: where a pattern that must contain a
    needle, at most `back` chars after its start and `fwd` chars before its end, can match. Scanning only
    these ranges visits each character at most once however dense the needles are."""
    hits = sorted(i for nd in needles for i in _occurrences(hay, nd))
    lo = hi = -1
    for i in hits:
        if i - back > hi:
            if hi > lo:
                yield lo, hi
            lo = max(0, i - back)
        hi = min(len(hay), i + fwd)
    if hi > lo:
        yield lo, hi


def _occurrences(hay: str, needle: str) -> Iterator[int]:
    i = hay.find(needle)
    while i != -1:
        yield i
        i = hay.find(needle, i + 1)


def _entropy(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


# ---------------------------------------------------------------------------------------------- email

_EMAIL_BACK = re.compile(r"[A-Za-z0-9._%+-]{1,64}\Z")
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s/?#@:]{0,128}:\Z")
_EMAIL_WRAPPED = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9-]{1,63}"
                            r"(?:\.[A-Za-z0-9-]{1,63}){0,4}\.\n(?:[ \t]*>)*[ \t]*[A-Za-z]{2,24}(?![\w-])")
_EMAIL_OBF = re.compile(
    r"[A-Za-z0-9](?<![\w.+-][A-Za-z0-9])[A-Za-z0-9._%+-]{0,63}(\s?[\[({]at[\])}]\s?| at )"
    r"[A-Za-z0-9-]{1,63}(?:(?:\s?[\[({]dot[\])}]\s?| dot |\.)[A-Za-z0-9-]{1,63}){1,4}(?![\w-])", re.I)


# Prose says "look at this dot later": the unbracketed spelling needs a TLD people actually spell out.
_SPOKEN_TLDS = frozenset("com org net edu gov io co uk de fr nl ca au us info biz me dev ai".split())
# Mailman's pipermail archives write "perry at stsci.edu": " at " and a dotted host whose TLD is a generic one
# or a country code, with a label of three or more characters before it ("look at it.so" is prose).
_PIPERMAIL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._%+-]{0,63} at ((?:[A-Za-z0-9-]{1,63}\.){1,5}"
                        r"(?:com|org|net|edu|gov|mil|int|info|biz|io|[a-z]{2}))(?![\w-])(?!\.\w)")
_PIPERMAIL_BACK = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}\Z")


def _emails(t: _Text) -> Iterator[_Cand]:
    s = t.s
    if "@" in s:
        for m in _anchored(s, s, "@", _EMAIL_BACK, EMAIL):
            if _USERINFO.search(s, max(0, m.start() - 256), m.start()):
                continue   # "scheme://user:<password>@host": a URL's password and host, no address
            if not email_excused(s, m.start(), m.end()):  # "Default@2x.png", "<20010614.123@host>"
                yield m.start(), m.end(), "email", _OTHER
        if ".\n" in s:  # an address a quoting client wrapped after a dot: "jane.roe@mail.\n>>> com>"
            for m in _anchored(s, s, "@", _EMAIL_BACK, _EMAIL_WRAPPED):
                yield m.start(), m.end(), "email", _OTHER
    if " at " in s:
        for m in _anchored(s, s, " at ", _PIPERMAIL_BACK, _PIPERMAIL, 64):
            if any(len(label) >= 3 for label in m.group(1).split(".")[:-1]):
                yield m.start(), m.end(), "email", _OTHER
    for lo, hi in _windows(t.low, ("[at]", "(at)", "{at}", " dot ", "[dot]", "(dot)"), 400, 400):
        for m in _EMAIL_OBF.finditer(s, lo, hi):
            v = m.group(0).lower()
            tld = re.split(r"\s?[\[({]dot[\])}]\s?| dot |\.", v)[-1]
            bracketed = m.group(1).strip() != "at"
            if tld.isalpha() and 2 <= len(tld) <= 24 and (bracketed or " dot " in v and tld in _SPOKEN_TLDS):
                yield m.start(), m.end(), "email", _OTHER


# ---------------------------------------------------------------------------------------------- phone

# Split by leading character: CPython's regex engine only skips ahead in C when every alternative starts
# with a literal or a character class, so the branches live inside one leading character each.
# Groups of an international number; the last may be a line of its own (a signature wrapped by a quoting client).
_GROUPS = (r"(?:[ .-]?\(\d{1,4}\))? [ .-]?\d{1,5} (?:[ .-]\d{2,8} | \n(?:[ \t]*>)*[ \t]*\d{2,8}(?=[ \t]*(?:\r?\n|\Z)) )"
           r"{1,5}")
_PHONE_END = r"(?![\w\-/]|[.:,]\d|[ .-]\d)"
_PHONE_PLUS = re.compile(rf"""\+(?<![\w+]\+)
    (?: (?P<intl> (?=[\d().\ \n>-]{{8}}) [1-9]\d{{0,2}} {_GROUPS} ) | [1-9]\d{{7,14}} ) {_PHONE_END}""", re.X)
_PHONE_PAREN = re.compile(rf"""\((?<![\w(]\()(?<!\d[ .-]\() (?=[\d).\ -]{{12}})
    (?: [2-9]\d\d\) [ .-]? [2-9]\d\d [ .-] \d{{4}}                # (415) 555-0134
      | 0\d{{1,4}}\) [ .-]? [1-9]\d{{2,4}} [ .-] \d{{3,4}} )        # (047) 3321-0660: a trunk code in parentheses
    {_PHONE_END}""", re.X)
_PHONE_DIGIT = re.compile(rf"""\d(?<![\w.+-]\d)(?<!\d[ .-]\d) (?=[\d().\ -]{{8}})
    (?: (?<=0) (?P<intl> 0[1-9]\d{{0,2}} {_GROUPS} )                              # 00 CC ...
      | (?<=1) (?P<s1>[-. ]) [2-9]\d\d (?P=s1) [2-9]\d\d (?P=s1) \d{{4}}           # 1-800-555-0199
      | (?<=[2-9]) \d\d (?P<s2>[-. ]) [2-9]\d\d (?P=s2) \d{{4}}                     # 415-555-0134
      | (?<=0) (?P<trunk> [1-9]\d{{0,3}} (?P<s3>[ -]) \d{{2,8}} (?:(?P=s3)\d{{2,4}}){{0,3}} ) )  # 020 7946 0958
    {_PHONE_END}""", re.X)
# Trunk-form look-alikes: dd-mm-yyyy dates and SSN-shaped AAA-GG-SSSS.
_DATE_LIKE = re.compile(r"0\d[-./ ]\d\d[-./ ](?:19|20)\d\d|\d{3}-\d\d-\d{4}\Z")


def _phones(t: _Text) -> Iterator[_Cand]:
    s = t.s
    for rx in (_PHONE_PLUS, _PHONE_PAREN, _PHONE_DIGIT) if "+" in s or "(" in s else (_PHONE_DIGIT,):
        for m in rx.finditer(s):
            v = m.group(0)
            digits = sum(c.isdigit() for c in v)
            if m.groupdict().get("intl"):
                ok = 8 <= digits - (2 if v.startswith("00") else 0) <= 15
            elif m.groupdict().get("trunk"):
                ok = 9 <= digits <= 12 and not _DATE_LIKE.match(v)
            else:
                ok = True
            if ok:
                yield m.start(), m.end(), "phone", _OTHER


# ------------------------------------------------------------------------------------------------- ip

_IPV4 = re.compile(r"(?<![\w.])\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?!\.?\w)")
# Literal-led hints (fast to scan for); the address is then matched from the start of its token.
_V4_HINT = re.compile(r"\.\d{1,3}\.\d{1,3}\.\d")
_V6_HINT = re.compile(r":[0-9A-Fa-f]{0,4}:")
_HEX = frozenset("0123456789abcdefABCDEF")
_VERSION_WORD = re.compile(r"(?i)(?:\bv|\bversion|\bver|\brelease|\bbuild|\bfirmware|\bsection|§|\bchapter)"
                           r"\.?\s*[:=#]?\s*\Z")
_H = r"[0-9A-Fa-f]{1,4}"
_IPV6 = re.compile(rf"""(?<![\w:.])
    (?: {_H} (?: (?::{_H}){{7}} | (?::{_H}){{0,6}}::(?:{_H}(?::{_H}){{0,5}})? )
      | ::(?:{_H}(?::{_H}){{0,6}})? )
    (?:\.\d{{1,3}}){{0,3}} (?:%[\w.-]{{1,20}})? (?![\w:]|\.\d)
""", re.X)


def _ips(t: _Text) -> Iterator[_Cand]:
    s = t.s
    pos = 0
    for h in _V4_HINT.finditer(s):
        start = h.start()
        while start > h.start() - 3 and start > 0 and s[start - 1].isdigit():
            start -= 1
        m = _IPV4.match(s, start) if start >= pos and start < h.start() else None
        if m:
            pos = m.end()
            v = m.group(0)
            octets = [int(o) for o in v.split(".")]
            if max(octets) > 255 or octets[0] == 127 or v in ("0.0.0.0", "255.255.255.255"):
                continue
            if _VERSION_WORD.search(s, max(0, m.start() - 16), m.start()):
                continue
            if s[m.start() - 1:m.start()] == "/" and s[m.end():m.end() + 1] == "/" \
                    and s[max(0, m.start() - 3):m.start()] != "://":
                continue  # a path segment ("org/foo/1.1.13.7/foo.pom"): a version, not a host
            if s[max(0, m.start() - 4):m.start()] in ("-- \n", "--\n") or s[max(0, m.start() - 3):m.start()] == "--\n":
                continue  # the git version under a format-patch signature ("-- \n1.6.4.2")
            yield m.start(), m.end(), "ip", _OTHER
    pos = 0
    for h in _V6_HINT.finditer(s):
        start = h.start()
        while start > h.start() - 4 and start > 0 and s[start - 1] in _HEX:
            start -= 1
        m = _IPV6.match(s, start) if start >= pos else None
        if m:
            pos = m.end()
            v = m.group(0)
            try:
                addr = ipaddress.IPv6Address(v.split("%")[0])
            except ValueError:
                continue
            groups = [g for g in v.split("%")[0].split(":") if g]
            if not any(c.isdigit() for c in v) or addr.is_loopback or addr.is_unspecified:
                continue
            if "::" in v and len(groups) < 3 and (not groups or len(groups[0]) < 4):
                continue
            yield m.start(), m.end(), "ip", _OTHER


# ------------------------------------------------------------------------------- validated numbers

_CARD = re.compile(r"""
    [1-9](?<![\w.+-][1-9])(?=[\d\ -]{12})\d{3}
    (?: (?P<s>[ -])\d{4}(?P=s)\d{4}(?P=s)\d{4}(?:(?P=s)\d{3})?   # 4-4-4-4(-3)
      | (?P<t>[ -])\d{6}(?P=t)\d{4,5}                            # 4-6-5 (Amex), 4-6-4 (Diners)
      | \d{9,15} )                                               # no separators
    (?![\w-]|[.,]\d)
""", re.X)


def _luhn(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_brand_ok(d: str) -> bool:
    n, p2, p4 = len(d), int(d[:2]), int(d[:4])
    if d[0] == "4":
        return n in (13, 16, 19)
    if 51 <= p2 <= 55 or 2221 <= p4 <= 2720:
        return n == 16
    if p2 in (34, 37):
        return n == 15
    if p2 in (36, 38, 30):
        return 14 <= n <= 19
    if p4 == 6011 or p2 == 65 or 644 <= int(d[:3]) <= 649 or p2 == 62 or 3528 <= p4 <= 3589:
        return 16 <= n <= 19
    return False


# Anchored on the first dash (a literal prefix the regex engine finds fast); the area digits are looked behind.
_SSN = re.compile(r"-(?<=\d\d\d-)(?<![\w.+-]\d\d\d-)\d\d-\d{4}(?![\w-]|[.,]\d)")
_IBAN = re.compile(r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]\d\d(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])")
# ISO 13616 registry lengths.
_IBAN_LEN = dict(
    (c, int(n)) for c, n in re.findall(r"([A-Z]{2})(\d\d)", """
    AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BI27 BR29 BY28 CH21 CR22 CY28 CZ24 DE22 DJ27 DK18 DO28
    EE20 EG29 ES24 FI18 FK18 FO18 FR27 GB22 GE22 GI23 GL18 GR27 GT28 HR21 HU28 IE22 IL23 IQ23 IS26 IT27
    JO30 KW30 KZ20 LB28 LC32 LI21 LT20 LU20 LV21 LY25 MC27 MD24 ME22 MK19 MN20 MR27 MT31 MU30 NI28 NL18
    NO15 OM23 PK24 PL28 PS29 PT25 QA29 RO24 RS22 RU33 SA24 SC31 SD18 SE24 SI19 SK24 SM27 SO23 ST25 SV28
    TL23 TN24 TR26 UA29 VA22 VG24 XK20 YE30"""))


def _numbers(t: _Text) -> Iterator[_Cand]:
    s = t.s
    for m in _CARD.finditer(s):
        d = m.group(0).replace(" ", "").replace("-", "")
        if 13 <= len(d) <= 19 and _card_brand_ok(d) and _luhn(d):
            yield m.start(), m.end(), "credit_card", _NUMBER
    if "-" in s:
        for m in _SSN.finditer(s):
            v = s[m.start() - 3:m.end()]
            a, g, n = v.split("-")
            if a not in ("000", "666") and a[0] != "9" and g != "00" and n != "0000" \
                    and v not in ("078-05-1120", "219-09-9999"):
                yield m.start() - 3, m.end(), "us_ssn", _NUMBER
    for m in _IBAN.finditer(s):
        v = m.group(0)
        want = _IBAN_LEN.get(v[:2])
        compact = v.replace(" ", "")
        if want is None or len(compact) < want:
            continue
        # A greedy match may run into a following group: cut at the country's length, on a group edge.
        end, count = m.start(), 0
        while count < want:
            count += v[end - m.start()] != " "
            end += 1
        if end < m.end() and s[end] != " ":
            continue
        iban = compact[:want]
        if int("".join(str(int(c, 36)) for c in iban[4:] + iban[:4])) % 97 == 1:
            yield m.start(), end, "iban", _NUMBER


# ------------------------------------------------------------------------------------ postal address

_STATES = (r"(?:A[LKZRSP]|C[AOT]|D[EC]|F[LM]|G[AU]|HI|I[DLNA]|K[SY]|LA|M[EDAINSOTP]|N[EVHJMYCD]|O[HKR]|P[AR]|RI|"
           r"S[CD]|T[NX]|UT|V[TAI]|W[AVIY])")
_US_ANCHOR = re.compile(_STATES + r"(?<![A-Za-z0-9]..),?[ \t]+\d{5}(?:-\d{4})?(?![\w-])")
_UK_ANCHOR = re.compile(r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]?\d[A-Z\d]? \d[ABD-HJLNP-UW-Z]{2}(?![A-Za-z0-9])")
_US_TYPES = ("Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Drive|Dr|Lane|Ln|Way|Court|Ct|Place|Pl|Terrace|Ter|"
             "Parkway|Pkwy|Highway|Hwy|Circle|Cir|Square|Sq|Trail|Trl|Loop|Alley|Plaza|Pike|Path")
_UK_TYPES = ("Street|St|Road|Rd|Lane|Avenue|Ave|Close|Crescent|Drive|Gardens|Place|Square|Terrace|Way|Row|Hill|"
             "Grove|Mews|Court|Walk|Green|Park|Parade|View|Rise|Wharf|Yard")
# A street-type word or PO box somewhere before the anchor: a cheap test before the anchored search.
_STREET_HINT = re.compile(rf"(?:{_US_TYPES}|{_UK_TYPES}|Box)\b")
_WORD = r"(?:[A-Z][A-Za-z'.-]{0,20}|\d{1,3}(?:st|nd|rd|th)) "
_SEP = r"[ \t]*(?:,[ \t]*|\r?\n[ \t]*)"
_TOWN = r"[A-Z][A-Za-z'.-]{1,24}(?: [A-Z][A-Za-z'.-]{1,24}){0,3}"
_US_STREET = (r"(?:\d{1,6}(?:-\d{1,4})?[A-Za-z]? (?:(?:[NSEW]|N[EW]|S[EW])\.? |(?:North|South|East|West) )?"
              rf"{_WORD}{{1,4}}(?:{_US_TYPES})\.?(?: (?:N|S|E|W|NE|NW|SE|SW)\.?)?"
              r"(?:,? (?:Apt|Apartment|Suite|Ste|Unit|Fl|Floor|Rm|Room|#)\.? ?#?[A-Za-z0-9-]{1,6})?"
              r"|P\.? ?O\.? Box \d{1,6})")
_US_BEFORE = re.compile(rf"(?<![\w-]){_US_STREET}{_SEP}{_TOWN},?[ \t]*\Z")
_UK_STREET = (r"(?:(?:Flat|Apartment|Unit) \d{1,4}[A-Za-z]?,? )?\d{1,5}[A-Za-z]?,? "
              rf"{_WORD}{{1,3}}(?:{_UK_TYPES})\.?")
_UK_BEFORE = re.compile(rf"(?<![\w-]){_UK_STREET}(?:{_SEP}{_TOWN}){{0,2}}(?:{_SEP}|[ \t]+)\Z")


def _addresses(t: _Text) -> Iterator[_Cand]:
    s = t.s
    for anchor, before in ((_US_ANCHOR, _US_BEFORE), (_UK_ANCHOR, _UK_BEFORE)):
        for m in anchor.finditer(s):
            lo = max(0, m.start() - 200)
            b = _STREET_HINT.search(s, lo, m.start()) and before.search(s, lo, m.start())
            if b:
                yield b.start(), m.end(), "postal_address", _OTHER


# ----------------------------------------------------------------------------------------------- URLs

_URL_BACK = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}\Z")
# A URL ends where another scheme:// starts ("...,redis://:pw@h" glued to a previous URL is its own URL).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}://(?:(?![A-Za-z][A-Za-z0-9+.-]{0,15}://)[^\s<>\"'`{}|\\^\[\]]){1,4096}")
_PROFILE_HOSTS = ("github.com", "gitlab.com", "bitbucket.org", "twitter.com", "x.com", "facebook.com",
                  "instagram.com", "keybase.io", "linkedin.com", "medium.com")
_BARE_URL = re.compile(r"(?:www\.|[a-z]{2}\.)?(?:" + "|".join(re.escape(h) for h in _PROFILE_HOSTS) +
                       r")/[^\s<>\"'`{}|\\^\[\]]{1,512}")
_BARE_BACK = re.compile(r"(?<![\w./@-])(?:www\.|[a-z]{2}\.)?\Z")
_MEMBER_HOSTS = frozenset("members homepages homepage users people personal".split())
_USER_FIRST_HOSTS = frozenset("gist.github.com gist.githubusercontent.com".split())  # <user>/<id>
_PROFILE_DIRS = frozenset("users user u people person profile profiles member members author authors staff".split())
_NOT_A_PERSON = frozenset("""
    me self current new edit search list all index login logout signin signup register settings account
    profile profiles home admin administrator root user users public shared default guest anonymous api docs
    help about features pricing orgs organizations settings topics marketplace explore notifications sponsors
    enterprise security site contact blog apps trending collections events issues pulls codespaces login
    join team teams customer customers stories readme features solutions resources partners careers jobs
    privacy terms legal status support download downloads feed in pub company school groups hashtag search
    intent share home i ubuntu runner runneradmin ec2-user vagrant git build builder jenkins circleci travis
    app node www-data docker postgres nobody vscode codespace gitpod username yourname your_username you
    all users default user administrator tmp agent
""".split())
_FILEISH = re.compile(r"(?i)\.(?:html?|php|aspx?|jsp|json|xml|js|css|png|jpe?g|gif|svg|txt|md|pdf|rss|atom)$")
_NAMEISH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_QUERY_SECRET = re.compile(
    r"(?i)[?&;](password|passwd|pwd|pass|secret|client_secret|token|access_token|refresh_token|id_token|"
    r"api_key|apikey|auth|sig|signature|x-amz-signature|x-amz-security-token|x-goog-signature)=([^&#\s]{8,})")
_DB_SCHEMES = frozenset("""postgres postgresql mysql mariadb mongodb mongodb+srv redis rediss amqp amqps mssql
    sqlserver jdbc:postgresql jdbc:mysql oracle cockroachdb clickhouse""".split())


def _is_person(seg: str) -> bool:
    return bool(_NAMEISH.fullmatch(seg)) and seg.lower() not in _NOT_A_PERSON and not _FILEISH.search(seg)


def _personal(scheme: str, host: str, segs: list[str]) -> bool:
    if any(g.startswith("~") and _is_person(g[1:]) for g in segs):
        return True
    dirs = _PROFILE_DIRS | ({"home"} if scheme == "file" else set())
    if any(a.lower() in dirs and _is_person(b) for a, b in zip(segs, segs[1:])):
        return True
    host = host.removeprefix("www.")
    if (host.split(".", 1)[0] in _MEMBER_HOSTS and len(host.split(".")) >= 3 or host in _USER_FIRST_HOSTS) \
            and segs and _is_person(segs[0]):
        return True  # an ISP's member pages (members.home.net/<user>/), gists (gist.github.com/<user>/<id>)
    if host.endswith("linkedin.com"):
        return len(segs) >= 2 and segs[0] in ("in", "pub") and _is_person(segs[1])
    if host == "medium.com":
        return bool(segs) and segs[0].startswith("@") and _is_person(segs[0][1:])
    return host in _PROFILE_HOSTS and len(segs) == 1 and _is_person(segs[0])


def person_in_url(url: str) -> tuple[int, int] | None:
    """[start, end) of the segment of a personal URL (a `url_personal` span) that names the person ("olamy" in
    http://twitter.com/olamy, "jsw" in /~jsw/), so a caller can replace it and keep the rest; None when the URL
    names nobody."""
    m = re.match(r"(?:([A-Za-z][A-Za-z0-9+.-]{0,15})://)?([^/?#]*)", url)
    scheme, host = (m.group(1) or "").lower(), m.group(2).rsplit("@", 1)[-1].split(":")[0].lower()
    pos = m.end()
    path = re.split(r"[?#]", url[pos:], maxsplit=1)[0]
    segs, offs, i = [], [], pos
    for g in path.split("/"):
        if g:
            segs.append(g)
            offs.append(i)
        i += len(g) + 1
    for g, o in zip(segs, offs):
        if g.startswith("~") and _is_person(g[1:]):
            return o + 1, o + len(g)
    dirs = _PROFILE_DIRS | ({"home"} if scheme == "file" else set())
    for (a, b), o in zip(zip(segs, segs[1:]), offs[1:]):
        if a.lower() in dirs and _is_person(b):
            return o, o + len(b)
    host = host.removeprefix("www.")
    if (host.split(".", 1)[0] in _MEMBER_HOSTS and len(host.split(".")) >= 3 or host in _USER_FIRST_HOSTS) \
            and segs and _is_person(segs[0]):
        return offs[0], offs[0] + len(segs[0])
    if host.endswith("linkedin.com") and len(segs) >= 2 and segs[0] in ("in", "pub") and _is_person(segs[1]):
        return offs[1], offs[1] + len(segs[1])
    if host == "medium.com" and segs and segs[0].startswith("@") and _is_person(segs[0][1:]):
        return offs[0] + 1, offs[0] + len(segs[0])
    if host in _PROFILE_HOSTS and len(segs) == 1 and _is_person(segs[0]):
        return offs[0], offs[0] + len(segs[0])
    return None


def _trim_url(url: str) -> str:
    while url and url[-1] in ".,;:!?'\"*)":
        if url[-1] == ")" and url.count("(") >= url.count(")"):
            break
        url = url[:-1]
    return url


def _url(s: str, start: int, end: int, scheme: str) -> Iterator[_Cand]:
    url = s[start:end]
    rest = url[len(scheme) + 3:] if scheme else url
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, path_q = rest[:cut], rest[cut:]
    base = start + (len(scheme) + 3 if scheme else 0)
    host = authority.rsplit("@", 1)[-1].split(":")[0].lower()
    if "@" in authority:
        userinfo = authority.rsplit("@", 1)[0]
        if ":" in userinfo:
            pw_at = base + userinfo.index(":") + 1
            pw = s[pw_at:base + len(userinfo)]
            if pw and not _placeholder(pw):
                kind = "connection_string" if scheme.lower() in _DB_SCHEMES else "url_password"
                yield pw_at, base + len(userinfo), f"secret:{kind}", _ASSIGNED
    for q in _QUERY_SECRET.finditer(path_q):
        if not _placeholder(q.group(2)):
            kind = "url_password" if q.group(1).lower().startswith("pass") or q.group(1) == "pwd" else "url_token"
            yield base + cut + q.start(2), base + cut + q.end(2), f"secret:{kind}", _ASSIGNED
    path = re.split(r"[?#]", path_q, maxsplit=1)[0]
    if host == "hooks.slack.com" and path.startswith(("/services/", "/workflows/", "/triggers/")):
        yield start, end, "secret:slack_webhook", _SPECIFIC
    elif host.endswith(("discord.com", "discordapp.com")) and path.startswith("/api/webhooks/"):
        yield start, end, "secret:discord_webhook", _SPECIFIC
    elif _personal(scheme.lower(), host, [g for g in path.split("/") if g]):
        yield start, end, "url_personal", _OTHER


_NAME_END = r"([A-Za-z0-9][A-Za-z0-9._-]{0,63})(?=[/\\]|$|[\s\"'`:;,)\]])"
_HOME = re.compile(r"/(?<![\w.~:-]/)(?:home|Users)/" + _NAME_END)
_MERGE_PR = re.compile(r"Merge pull request #\d{1,9} from ([A-Za-z0-9][A-Za-z0-9-]{0,38})/")
_WIN_HOME = re.compile(r"(?i:[a-z]:(?:\\\\|\\)(?:users|documents and settings)(?:\\\\|\\))" + _NAME_END)


# A URL inside a JSON string escapes its slashes ("http:\/\/user:pass@host\/"): only its password is looked for.
_ESCAPED_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}:\\/\\/[^\s:@/\\\"'<>]{0,256}:([^\s@/\\\"'<>]{1,256})@")


def _urls(t: _Text) -> Iterator[_Cand]:
    s = t.s
    if "://" in s:
        for m in _anchored(s, s, "://", _URL_BACK, _URL, 16):
            url = _trim_url(m.group(0))
            yield from _url(s, m.start(), m.start() + len(url), url[:url.index("://")])
    if ":\\/\\/" in s:
        for m in _anchored(s, s, ":\\/\\/", _URL_BACK, _ESCAPED_USERINFO, 16):
            if not _placeholder(m.group(1)):
                yield m.start(1), m.end(1), "secret:url_password", _ASSIGNED
    low = t.low
    for host in _PROFILE_HOSTS:
        if host + "/" in low:
            for m in _anchored(s, low, host + "/", _BARE_BACK, _BARE_URL, 8):
                yield from _url(s, m.start(), m.start() + len(_trim_url(m.group(0))), "")
    if "Merge pull request #" in s:
        for m in _MERGE_PR.finditer(s):
            if _is_person(m.group(1)):
                yield m.start(1), m.end(1), "url_personal", _OTHER
    for rx, present in ((_HOME, "/home/" in s or "/Users/" in s), (_WIN_HOME, "users\\" in low)):
        for m in rx.finditer(s) if present else ():
            if _is_person(m.group(1)):
                yield m.start(1), m.end(1), "url_personal", _OTHER


# -------------------------------------------------------------------------------------------- secrets

_SPECIFIC_SECRETS: tuple[tuple[str, tuple[str, ...], re.Pattern], ...] = tuple(
    (kind, needles, re.compile(rx)) for kind, needles, rx in (
        ("private_key", ("-----BEGIN",),
         r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
         r"(?:[\s\S]{0,20000}?-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
         r"|(?:(?:\r?\n|\\n)[A-Za-z0-9+/=:, -]{1,100}){1,400})"),
        ("aws_access_key_id", ("AKIA", "ASIA", "ABIA", "ACCA"),
         r"(?<![A-Za-z0-9])A[A-Z]{3}[A-Z0-9]{16}(?![A-Za-z0-9])"),
        ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"(?<!\w)gh[pousr]_[A-Za-z0-9]{36,251}(?!\w)"),
        ("github_token", ("github_pat_",), r"(?<!\w)github_pat_[A-Za-z0-9_]{22,251}(?!\w)"),
        ("gitlab_token", ("glpat-",), r"(?<![\w-])glpat-[A-Za-z0-9_-]{20,64}(?![\w-])"),
        ("npm_token", ("npm_",), r"(?<!\w)npm_[A-Za-z0-9]{36}(?!\w)"),
        ("slack_token", ("xox",), r"(?<![\w-])xox[abeoprs]-[A-Za-z0-9-]{10,250}(?![\w-])"),
        ("google_api_key", ("AIza",), r"(?<![\w-])AIza[0-9A-Za-z_-]{35}(?![\w-])"),
        ("stripe_key", ("_live_", "_test_"), r"(?<!\w)(?:[sr]k_(?:live|test)|pk_live)_[0-9A-Za-z]{10,247}(?!\w)"),
        ("anthropic_key", ("sk-ant-",), r"(?<![\w-])sk-ant-[A-Za-z0-9_-]{32,200}(?![\w-])"),
        ("openai_key", ("sk-",),
         r"(?<![\w-])sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,200}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})"
         r"(?![\w-])"),
        ("jwt", ("eyJ",), r"(?<![\w-])eyJ[A-Za-z0-9_-]{8,4000}\.[A-Za-z0-9_-]{4,100000}\.[A-Za-z0-9_-]{0,4000}"
         r"(?![\w-])"),
    ))
# Stripe's kinds end with _live_/_test_ so the needle sits 2-3 characters into the match.
_STRIPE_BACK = re.compile(r"[spr]k\Z")


def _jwt_ok(token: str) -> bool:
    head = token.split(".", 1)[0]
    try:
        obj = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False
    return isinstance(obj, dict) and "alg" in obj


_AUTH_HEADER = re.compile(r"(?i)authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token|digest)\s+"
                          r"([A-Za-z0-9._~+/=-]{8,4096})")


def _specific_secrets(t: _Text) -> Iterator[_Cand]:
    s = t.s
    for kind, needles, rx in _SPECIFIC_SECRETS:
        for needle in needles:
            if needle not in s:
                continue
            back = _STRIPE_BACK if kind == "stripe_key" else None
            for m in _anchored(s, s, needle, back, rx, 3):
                if kind != "jwt" or _jwt_ok(m.group(0)):
                    yield m.start(), m.end(), f"secret:{kind}", _SPECIFIC
    low = t.low
    if "authorization" in low:
        for m in _anchored(s, low, "authorization", None, _AUTH_HEADER):
            if not _placeholder(m.group(1)):
                yield m.start(1), m.end(1), "secret:auth_header", _ASSIGNED


# --------------------------------------------------------------------------- assignments of secrets

_KEYWORDS = re.compile(r"pass|pwd|secret|token|api.?key|access.?key|private.?key|auth|credential")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_ASSIGN = re.compile(r"""(?P<tail>[A-Za-z0-9_.-]{0,64})["']?[ \t]*(?::=|=>|=(?!=)|:(?![:/]))[ \t]*
    (?: "((?:[^"\\\n]|\\.){1,256})" | '([^'\n]{1,256})'
      | ([^\s"'`,;(){}\[\]<>=|&][^\s"'`,;(){}\[\]<>|&]{0,255}) (?=[\s"'`,;){}\]<>|&]|\Z) )""", re.X)
_PASSWORD_WORDS = frozenset("password passwd pwd pass passphrase".split())
_SECRET_WORDS = frozenset("secret secrets auth credential credentials".split())
_NOT_SECRET_SUFFIX = frozenset("""
    name names type path file filename dir url uri endpoint len length size count max min field label prompt hint
    regex pattern policy expiry expires expiration ttl timeout format prefix header kind id ids arn ref env var
    param required enabled reset user username method mode provider backend scheme strategy service server host
    port realm domain scope scopes version class module flow grant store manager
""".split())
_PLACEHOLDER = re.compile(r"""(?ix)
    \$\{?[\w.:-]*\}? | \{\{.*\}\} | \{[\w.-]*\} | %\(?\w*\)?s? | <[^>]*> | \[[^\]]*\] | \*+ | x+ | \.+ | -+ | _+
  | \#+ | \?+ | 0+ | (?:your|my|some|insert|enter|put|replace|fill)[\w-]* | change[_-]?me\w* | change[_-]?it
  | password\d* | passwd | secret | token | example\w* | redacted | hidden | masked | removed | dummy\w*
  | fake\w* | sample\w* | placeholder\w* | todo | tbd | fixme | none | null | nil | undefined | true | false
  | empty | default | foo | bar | baz | foobar | test | testing
  | (?:os\.)?(?:environ|getenv)\b.* | process\.env\b.* | env\(.* | !\w.* | vault:.*
  | [A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+ | [A-Za-z_]\w*\(.* | \$\w+
""")


def _placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.fullmatch(value))


def _words(name: str) -> list[str]:
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower().replace("-", "_").replace(".", "_").split("_")


def _secret_name(name: str) -> str | None:
    """The secret type a variable name announces, or None."""
    words = [w for w in _words(name) if w]
    if not words or words[-1] in _NOT_SECRET_SUFFIX:
        return None
    joined = "_".join(words)
    if any(w in _PASSWORD_WORDS or w.endswith(("password", "passwd")) for w in words):
        return "password"
    if "secret" in joined and ("aws" in words or "access" in joined):
        return "aws_secret_key"
    if any(w.endswith("token") for w in words):
        return "token"
    if "apikey" in words or "api_key" in joined:
        return "api_key"
    if any(w in _SECRET_WORDS or w.endswith(("secret", "apikey", "accesskey")) for w in words) \
            or "access_key" in joined or "private_key" in joined:
        return "generic"
    return None


_AWS_SECRET = re.compile(r"[A-Za-z0-9/+]{40}")


def _value_ok(value: str, kind: str, quoted: bool) -> bool:
    if _placeholder(value) or any(c.isspace() for c in value):
        return False
    if kind == "password":
        return len(value) >= 6 and _entropy(value) >= 2.0 and (quoted or not value.isalpha())
    if kind == "aws_secret_key" and _AWS_SECRET.fullmatch(value):
        return True
    return (len(value) >= 16 and _entropy(value) >= 3.0 and any(c.isdigit() for c in value)
            and any(c.isalpha() for c in value))


_ADO_KEYS = re.compile(r"(?i)(?:server|data source|host|initial catalog|database|user id|uid|provider)\s*=")


def _assignments(t: _Text) -> Iterator[_Cand]:
    s, low = t.s, t.low
    # lower() changed the length (or returned the text itself): search case-insensitively instead.
    hits = re.compile(_KEYWORDS.pattern, re.I).finditer(s) if low is s else _KEYWORDS.finditer(low)
    done = 0
    for k in hits:
        if k.start() < done:
            continue
        a = _ASSIGN.match(s, k.start())
        if not a:
            continue
        j = k.start()
        while j > max(0, k.start() - 64) and s[j - 1] in _NAME_CHARS:
            j -= 1
        done = a.end()
        kind = _secret_name(s[j:a.end("tail")])
        if kind is None:
            continue
        g = next(i for i in (2, 3, 4) if a.group(i) is not None)
        value, start, end = a.group(g), a.start(g), a.end(g)
        if kind == "password" and g == 4 and s[end:end + 1] in (";", "") and _ADO_KEYS.search(s, max(0, j - 200), j):
            if len(value) >= 3 and not _placeholder(value):
                yield start, end, "secret:connection_string", _ASSIGNED
            continue
        if _value_ok(value, kind, g != 4):
            if kind == "aws_secret_key" and not _AWS_SECRET.fullmatch(value):
                kind = "generic"
            yield start, end, f"secret:{kind}", _ASSIGNED


# ------------------------------------------------------------------------------------------- driver

_RECOGNIZERS: tuple[Callable[[_Text], Iterator[_Cand]], ...] = (
    _specific_secrets, _assignments, _urls, _emails, _numbers, _ips, _phones, _addresses)


def find(text: str) -> list[Span]:
    """Every PII/secret span in `text`, non-overlapping and sorted by start (see the module docstring)."""
    if not text:
        return []
    t = _Text(text)
    cands = [c for rec in _RECOGNIZERS for c in rec(t) if c[0] < c[1]]
    return [Span(s, e, k, text[s:e]) for s, e, k, _ in _resolve(cands)]


# Kinds whose every fragment still identifies someone: when one loses to a span inside it (a token in a
# profile URL's query), its uncovered remnants are kept rather than the whole span being dropped.
_SPLITTABLE = frozenset({"url_personal", "postal_address"})


def _resolve(cands: list[_Cand]) -> list[_Cand]:
    """Drop overlapping candidates: higher tier, then longer, then earlier wins (remnants of _SPLITTABLE kinds
    survive).

    Candidates are swept in start order into clusters of transitively overlapping spans; only a cluster
    of two or more needs picking, with a bytearray of taken positions (linear in the cluster's length).
    """
    cands.sort()
    out: list[_Cand] = []
    i, n = 0, len(cands)
    while i < n:
        j, end = i + 1, cands[i][1]
        while j < n and cands[j][0] < end:
            end = max(end, cands[j][1])
            j += 1
        if j == i + 1:
            out.append(cands[i])
        else:
            base = cands[i][0]
            taken = bytearray(end - base)
            picked = []
            for c in sorted(cands[i:j], key=lambda c: (-c[3], c[0] - c[1], c[0], c[2])):
                if taken.find(1, c[0] - base, c[1] - base) == -1:
                    pieces = [c]
                elif c[2] in _SPLITTABLE:
                    pieces, a = [], c[0] - base
                    while (a := taken.find(0, a, c[1] - base)) != -1:
                        b = taken.find(1, a, c[1] - base)
                        b = c[1] - base if b == -1 else b
                        pieces.append((a + base, b + base, c[2], c[3]))
                        a = b
                else:
                    continue
                for p in pieces:
                    taken[p[0] - base:p[1] - base] = b"\x01" * (p[1] - p[0])
                picked += pieces
            out.extend(sorted(picked))
        i = j
    return out


def default_placeholder(span: Span) -> str:
    return f"[{span.kind.upper()}]"


def redact(text: str, placeholder: Callable[[Span], str] = default_placeholder) -> str:
    """`text` with every span of `find(text)` replaced by `placeholder(span)` ("[SECRET:GITHUB_TOKEN]")."""
    parts, pos = [], 0
    for sp in find(text):
        parts += (text[pos:sp.start], placeholder(sp))
        pos = sp.end
    parts.append(text[pos:])
    return "".join(parts)
