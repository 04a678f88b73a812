"""Every table taskmine writes, declared once.

Invariants:
- Each table is one frozen pydantic model. Its Arrow schema (`arrow_schema`) and DuckDB DDL
  (`duckdb_ddl`) are derived from the model, never written by hand, so there is exactly one place a
  column is declared.
- Nested values (dicts, lists of dicts) are stored as canonical JSON strings so that every engine
  (DuckDB, Spark, Trino, pandas) reads the Parquet files without a custom type. Two list types are native:
  `list[str]` (Arrow list<string>, DuckDB VARCHAR[]) and `list[float]` (Arrow list<float32>, DuckDB
  FLOAT[]; vectors: 4 bytes a number, and Parquet stores them without a JSON parse on every read).
- Timestamps are UTC, microsecond precision.
"""

from __future__ import annotations

import datetime as dt
import json
import types
import typing
from typing import Annotated, Any, ClassVar, Union

import pyarrow as pa
from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from warehouse.ids import canonical_json

UTC = dt.UTC


class Record(BaseModel):
    """Base of every row: frozen, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    table: ClassVar[str] = ""
    key: ClassVar[tuple[str, ...]] = ()

    def to_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if _is_json(field.annotation) and value is not None:
                value = canonical_json(value)
            row[name] = value
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]):
        data = dict(row)
        for name, field in cls.model_fields.items():
            if _is_json(field.annotation) and isinstance(data.get(name), str):
                data[name] = json.loads(data[name])
            if isinstance(data.get(name), dt.datetime) and data[name].tzinfo is None:
                data[name] = data[name].replace(tzinfo=UTC)
        return cls(**{k: v for k, v in data.items() if k in cls.model_fields})


# Columns that name the run that wrote a row (a Dagster run id): provenance, never content. No id, content key, cache
# key or published hash reads them (Store.merge keeps a row that differs only in them; Store.content_digest leaves
# them out), so that the same input and salt give the same ids and the same published tasks in every run.
RUN_FIELDS = frozenset({"ingest_run_id", "run_id"})


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("timestamp has no zone; extractors must attach the source's zone")
    return value.astimezone(UTC)


UtcDatetime = Annotated[dt.datetime, AfterValidator(_utc)]


MEDIA = ("tracker", "mail", "chat", "code")  # Event.medium: issues and comments, e-mail, chat messages, commits
# The medium of events the built-in connectors wrote before Event.medium existed (a warehouse from an earlier
# version, whose unchanged exports are not read again) and of events built by hand without one. Extractors set
# `medium` themselves (Extractor.medium); nothing downstream reads this table.
_EARLIER_MEDIA = {"jira": "tracker", "github": "tracker", "email": "mail", "slack": "chat", "git": "code"}


class Event(Record):
    """One message, comment, commit or field change, from any source."""

    table: ClassVar[str] = "events"
    key: ClassVar[tuple[str, ...]] = ("event_id",)

    event_id: str
    dataset: str
    source: str                      # jira, git, email, slack, github
    kind: str                        # issue_created, field_changed, comment, issue_link, commit, ...
    native_id: str                   # the id the source gives it (issue key, SHA, Message-ID, ...)
    thread_key: str | None = None    # events of one conversation share it (an issue key, a thread)
    parent_id: str | None = None     # event_id of the event this one answers or changes
    ts: UtcDatetime
    actor: str | None = None         # raw identity ref, "<source>:<kind>:<value>", see privacy.identity
    actor_name: str | None = None    # display name as the source shows it
    recipients: list[str] = []
    title: str | None = None
    body: str | None = None
    attrs: dict[str, Any] = {}       # source-specific structured fields
    artifacts: list[str] = []        # commit SHAs, file paths
    diff: str | None = None          # large artifact text (a commit's diff), capped by the extractor
    provenance: dict[str, Any] = {}  # {"file": ..., "offset": ..., "member": ...}
    ingest_run_id: str = ""
    # Normalized by the extractor, so that identity, links, mining and signals never branch on source names:
    medium: str = ""                 # what the source is to the company: one of MEDIA (a chat message: kind "message")
    automated: str = ""              # why a machine wrote it (bot, auto-reply header, join notice); "" = a person

    @property
    def withheld(self) -> str:
        """Why the anonymize stage withheld this event ("" when it did not): a withheld event is a stub that keeps
        only its place (ids, thread, time, kind, actor), so mining knows something was there and no task cites it
        (privacy.withhold)."""
        return str(self.attrs.get("withheld") or "")

    @model_validator(mode="before")
    @classmethod
    def _earlier_medium(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("medium") and data.get("source") in _EARLIER_MEDIA:
            data = {**data, "medium": _EARLIER_MEDIA[data["source"]]}
        return data



class Quarantine(Record):
    """A record that could not be parsed. Nothing is dropped silently."""

    table: ClassVar[str] = "quarantine"
    key: ClassVar[tuple[str, ...]] = ("quarantine_id",)

    quarantine_id: str
    dataset: str
    source: str
    file: str
    offset: int | None = None        # byte offset (or record index where the format has no bytes)
    member: str | None = None        # path inside an archive, or the record's native id when known
    error_class: str                 # e.g. json_decode, missing_key, not_a_repository, unreadable
    message: str
    excerpt: str = ""                # bounded raw excerpt (<= 2 KB); stays in the private store
    ingest_run_id: str = ""


class Identity(Record):
    """A handle seen in a source, and the person it resolved to, with the evidence."""

    table: ClassVar[str] = "identities"
    key: ClassVar[tuple[str, ...]] = ("dataset", "handle")

    dataset: str
    handle: str                      # the raw identity ref used in Event.actor
    source: str
    person_id: str
    display_name: str | None = None
    email: str | None = None
    username: str | None = None
    names: list[str] = []            # every display name this handle was seen with
    emails: list[str] = []           # every e-mail address this handle was seen with
    usernames: list[str] = []
    evidence: list[str] = []         # why this handle belongs to this person


class Link(Record):
    """One event's text names another event of the dataset (a key, a SHA, a URL, a Message-ID)."""

    table: ClassVar[str] = "links"
    key: ClassVar[tuple[str, ...]] = ("link_id",)

    link_id: str
    dataset: str
    from_event_id: str
    to_event_id: str
    kind: str                        # jira_key, commit, issue_url, commit_url, message_id
    evidence: str = ""               # the text that made the link


class WorkItem(Record):
    """A unit of real work: a request, the context before it, and the outcome after it."""

    table: ClassVar[str] = "work_items"
    key: ClassVar[tuple[str, ...]] = ("item_id",)

    item_id: str
    dataset: str
    kind: str                        # issue_with_fix, ...
    thread_key: str
    request_event_id: str
    outcome_event_ids: list[str] = []
    context_event_ids: list[str] = []
    ts: UtcDatetime
    attrs: dict[str, Any] = {}
    lineage: list[str] = []          # every source event_id it was built from



class Task(Record):
    """A validated-or-candidate task. task_id is the content hash of everything below."""

    table: ClassVar[str] = "tasks"
    key: ClassVar[tuple[str, ...]] = ("task_id",)

    task_id: str
    dataset: str
    family: str
    item_id: str
    prompt: str
    cutoff: UtcDatetime              # the moment the world is frozen at
    world: dict[str, Any]            # manifest of the world slice: {path: sha256}, plus kind
    world_hash: str
    reference: dict[str, Any]        # the real outcome, in the form the `company` tool submits it
    rubric: dict[str, Any]           # graders.rubric.Rubric as JSON
    lineage: list[str] = []
    split: str = "test"
    canary: str = ""



class Validation(Record):
    """One replay of one task: oracle, null, a probe or an agent."""

    table: ClassVar[str] = "validations"
    key: ClassVar[tuple[str, ...]] = ("validation_id",)

    validation_id: str
    task_id: str
    dataset: str
    run_kind: str                    # oracle, null, probe:<name>, agent
    attempt: int
    score: float | None
    checks: list[dict[str, Any]] = []
    duration_s: float
    image_digest: str | None = None
    sandbox: str                     # docker or local
    error_class: str | None = None   # None, infra, timeout, grader_error
    message: str = ""
    exit_code: int | None = None     # of the agent's command; None when it timed out or left no status
    status: str = ""                 # how the command ended: "exit 0", "timed out", "exit 137 (SIGKILL), OOM-killed"


class Rejection(Record):
    """Why something did not make it to the next stage (the funnel's reasons)."""

    table: ClassVar[str] = "rejections"
    key: ClassVar[tuple[str, ...]] = ("dataset", "stage", "family", "subject_id", "reason")

    dataset: str
    stage: str                       # work_items, candidates, tasks, validated, published
    family: str = ""
    subject_id: str
    reason: str
    detail: str = ""


class Withheld(Record):
    """A record left out because the leak audit still refused something in it after anonymization (DESIGN.md,
    Convention 19): never its text, only what it was, where, and the kind of what was found."""

    table: ClassVar[str] = "withheld"
    key: ClassVar[tuple[str, ...]] = ("dataset", "stage", "record_kind", "record_id")

    dataset: str
    stage: str                       # anonymize (events, commit files, git content), publish (tasks, documents)
    record_kind: str                 # event, commit_file, git_blob, git_path, git_message, task, document
    record_id: str                   # event_id, "<event_id>#<file n>", "<repo>:<object>", task_id
    reason: str                      # the audit's kind of the first hit: email, name, person, secret:<type>, ...
    run_id: str = ""


class Cluster(Record):
    """Where a work item sits: its family, its near-duplicate group, its split (task_builders.cluster)."""

    table: ClassVar[str] = "clusters"
    key: ClassVar[tuple[str, ...]] = ("item_id",)

    item_id: str
    dataset: str
    kind: str
    ts: UtcDatetime
    family: str                      # "f<rank>", 0 = the largest family
    family_label: str                # top terms, e.g. "normalize / none / attributeerror"
    family_size: int                 # items in the family
    dup_group: str                   # item_id of the group's representative (itself when unique)
    dup_count: int                   # items in its near-duplicate group
    representative: bool             # the one item of its group that becomes a task
    split: str                       # train | test
    canary: str = ""                 # the dataset's canary string on test items
    x: float = 0.0                   # the 2-D map (PCA of the request's embedding)
    y: float = 0.0


class Embedding(Record):
    """The vector of one text under one model; task_builders.cluster.embed is the only writer.

    content_hash is sha256 of the model id and the text, so one table holds any number of models and a
    text is embedded once per model and dataset (`Store.append_arrow` keeps the first row of a key)."""

    table: ClassVar[str] = "embeddings"
    key: ClassVar[tuple[str, ...]] = ("content_hash",)

    content_hash: str
    model: str                       # "<name>@<first 8 hex of the weights' sha256>"
    vector: list[float]              # float32, L2-normalized


TABLES: dict[str, type[Record]] = {m.table: m for m in (Event, Quarantine, Identity, Link, WorkItem, Task,
                                                         Validation, Rejection, Withheld, Cluster, Embedding)}


# --- derivation of Arrow and DuckDB schemas -------------------------------------------------------

def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


_NATIVE_LISTS = {str: pa.string(), float: pa.float32()}  # list[X] stored as an Arrow list, not JSON


def _is_json(annotation: Any) -> bool:
    base, _ = _strip_optional(annotation)
    origin = typing.get_origin(base)
    if base is dict or origin is dict:
        return True
    if origin is list:
        (inner,) = typing.get_args(base)
        return inner not in _NATIVE_LISTS
    return False


def _arrow_type(annotation: Any) -> pa.DataType:
    base, _ = _strip_optional(annotation)
    if _is_json(base):
        return pa.string()
    if typing.get_origin(base) is list:
        return pa.list_(_NATIVE_LISTS[typing.get_args(base)[0]])
    mapping = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(),
               dt.datetime: pa.timestamp("us", tz="UTC")}
    try:
        return mapping[base]
    except KeyError:
        raise TypeError(f"no Arrow type for {annotation!r}") from None


def arrow_schema(model: type[Record]) -> pa.Schema:
    fields = []
    for name, field in model.model_fields.items():
        _, optional = _strip_optional(field.annotation)
        fields.append(pa.field(name, _arrow_type(field.annotation), nullable=optional))
    return pa.schema(fields, metadata={b"taskmine.table": model.table.encode()})


_DUCK = {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
         pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ", pa.list_(pa.string()): "VARCHAR[]",
         pa.list_(pa.float32()): "FLOAT[]"}


def duckdb_ddl(model: type[Record]) -> str:
    cols = ", ".join(
        f'"{f.name}" {_DUCK[f.type]}{"" if f.nullable else " NOT NULL"}' for f in arrow_schema(model)
    )
    return f'CREATE TABLE IF NOT EXISTS "{model.table}" ({cols})'


def to_table(model: type[Record], records: typing.Iterable[Record]) -> pa.Table:
    """Records -> Arrow table, validated against the derived schema (a wrong type raises)."""
    rows = []
    for r in records:
        if not isinstance(r, model):
            raise TypeError(f"{type(r).__name__} written to table {model.table}")
        rows.append(r.to_row())
    return pa.Table.from_pylist(rows, schema=arrow_schema(model))


def conform(model: type[Record], data: pa.Table) -> pa.Table:
    """An Arrow table -> the table's schema (columns reordered, types cast safely), or TypeError/ValueError.

    The bulk counterpart of `to_table` for writers that never build one pydantic model per row (vectors):
    every declared column must be there and no other, and a non-nullable column must hold no null."""
    schema = arrow_schema(model)
    missing = [n for n in schema.names if n not in data.column_names]
    extra = [n for n in data.column_names if n not in schema.names]
    if missing or extra:
        raise TypeError(f"table {model.table}: columns {'missing ' + ', '.join(missing) if missing else ''}"
                        f"{'; ' if missing and extra else ''}{'unknown ' + ', '.join(extra) if extra else ''}")
    for f in schema:
        nulls = data.column(f.name).null_count
        if not f.nullable and nulls:
            raise ValueError(f"table {model.table}: {nulls} nulls in non-nullable column {f.name}")
    try:
        return data.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise TypeError(f"table {model.table}: {exc}") from None
