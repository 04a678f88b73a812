"""Where sandboxes run: the Docker daemons of a sandbox pool as a dataset or an operator writes them (`URL*N
[files=auto|bind|copy]`, a list in taskmine.toml's `sandbox_hosts` or TASKMINE_SANDBOX_HOSTS), parsed and checked.

Here, below the configuration that validates `sandbox_hosts` (core.config), rather than in environments.pool
which runs them: reading a host entry needs no sandbox module, and core imports nothing above it.

Invariant: an entry that cannot be read is a one-line PoolConfigError naming the entry and how to write one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

__all__ = ["EXAMPLE", "HOSTS_ENV", "HostSpec", "PoolConfigError", "hosts_from", "parse_host", "parse_hosts"]

HOSTS_ENV = "TASKMINE_SANDBOX_HOSTS"
SCHEMES = ("unix", "tcp", "ssh")
FILES = ("auto", "bind", "copy")
MAX_CONCURRENCY = 64
EXAMPLE = "unix:///var/run/docker.sock*2 or ssh://user@build-2*4 files=copy"

class PoolConfigError(ValueError):
    """A sandbox host entry that cannot be read (the message names it and says how to write one)."""


@dataclass(frozen=True)
class HostSpec:
    """One Docker daemon of the pool: its URL, how many sessions it runs at once, how sessions see our folders."""

    url: str
    concurrency: int = 1
    files: str = "auto"

    def __str__(self) -> str:
        return f"{self.url}*{self.concurrency}" + (f" files={self.files}" if self.files != "auto" else "")


def _bad(entry: object, where: str, problem: str) -> PoolConfigError:
    return PoolConfigError(f"sandbox host {entry!r} ({where}): {problem}; write URL*N, e.g. {EXAMPLE}")


def _check_url(url: str, entry: object, where: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in SCHEMES:
        raise _bad(entry, where, f"the URL must start with {', '.join(s + '://' for s in SCHEMES)}")
    if parsed.scheme == "unix":
        if not parsed.path.startswith("/") or parsed.netloc:
            raise _bad(entry, where, "a unix socket URL is unix:///absolute/path/docker.sock")
    else:
        try:
            port = parsed.port
        except ValueError:
            raise _bad(entry, where, "the port is not a number") from None
        if not parsed.hostname:
            raise _bad(entry, where, "the URL names no host")
        if parsed.scheme == "tcp" and port is None:
            raise _bad(entry, where, "a tcp URL needs its port (tcp://host:2376)")
    return url


def _count(value: object, entry: object, where: str) -> int:
    if isinstance(value, str):
        value = value.strip()
        if not value.isdigit():
            raise _bad(entry, where, f"the concurrency {value!r} is not a whole number")
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_CONCURRENCY:
        raise _bad(entry, where, f"the concurrency must be a whole number from 1 to {MAX_CONCURRENCY}")
    return value


def _files(value: object, entry: object, where: str) -> str:
    if value not in FILES:
        raise _bad(entry, where, f"files must be one of {', '.join(FILES)}")
    return str(value)


def parse_host(entry: str | dict, where: str = "configuration") -> HostSpec:
    """One entry: `URL`, `URL*N`, `URL*N files=copy`, or a table {url, concurrency, files}."""
    if isinstance(entry, dict):
        unknown = set(entry) - {"url", "concurrency", "files"}
        if unknown:
            raise _bad(entry, where, f"unknown key {sorted(unknown)[0]!r} (keys: url, concurrency, files)")
        if not isinstance(entry.get("url"), str):
            raise _bad(entry, where, "the table needs url = \"...\"")
        return HostSpec(_check_url(entry["url"].strip(), entry, where),
                        _count(entry.get("concurrency", 1), entry, where),
                        _files(entry.get("files", "auto"), entry, where))
    if not isinstance(entry, str) or not entry.strip():
        raise _bad(entry, where, "an entry is a string or a table")
    head, *options = entry.split()
    files = "auto"
    for option in options:
        key, sep, value = option.partition("=")
        if key != "files" or not sep:
            raise _bad(entry, where, f"unknown option {option!r} after the URL (only files=auto|bind|copy)")
        files = _files(value, entry, where)
    url, star, count = head.rpartition("*")
    if not star:
        url, count = head, "1"
    return HostSpec(_check_url(url, entry, where), _count(count, entry, where), files)


def parse_hosts(entries: str | Sequence[str | dict], where: str = "configuration") -> tuple[HostSpec, ...]:
    """Every host of a configuration: a comma-separated string (the environment variable) or a list (TOML)."""
    if isinstance(entries, str):
        entries = [e for e in (part.strip() for part in entries.split(",")) if e]
    hosts = tuple(parse_host(e, where) for e in entries)
    seen: set[str] = set()
    for h in hosts:
        if h.url in seen:
            raise PoolConfigError(f"sandbox host {h.url} ({where}) is listed twice; give it one entry with the "
                                  "sum of the concurrencies")
        seen.add(h.url)
    return hosts


def hosts_from(config_hosts: Sequence[str | dict] | None = None) -> tuple[tuple[HostSpec, ...], str]:
    """(hosts, where they come from): TASKMINE_SANDBOX_HOSTS when set (this machine's operator knows its
    daemons), else the dataset's `sandbox_hosts`; ((), "") when neither names one."""
    env = os.environ.get(HOSTS_ENV, "").strip()
    if env:
        return parse_hosts(env, HOSTS_ENV), HOSTS_ENV
    if config_hosts:
        return parse_hosts(list(config_hosts), "sandbox_hosts in taskmine.toml"), "taskmine.toml"
    return (), ""
