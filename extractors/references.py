"""References one record makes to another, as text carries them: issue keys (`PROJ-123`, the Jira form every
tracker of the exports uses). Below every stage that reads them: mining links commits and mail to issues by them,
the world strips them from commit messages, and a withheld commit's stub keeps the keys its message named.

Invariant: a key matches only on word boundaries: `ALOY-12` never matches inside `ALOY-123` or `XALOY-12`.
"""

from __future__ import annotations

import re

KEY = re.compile(r"(?<![A-Za-z0-9_-])([A-Z][A-Z0-9_]{0,19}-[1-9][0-9]{0,8})(?![A-Za-z0-9_]|-[0-9])")


def find_keys(text: str | None, known: set[str] | None = None) -> list[str]:
    """Issue keys mentioned in `text`, in order of first mention, filtered to `known` if given."""
    if not text:
        return []
    seen: dict[str, None] = {}
    for m in KEY.finditer(text):
        k = m.group(1)
        if known is None or k in known:
            seen.setdefault(k)
    return list(seen)
