"""The one typed model of what an agent can do in a company world: every tool's request, as pydantic models
in one discriminated union per kind (reads and writes), with the JSON schema each tool is served with.

This module owns, for every tool:
- validation (the models: types, lengths, formats; a bad call is refused with one line saying why),
- the action log's entries (`Logged`: a write as the agent asked it and what it did),
- how a reference is replayed (`cli_argv`: the `company` command that makes the same call),
- and what graders read (they get `Logged` entries and match on the action's class; nothing else parses it).

The `company` CLI and the MCP server are both generated from `TOOLS` (names, descriptions, schemas,
examples), so the two surfaces cannot drift apart.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

SHORT = 200
TEXT = 100_000
KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*-[0-9]+$|^[\w.-]+/[\w.-]+#[0-9]+$")
SHA_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")
ADDR_RE = re.compile(r"^[^@\s<>,]+@[^@\s<>,]+$")

Short = Annotated[str, Field(min_length=1, max_length=SHORT)]
Text = Annotated[str, Field(min_length=1, max_length=TEXT)]


def _key(v: str | None) -> str | None:
    if v is not None and not KEY_RE.match(v):
        raise ValueError(f"{v!r} is not an issue key like PROJ-123")
    return v


def _addresses(v: list[str] | None) -> list[str] | None:
    if v is None:
        return None
    out = []
    for a in v:
        for part in a.split(","):
            part = part.strip().lower()
            if part and not ADDR_RE.match(part):
                raise ValueError(f"{part!r} is not an e-mail address")
            if part:
                out.append(part)
    return list(dict.fromkeys(out))


def _one_line(value: str, what: str) -> str:
    value = value.strip()
    if "\n" in value:
        raise ValueError(f"{what} must be one line")
    return value


class Tool(BaseModel):
    """A tool call. Subclasses set `tool` (the discriminator), a docstring (the tool's description),
    `examples` (CLI lines) and, for the CLI, which fields are positional."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)
    kind: ClassVar[str] = "read"  # read | write | shell
    examples: ClassVar[tuple[str, ...]] = ()
    positional: ClassVar[tuple[str, ...]] = ()
    flags: ClassVar[dict[str, str]] = {}  # field -> CLI flag when not --<field>

    @classmethod
    def name(cls) -> str:
        return cls.model_fields["tool"].default

    @classmethod
    def description(cls) -> str:
        return " ".join((cls.__doc__ or "").split())

    @classmethod
    def input_schema(cls) -> dict:
        schema = cls.model_json_schema()
        schema["properties"].pop("tool", None)
        schema["required"] = [r for r in schema.get("required", []) if r != "tool"]
        schema.pop("title", None)
        schema["additionalProperties"] = False
        return schema

    def arguments(self) -> dict[str, Any]:
        return self.model_dump(exclude={"tool"}, exclude_none=True, exclude_defaults=True)

    def cli_argv(self) -> list[str]:
        """The `company` command line that makes this call (how a reference is replayed)."""
        group, _, verb = self.name().partition("_")
        argv = ["company", group, verb] if verb else ["company", group]
        values = self.arguments()
        for name in self.positional:
            if name in values:
                argv.append(str(values.pop(name)))
        for name, value in values.items():
            flag = self.flags.get(name, "--" + name.replace("_", "-"))
            for v in value if isinstance(value, list) else [value]:
                argv += [flag, str(v)]
        return argv

    def cli(self) -> str:
        return shlex.join(self.cli_argv())


# --- reads ------------------------------------------------------------------------------------------------


class JiraSearch(Tool):
    """Search the issue tracker (Jira, GitHub issues) as it stood at this moment: issues whose text or comments
    match, best first (BM25)."""

    tool: Literal["jira_search"] = "jira_search"
    query: Short
    project: Short | None = None
    limit: int = Field(10, ge=1, le=50)
    positional: ClassVar = ("query",)
    examples: ClassVar = ('company jira search "login timeout"', "company jira search NullPointerException --limit 5")


class JiraShow(Tool):
    """Show an issue as it stood at this moment: its fields, description, comments and history."""

    tool: Literal["jira_show"] = "jira_show"
    key: Short
    positional: ClassVar = ("key",)
    examples: ClassVar = ("company jira show PROJ-123",)


class JiraProject(Tool):
    """What a project's issues used up to this moment: issue types, priorities, components and assignees (the
    values a triager chooses from). Without a project: the list of projects."""

    tool: Literal["jira_project"] = "jira_project"
    project: Short | None = None
    positional: ClassVar = ("project",)
    examples: ClassVar = ("company jira project CORE",)


class MailSearch(Tool):
    """Search the mail archive up to this moment: messages whose subject or body match, best first."""

    tool: Literal["mail_search"] = "mail_search"
    query: Short
    limit: int = Field(10, ge=1, le=50)
    positional: ClassVar = ("query",)
    examples: ClassVar = ('company mail search "invoice overdue"',)


class MailRead(Tool):
    """Read one e-mail (by its Message-ID) and list the messages of its thread up to this moment."""

    tool: Literal["mail_read"] = "mail_read"
    message_id: Short
    positional: ClassVar = ("message_id",)
    examples: ClassVar = ("company mail read 1a2b3c@example.com",)


class SlackSearch(Tool):
    """Search chat messages up to this moment, best first; optionally in one channel."""

    tool: Literal["slack_search"] = "slack_search"
    query: Short
    channel: Short | None = None
    limit: int = Field(10, ge=1, le=50)
    positional: ClassVar = ("query",)
    examples: ClassVar = ('company slack search "deploy failed" --channel dev',)


class SlackHistory(Tool):
    """The latest messages of a channel (thread roots, with reply counts), or of one thread, up to this moment."""

    tool: Literal["slack_history"] = "slack_history"
    channel: Short
    thread_ts: Short | None = None
    limit: int = Field(30, ge=1, le=200)
    before: Short | None = None
    positional: ClassVar = ("channel",)
    examples: ClassVar = ("company slack history dev", "company slack history dev --thread-ts 1602126299.249000")


class SlackChannels(Tool):
    """The chat channels of the company, with how many messages each had at this moment."""

    tool: Literal["slack_channels"] = "slack_channels"
    examples: ClassVar = ("company slack channels",)


# --- writes (recorded in the action log) ---------------------------------------------------------------------


class JiraUpdate(Tool):
    """Set fields of an issue (type, priority, components, assignee, resolution, status, duplicate link);
    later reads show the new values."""

    tool: Literal["jira_update"] = "jira_update"
    key: Short
    type: Short | None = None
    priority: Short | None = None
    components: list[Short] | None = Field(None, max_length=20)
    assignee: Short | None = None
    resolution: Short | None = None
    status: Short | None = None
    duplicate_of: Short | None = None
    kind: ClassVar = "write"
    positional: ClassVar = ("key",)
    flags: ClassVar = {"components": "--component"}
    examples: ClassVar = ("company jira update PROJ-123 --type Bug --priority Major --component API "
                          "--assignee 'Ann Lee'",
                          "company jira update PROJ-123 --duplicate-of PROJ-99")

    @field_validator("key", "duplicate_of")
    @classmethod
    def _keys(cls, v: str | None) -> str | None:
        return _key(v)

    @field_validator("type", "priority", "assignee", "resolution", "status")
    @classmethod
    def _line(cls, v: str | None) -> str | None:
        return None if v is None else _one_line(v, "a field value")

    def fields(self) -> dict[str, Any]:
        return {k: (sorted(set(v)) if k == "components" else v) for k, v in self.arguments().items() if k != "key"}


class JiraComment(Tool):
    """Add a comment to an issue."""

    tool: Literal["jira_comment"] = "jira_comment"
    key: Short
    body: Text
    kind: ClassVar = "write"
    positional: ClassVar = ("key",)
    examples: ClassVar = ("company jira comment PROJ-123 --body 'Fixed in 2.3.1: the pool now times out after 30s.'",)

    @field_validator("key")
    @classmethod
    def _keys(cls, v: str) -> str:
        return _key(v)


class MailSend(Tool):
    """Send a new e-mail."""

    tool: Literal["mail_send"] = "mail_send"
    to: list[Short] = Field(min_length=1, max_length=50)
    cc: list[Short] = Field([], max_length=50)
    subject: Short
    body: Text
    kind: ClassVar = "write"
    examples: ClassVar = ("company mail send --to bob@example.com --subject 'Invoice 1042' --body 'Paid on the 3rd.'",)

    @field_validator("to", "cc")
    @classmethod
    def _addrs(cls, v: list[str]) -> list[str]:
        return _addresses(v)


class MailReply(Tool):
    """Reply to an e-mail (by its Message-ID): to its sender unless `to` is given, in its thread, subject "Re: ..."."""

    tool: Literal["mail_reply"] = "mail_reply"
    message_id: Short
    body: Text
    to: list[Short] | None = Field(None, max_length=50)
    cc: list[Short] = Field([], max_length=50)
    kind: ClassVar = "write"
    positional: ClassVar = ("message_id",)
    examples: ClassVar = ("company mail reply 1a2b3c@example.com --body 'Done, see the attached numbers.' "
                          "--cc carol@example.com",)

    @field_validator("to", "cc")
    @classmethod
    def _addrs(cls, v: list[str] | None) -> list[str] | None:
        return _addresses(v)


class SlackPost(Tool):
    """Post a chat message in a channel, or in a thread of it (`thread_ts` of the thread's first message)."""

    tool: Literal["slack_post"] = "slack_post"
    channel: Short
    text: Text
    thread_ts: Short | None = None
    kind: ClassVar = "write"
    positional: ClassVar = ("channel",)
    examples: ClassVar = ("company slack post dev --text 'Deployed 2.3.1.'",
                          "company slack post dev --thread-ts 1602126299.249000 --text 'It was the cache.'")

    @field_validator("channel")
    @classmethod
    def _channel(cls, v: str) -> str:
        return v.lstrip("#")


class Answer(Tool):
    """Give your answer: a commit SHA, or a text."""

    tool: Literal["answer"] = "answer"
    sha: Short | None = None
    text: Text | None = None
    kind: ClassVar = "write"
    examples: ClassVar = ("company answer --sha 3f2a9c1", "company answer --text 'Restart the worker.'")

    @field_validator("sha")
    @classmethod
    def _sha(cls, v: str | None) -> str | None:
        if v is not None and not SHA_RE.match(v):
            raise ValueError(f"{v!r} is not a commit SHA (4 to 64 hex digits)")
        return None if v is None else v.lower()

    def model_post_init(self, _ctx) -> None:
        if (self.sha is None) == (self.text is None):
            raise ValueError("give exactly one of --sha and --text")


# --- shell and files (served over MCP, in the task's sandbox session; in the CLI the agent simply runs git, sh
# and its editor) ----------------------------------------------------------------------------------------------


class Git(Tool):
    """Run git in one of the task's repositories (in your home), e.g. ["log", "--oneline", "-5"]."""

    tool: Literal["git"] = "git"
    args: list[Annotated[str, Field(max_length=4096)]] = Field(min_length=1, max_length=100)
    repo: Short | None = None
    kind: ClassVar = "shell"


class Shell(Tool):
    """Run a shell command (sh -c) in your home; output is bounded; processes it leaves are killed."""

    tool: Literal["shell"] = "shell"
    command: Annotated[str, Field(min_length=1, max_length=TEXT)]
    timeout_s: float = Field(60, gt=0, le=600)
    kind: ClassVar = "shell"


HOME = "/home/agent"
WORK_ROOTS = (HOME, "/tmp")   # where the file tools read and write (the agent's home and its temp folder)


def _work_path(v: str) -> str:
    """A path of the file tools: relative to the home, or absolute under the home or /tmp; no `..` outside."""
    v = v.strip()
    if "\0" in v:
        raise ValueError("a path has no NUL character")
    full = posixpath.normpath(v if v.startswith("/") else posixpath.join(HOME, v.removeprefix("~/")))
    if not any(full == r or full.startswith(r + "/") for r in WORK_ROOTS):
        raise ValueError(f"{v!r} is outside your home ({HOME}) and /tmp")
    return full


class ReadFile(Tool):
    """Read a text file of your work tree (a path relative to your home, e.g. "repo/src/app.py", or under /tmp);
    optionally only lines `start` to `end` (1-based, inclusive)."""

    tool: Literal["read_file"] = "read_file"
    path: Annotated[str, Field(min_length=1, max_length=4096)]
    start: int | None = Field(None, ge=1)
    end: int | None = Field(None, ge=1)
    kind: ClassVar = "shell"

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return _work_path(v)


class WriteFile(Tool):
    """Write a text file of your work tree (created with its folders, or replaced whole): `content` is the file's
    complete new text."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)  # the text as given
    tool: Literal["write_file"] = "write_file"
    path: Annotated[str, Field(min_length=1, max_length=4096)]
    content: Annotated[str, Field(max_length=TEXT * 5)]
    kind: ClassVar = "shell"

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return _work_path(v)


class ListFiles(Tool):
    """List a folder of your work tree (default: your home): names, folders with a trailing "/", and sizes;
    `recursive` walks it (skipping .git)."""

    tool: Literal["list_files"] = "list_files"
    path: Annotated[str, Field(min_length=1, max_length=4096)] = HOME
    recursive: bool = False
    kind: ClassVar = "shell"

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return _work_path(v)


READS = (JiraSearch, JiraShow, JiraProject, MailSearch, MailRead, SlackSearch, SlackHistory, SlackChannels)
WRITES = (JiraUpdate, JiraComment, MailSend, MailReply, SlackPost, Answer)
SHELLS = (Git, Shell, ReadFile, WriteFile, ListFiles)
TOOLS: dict[str, type[Tool]] = {t.name(): t for t in (*READS, *WRITES, *SHELLS)}

Action = Annotated[Union[JiraUpdate, JiraComment, MailSend, MailReply, SlackPost, Answer],  # noqa: UP007
                   Field(discriminator="tool")]
AnyCall = Annotated[Union[tuple(TOOLS.values())], Field(discriminator="tool")]  # noqa: UP007
ACTION = TypeAdapter(Action)
CALL = TypeAdapter(AnyCall)


class Logged(BaseModel):
    """One write in the action log: what the agent asked (`action`) and what it did (`effect`: the resolved
    recipients, subject and thread of a mail, the issue's fields after an update, ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    seq: int
    action: Action
    effect: dict[str, Any] = {}


def parse_call(name: str, arguments: dict[str, Any] | None) -> Tool:
    """The typed call for tool `name` with `arguments`; ValueError with one line when it is not valid."""
    cls = TOOLS.get(name)
    if cls is None:
        raise ValueError(f"no tool {name!r}; the tools are: {', '.join(sorted(TOOLS))}")
    try:
        return cls.model_validate({**(arguments or {}), "tool": name})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "tool")
        msg = str(first.get("msg", "invalid")).replace("Value error, ", "")
        raise ValueError(f"{name}: {where + ': ' if where else ''}{msg}") from None
