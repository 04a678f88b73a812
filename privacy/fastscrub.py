"""The Scrubber's known-term pass with the same output, in time that does not grow with the number of terms.

Why: `Scrubber._known` is one alternation of every known identity string (longest first). Python's regex
engine has no trie: at every word start it tries the alternatives one by one, so the pass costs
characters x terms. With the sample company at scale 80 (1,722 terms) it runs at ~0.35M chars/s, and a real
dataset has far more people.

How (`TermMatcher.sub`, a drop-in for `pattern.sub(repl, text)`):
- A scanner (the original look-behind and one character class of every term's first character, with the
  original flags, so the same case-insensitive equivalences) finds each position where a match could start.
- There, the next 3 characters, if ASCII, pick the terms whose first 3 characters are those characters in
  any case (a term with a non-ASCII character among its first 3, or shorter than 3, is always included);
  a regex of just those terms, in the original order, between the original assertions, is matched at that
  position (compiled once per 3-character key). Any other position (non-ASCII text, the last 2 characters)
  uses the original regex.
- Before that, a text is cut into runs of letters and digits once (lower-cased; when lower() keeps its length and it
  holds none of the letters the regex engine folds together although their lower() differs): a match's term
  begins with such a run that is a whole run of the text (the assertions around it see to that), so a text
  holding none of the terms' first runs has no match (most source files), and the scan visits only where those
  runs start.

Invariant: `TermMatcher(rx, terms).sub(f, s) == rx.sub(f, s)` and `finditer(s)` gives the spans of
`rx.finditer(s)`, for every text. Each per-position regex tries a
superset of the terms that can match there, in the original order, so the first that matches is the one the
original alternation picks (a term with a space among its first characters, where the text may wrap a line, is
in every such regex); positions the scanner skips cannot start a match; like `re.sub`, scanning resumes
at the end of each replacement, and look-behind reads the original text before the position. ASCII
characters match each other case-insensitively exactly when their lower() is equal; every other case
equivalence (Kelvin sign and k, long s and s, dotless i and I) involves a non-ASCII character and goes to a
fallback. If `rx` is not the alternation of `terms` that `Scrubber` builds, the original regex is used as is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

KEY = 3
_RUN = re.compile(r"[^\W_]+")
_RUNS = re.compile(r"[^\W_]+")
# Letters the regex engine folds together although their lower() differs (sre's extra case equivalences: dotless i,
# long s, micro sign, Greek variants, ...): a text holding one is scanned in full.
_SPECIAL = re.compile("[\u0131\u017f\u00b5\u03bc\u0345\u03b9\u1fbe\u0390\u1fd3\u03b0\u1fe3\u03b2\u03d0\u03b5\u03f5"
                      "\u03b8\u03d1\u03ba\u03f0\u03c0\u03d6\u03c1\u03f1\u03c2\u03c3\u03c6\u03d5\u1e61\u1e9b\ufb05"
                      "\ufb06\u0130\u212a\u2126\u039c\u0399\u0392\u0395\u0398\u039a\u03a0\u03a1\u03a3\u03a6\u1e60]")


def order(terms: Iterable[str]) -> list[str]:
    """The Scrubber's alternation order: longest first, then alphabetical."""
    return sorted(terms, key=lambda s: (-len(s), s))


def term_pattern(term: str) -> str:
    """The regex of a known string: literal, but any whitespace or a line wrap (quote markers included, as a
    quoting client rewraps: "Douglas \\n> Condon") may stand where the string has a space."""
    return re.escape(term).replace("\\ ", SEP)


# What may stand for one space of a known string: blanks, or a line break with the blanks and quote markers
# around it.
SEP = r"(?:[ \t]*\r?\n(?:[ \t]*>)*[ \t]*|[ \t]+)"
_SEP_RX = re.compile(SEP)


def norm(matched: str) -> str:
    """The known string a match of `term_pattern` stands for (its separators made single spaces), casefolded."""
    return _SEP_RX.sub(" ", matched).casefold()


class TermMatcher:
    def __init__(self, rx: re.Pattern, terms: Iterable[str], escape: Callable[[str], str] = re.escape):
        self.rx = rx
        self.escape = escape
        keys = order(terms)
        alternation = "|".join(escape(k) for k in keys)
        head, sep, tail = rx.pattern.partition(f"(?:{alternation})")
        self.split = bool(sep) and bool(keys) and f"(?:{alternation})" not in tail
        if not self.split:
            return
        self.head, self.tail, self.flags = head, tail, rx.flags
        firsts = "".join(sorted({re.escape(k[0]) for k in keys}))
        self.scan = re.compile(f"{head}[{firsts}]", rx.flags)
        self.buckets: dict[str, list[int]] = {}
        self.always: list[int] = []
        for i, k in enumerate(keys):
            # a space among the first characters may be a line wrap in the text: such a term is always tried
            if len(k) >= KEY and k[:KEY].isascii() and " " not in k[:KEY]:
                self.buckets.setdefault(k[:KEY].lower(), []).append(i)
            else:
                self.always.append(i)
        self.keys = keys
        self.compiled: dict[str, re.Pattern | None] = {}
        # The prefilter: a match's term starts with a run of letters and digits that is a whole token of the
        # text (the head and tail assertions see to that), so an ASCII text none of whose tokens is such a
        # first run holds no match, and one that holds some can only match where those tokens start.
        self.first_runs: set[str] = set()
        self.any_start = False  # a term starting with neither letter nor digit: every position may start one
        for k in keys:
            run = _RUN.match(k.lower())
            if run is None:
                self.any_start = True
            else:
                self.first_runs.add(run.group(0))
        # case-insensitive equivalences between ASCII and other letters (Kelvin sign, long s, dotless i, dotted I)
        self.prefilter = not any(c in k for k in keys for c in "\u212a\u017f\u0131\u0130")
        self.positions: dict[frozenset, re.Pattern] = {}

    def _for(self, key: str) -> re.Pattern | None:
        if key not in self.compiled:
            picked = sorted(self.buckets.get(key, []) + self.always)
            self.compiled[key] = re.compile(
                self.head + "(?:" + "|".join(self.escape(self.keys[i]) for i in picked) + ")" + self.tail,
                self.flags) if picked else None
        return self.compiled[key]

    def finditer(self, text: str) -> Iterator[re.Match]:
        """The matches `self.rx.finditer(text)` yields (leftmost, non-overlapping), in order."""
        if not self.split:
            yield from self.rx.finditer(text)
            return
        starts = None
        low = text.lower() if self.prefilter else ""
        if self.prefilter and len(low) == len(text) and (text.isascii() or not _SPECIAL.search(text)):
            hits = self.first_runs.intersection(_RUNS.findall(low))
            if not hits:
                return
            if not self.any_start:
                starts = (m.start() for m in self._positions(frozenset(hits)).finditer(low))
        if starts is None:
            starts = (c.start() for c in self.scan.finditer(text))
        last = 0
        for p in starts:
            if p < last:
                continue
            chunk = text[p:p + KEY]
            rx = self._for(chunk.lower()) if len(chunk) == KEY and chunk.isascii() else self.rx
            m = rx.match(text, p) if rx is not None else None
            if m:
                yield m
                last = m.end()

    def _positions(self, hits: frozenset) -> re.Pattern:
        rx = self.positions.get(hits)
        if rx is None:
            if len(self.positions) > 4096:
                self.positions.clear()
            alt = "|".join(re.escape(h) for h in sorted(hits, key=lambda h: (-len(h), h)))
            rx = self.positions[hits] = re.compile(rf"(?<![^\W_])(?:{alt})(?![^\W_])")
        return rx

    def sub(self, repl: Callable[[re.Match], str], text: str) -> str:
        parts, last = [], 0
        for m in self.finditer(text):
            parts += (text[last:m.start()], repl(m))
            last = m.end()
        if not parts:
            return text
        parts.append(text[last:])
        return "".join(parts)


def speed_up(scrubber) -> None:
    """Give a `privacy.anonymize.Scrubber` the TermMatcher in place of its known-term regex."""
    if scrubber._known is not None and not isinstance(scrubber._known, TermMatcher):
        scrubber._known = TermMatcher(scrubber._known, scrubber.terms)
