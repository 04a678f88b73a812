"""`Anonymized`: the only text the LLM layer sends to a model.

Invariant: every message content the client sends is an `Anonymized`. Raw events (real names, addresses,
secrets) must never reach a hosted model, so the type cannot be made by accident:

- `Anonymized("...")` raises `TypeError`; so does passing a plain `str` to the client.
- `declare_anonymized(text, source=...)` is the one way to make one from text. Only code that *knows* the
  text is anonymized calls it: the anonymize stage (privacy/anonymize.py) on its output and the
  warehouse reader of the `anonymized_events` table. Every call names its `source`, so
  `git grep -n "declare_anonymized("` lists every place text enters the anonymized world.
- `fill(template, **values)` builds a prompt from our own fixed template text (a literal in our code,
  never data) and `Anonymized` values; `join(sep, parts)` joins `Anonymized` parts with our own separator.
  Neither accepts a plain `str` value.
- Any `str` operation on an `Anonymized` (slicing, `+`, `.strip()`, `.format()`) returns a plain `str`:
  text derived by code loses the mark and has to be declared again, deliberately.

A model's reply to anonymized input is itself anonymized (it saw nothing else); the library functions that
return model text as `Anonymized` (llm/instruction.py, llm/requester.py) declare it with a `source` that says
so. The leak audit before publishing still checks everything published.
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from typing import LiteralString

REFUSED = ("LLM input must be llm.Anonymized (text from the anonymize stage, or llm.fill of a fixed template "
           "with Anonymized values); got {kind}: raw text never reaches a model")


def refuse(value: object) -> TypeError:
    """The one-line TypeError for a value that is not `Anonymized`."""
    return TypeError(REFUSED.format(kind=type(value).__name__))


class Anonymized(str):
    """Text known to contain no real identity: made only by `declare_anonymized`, `fill` or `join`."""

    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        raise TypeError("Anonymized(...) cannot be constructed directly; the anonymize stage and the reader of "
                        "anonymized_events call llm.declare_anonymized(text, source=...)")

    def __reduce__(self):   # pickling (a process pool) keeps the mark: it was anonymized when pickled
        return _restore, (str(self),)

    def __repr__(self) -> str:
        return f"Anonymized({str.__repr__(self)})"


def _make(text: str) -> Anonymized:
    return str.__new__(Anonymized, text)


def _restore(text: str) -> Anonymized:
    return _make(text)


def declare_anonymized(text: str, *, source: str) -> Anonymized:
    """Mark `text` as anonymized. THE entry point of text into the LLM layer.

    Call it only where the text is known to be anonymized: the anonymize stage on what it produced, the
    reader of the `anonymized_events` table, or a model's reply to anonymized input. `source` names that
    place (e.g. "anonymized_events.body"); it is required so every call says why it is allowed.
    """
    if not isinstance(text, str):
        raise TypeError(f"declare_anonymized takes text, got {type(text).__name__}")
    if not source or not source.strip():
        raise ValueError("declare_anonymized needs a source that says where the anonymized text comes from")
    return text if type(text) is Anonymized else _make(str(text))


def fill(template: LiteralString, /, **values: Anonymized) -> Anonymized:
    """A prompt from our own fixed `template` and `Anonymized` values.

    `template` is text written in our code (a literal; `$name` marks a value, `$$` a dollar sign). Every
    value must be `Anonymized`: a plain `str` raises TypeError. A template with no values is just our text.
    """
    for name, value in values.items():
        if not isinstance(value, Anonymized):
            raise TypeError(f"fill(${name}): " + REFUSED.format(kind=type(value).__name__))
    return _make(string.Template(template).substitute(values))


def join(sep: LiteralString, parts: Iterable[Anonymized]) -> Anonymized:
    """`sep.join(parts)` that keeps the mark: `sep` is our own text, every part must be `Anonymized`."""
    parts = list(parts)
    for p in parts:
        if not isinstance(p, Anonymized):
            raise refuse(p)
    return _make(sep.join(parts))
