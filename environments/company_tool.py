#!/usr/bin/env python3
"""`company`: the company's tools on the command line, inside the sandbox.

This file is copied verbatim into the sandbox image as /usr/local/bin/company (and onto PATH by the local
sandbox), so it is a standalone script: python3.11 standard library only, no taskmine imports.

It is an MCP client: it connects to the tool server of the episode on the Unix socket $TASKMINE_TOOLS
(default /run/company/tools.sock), lists its tools and builds its commands from their JSON schemas, so the
CLI and the MCP server are the same tools with the same validation. `company mcp` relays an agent's stdio
MCP session to the same server (configure an MCP client with the command `company mcp`).

Invariants:
- Nothing is decided here: the server validates every call, keeps the action log and answers; this client
  only turns arguments into a call and prints the answer.
- Bad use exits 2 with one line on stderr; "nothing found" exits 1; success exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import sys

SOCKET = "/run/company/tools.sock"
PROTOCOL = "2025-06-18"
MAX_REPLY = 8 << 20


class UsageError(Exception):
    """Bad use by the caller: reported as one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of argparse's usage block
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def socket_path() -> str:
    return os.environ.get("TASKMINE_TOOLS") or SOCKET


def connect() -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(socket_path())
    except OSError as exc:
        s.close()
        raise UsageError(f"the company tools are not reachable at {socket_path()} ({exc.strerror}); "
                         "run this inside a taskmine sandbox") from None
    return s


class Client:
    """A minimal MCP client over the socket: initialize, tools/list, tools/call (JSON-RPC, one per line)."""

    def __init__(self) -> None:
        self.sock = connect()
        self.rfile = self.sock.makefile("rb")
        self.next_id = 0
        self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                    "clientInfo": {"name": "company-cli", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        self.sock.sendall((json.dumps(message) + "\n").encode("utf-8"))

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.rfile.readline(MAX_REPLY)
            if not line:
                raise UsageError("the tool server closed the connection")
            msg = json.loads(line)
            if msg.get("id") != self.next_id:
                continue  # a notification or log message
            if "error" in msg:
                raise UsageError(str(msg["error"].get("message", msg["error"])))
            return msg.get("result") or {}

    def tools(self) -> list[dict]:
        return self.request("tools/list", {}).get("tools", [])

    def call(self, name: str, arguments: dict) -> dict:
        return self.request("tools/call", {"name": name, "arguments": arguments})


def _kind(prop: dict) -> tuple[str, bool]:
    """(json type, nullable) of a schema property (pydantic writes optionals as anyOf [.., null])."""
    options = prop.get("anyOf") or [prop]
    types = [o.get("type") for o in options]
    main = next((t for t in types if t != "null"), "string")
    return main, "null" in types


def _flag(name: str, tool: dict) -> str:
    return (tool.get("_meta") or {}).get("taskmine/flags", {}).get(name) or "--" + name.replace("_", "-")


def build_parser(tools: list[dict]) -> tuple[Parser, dict]:
    """A parser with one sub-command per tool (`jira_show` -> `jira show`), its options from the schema."""
    cli = [t for t in tools if (t.get("_meta") or {}).get("taskmine/kind") != "shell"]
    examples = [e for t in cli for e in (t.get("_meta") or {}).get("taskmine/examples", [])]
    p = Parser(prog="company", description="The company's tools, as they stood at this task's moment.",
               epilog="examples:\n  " + "\n  ".join(examples) + "\n\n  company mcp      serve these tools to an MCP "
               "client over stdio\n\nA value of - is read from stdin (e.g. --body -).",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="group", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    groups: dict[str, argparse._SubParsersAction] = {}
    index = {}
    for t in cli:
        group, _, verb = t["name"].partition("_")
        desc = t.get("description", "")
        if verb:
            if group not in groups:
                g = sub.add_parser(group, help=f"{group} tools")
                groups[group] = g.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
                groups[group].required = True
            sp = groups[group].add_parser(verb, help=desc, description=desc)
        else:
            sp = sub.add_parser(group, help=desc, description=desc)
        schema = t.get("inputSchema") or {}
        required = set(schema.get("required") or [])
        positional = (t.get("_meta") or {}).get("taskmine/positional", [])
        for name, prop in (schema.get("properties") or {}).items():
            kind, nullable = _kind(prop)
            conv = {"integer": int, "number": float}.get(kind, str)
            if name in positional:
                sp.add_argument(name, type=conv, nargs=None if name in required else "?")
            elif kind == "array":
                sp.add_argument(_flag(name, t), dest=name, action="append", required=name in required and not nullable,
                                help="repeat for several")
            else:
                sp.add_argument(_flag(name, t), dest=name, type=conv, required=name in required,
                                help=prop.get("description"))
        index[(group, verb or None)] = t
    return p, index


def arguments(ns: argparse.Namespace, tool: dict) -> dict:
    out = {}
    for name in (tool.get("inputSchema") or {}).get("properties") or {}:
        value = getattr(ns, name, None)
        if value is None:
            continue
        if value == "-":
            value = sys.stdin.read(200_001)
        out[name] = value
    return out


def relay() -> int:
    """`company mcp`: copy stdin to the tool server and its answers to stdout until either side ends."""
    s = connect()
    fd_in, fd_out = sys.stdin.fileno(), sys.stdout.fileno()
    open_in = True
    while True:
        ready, _, _ = select.select([s] + ([fd_in] if open_in else []), [], [])
        if fd_in in ready:
            data = os.read(fd_in, 65536)
            if data:
                s.sendall(data)
            else:
                open_in = False
                s.shutdown(socket.SHUT_WR)
        if s in ready:
            data = s.recv(65536)
            if not data:
                return 0
            os.write(fd_out, data)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["mcp"]:
            return relay()
        if argv[:1] == ["--version"]:
            print("company 2")
            return 0
        client = Client()
        parser, index = build_parser(client.tools())
        ns = parser.parse_args(argv)
        tool = index[(ns.group, getattr(ns, "verb", None))]
        result = client.call(tool["name"], arguments(ns, tool))
        text = "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
        if result.get("isError"):
            raise UsageError(text.strip().splitlines()[0] if text.strip() else "the call failed")
        print(text)
        return 1 if (result.get("structuredContent") or {}).get("empty") else 0
    except UsageError as exc:
        print(f"company: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `company jira search x | head`: stop quietly, also at interpreter exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
