"""How common each fact is in the world at a moment: what a constant answer or a list of the commonest values
would guess without reading anything.

A fact that most documents of the world name (`pom.xml` on a Maven list, the current version, the most active
person) is no evidence that a reply answered anything: a constant answer or a list of the commonest values
states it. `Prevalence` counts, for every value of every fact kind (graders.facts, and people), the
documents that name it, so that at any cutoff it tells a value's rank among the values of its kind, and which
values of a kind are the commonest (what the listing probes of task_builders.probes name).

Invariants:
- A document counts once per value it names (a mail naming pom.xml three times counts once). Documents are what
  people wrote: issues, comments, mails (their own text, without the quote), chat messages, and commits (their
  message and the files they touch); a notice a machine wrote (`Event.automated`: a join notice, a bot's post)
  is not one.
- A view at a cutoff counts only the documents dated at or before it, without the events the task hides.
- People are counted by the documents they wrote and those naming them by full name or as a mention
  (`@user`, `[~user]`), under their full name.
- Nothing depends on which pseudonyms were drawn: a rank counts the values strictly more common (ties share the
  best rank), a reach counts the values tied with one, and the commonest list breaks ties by first appearance
  (time, then event id: a hash of the raw record's id, not of pseudonymized text, then the order in which that
  document names them: its text, then the files a commit touches, then its people).
- Nothing depends on the process either: the values a document names are kept in the order it names them, never
  in a set's order (which PYTHONHASHSEED draws), so the commonest list, and the listing probes built from it, are
  the same in every run.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from graders import facts as F
from graders.facts import key_of
from task_builders.signals import new_text
from warehouse.schemas import Event

PERSON = "person"
CONTENT_KINDS = ("issue_created", "pr_created", "comment", "email", "message", "thread_broadcast", "file_share",
                 "commit")


@dataclass
class Prevalence:
    """Documents naming each value, by kind (see the module docstring)."""

    # (kind, key) -> sorted (epoch, event id) of the documents naming it
    occurrences: dict[tuple[str, str], list[tuple[float, str]]] = field(default_factory=dict)
    spelling: dict[tuple[str, str], str] = field(default_factory=dict)          # (kind, key) -> as first written
    by_event: dict[str, list[tuple[str, str]]] = field(default_factory=dict)     # event id -> the values it names
    when: dict[str, float] = field(default_factory=dict)                        # event id -> its epoch
    # a file's name where a document wrote only its path (`core/pom.xml` names `pom.xml` too): counted for a
    # fact spelled by the name, never as a value of its own (a list of files would name both)
    bases: dict[tuple[str, str], list[tuple[float, str]]] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)                           # every document's epoch, sorted

    @classmethod
    def of(cls, events: Iterable[Event], translate: Callable[[str], str] = lambda s: s,
           names: dict[str, str] | None = None) -> Prevalence:
        """Count the documents of `events` (anonymized). `translate` maps a text to the world's (commit SHAs of the
        rewritten history); `names` maps a case-folded full name or user name to the person's full name."""
        names = names or {}
        fulls = sorted({n for n in names.values() if len(n.split()) >= 2}, key=lambda n: (-len(n), n))
        users = sorted({u for u in names if " " not in u and "@" not in u}, key=lambda u: (-len(u), u))
        full_re = re.compile(r"(?<![\w~])(" + "|".join(map(re.escape, fulls)) + r")(?![\w])", re.I) if fulls else None
        user_re = re.compile(r"(?:@|\[~)(" + "|".join(map(re.escape, users)) + r")(?![\w])", re.I) if users else None
        full_of = {n.casefold(): n for n in fulls}
        out = cls()
        rows: list[tuple[float, str, list[tuple[str, str]], list[tuple[str, str]]]] = []
        for e in events:
            if e.kind not in CONTENT_KINDS or e.automated:
                continue
            text = translate(f"{e.title or ''}\n{new_text(e) if e.kind != 'commit' else e.body or ''}") or ""
            # dicts as ordered sets: the order a document names its values in breaks ties in `commonest`
            found: dict[tuple[str, str], None] = {}
            bases: dict[tuple[str, str], None] = {}
            for f in F.extract(text, limit=10**6):
                k = (f.kind, key_of(f.kind, f.text))
                found[k] = None
                out.spelling.setdefault(k, f.text)
                if f.kind == "file" and "/" in f.text:
                    bases[("file", key_of("file", f.text.rsplit("/", 1)[-1]))] = None
            if e.kind == "commit":
                for p in (e.attrs or {}).get("files") or []:
                    path = str(p.get("path") or "") if isinstance(p, dict) else ""
                    if path:
                        found[("file", key_of("file", path))] = None
                        out.spelling.setdefault(("file", key_of("file", path)), path)
                        bases[("file", key_of("file", path.rsplit("/", 1)[-1]))] = None
            people: dict[str, None] = {}
            if e.actor_name and e.actor_name.casefold() in full_of:
                people[full_of[e.actor_name.casefold()]] = None
            if full_re is not None:
                people.update((full_of.get(m.casefold(), m), None) for m in full_re.findall(text))
            if user_re is not None:
                people.update((names[m.casefold()], None) for m in user_re.findall(text) if m.casefold() in names)
            for p in people:
                k = (PERSON, key_of(PERSON, p))
                found[k] = None
                out.spelling.setdefault(k, p)
            rows.append((e.ts.timestamp(), e.event_id, list(found), [k for k in bases if k not in found]))
        rows.sort(key=lambda r: (r[0], r[1]))
        for ts, eid, found, bases in rows:
            out.times.append(ts)
            out.by_event[eid] = sorted({*found, *bases})
            out.when[eid] = ts
            for k in found:
                out.occurrences.setdefault(k, []).append((ts, eid))
            for k in bases:
                out.bases.setdefault(k, []).append((ts, eid))
        return out

    # -- at a cutoff --------------------------------------------------------------------------------------------

    def _minus(self, t: float, hidden: Iterable[str]) -> dict[tuple[str, str], int]:
        """Per value, the hidden documents dated at or before `t` that name it (to take off the counts)."""
        out: dict[tuple[str, str], int] = {}
        for eid in set(hidden):
            if self.when.get(eid, t + 1) <= t:
                for k in self.by_event[eid]:
                    out[k] = out.get(k, 0) + 1
        return out

    def documents(self, t: float) -> int:
        """Documents dated at or before `t`."""
        return bisect.bisect_right(self.times, t)

    def counts(self, kind: str, t: float, hidden: Iterable[str] = ()) -> dict[str, int]:
        """key -> documents naming it at or before `t`, of every value of `kind` named by then."""
        minus = self._minus(t, hidden)
        out = {}
        for (k, key), occ in self.occurrences.items():
            if k != kind:
                continue
            n = bisect.bisect_right(occ, (t, "\uffff")) - minus.get((k, key), 0)
            if n > 0:
                out[key] = n
        return out

    def count(self, kind: str, text: str, t: float, hidden: Iterable[str] = ()) -> int:
        """Documents naming the value at or before `t` (a file name: also those naming a path to it)."""
        key = (kind, key_of(kind, text))
        hide = set(hidden)
        docs = {e for ts, e in [*self.occurrences.get(key, ()), *self.bases.get(key, ())] if ts <= t and e not in hide}
        return len(docs)

    def rank(self, kind: str, text: str, t: float, hidden: Iterable[str] = (), counts: dict[str, int] | None = None
             ) -> int:
        """1 + the number of values of `kind` strictly more common at `t` than `text` (ties share the best rank)."""
        counts = self.counts(kind, t, hidden) if counts is None else counts
        mine = self.count(kind, text, t, hidden)
        return 1 + sum(1 for key, n in counts.items() if n > mine and key != key_of(kind, text))

    def reach(self, kind: str, text: str, t: float, n: int, hidden: Iterable[str] = (),
              counts: dict[str, int] | None = None) -> float:
        """The share of the lists of the `n` commonest values of `kind` at `t` that hold `text`, over every order
        of the values tied with it (a guess cannot tell tied values apart without reading): 1 when the values
        strictly more common leave room for its whole tie group, 0 when they fill the list, else the room left
        over the size of the group. A value one document names, tied with forty others named once, is in 1 of
        40 such lists, not in every one as its rank (ties share the best) would say."""
        counts = self.counts(kind, t, hidden) if counts is None else counts
        mine, me = self.count(kind, text, t, hidden), key_of(kind, text)
        if not mine:
            return 0.0
        above = sum(1 for key, c in counts.items() if c > mine and key != me)
        tied = 1 + sum(1 for key, c in counts.items() if c == mine and key != me)
        return max(0.0, min(1.0, (n - above) / tied))

    def commonest(self, kind: str, t: float, n: int, hidden: Iterable[str] = (), exclude: Iterable[str] = ()
                  ) -> list[str]:
        """The `n` values of `kind` named by the most documents at `t`, as first written (ties: the one that
        appeared first), leaving out `exclude` (spellings)."""
        skip = {key_of(kind, x) for x in exclude if x}
        counts = self.counts(kind, t, hidden)
        first = {key: self.occurrences[(kind, key)][0] for key in counts}
        # sorted is stable: values first named by the same document keep the order it names them in (`of`)
        ranked = sorted((key for key in counts if key not in skip), key=lambda key: (-counts[key], first[key]))
        return [self.spelling[(kind, key)] for key in ranked[:n]]
