"""The `Extractor` base and the explicit registry.

Invariants (DESIGN.md, Conventions 4-5):
- An extractor is one small class: a registry name, a source name, file patterns, a pydantic config
  and one streaming `iter_records(path)` that yields `Event` and `Quarantine` rows one at a time.
  It never loads a whole export into memory and never drops a bad record silently: a record it
  cannot parse becomes a `Quarantine` row with file, offset and reason, and the next record is read.
- Registration is explicit (`@register_extractor("jira_json")`), and every connector, built-in or third-party,
  is found through the `taskmine.extractors` entry point group (the built-ins are the project's own entry
  points, in its pyproject.toml). The registry stores names, never functions.
- Source-specific knowledge ends here (DESIGN.md, Convention 16): a connector says what its source is to the
  company with class attributes (`medium`, `directory`, `handle_value`, `reference_attrs`) and normalizes each
  record's fields (`automated`, `attrs.new_text`, references in native ids); later stages never test a source
  name.
- Extractors never import dagster and never write to the warehouse.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from core.registry import registry as _r
from warehouse.ids import content_hash, event_id
from warehouse.schemas import MEDIA, Event, Quarantine

Row = Event | Quarantine
ENTRY_POINT_GROUP = "taskmine.extractors"
EXCERPT_LIMIT = 2048


class ExtractorConfig(BaseModel):
    """Per-extractor settings; subclasses add fields. Unknown keys are an error, not ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Extractor(ABC):
    """Base of every connector. Subclasses set the class attributes and implement `iter_records`."""

    name: ClassVar[str] = ""              # registry name, e.g. "jira_json"
    source: ClassVar[str] = ""            # Event.source, e.g. "jira"
    medium: ClassVar[str] = ""            # Event.medium, one of warehouse.schemas.MEDIA: what mining reads it as
    directory: ClassVar[bool] = False     # its accounts are a directory's (one per person: Jira, Slack users)
    # what a person's handle ("<source>:<value>") holds once anonymized: their pseudonym's user name, or (git:
    # an author is an e-mail address, and the rewritten history's authors are pseudonymous addresses) e-mail
    handle_value: ClassVar[str] = "username"
    # attrs whose values name other records (URLs, commit SHAs, keys) apart from the text: links reads them too
    reference_attrs: ClassVar[tuple[str, ...]] = ()
    patterns: ClassVar[tuple[str, ...]] = ()  # glob patterns of the files it reads (for `detect`)
    Config: ClassVar[type[ExtractorConfig]] = ExtractorConfig

    def __init__(self, dataset: str, config: ExtractorConfig | dict | None = None, run_id: str = "", *,
                 root: Path | None = None):
        self.dataset = dataset
        self.config = config if isinstance(config, ExtractorConfig) else self.Config(**(config or {}))
        self.run_id = run_id
        self.root = root  # the dataset folder; file names in rows are relative to it (see `rel`)

    def rel(self, path: Path | str) -> str:
        """`path` as rows name it: relative to the dataset folder (POSIX), so that provenance and
        quarantine ids do not change when the export is moved; unchanged when outside it."""
        if self.root is not None:
            # Lexically first: a symlink inside the export keeps its own name even when it points outside.
            for p, r in ((os.path.abspath(path), os.path.abspath(self.root)),
                         (Path(path).resolve(), Path(self.root).resolve())):
                try:
                    return Path(p).relative_to(r).as_posix()
                except ValueError:
                    pass
        return str(path)

    # -- discovery ---------------------------------------------------------------------------------
    @classmethod
    def detect(cls, root: Path) -> list[Path]:
        """The inputs under `root` this extractor claims (files matching `patterns`), sorted.

        Override when an input is not a file (a git repository is a folder). `root` may be one file (a
        download checked on its own): it is then a folder holding only that file (see `walk`)."""
        found = []
        for dirpath, dirnames, filenames in walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            for f in sorted(filenames):
                if any(fnmatch.fnmatch(f, p) for p in cls.patterns):
                    found.append(Path(dirpath) / f)
        return found

    # -- the one method a connector writes ---------------------------------------------------------
    @abstractmethod
    def iter_records(self, path: Path) -> Iterator[Row]:
        """Yield one `Event` or `Quarantine` at a time from one input (file or folder)."""

    # -- helpers for subclasses --------------------------------------------------------------------
    def event(self, *, kind: str, native_id: str, **fields) -> Event:
        """An event of this source; its `medium` is the class's unless the record says otherwise. Set
        `automated` when the source itself says a machine wrote the record (a bot flag, an auto-reply header)."""
        medium = fields.setdefault("medium", self.medium)
        if medium and medium not in MEDIA:  # "" is allowed: the events reach the world, mining makes nothing of them
            raise ValueError(f"{type(self).__name__}.medium must be one of {', '.join(MEDIA)} (what mining reads "
                             f"its events as), not {medium!r}")
        return Event(event_id=event_id(self.dataset, self.source, native_id), dataset=self.dataset,
                     source=self.source, kind=kind, native_id=native_id, ingest_run_id=self.run_id,
                     **fields)

    def quarantine(self, *, file: Path | str, error_class: str, message: str, offset: int | None = None,
                   member: str | None = None, excerpt: str | bytes = "") -> Quarantine:
        if isinstance(excerpt, bytes):
            excerpt = excerpt[:EXCERPT_LIMIT].decode("utf-8", "replace")
        excerpt = excerpt[:EXCERPT_LIMIT]
        message = " ".join(str(message).split())[:500]
        return Quarantine(
            quarantine_id=content_hash("quarantine", self.dataset, self.source, str(file), offset, member,
                                       error_class),
            dataset=self.dataset, source=self.source, file=str(file), offset=offset, member=member,
            error_class=error_class, message=message, excerpt=excerpt, ingest_run_id=self.run_id)


def walk(root: Path):
    """`os.walk(root)`; a file is walked as a folder that holds only it, so every `detect` can be asked
    about a single downloaded file (`taskmine extractors check export.zip`)."""
    root = Path(root)
    if root.is_file():
        yield str(root.parent), [], [root.name]
    else:
        yield from os.walk(root)


def says_where(q: Quarantine, inputs: set[str]) -> bool:
    """A quarantine row says where the problem is: an offset or member for a record inside an input, or,
    for a row about a whole input (it cannot be opened, git cannot read the repository, a zip is over the
    size limit), the input itself as its `file`."""
    return q.offset is not None or bool(q.member) or q.file in inputs


def parse_iso_ts(value) -> dt.datetime | None:
    """An ISO 8601 date with a zone (Jira's "2013-03-06T14:22:11.000+0000", GitHub's "...Z") -> an aware
    datetime; None when absent, zoneless or unparseable (the caller quarantines or flags, never guesses)."""
    if not isinstance(value, str):
        return None
    try:
        ts = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return ts if ts.tzinfo is not None else None


# --- registry ---------------------------------------------------------------------------------------
# One registry for every plug-in kind (core/registry.py); extractors are its "extractor" kind, whose
# entry point group is `taskmine.extractors`.


def _registry():
    return _r("extractor")


def register_extractor(name: str):
    """Class decorator: make `cls` available under `name`. A second class under one name is an error."""

    def wrap(cls: type[Extractor]) -> type[Extractor]:
        if not (isinstance(cls, type) and issubclass(cls, Extractor)):
            raise TypeError(f"@register_extractor({name!r}) must decorate an Extractor subclass")
        cls.name = name
        _registry().add(name, cls, f"builtin:{cls.__module__}")
        return cls

    return wrap


def registry():
    """Every registered extractor, builtin and third-party, by name (sorted): name -> Registered (.cls)."""
    return _registry().all()


def get_extractor(name: str) -> type[Extractor]:
    return _registry().get(name).obj
