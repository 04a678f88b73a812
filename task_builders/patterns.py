"""Pattern recognizers for PII that no identity graph knows: e-mail addresses and phone numbers.

Invariants: every pattern is anchored on non-word boundaries so it does not eat neighbouring text;
a phone number needs 9-15 digits and either a leading + or separators, so dates, versions, SHAs and
issue keys are not mistaken for one.
"""

from __future__ import annotations

import re

EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                   r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![\w-])")
# "user at host dot org" obfuscation used by mail archives.
EMAIL_OBFUSCATED = re.compile(r"(?<![\w.])([A-Za-z0-9._%+-]{2,64}) at ([A-Za-z0-9-]{2,63}(?:(?:\.| dot )"
                              r"[A-Za-z0-9-]{2,63})+)(?![\w])")
PHONE = re.compile(r"(?<![\w+.\-/])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,6}){1,4}"
                   r"(?![\w\-/:]|\.\w)"
                   r"|(?<![\w+])\+\d{9,15}(?!\w)")


_DATE = re.compile(r"(?:19|20)\d\d[-./](?:0?[1-9]|1[0-2])[-./](?:0?[1-9]|[12]\d|3[01])\b")


def is_phone(candidate: str) -> bool:
    if _DATE.match(candidate):
        return False
    digits = sum(c.isdigit() for c in candidate)
    if not 9 <= digits <= 15:
        return False
    return candidate.startswith("+") or "(" in candidate or sum(c in " .-" for c in candidate) >= 2
