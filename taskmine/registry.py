"""One registry for every kind of plug-in: extractors, task families, grader checks, sandbox backends.

A plug-in is registered explicitly, by name, with a decorator in the module that defines it, and a built-in
kind lists the modules to import (so `import` order never decides what exists); third-party packages add
plug-ins through the entry point group of their kind (`taskmine.extractors`, `taskmine.families`,
`taskmine.checks`, `taskmine.sandboxes` in their pyproject.toml). A plug-in
may declare a pydantic model for its arguments (`args=`), which callers validate when they build the thing
that uses it (a rubric validates every check's arguments when it is built, not when it runs).

Invariants:
- What is stored (in a rubric, a config, a task) is the registry name, never a function or a class.
- A name is taken once: a second, different object under the same name is an error.
- Lookups of an unknown name raise KeyError with one line that lists the known names.
- No work at import time: built-ins and entry points are loaded on first use.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


@dataclass(frozen=True)
class Registered(Generic[T]):
    name: str
    obj: T
    origin: str  # "builtin:<module>" or "entry-point:<distribution>"
    args: type[BaseModel] | None = None
    summary: str = ""

    @property
    def cls(self) -> T:  # extractors call their registered object a class
        return self.obj


class Registry(Generic[T]):
    """The plug-ins of one kind (see the module docstring)."""

    def __init__(self, kind: str, plural: str, builtins: tuple[str, ...], check: Callable[[Any], bool] | None = None):
        self.kind, self.plural = kind, plural
        self.group = f"taskmine.{plural}"
        self.builtins = builtins
        self.check = check
        self._items: dict[str, Registered[T]] = {}
        self._loaded = False      # loading started (a module being imported may ask again: it sees what is in)
        self._done = False        # loading finished
        self._lock = threading.RLock()   # another thread waits for the whole list (code_change builds in a pool)

    def register(self, name: str, *, args: type[BaseModel] | None = None):
        """Decorator: make the decorated object available under `name` (with an argument model)."""

        def wrap(obj: T) -> T:
            self.add(name, obj, f"builtin:{getattr(obj, '__module__', '?')}", args)
            return obj

        return wrap

    def add(self, name: str, obj: T, origin: str, args: type[BaseModel] | None = None) -> None:
        if self.check is not None and not self.check(obj):
            raise TypeError(f"{self.kind} {name!r}: {obj!r} is not a {self.kind}")
        old = self._items.get(name)
        if old is not None and old.obj is not obj and getattr(old.obj, "__qualname__", None) != \
                getattr(obj, "__qualname__", object()):
            raise ValueError(f"{self.kind} name {name!r} is taken by {old.origin}")
        doc = " ".join(((getattr(obj, "__doc__", None) or "").strip().split("\n\n")[0]).split())
        self._items[name] = Registered(name, obj, origin if old is None else old.origin if origin.startswith(
            "builtin") else origin, args or (old.args if old else None), doc)

    def _load(self) -> None:
        if self._done:
            return
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            for module in self.builtins:
                importlib.import_module(module)
            from importlib.metadata import entry_points

            for ep in entry_points(group=self.group):
                obj = ep.load()
                dist = getattr(ep, "dist", None)
                origin = f"entry-point:{dist.name if dist else ep.value}"
                current = self._items.get(ep.name)
                if current is None or current.obj is not obj:
                    self.add(ep.name, obj, origin, getattr(obj, "args_model", None))
                self._items[ep.name] = Registered(ep.name, self._items[ep.name].obj, origin,
                                                  self._items[ep.name].args, self._items[ep.name].summary)
            self._done = True

    def all(self) -> dict[str, Registered[T]]:
        self._load()
        return dict(sorted(self._items.items()))

    def get(self, name: str) -> Registered[T]:
        items = self.all()
        if name not in items:
            raise KeyError(f"no {self.kind} named {name!r}; known: {', '.join(items) or 'none'} "
                           f"(see `taskmine {self.plural} list`)")
        return items[name]

    def validate_args(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """`args` checked against the plug-in's argument model (as a plain dict again); ValueError says why."""
        from pydantic import ValidationError

        model = self.get(name).args
        if model is None:
            return dict(args)
        try:
            return model.model_validate(args).model_dump(mode="json")
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise ValueError(f"{self.kind} {name!r}: argument {where or '?'}: {first.get('msg')}") from None


REGISTRIES: dict[str, Registry] = {}
KINDS = ("extractor", "family", "check", "sandbox")


def registry(kind: str) -> Registry:
    """The registry of one kind: extractor, family, check or sandbox."""
    if not REGISTRIES:
        _make()
    if kind not in REGISTRIES:
        raise KeyError(f"no plug-in kind {kind!r}; the kinds are: {', '.join(KINDS)}")
    return REGISTRIES[kind]


def _make() -> None:
    REGISTRIES["extractor"] = Registry("extractor", "extractors", (
        "extractors.git", "extractors.github", "extractors.email", "extractors.jira", "extractors.slack",
        # scaffold: new built-in extractors are listed above this line
    ))
    REGISTRIES["family"] = Registry("family", "families", (
        "task_builders.families.triage", "task_builders.families.commit_link",
        "task_builders.families.email_reply", "task_builders.families.chat_answer",
        "task_builders.families.resolution_note",
        "task_builders.families.code_change",
    ))
    REGISTRIES["check"] = Registry("check", "checks", (
        "graders.checks", "graders.communication", "graders.code_checks",
    ))
    REGISTRIES["sandbox"] = Registry("sandbox", "sandboxes", ("environments.sandbox", "environments.kube"))
