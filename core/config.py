"""Per-dataset settings: `taskmine.toml` inside the dataset's export folder (optional).

Example:

    families = ["ticket_triage", "commit_link"]   # default: every registered family (`taskmine families list`)
    repeats = 3                 # oracle and null runs per task
    validate_parallel = 1       # tasks validated at once (each episode a sandbox session of its own)
    workers = 0                 # worker processes of the stages that work in chunks (anonymization's NER, scrubbing
                                #   and leak audit; core.parallel): 0 = every core this process may use, 1 = none
    chunk_events = 500          # events per chunk a worker takes at a time (memory per worker grows with it)
    sandbox_hosts = ["unix:///var/run/docker.sock*2", "ssh://ci@build-2*4 files=copy"]  # Docker daemons to
                                #   spread validation over, URL*N = N sessions at once (environments.pool; the
                                #   environment's TASKMINE_SANDBOX_HOSTS wins when set)
    max_quarantine_rate = 0.2   # the quarantine asset check fails above this share of records
    max_withheld_rate = 0.02    # the anonymized_leaks check fails above this share of records withheld (the
                                #   leak audit still refused something in them after anonymization)
    ner_model = "en_core_web_sm"  # "" turns NER off (known identities and patterns are still scrubbed)
    allow = ["Apache", "GitHub"]  # reviewed public names NER must not treat as people or places
    answer_window_hours = 72    # a Slack answer / e-mail reply must come this soon after its question
    channel_answer_hours = 4    # an answer posted in the channel (not a thread) must come this soon
    context_messages = 10       # messages before a question kept as its context
    resolution_window_hours = 24  # a comment this close to a ticket's resolution is its resolution note
    near_duplicate_threshold = 0.5  # word 3-gram Jaccard from which requests naming the same things are copies
    split_by = "family"         # "family" | "near_duplicate": the unit that never crosses train/test
    cluster_method = "agglomerative"  # or "hdbscan" (families of work items)
    cluster_distance = 0.5      # cosine distance at which the agglomerative tree is cut
    test_after = ""             # ISO date: every item after it is test (time split), on top of split_by
    probe_max = 0.5             # a probe (task_builders.probes) must score under this, or the task is rejected
    probe_max_by = {"ticket_triage:as_filed" = 0.75}  # per "family:probe", "probe" or "family" (most specific
                                #   wins; default {}: the family's own, code_change 0.01, else probe_max)
    alternative_min = 0.99      # a valid alternative (task_builders.alternatives) scoring under this is a measured
                                #   grader false negative (recorded, never a reason to reject)
    baselines = true            # validations: run the retrieval baselines (each family's `baselines`) on valid tasks
    rollouts = 0                # validations: model-agent rollouts per valid task (only when a model is
                                #   configured in the llm resource; 0 = none)
    band_min = 0.02             # with rollouts: publish only tasks whose pass rate is in [band_min, band_max];
    band_max = 0.7              #   the others are retired with the reason (without rollouts: every task is
                                #   kept, marked "unmeasured", or "easy" when a baseline solves it)
    license = "Apache-2.0"      # the published dataset's licence (default "other"), in the card's YAML
    source_licenses = {git = "MIT", email = "Apache-2.0"}   # per source, in the card's provenance table

    [families.ticket_triage]    # a family's own settings: its `Config` model (`taskmine families list`)
    window_days = 3             #   changes this soon after filing count as triage
    [families.commit_link]
    days_after_fix = 7          #   the world is the repository this long after the fix
    [families.code_change]      #   see task_builders/families/code_change.py, CodeChangeConfig
    test = ""                   #   test command; runs $TASKMINE_TESTS, writes JUnit XML to $TASKMINE_JUNIT
    install = ["hypothesis<7"]  #   more to install for the tests (PyPI specifiers / npm packages)

With family tables, the list of families to build moves into the table too: `[families]` `enabled = [...]`
(a top-level `families = [...]` array and `[families.<name>]` tables cannot both be written in TOML).
The flat keys of earlier versions (`triage_window_days`, `link_days`, `code_test`, `code_timeout_s`, ...) are
still read, each into its family's table (a family's `Config.legacy` names them); a key set both ways is an error.

Invariant: an unknown key or a wrong type is a one-line error naming the file, the key and the fix; a family's
table is validated by the family's own model, so a family adds settings without touching this module.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import tomllib
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from core.hosts import parse_hosts
from core.registry import registry

CONFIG_NAME = "taskmine.toml"


def known_families() -> tuple[str, ...]:
    return tuple(registry("family").all())


class ConfigError(ValueError):
    pass


class FamilyConfig(BaseModel):
    """A family's settings, the `[families.<name>]` table of taskmine.toml: a family subclasses it as its
    `Config` (task_builders.families.Family) and reads it with `self.settings(ctx)`. Unknown keys are an error.
    `legacy` maps top-level keys of earlier versions to its fields (still read)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    legacy: ClassVar[dict[str, str]] = {}


def _error(text: str) -> PydanticCustomError:
    """A validation error whose message is `text` as written (pydantic prefixes a plain ValueError's)."""
    return PydanticCustomError("taskmine_config", "{text}", {"text": text})


class DatasetConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    families: tuple[str, ...] | None = None  # None: every registered family
    repeats: int = Field(3, ge=1, le=20)
    validate_parallel: int = Field(1, ge=1, le=32)
    workers: int = Field(0, ge=0, le=256)        # 0: the cores this process may use (core.parallel.workers)
    chunk_events: int = Field(500, ge=1, le=1_000_000)
    sandbox_hosts: tuple[str | dict, ...] = ()   # environments.pool entries (kept as strings URL*N);
                                                 #   () = the environment's daemon
    max_quarantine_rate: float = Field(0.2, ge=0, le=1)
    max_withheld_rate: float = Field(0.02, ge=0, le=1)
    history_limit: int = Field(200, ge=0)
    test_share: float = Field(0.2, ge=0, le=1)
    ner_model: str = "en_core_web_sm"   # spaCy model for names outside the identity graph; "" turns NER off
    allow: tuple[str, ...] = ()         # reviewed public names (organisations, products, places) NER keeps
    answer_window_hours: float = Field(72.0, gt=0)
    channel_answer_hours: float = Field(4.0, gt=0)
    context_messages: int = Field(10, ge=0, le=1000)
    resolution_window_hours: float = Field(24.0, ge=0)
    near_duplicate_threshold: float = Field(0.5, gt=0, le=1)
    split_by: Literal["family", "near_duplicate"] = "family"
    cluster_method: Literal["agglomerative", "hdbscan"] = "agglomerative"
    cluster_distance: float = Field(0.5, gt=0, lt=2)
    test_after: str = ""
    probe_max: float = Field(0.5, gt=0, le=1)
    probe_max_by: dict[str, float] = Field(default_factory=dict)
    alternative_min: float = Field(0.99, gt=0, le=1)
    baselines: bool = True
    rollouts: int = Field(0, ge=0, le=100)
    band_min: float = Field(0.02, ge=0, le=1)
    band_max: float = Field(0.7, ge=0, le=1)
    license: str = "other"              # the published dataset's licence (an SPDX id; the card's YAML `license`)
    source_licenses: dict[str, str] = {}  # per source (jira, git, email, slack, github): its licence, for the card
    # the [families.<name>] tables, each validated by its family's Config (as JSON; `family(name)` gives the model)
    family_tables: dict[str, dict[str, Any]] = {}

    @model_validator(mode="before")
    @classmethod
    def _families_tables(cls, data: Any) -> Any:
        """`families` as a list (the families to build) or a table (`enabled` and one table per family); the flat
        keys of earlier versions moved into their family's table; every table validated by its family's model."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        tables: dict[str, dict] = {k: dict(v) for k, v in (data.pop("family_tables", None) or {}).items()}
        fams = data.get("families")
        if isinstance(fams, dict):
            fams = dict(fams)
            data["families"] = fams.pop("enabled", None)
            for name, table in fams.items():
                if not isinstance(table, dict):
                    raise _error(f"families.{name}: a family's settings are a table ([families.{name}]); the "
                                 f"families to build are `enabled = [...]` under [families]")
                tables.setdefault(name, {}).update(table)
        if not tables and not any(k not in cls.model_fields for k in data):
            return data          # nothing of a family's: no need to load them
        known = {name: r.obj.Config for name, r in registry("family").all().items()}
        written: dict[tuple[str, str], str] = {}     # (family, field) -> the legacy key it was written as
        for name, model in known.items():
            for old, new in model.legacy.items():
                if old in data:
                    table = tables.setdefault(name, {})
                    if new in table:
                        raise _error(f"{old} and families.{name}.{new} are both set: keep families.{name}.{new}")
                    table[new] = data.pop(old)
                    written[(name, new)] = old
        out = {}
        for name, table in sorted(tables.items()):
            if name not in known:
                raise _error(f"families.{name}: no family named {name!r}; known: {', '.join(known)}")
            try:
                out[name] = known[name].model_validate(table).model_dump(mode="json")
            except ValidationError as exc:
                err = exc.errors()[0]
                field = ".".join(str(x) for x in err["loc"])
                where = written.get((name, field)) or f"families.{name}.{field}"
                msg = err["msg"].removeprefix("Value error, ")
                raise _error(f"{where}: {msg}") from None
        data["family_tables"] = out
        return data

    @field_validator("sandbox_hosts")
    @classmethod
    def _hosts(cls, v: tuple) -> tuple[str, ...]:
        """Checked, and kept as canonical `URL*N [files=...]` strings (the config stays hashable)."""
        return tuple(str(h) for h in parse_hosts(list(v), "sandbox_hosts"))

    @field_validator("test_after")
    @classmethod
    def _date(cls, v: str) -> str:
        if v:
            try:
                dt.date.fromisoformat(v[:10])
            except ValueError:
                raise ValueError(f"test_after {v!r} is not an ISO date like 2021-06-30") from None
        return v

    @model_validator(mode="after")
    def _band(self) -> DatasetConfig:
        if self.band_min > self.band_max:
            raise ValueError(f"band_min {self.band_min:g} is above band_max {self.band_max:g}")
        return self

    def model_post_init(self, _context) -> None:
        known = known_families()
        unknown = [f for f in self.families or () if f not in known]
        if unknown:
            raise ValueError(f"unknown family {unknown[0]!r}; choose from {', '.join(known)}")

    def enabled(self) -> tuple[str, ...]:
        """The families this dataset builds: the configured ones, else every registered one."""
        return self.families if self.families is not None else known_families()

    def family(self, name: str) -> FamilyConfig:
        """The settings of family `name`: its `[families.<name>]` table, or its defaults."""
        return _family_settings(name, json.dumps(self.family_tables.get(name, {}), sort_keys=True))


@functools.lru_cache(maxsize=256)
def _family_settings(name: str, table: str) -> FamilyConfig:
    return registry("family").get(name).obj.Config.model_validate(json.loads(table))


def load_config(dataset_dir: Path | None) -> DatasetConfig:
    path = dataset_dir / CONFIG_NAME if dataset_dir else None
    if path is None or not path.exists():
        return DatasetConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return DatasetConfig(**data)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax or delete the file") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{path}: {where + ': ' if where else ''}{msg}; see `taskmine run --help` for the keys "
                          f"and `taskmine families list` for the families' tables") from None
