"""One registry for every kind of plug-in: extractors, task families, grader checks, sandbox backends.

Every plug-in, built-in or not, is found the same way: through the entry point group of its kind
(`taskmine.extractors`, `taskmine.families`, `taskmine.checks`, `taskmine.sandboxes`), read with
`importlib.metadata`. The project's own plug-ins are entry points of its own distribution, declared in its
pyproject.toml; a third party declares theirs in their own pyproject.toml. An entry point is either
- `name = "module:Object"`: the object is the plug-in `name` (a decorator in the module, when it has one,
  must use the same name), or
- `anything = "module"`: the module is imported and the plug-ins it registers with its decorators
  (`@register_check(...)`) are its plug-ins (a module of many small ones: the checks; inspect_ai's way).
A plug-in may declare a pydantic model for its arguments (`args=`), which callers validate when they build
the thing that uses it (a rubric validates every check's arguments when it is built, not when it runs).

Invariants:
- What is stored (in a rubric, a config, a task) is the registry name, never a function or a class.
- A name is taken once: a second, different object under the same name is an error.
- Lookups of an unknown name raise KeyError with one line that lists the known names.
- No work at import time: entry points are loaded on first use, once, by one thread (another waits).
- The project's own entry points must be installed: a kind none of whose entry points comes from the
  taskmine distribution is an error that says to install it (`uv sync --inexact`), never an empty registry.
  Entry points are installed metadata: after editing pyproject.toml the project is installed again
  (`uv run` does it when pyproject.toml changed; tests/test_registry.py fails when they disagree).
"""

from __future__ import annotations

import threading
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from importlib.metadata import distribution
from importlib.metadata import entry_points as installed_entry_points
from types import ModuleType
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T")
OWN = "taskmine"   # the distribution whose entry points are the built-ins


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
    """The plug-ins of one kind (see the module docstring). `own`: the distribution whose entry points must be
    there (None: none must, e.g. a registry of a test); `adopt(obj, name)`: what a plug-in learns when it is
    registered (a family or an extractor class is told its name)."""

    def __init__(self, kind: str, plural: str, check: Callable[[Any], bool] | None = None, *,
                 own: str | None = OWN, adopt: Callable[[Any, str], None] | None = None):
        self.kind, self.plural = kind, plural
        self.group = f"taskmine.{plural}"
        self.check, self.own, self.adopt = check, own, adopt
        self._items: dict[str, Registered[T]] = {}
        self._origin: str | None = None   # while an entry point loads: the origin of what it registers
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
        if self._origin is not None and origin.startswith("builtin"):
            origin = self._origin     # registered by a decorator of a module an entry point loads
        old = self._items.get(name)
        if old is not None and old.obj is not obj and getattr(old.obj, "__qualname__", None) != \
                getattr(obj, "__qualname__", object()):
            raise ValueError(f"{self.kind} name {name!r} is taken by {old.origin}")
        if self.adopt is not None:
            self.adopt(obj, name)
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
            eps = entry_points(self.group)
            if self.own is not None and not any(_dist(ep) == self.own for ep in eps):
                self._loaded = False
                raise RuntimeError(f"no {self.group} entry points of the {self.own} distribution: install the "
                                   f"project (`uv sync --inexact` or `bash scripts/setup.sh`) so its pyproject.toml "
                                   f"entry points are registered")
            # the project's own first, then the others by distribution: a third party cannot take a built-in name
            for ep in sorted(eps, key=lambda e: (_dist(e) != self.own, _dist(e), e.name)):
                self._load_one(ep)
            self._done = True

    def _load_one(self, ep) -> None:
        dist = _dist(ep)
        module = ep.value.split(":", 1)[0].strip()
        origin = f"builtin:{module}" if dist == self.own else f"entry-point:{dist or ep.value}"
        self._origin = origin
        try:
            obj = ep.load()
        finally:
            self._origin = None
        if isinstance(obj, ModuleType):     # a module of plug-ins: its decorators registered them
            for name, r in list(self._items.items()):   # (when it was imported before, by its origin's module)
                if getattr(r.obj, "__module__", None) == obj.__name__ and r.origin != origin:
                    self._items[name] = Registered(name, r.obj, origin, r.args, r.summary)
            return
        taken = [n for n, r in self._items.items() if r.obj is obj and n != ep.name]
        if taken:
            raise ValueError(f"entry point {ep.name} = {ep.value!r} ({self.group}) names a {self.kind} registered "
                             f"as {taken[0]!r}: use one name in both places")
        current = self._items.get(ep.name)
        if current is None or current.obj is not obj:
            self.add(ep.name, obj, origin, getattr(obj, "args_model", None))
        r = self._items[ep.name]
        self._items[ep.name] = Registered(ep.name, r.obj, origin, r.args, r.summary)

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
        model = self.get(name).args
        if model is None:
            return dict(args)
        try:
            return model.model_validate(args).model_dump(mode="json")
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise ValueError(f"{self.kind} {name!r}: argument {where or '?'}: {first.get('msg')}") from None


def own_metadata() -> dict[str, Path]:
    """The project's own installed metadata a copy of its source needs elsewhere (a step image, a Harbor runtime):
    `<name>.dist-info/METADATA` and `entry_points.txt` (how the registry finds the built-ins) -> their files. Not
    RECORD or direct_url.json: they name this machine's paths."""
    out: dict[str, Path] = {}
    for f in distribution(OWN).files or ():
        if f.name in ("METADATA", "entry_points.txt") and f.parent.name.endswith(".dist-info"):
            out[f"{f.parent.name}/{f.name}"] = Path(f.locate())
    return out


def entry_points(group: str) -> list:
    """The entry points of `group` in the installed distributions (one per distribution name: the first on
    sys.path wins, as importlib.metadata decides)."""
    return list(installed_entry_points(group=group))


def _dist(ep) -> str:
    dist = getattr(ep, "dist", None)
    return _normal(dist.name) if dist is not None else ""


def _normal(name: str) -> str:
    return name.replace("_", "-").replace(".", "-").lower()


def _named(obj: Any, name: str) -> None:
    """A family or extractor class knows its registry name (tasks and events store it)."""
    if isinstance(obj, type) and getattr(obj, "name", None) != name:
        obj.name = name


REGISTRIES: dict[str, Registry] = {}
KINDS = ("extractor", "family", "check", "sandbox")
PLURALS = {"extractor": "extractors", "family": "families", "check": "checks", "sandbox": "sandboxes"}


def registry(kind: str) -> Registry:
    """The registry of one kind: extractor, family, check or sandbox."""
    if not REGISTRIES:
        for k in KINDS:
            REGISTRIES[k] = Registry(k, PLURALS[k], adopt=_named if k in ("extractor", "family") else None)
    if kind not in REGISTRIES:
        raise KeyError(f"no plug-in kind {kind!r}; the kinds are: {', '.join(KINDS)}")
    return REGISTRIES[kind]


def declared(pyproject: Iterable[str] | str) -> dict[str, dict[str, str]]:
    """The entry points a pyproject.toml declares, per group of the plug-in kinds (what an install registers):
    compared with the installed ones by the test suite, and read by the scaffolds."""
    text = pyproject if isinstance(pyproject, str) else "".join(pyproject)
    tables = tomllib.loads(text).get("project", {}).get("entry-points", {})
    return {f"taskmine.{p}": dict(tables.get(f"taskmine.{p}", {})) for p in PLURALS.values()}
