"""The tool server: the company's tools for one episode, on the host, outside the agent's container.

One `ToolServer` per session holds the task's world view (cutoff and hidden events), the persona the agent
acts as, and the episode's action log. It is served over MCP (the official `mcp` SDK) on a Unix socket
that the sandbox mounts (read-only) into the container at /run/company/tools.sock; there, the `company`
CLI is an MCP client of it and `company mcp` relays an agent's stdio MCP session to it. The agent never
holds the world file, the log or the grader: reading them needs the host.

Invariants:
- Every call is validated by its typed model (`environments.actions`); a bad call gets one line saying
  what is wrong, never a traceback, and is not logged as an action.
- Reads never return anything after the cutoff or hidden (see `environments.world`); the episode's own
  writes are visible to later reads (a comment in `jira_show`, a reply in the thread, a post in the
  channel), and only to this episode.
- Every write is appended to the action log, which only the host can read (`actions`); the log is
  bounded (MAX_ACTIONS) and so is every answer (characters).
- The socket server reads at most MAX_LINE bytes of one message; a longer one closes the connection.
- Someone else may answer a write (`requester`: the simulated requester of a communication task answers a
  clarifying question): the answer is shown with the write's result and in later reads (a mail in the
  thread, a post in the thread, a comment on the issue), by its author, and is never in the action log.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import shlex
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from environments import actions as A
from environments.docker_cli import SandboxError
from environments.world import WorldView

MAX_ACTIONS = 200
MAX_TRANSCRIPT = 2000
MAX_ANSWER = 60_000
MAX_LINE = 1 << 20
SOCKET_NAME = "tools.sock"
CONTAINER_SOCKET = f"/run/company/{SOCKET_NAME}"


@dataclass(frozen=True)
class Persona:
    """Who the agent acts as in the world (a pseudonym from the history, or a neutral agent)."""

    name: str = "Agent"
    email: str = "agent@company.invalid"
    handle: str = "agent"

    def address(self) -> str:
        return f"{self.name} <{self.email}>"


@dataclass(frozen=True)
class Reply:
    """A message someone else in the world wrote during the episode, in answer to one of the agent's writes
    (the simulated requester's answer to a clarifying question)."""

    author: Persona
    text: str


Requester = Callable[[A.Logged], "Reply | None"]  # the agent's write -> someone's answer to it, or None


@dataclass
class Result:
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    error: bool = False

    @property
    def empty(self) -> bool:
        return bool(self.data.get("empty"))


class ToolServer:
    """The tools of one episode (see the module docstring)."""

    def __init__(self, view: WorldView | None, *, persona: Persona | None = None, session=None,
                 repos: tuple[str, ...] = (), tools: set[str] | None = None, requester: Requester | None = None):
        self.view = view
        self.persona = persona or Persona()
        self.session = session  # a sandbox Session, for the git and shell tools (may be attached later)
        self.repos = tuple(repos)
        self.allowed = tools
        self.requester = requester
        self.log: list[A.Logged] = []
        self.replies: list[tuple[A.Logged, Reply, str]] = []   # (the write answered, the answer, when)
        self.transcript: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._clock = 0

    @property
    def available(self) -> set[str]:
        """The tools of this episode: every read and write tool; git, shell and the file tools only with a
        session (and git only with a repository); narrowed to the task's list when it has one."""
        names = {n for n, t in A.TOOLS.items() if t.kind != "shell" or self.session is not None}
        if not self.repos:
            names.discard("git")
        return names & self.allowed if self.allowed is not None else names

    # -- what the grader reads ------------------------------------------------------------------------
    @property
    def actions(self) -> list[A.Logged]:
        with self._lock:
            return list(self.log)

    def specs(self) -> list[dict[str, Any]]:
        return [{"name": n, "description": t.description(), "inputSchema": t.input_schema(), "kind": t.kind,
                 "examples": list(t.examples), "positional": list(t.positional), "flags": dict(t.flags)}
                for n, t in A.TOOLS.items() if n in self.available]

    # -- calls ----------------------------------------------------------------------------------------
    def call(self, name: str, arguments: dict[str, Any] | None) -> Result:
        if name not in self.available:
            return self._note(name, arguments, Result(f"no tool {name!r} here; the tools are: "
                                                      f"{', '.join(sorted(self.available))}", error=True))
        try:
            call = A.parse_call(name, arguments)
        except ValueError as exc:
            return self._note(name, arguments, Result(str(exc), error=True))
        try:
            result = getattr(self, f"_{name}")(call)
        except ToolRefused as exc:
            result = Result(str(exc), error=True)
        if len(result.text) > MAX_ANSWER:
            result.text = result.text[:MAX_ANSWER] + f"\n... cut at {MAX_ANSWER} characters"
        return self._note(name, arguments, result)

    def _note(self, name: str, arguments: Any, result: Result) -> Result:
        with self._lock:
            if len(self.transcript) < MAX_TRANSCRIPT:
                self.transcript.append({"tool": name, "arguments": _bounded(arguments), "error": result.error,
                                        "answer": result.text[:300]})
        return result

    def _record(self, action: A.Tool, effect: dict[str, Any]) -> A.Logged:
        with self._lock:
            if len(self.log) >= MAX_ACTIONS:
                raise ToolRefused(f"the action log is full ({MAX_ACTIONS} actions); nothing more is recorded")
            entry = A.Logged(seq=len(self.log) + 1, action=action, effect=effect)
            self.log.append(entry)
            return entry

    def _answered(self, entry: A.Logged, result: Result) -> Result:
        """Let the requester answer the write just recorded; the answer shows in the result and later reads."""
        if self.requester is None:
            return result
        reply = self.requester(entry)
        if reply is None:
            return result
        with self._lock:
            self.replies.append((entry, reply, self._now()))
        result.text += f"\n{reply.author.name} answered:\n{reply.text}"
        result.data["answer"] = {"author": reply.author.name, "text": reply.text}
        return result

    def _replies_to(self, cls: type) -> list[tuple[A.Logged, Reply, str]]:
        with self._lock:
            return [r for r in self.replies if isinstance(r[0].action, cls)]

    def _now(self) -> str:
        """Episode time: just after the cutoff, one second per write (so episode items sort after the world)."""
        self._clock += 1
        base = self.view.cutoff if self.view else dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
        return (base + dt.timedelta(seconds=self._clock)).isoformat()

    def _need_view(self) -> WorldView:
        if self.view is None:
            raise ToolRefused("this task has no company world to read")
        return self.view

    def _mine(self, cls: type, **match) -> list[A.Logged]:
        return [e for e in self.actions if isinstance(e.action, cls)
                and all(getattr(e.action, k, None) == v for k, v in match.items())]

    # -- tracker --------------------------------------------------------------------------------------
    def _jira_search(self, c: A.JiraSearch) -> Result:
        hits = self._need_view().issue_search(c.query, c.limit, c.project)
        if not hits:
            return Result(f"no issue matches {c.query!r}", {"results": [], "empty": True})
        lines = [f"{h['key']}  [{h.get('status') or '-'}]  {h['summary']}\n    {h['match']}" for h in hits]
        return Result("\n".join(lines), {"results": hits})

    def _issue(self, key: str) -> dict:
        issue = self._need_view().issue(key)
        if issue is None:
            raise ToolRefused(f"no issue {key} at this moment (try: company jira search WORDS)")
        for e in self._mine(A.JiraUpdate, key=key):
            for name, value in e.action.fields().items():
                issue["fields"]["issuetype" if name == "type" else name] = value
        issue["comments"] += [{"id": f"{key}#episode-{e.seq}", "author": self.persona.name, "created": e.effect["at"],
                               "body": e.action.body} for e in self._mine(A.JiraComment, key=key)]
        issue["comments"] += [{"id": f"{key}#episode-{e.seq}-answer", "author": r.author.name, "created": at,
                               "body": r.text} for e, r, at in self._replies_to(A.JiraComment) if e.action.key == key]
        issue["comments"].sort(key=lambda c: str(c["created"]))
        return issue

    def _jira_show(self, c: A.JiraShow) -> Result:
        issue = self._issue(c.key)
        lines = [f"{issue['key']}: {issue['summary']}", f"  created: {issue['created']} by {issue['reporter']}"]
        lines += [f"  {k}: {', '.join(map(str, v)) if isinstance(v, list) else v}"
                  for k, v in sorted(issue["fields"].items())]
        if issue["description"]:
            lines += ["", "description:", issue["description"]]
        for h in issue["history"]:
            if h.get("commit") or h.get("source"):      # a commit or a ticket that referenced this one
                lines.append(f"  history {h['at']} {h.get('by') or '?'}: {h.get('event') or 'referenced'} "
                             f"{' '.join(x for x in (h.get('commit'), h.get('source')) if x)}")
                continue
            lines.append(f"  history {h['at']} {h.get('by') or '?'}: {h.get('field') or h.get('event')} "
                         f"{h.get('fromString') or ''} -> {h.get('toString') or ''}")
        for i, cm in enumerate(issue["comments"], 1):
            lines += ["", f"--- comment {i} by {cm['author']} at {cm['created']}", cm["body"]]
        return Result("\n".join(lines), {"issue": issue})

    def _jira_project(self, c: A.JiraProject) -> Result:
        view = self._need_view()
        if not c.project:
            names = view.projects()
            return Result("\n".join(names) or "no projects at this moment", {"projects": names, "empty": not names})
        meta = view.project(c.project)
        if not meta["issues"]:
            raise ToolRefused(f"no project {c.project!r} at this moment (projects: {', '.join(view.projects())})")
        lines = [f"{meta['project']}: {meta['issues']} issues up to now"]
        lines += [f"  {k}: {', '.join(meta[k]) or '-'}" for k in ("types", "priorities", "components", "assignees")]
        return Result("\n".join(lines), meta)

    def _jira_update(self, c: A.JiraUpdate) -> Result:
        self._issue(c.key)
        if not c.fields():
            raise ToolRefused("jira_update: give at least one field to set")
        entry = self._record(c, {"at": self._now(), "by": self.persona.handle})
        return Result(f"recorded #{entry.seq}: {c.key} " + ", ".join(f"{k}={v}" for k, v in c.fields().items()),
                      {"seq": entry.seq})

    def _jira_comment(self, c: A.JiraComment) -> Result:
        self._issue(c.key)
        entry = self._record(c, {"at": self._now(), "by": self.persona.handle})
        return self._answered(entry, Result(f"recorded #{entry.seq}: comment on {c.key}", {"seq": entry.seq}))

    # -- mail -----------------------------------------------------------------------------------------
    def _episode_mails(self) -> list[dict]:
        """The episode's mails: the agent's, and the answers others sent to them (in the same thread)."""
        mine = [e.effect["message"] for e in self.actions if isinstance(e.action, (A.MailSend, A.MailReply))]
        others = []
        for e, r, at in self._replies_to((A.MailSend, A.MailReply)):
            m = e.effect["message"]
            subject = m["subject"] if m["subject"].lower().startswith("re:") else f"Re: {m['subject']}"
            others.append({"message_id": f"{m['message_id'].split('@')[0]}-answer@episode.invalid",
                           "from": r.author.address(), "to": [self.persona.email], "cc": [], "subject": subject,
                           "body": r.text, "in_reply_to": m["message_id"], "thread": m["thread"], "date": at})
        return sorted(mine + others, key=lambda m: m["date"])

    def _mail_search(self, c: A.MailSearch) -> Result:
        words = {w.casefold() for w in c.query.split()}
        own = [m for m in self._episode_mails()
               if words & {w.casefold() for w in f"{m['subject']} {m['body']}".split()}]
        hits = [{"message_id": m["message_id"], "subject": m["subject"], "from": m["from"], "date": m["date"],
                 "match": m["body"][:200]} for m in own] + self._need_view().mail_search(c.query, c.limit)
        if not hits:
            return Result(f"no message matches {c.query!r}", {"results": [], "empty": True})
        hits = hits[:c.limit]
        return Result("\n".join(f"{h['date']}  {h['message_id']}\n    {h['from']}: {h['subject']}\n    {h['match']}"
                                for h in hits), {"results": hits})

    def _message(self, message_id: str) -> dict:
        mid = message_id.strip().strip("<>")
        for m in self._episode_mails():
            if m["message_id"] == mid:
                return dict(m, thread_messages=[])
        msg = self._need_view().mail(mid)
        if msg is None:
            raise ToolRefused(f"no message {mid} at this moment (try: company mail search WORDS)")
        return msg

    def _mail_read(self, c: A.MailRead) -> Result:
        m = self._message(c.message_id)
        replies = [r for r in self._episode_mails()
                   if r.get("thread") == m.get("thread") and r["message_id"] != m["message_id"]]
        thread = m.get("thread_messages", []) + [{"message_id": r["message_id"], "subject": r["subject"],
                                                  "from": r["from"], "date": r["date"]} for r in replies]
        lines = [f"Message-ID: {m['message_id']}", f"From: {m['from']}", f"To: {', '.join(m['to'])}"]
        if m.get("cc"):
            lines.append(f"Cc: {', '.join(m['cc'])}")
        lines += [f"Date: {m['date']}", f"Subject: {m['subject']}"]
        if m.get("in_reply_to"):
            lines.append(f"In-Reply-To: {m['in_reply_to']}")
        lines += ["", m["body"]]
        if len(thread) > 1:
            lines += ["", f"--- thread ({len(thread)} messages)"]
            lines += [f"  {t['date']}  {t['message_id']}  {t['from']}: {t['subject']}" for t in thread]
        return Result("\n".join(lines), {"message": {**m, "thread_messages": thread}})

    def _mail(self, action: A.Tool, to: list[str], cc: list[str], subject: str, body: str,
              in_reply_to: str | None, thread: str | None) -> Result:
        mid = f"{uuid.uuid5(uuid.NAMESPACE_URL, f'{self.persona.email}/{len(self.log)}/{subject}').hex}@episode.invalid"
        message = {"message_id": mid, "from": self.persona.address(), "to": to, "cc": cc, "subject": subject,
                   "body": body, "in_reply_to": in_reply_to, "thread": thread or mid, "date": self._now()}
        entry = self._record(action, {"message": message, "at": message["date"]})
        return self._answered(entry, Result(f"recorded #{entry.seq}: sent {mid} to {', '.join(to)}",
                                            {"seq": entry.seq, "message_id": mid}))

    def _mail_send(self, c: A.MailSend) -> Result:
        return self._mail(c, c.to, c.cc, c.subject, c.body, None, None)

    def _mail_reply(self, c: A.MailReply) -> Result:
        m = self._message(c.message_id)
        sender = _address_of(m["from"])
        to = c.to if c.to is not None else ([sender] if sender else [])
        if not to:
            raise ToolRefused("the message has no sender address to reply to; give --to")
        subject = m["subject"] or ""
        subject = subject if subject.lower().startswith("re:") else f"Re: {subject}".strip()
        return self._mail(c, to, c.cc, subject, c.body, m["message_id"], m.get("thread"))

    # -- chat -----------------------------------------------------------------------------------------
    def _episode_posts(self, channel: str) -> list[dict]:
        """The episode's posts in a channel: the agent's, and the answers others posted in their threads."""
        posts = [e.effect["post"] for e in self._mine(A.SlackPost, channel=channel)]
        for e, r, at in self._replies_to(A.SlackPost):
            if e.action.channel == channel:
                p = e.effect["post"]
                posts.append({"ts": f"{dt.datetime.fromisoformat(at).timestamp():.6f}",
                              "thread_ts": p["thread_ts"] or p["ts"], "author": r.author.name, "date": at,
                              "text": r.text, "subtype": None, "replies": None})
        return sorted(posts, key=lambda p: p["date"])

    def _slack_search(self, c: A.SlackSearch) -> Result:
        words = {w.casefold() for w in c.query.split()}
        own = [dict(p, channel=e.action.channel) for e in self._mine(A.SlackPost) for p in [e.effect["post"]]
               if words & {w.casefold() for w in p["text"].split()}
               and (not c.channel or e.action.channel == c.channel)]
        hits = [{"channel": p["channel"], "ts": p["ts"], "author": p["author"], "date": p["date"],
                 "thread_ts": p["thread_ts"], "match": p["text"][:200]} for p in own]
        hits += self._need_view().chat_search(c.query, c.limit, c.channel)
        if not hits:
            return Result(f"no message matches {c.query!r}", {"results": [], "empty": True})
        hits = hits[:c.limit]
        return Result("\n".join(f"#{h['channel']} {h['date']} ts={h['ts']}"
                                f"{' thread=' + h['thread_ts'] if h.get('thread_ts') else ''} "
                                f"{h['author']}: {h['match']}" for h in hits), {"results": hits})

    def _slack_channels(self, c: A.SlackChannels) -> Result:
        chans = self._need_view().channels()
        if not chans:
            return Result("no chat channels at this moment", {"channels": [], "empty": True})
        return Result("\n".join(f"#{ch['channel']}  {ch['messages']} messages, last {ch['last']}" for ch in chans),
                      {"channels": chans})

    def _slack_history(self, c: A.SlackHistory) -> Result:
        msgs = self._need_view().chat_history(c.channel, c.thread_ts, c.limit, c.before)
        own = [p for p in self._episode_posts(c.channel)
               if (p["thread_ts"] == c.thread_ts if c.thread_ts else not p["thread_ts"])]
        msgs = (msgs + own)[-c.limit:]
        if not msgs:
            return Result(f"no messages in #{c.channel} at this moment", {"messages": [], "empty": True})
        lines = [f"{m['date']} ts={m['ts']} {m['author']}: {m['text']}"
                 + (f"  [{m['replies']} replies]" if m.get("replies") else "") for m in msgs]
        return Result("\n".join(lines), {"messages": msgs})

    def _slack_post(self, c: A.SlackPost) -> Result:
        at = self._now()
        ts = f"{dt.datetime.fromisoformat(at).timestamp():.6f}"
        post = {"ts": ts, "thread_ts": c.thread_ts, "author": self.persona.name, "date": at, "text": c.text,
                "subtype": None, "replies": None}
        entry = self._record(c, {"post": post, "at": at})
        return self._answered(entry, Result(f"recorded #{entry.seq}: posted in #{c.channel} (ts={ts})",
                                            {"seq": entry.seq, "ts": ts}))

    # -- answer, git, shell ---------------------------------------------------------------------------
    def _answer(self, c: A.Answer) -> Result:
        entry = self._record(c, {"at": self._now()})
        return Result(f"recorded #{entry.seq}: answer", {"seq": entry.seq})

    def _git(self, c: A.Git) -> Result:
        repo = c.repo or self.repos[0]
        if repo not in self.repos:
            raise ToolRefused(f"no repository {repo!r}; the repositories are: {', '.join(self.repos)}")
        return self._exec(f'cd "$HOME"/{shlex.quote(repo)} && ' + shlex.join(["git", *c.args]), 60)

    def _shell(self, c: A.Shell) -> Result:
        return self._exec(c.command, c.timeout_s)

    # -- files (in the session, as the agent: what it could do with the shell, without quoting) -----------
    def _read_file(self, c: A.ReadFile) -> Result:
        try:
            data = self.session.read_file(c.path, limit=MAX_FILE)
        except SandboxError as exc:
            raise ToolRefused(f"read_file: {_after_path(str(exc), c.path)}") from None
        if b"\0" in data[:8192]:
            raise ToolRefused(f"read_file: {c.path} is a binary file ({len(data)} bytes)")
        text = data.decode("utf-8", "replace")
        lines = text.splitlines(keepends=True)
        if c.start or c.end:
            first, last = (c.start or 1), min(c.end or len(lines), len(lines))
            text = "".join(lines[first - 1:last])
            return Result(text, {"path": c.path, "lines": len(lines), "start": first, "end": last})
        cut = len(data) > MAX_FILE
        return Result(text + (f"\n... cut at {MAX_FILE} bytes (read it by lines: start, end)" if cut else ""),
                      {"path": c.path, "lines": len(lines), "truncated": cut})

    def _write_file(self, c: A.WriteFile) -> Result:
        data = c.content.encode("utf-8")
        try:
            self.session.write_file(c.path, data, 0o644)
        except SandboxError as exc:
            raise ToolRefused(f"write_file: {_after_path(str(exc), c.path)}") from None
        return Result(f"wrote {c.path} ({len(data)} bytes, {c.content.count(chr(10)) + bool(c.content)} lines)",
                      {"path": c.path, "bytes": len(data)})

    def _list_files(self, c: A.ListFiles) -> Result:
        r = self.session.exec(f"python3 -I -c {shlex.quote(_LIST)} {shlex.quote(self.session.path_of(c.path))} "
                              f"{int(c.recursive)} {MAX_LISTED}", timeout_s=60, kill_others=False)
        if r.exit_code != 0:
            raise ToolRefused(f"list_files: {c.path}: {(r.stderr.strip() or r.status_line())[-300:]}")
        lines = r.stdout.splitlines()
        return Result(r.stdout.rstrip() or f"{c.path} is empty", {"path": c.path, "entries": len(lines)})

    def _exec(self, command: str, timeout_s: float) -> Result:
        r = self.session.exec(command, timeout_s=timeout_s, kill_others=False)
        status = "timed out" if r.timed_out else (r.error or f"exit {r.exit_code}")
        text = (r.stdout + (("\n[stderr]\n" + r.stderr) if r.stderr.strip() else "")).rstrip() + f"\n[{status}]"
        return Result(text, {"exit_code": r.exit_code, "timed_out": r.timed_out}, error=r.exit_code not in (0,))


MAX_FILE = 256 << 10      # read_file: bytes of one answer (the rest by lines)
MAX_LISTED = 2000         # list_files: entries of one answer

# Runs in the session as `python3 -I -c _LIST <folder> <recursive 0|1> <max>`: one entry per line, folders with "/".
_LIST = r"""
import os, sys
root, recursive, most = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
if not os.path.isdir(root):
    sys.exit(f"{root} is not a folder" if os.path.lexists(root) else f"{root} does not exist")
n = 0
for d, dirs, files in os.walk(root):
    dirs[:] = sorted(x for x in dirs if x != ".git")
    rel = os.path.relpath(d, root)
    for name in dirs + sorted(files):
        path = os.path.join(d, name)
        shown = name if rel == "." else os.path.join(rel, name)
        if os.path.isdir(path) and not os.path.islink(path):
            print(shown + "/")
        else:
            try:
                print(f"{shown}  {os.lstat(path).st_size}")
            except OSError:
                print(shown)
        n += 1
        if n >= most:
            print(f"... more than {most} entries")
            sys.exit(0)
    if not recursive:
        break
"""


def _after_path(message: str, path: str) -> str:
    """A sandbox error about a file, said from the agent's side (the path it asked for, not the host's)."""
    return message if message.startswith(path) else f"{path}: {message.split(': ', 1)[-1]}"


class ToolRefused(Exception):
    """A valid call the world cannot serve (no such issue, a full log): one line back to the agent."""


def _address_of(value: str | None) -> str | None:
    if not value:
        return None
    if "<" in value and ">" in value:
        value = value[value.index("<") + 1:value.index(">")]
    value = value.strip().lower()
    return value if A.ADDR_RE.match(value) else None


def _bounded(value: Any) -> Any:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= 2000 else text[:2000]


# --- MCP ---------------------------------------------------------------------------------------------


SUBMIT_DESCRIPTION = "End the task: what you did is graded (a code change: by its hidden tests) and the grade returned."


def mcp_server(tools: ToolServer, submit: Callable[[], Result] | None = None):
    """The tools as an MCP server (the official SDK's low-level `Server`), every schema from the typed models.
    `submit` (a harness's: `taskmine serve`): a `submit` tool that ends the task and answers with its grade; it is
    no company action (never in the action log)."""
    # the MCP SDK: loaded only when the tool server is served
    import mcp.types as types
    from mcp.server.lowlevel import Server

    server = Server("company", instructions="The company's tools as they stood at this task's moment: search and "
                    "read the issue tracker, mail and chat; act by updating issues, replying to mail, posting."
                    + (" Call `submit` when you are done." if submit else ""))

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        listed = [types.Tool(name=s["name"], description=s["description"], inputSchema=s["inputSchema"],
                             _meta={"taskmine/kind": s["kind"], "taskmine/examples": s["examples"],
                                    "taskmine/positional": s["positional"], "taskmine/flags": s["flags"]})
                  for s in tools.specs()]
        if submit is not None:
            listed.append(types.Tool(name="submit", description=SUBMIT_DESCRIPTION, _meta={"taskmine/kind": "shell"},
                                     inputSchema={"type": "object", "properties": {}, "additionalProperties": False}))
        return listed

    @server.call_tool(validate_input=False)  # the typed models validate, with their own one-line messages
    async def call_tool(name: str, arguments: dict[str, Any]):
        # the MCP SDK: loaded only when the tool server is served
        import anyio

        if submit is not None and name == "submit":
            result = await anyio.to_thread.run_sync(submit)
        else:
            result = await anyio.to_thread.run_sync(tools.call, name, arguments)
        return types.CallToolResult(content=[types.TextContent(type="text", text=result.text)],
                                    structuredContent=_jsonable(result.data), isError=result.error)

    return server


def _jsonable(data: dict) -> dict:
    return json.loads(json.dumps(data, default=str))


class _LineFile:
    """A socket as the text file the SDK's stdio transport reads and writes, refusing lines over MAX_LINE."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.rfile = sock.makefile("rb")
        self.closed = False

    def readline(self) -> str:
        line = self.rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            self.close()
            return ""
        return line.decode("utf-8", "replace")

    def write(self, text: str) -> int:
        try:
            self.sock.sendall(text.encode("utf-8"))
        except OSError:
            self.closed = True
        return len(text)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


class ToolSocket:
    """Serve a `ToolServer` over MCP on a Unix socket in `folder` (one thread per connection)."""

    def __init__(self, tools: ToolServer, folder: Path):
        self.tools = tools
        self.folder = Path(folder)
        self.path = self.folder / SOCKET_NAME
        self._sock: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._closed = threading.Event()

    def start(self) -> ToolSocket:
        for name in ("mcp", "mcp.server", "mcp.server.lowlevel.server"):
            logging.getLogger(name).setLevel(logging.WARNING)
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o755)
        if len(str(self.path)) > 100:
            raise OSError(f"socket path too long for AF_UNIX: {self.path}")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.path))
        os.chmod(self.path, 0o666)  # the agent (uid 1000) connects; the folder is mounted read-only
        self._sock.listen(16)
        t = threading.Thread(target=self._accept, name="taskmine-tools", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()  # type: ignore[union-attr]
            except OSError:
                return
            self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        # the MCP SDK: loaded only when the tool server is served
        import anyio
        from mcp.server.stdio import stdio_server

        f = _LineFile(conn)

        async def main() -> None:
            server = mcp_server(self.tools)
            async with stdio_server(anyio.wrap_file(f), anyio.wrap_file(f)) as (read, write):  # type: ignore[arg-type]
                await server.run(read, write, server.create_initialization_options())

        try:
            anyio.run(main)
        except Exception:  # a client that hangs up or speaks nonsense ends its own connection only
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def close(self) -> None:
        self._closed.set()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
                c.close()
        with contextlib.suppress(OSError):
            self.path.unlink()

    def __enter__(self) -> ToolSocket:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
