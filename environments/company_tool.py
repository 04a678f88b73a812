#!/usr/bin/env python3
"""`company`: the only tool an agent gets to look at the company's world and act on it.

This file is copied verbatim into the sandbox image as /usr/local/bin/company (and onto PATH by the local
sandbox), so it is a standalone script: python3.11 standard library only, no taskmine imports.

Invariants:
- Reads never leave $TASKMINE_WORLD (default /world): paths are resolved and checked, symlinks are not
  followed out of it, and every listing is bounded.
- Actions are only *recorded*: each appends one JSON object per line to $TASKMINE_OUTBOX with an
  increasing "seq", under an exclusive lock; nothing is sent anywhere. The grader reads the outbox from
  outside the container and trusts none of it, so the validation here only helps an honest agent.
- Bad use exits 2 with one line on stderr; "nothing found" exits 1; success exits 0.

Outbox entries (the contract graders rely on):
  {"seq": N, "action": "jira.update",
      "fields": {"type", "priority", "components", "assignee", "duplicate_of"}}
      (only the fields given are present; "components" is a sorted list)
  {"seq": N, "action": "answer", "sha": "<lower-case hex>"}
  {"seq": N, "action": "answer", "text": "..."}
  {"seq": N, "action": "mail.send", "to": [...], "cc": [...], "subject": "...", "body": "...",
      "in_reply_to": "..." | null}
  {"seq": N, "action": "slack.post", "channel": "...", "text": "...", "thread_ts": "..." | null}
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import sys

EXAMPLES = """\
commands:
  search QUERY [--path SUBDIR]     case-insensitive search of the world's text files
  read PATH                        print a file of the world (or list a directory)
  jira show [KEY]                  show an issue (default: the task's issue)
  jira update [--type T] [--priority P] [--component C ...] [--assignee NAME] [--duplicate-of KEY]
  answer --sha SHA | --text TEXT   give your answer
  mail send --to ADDR --subject S --body B
  slack post --channel C --text T

examples:
  company search "login timeout"
  company search NullPointerException --path repo/src
  company read issue.json
  company jira show PROJ-123
  company jira update --type Bug --priority Major --component Backend --component API --assignee "Ann Lee"
  company jira update --duplicate-of PROJ-99
  company answer --sha 3f2a9c1
  company answer --text "Restart the worker after rotating the key."
  company mail send --to bob@example.com --subject "Re: invoice" --body "Paid on the 3rd."
  company slack post --channel general --text "Deployed."
  echo "long text" | company answer --text -        (a value of - is read from stdin)

environment: TASKMINE_WORLD (default /world), TASKMINE_OUTBOX (where actions are recorded)
"""

MAX_MATCHES = 200
MAX_LINE = 300
MAX_SEARCH_FILE = 4 << 20
MAX_READ = 1 << 20
MAX_VALUE = 200
MAX_TEXT = 100_000
MAX_OUTBOX = 1 << 20
KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*-[0-9]+$")
SHA_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")
SKIP_DIRS = {".git", ".hg", ".svn"}


class UsageError(Exception):
    """Bad use by the caller: reported as one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of argparse's usage block
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def world_root() -> str:
    return os.path.realpath(os.environ.get("TASKMINE_WORLD") or "/world")


def resolve(path: str) -> str:
    """Absolute real path of `path` (relative to the world, or /world/...) that must stay inside the world."""
    root = world_root()
    if path.startswith("/world/") or path == "/world":
        path = path[len("/world") :].lstrip("/")
    real = os.path.realpath(os.path.join(root, path))
    if real != root and not real.startswith(root + os.sep):
        raise UsageError(f"{path!r} is outside the world; paths are relative to {root}")
    if not os.path.exists(real):
        raise UsageError(f"no such file in the world: {path!r} (try `company search` or `company read .`)")
    return real


def is_text(head: bytes) -> bool:
    return b"\0" not in head


def text_value(value: str, what: str, limit: int = MAX_TEXT) -> str:
    if value == "-":
        value = sys.stdin.read(limit + 1)
    value = value.strip()
    if not value:
        raise UsageError(f"{what} is empty")
    if len(value) > limit:
        raise UsageError(f"{what} is longer than {limit} characters")
    return value


def short_value(value: str, what: str) -> str:
    value = text_value(value, what, MAX_VALUE)
    if "\n" in value:
        raise UsageError(f"{what} must be one line")
    return value


def issue_key(value: str) -> str:
    if not KEY_RE.match(value):
        raise UsageError(f"{value!r} is not an issue key like PROJ-123")
    return value.upper()


# --- reading -------------------------------------------------------------------------------------------


def cmd_search(args) -> int:
    query = args.query.lower()
    if not query.strip():
        raise UsageError("the search query is empty")
    start = resolve(args.path or ".")
    root = world_root()
    found = 0
    for dirpath, dirnames, filenames in os.walk(start):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if os.path.islink(full) or not os.path.isfile(full) or os.path.getsize(full) > MAX_SEARCH_FILE:
                continue
            with open(full, "rb") as f:
                data = f.read()
            if not is_text(data[:8192]):
                continue
            rel = os.path.relpath(full, root)
            for lineno, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if query in line.lower():
                    found += 1
                    if found > args.max:
                        print(
                            f"... more than {args.max} matches; narrow the query or use --path",
                            file=sys.stderr,
                        )
                        return 0
                    print(f"{rel}:{lineno}: {line.strip()[:MAX_LINE]}")
    if not found:
        print(f"no matches for {args.query!r}", file=sys.stderr)
        return 1
    return 0


def cmd_read(args) -> int:
    real = resolve(args.path)
    if os.path.isdir(real):
        for name in sorted(os.listdir(real)):
            print(name + ("/" if os.path.isdir(os.path.join(real, name)) else ""))
        return 0
    with open(real, "rb") as f:
        data = f.read(MAX_READ + 1)
    if not is_text(data[:8192]):
        raise UsageError(f"{args.path!r} is a binary file")
    sys.stdout.write(data[:MAX_READ].decode("utf-8", "replace"))
    if len(data) > MAX_READ:
        print(f"\n... truncated at {MAX_READ} bytes", file=sys.stderr)
    return 0


def load_issue(key: str | None) -> dict:
    root = world_root()
    candidates = [os.path.join(root, "jira", f"{key}.json")] if key else []
    candidates.append(os.path.join(root, "issue.json"))
    for path in candidates:
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                issue = json.load(f)
        except (OSError, ValueError) as exc:
            raise UsageError(f"{os.path.relpath(path, root)} is not readable JSON: {exc}") from None
        if not isinstance(issue, dict):
            continue
        if key is None or path != candidates[-1] or str(issue.get("key", key)).upper() == key:
            return issue
    raise UsageError(f"no issue {key} in the world" if key else "this world has no issue.json")


def render(value) -> str:
    if isinstance(value, dict):
        for name in ("name", "displayName", "value", "key"):
            if isinstance(value.get(name), str):
                return value[name]
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return ", ".join(render(v) for v in value)
    return str(value)


def cmd_jira_show(args) -> int:
    issue = load_issue(issue_key(args.key) if args.key else None)
    if args.json:
        print(json.dumps(issue, indent=2, ensure_ascii=False))
        return 0
    fields = dict(issue.get("fields") or {}) if isinstance(issue.get("fields"), dict) else {}
    fields.update({k: v for k, v in issue.items() if k != "fields"})
    comments = fields.pop("comments", None) or fields.pop("comment", None)
    if isinstance(comments, dict):
        comments = comments.get("comments")
    print(f"{render(fields.pop('key', '?'))}: {render(fields.pop('summary', fields.pop('title', '')))}")
    blocks = []
    for name in sorted(fields):
        value = fields[name]
        if value in (None, "", [], {}):
            continue
        text = render(value)
        if isinstance(value, str) and ("\n" in value or len(value) > 100):
            blocks.append((name, text))
        else:
            print(f"  {name}: {text[:MAX_LINE]}")
    for name, text in blocks:
        print(f"\n{name}:\n{text}")
    for i, comment in enumerate(comments if isinstance(comments, list) else [], 1):
        if isinstance(comment, dict):
            who = render(comment.get("author") or comment.get("actor") or "?")
            when = comment.get("created") or comment.get("ts") or ""
            body = comment.get("body") or comment.get("text") or ""
            print(f"\n--- comment {i} by {who} {when}\n{render(body)}")
    return 0


# --- actions (recorded in the outbox) ------------------------------------------------------------------


def record(entry: dict) -> int:
    path = os.environ.get("TASKMINE_OUTBOX")
    if not path:
        raise UsageError("TASKMINE_OUTBOX is not set; run this inside a taskmine sandbox")
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise UsageError(f"cannot open the outbox {path}: {exc.strerror}") from None
    with os.fdopen(fd, "r+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        existing = f.read()
        entry = {"seq": existing.count(b"\n") + 1, **entry}
        line = (json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        if len(existing) + len(line) > MAX_OUTBOX:
            raise UsageError("the outbox is full (1 MB); nothing more can be recorded")
        f.write(line)
    print(f"recorded #{entry['seq']}: {entry['action']}")
    return 0


def cmd_jira_update(args) -> int:
    fields = {}
    for name in ("type", "priority", "assignee"):
        if getattr(args, name) is not None:
            fields[name] = short_value(getattr(args, name), f"--{name}")
    if args.component:
        fields["components"] = sorted({short_value(c, "--component") for c in args.component})
    if args.duplicate_of is not None:
        fields["duplicate_of"] = issue_key(args.duplicate_of.strip())
    if not fields:
        raise UsageError("give at least one of --type, --priority, --component, --assignee, --duplicate-of")
    return record({"action": "jira.update", "fields": fields})


def cmd_answer(args) -> int:
    if args.sha is not None:
        sha = args.sha.strip()
        if not SHA_RE.match(sha):
            raise UsageError(f"{sha!r} is not a commit SHA (4 to 64 hex digits)")
        return record({"action": "answer", "sha": sha.lower()})
    return record({"action": "answer", "text": text_value(args.text, "--text")})


def addresses(values: list[str] | None, what: str) -> list[str]:
    out = [short_value(a, what) for v in values or [] for a in v.split(",") if a.strip()]
    for a in out:
        if "@" not in a or " " in a:
            raise UsageError(f"{a!r} is not an e-mail address")
    return out


def cmd_mail_send(args) -> int:
    to = addresses(args.to, "--to")
    if not to:
        raise UsageError("--to is empty")
    return record(
        {
            "action": "mail.send",
            "to": to,
            "cc": addresses(args.cc, "--cc"),
            "subject": short_value(args.subject, "--subject"),
            "body": text_value(args.body, "--body"),
            "in_reply_to": short_value(args.in_reply_to, "--in-reply-to") if args.in_reply_to else None,
        }
    )


def cmd_slack_post(args) -> int:
    return record(
        {
            "action": "slack.post",
            "channel": short_value(args.channel, "--channel").lstrip("#"),
            "text": text_value(args.text, "--text"),
            "thread_ts": short_value(args.thread_ts, "--thread-ts") if args.thread_ts else None,
        }
    )


def build_parser() -> Parser:
    p = Parser(
        prog="company",
        description="Look at the company's world and act on it.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    s = sub.add_parser("search", help="search the world's text files")
    s.add_argument("query")
    s.add_argument("--path", help="only under this folder of the world")
    s.add_argument("--max", type=int, default=MAX_MATCHES, help=f"at most this many matches ({MAX_MATCHES})")
    s.set_defaults(func=cmd_search)

    r = sub.add_parser("read", help="print a file of the world")
    r.add_argument("path")
    r.set_defaults(func=cmd_read)

    jira = sub.add_parser("jira", help="show or update the issue").add_subparsers(
        dest="jira_command", metavar="show|update", parser_class=Parser
    )
    jira.required = True
    js = jira.add_parser("show", help="show an issue")
    js.add_argument("key", nargs="?")
    js.add_argument("--json", action="store_true", help="print the raw JSON")
    js.set_defaults(func=cmd_jira_show)
    ju = jira.add_parser("update", help="set triage fields of the issue")
    ju.add_argument("--type")
    ju.add_argument("--priority")
    ju.add_argument("--component", action="append", help="repeat for several components")
    ju.add_argument("--assignee")
    ju.add_argument("--duplicate-of", metavar="KEY")
    ju.set_defaults(func=cmd_jira_update)

    a = sub.add_parser("answer", help="give your answer")
    g = a.add_mutually_exclusive_group(required=True)
    g.add_argument("--sha", help="a commit SHA")
    g.add_argument("--text", help="free text (- reads stdin)")
    a.set_defaults(func=cmd_answer)

    mail = sub.add_parser("mail", help="send an e-mail").add_subparsers(
        dest="mail_command", metavar="send", parser_class=Parser
    )
    mail.required = True
    ms = mail.add_parser("send", help="send an e-mail")
    ms.add_argument("--to", action="append", required=True, help="repeat or comma-separate")
    ms.add_argument("--cc", action="append")
    ms.add_argument("--subject", required=True)
    ms.add_argument("--body", required=True, help="- reads stdin")
    ms.add_argument("--in-reply-to", metavar="MESSAGE_ID")
    ms.set_defaults(func=cmd_mail_send)

    slack = sub.add_parser("slack", help="post to Slack").add_subparsers(
        dest="slack_command", metavar="post", parser_class=Parser
    )
    slack.required = True
    sp = slack.add_parser("post", help="post a message")
    sp.add_argument("--channel", required=True)
    sp.add_argument("--text", required=True, help="- reads stdin")
    sp.add_argument("--thread-ts")
    sp.set_defaults(func=cmd_slack_post)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "max", 1) < 1:
            raise UsageError("--max must be at least 1")
        return args.func(args)
    except UsageError as exc:
        print(f"company: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `company search x | head`: stop quietly, also at interpreter exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
