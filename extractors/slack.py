"""Slack workspace export (the .zip a workspace admin downloads, or the folder it unpacks to) -> events.

Format followed: Slack's workspace export ("How to read Slack data exports",
https://slack.com/help/articles/220556107): top-level `users.json`, `channels.json` (public channels),
`groups.json` (private channels), `dms.json` and `mpims.json` (direct and group messages, Business+ and
Enterprise exports), and one folder per conversation (named after the channel, the mpim, or the DM's id)
holding `<YYYY-MM-DD>.json` day files, each a JSON array of message objects as the Web API returns them
(https://api.slack.com/events/message and its subtypes; text formatting per
https://api.slack.com/reference/surfaces/formatting#retrieving-messages).

Invariants:
- One row per message object: an `Event`, or a `Quarantine` row when it cannot be read. Chat text is kind
  "message" (subtypes thread_broadcast and me_message are chat text too); any other subtype is its own
  kind (channel_join, bot_message, file_share, ...); message_deleted and tombstones are "message_deleted".
- native_id = "<channel id>:<ts>" (ts as the export writes it), thread_key = "slack:<channel id>:<thread_ts
  or ts>", parent_id = the thread root's event id for a reply. Times come from `ts` (Unix seconds, UTC).
- Actors: "slack:<user id>"; a bot or integration message is "slack:bot:<bot_id>" and flags attrs.bot.
  attrs.people holds the author and every mentioned user with the profile users.json gives them.
- Day files are read one at a time and streamed (extractors.jsonstream); only users.json and
  the channel lists are held in memory, reduced to the few fields used. A day file that is not JSON or
  is cut short is quarantined from the point of damage (its messages before it are kept, other days too);
  a bad message object is quarantined alone.
- File shares are metadata only (id, name, title, type, size, mode): never the content, never a URL
  (Slack's file URLs carry access tokens).
- A zip is untrusted and never extracted: members are streamed with zipfile.open. A member whose name is
  absolute, has a drive letter, a backslash or a "." / ".." part, or that is a symlink, is refused and
  quarantined. Bytes are counted while reading (the header's sizes are not trusted): a member may not
  expand past `max_zip_ratio` times its compressed size (with a floor of 1 MiB), nor all of them past
  `max_zip_bytes`; breaking the first refuses that member, the second stops reading the zip.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, ClassVar

from extractors.base import Extractor, ExtractorConfig, Row, register_extractor, walk
from extractors.jsonguard import iter_items, safe_repr
from extractors.jsonstream import CHUNK, JsonItem
from warehouse.ids import event_id

UTC = dt.UTC
ROOT_FILES = ("users.json", "channels.json")
LISTS = {"channels.json": "public", "groups.json": "private", "mpims.json": "mpim", "dms.json": "dm"}
DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.json")
CHAT = {None, "thread_broadcast", "me_message"}
DELETED = {"message_deleted", "tombstone"}
RATIO_FLOOR = 1 << 20
_KIND = re.compile(r"[a-z][a-z0-9_]{0,39}")
_TS = re.compile(r"(\d{1,11})(?:\.(\d{1,9}))?")
_TAG = re.compile(r"<([^<>\n]*)>")  # Slack's control sequences: <@U1>, <#C1|name>, <!here>, <url|label>
_UNSAFE = re.compile(r"^[A-Za-z]:|\\|\x00")


class SlackConfig(ExtractorConfig):
    max_message_bytes: int = 16 * 1024 * 1024
    max_zip_bytes: int = 2 * 1024 ** 3     # total uncompressed bytes read from one zip
    max_zip_ratio: float = 100.0           # per member: uncompressed / compressed


@dataclass(frozen=True)
class User:
    name: str | None
    real_name: str | None
    display_name: str | None
    email: str | None
    is_bot: bool = False

    @property
    def shown(self) -> str | None:
        """The name Slack shows for the user (real name first, as the brief's `@Real Name` rendering)."""
        return self.real_name or self.display_name or self.name


@dataclass(frozen=True)
class Channel:
    id: str
    name: str
    type: str | None
    members: tuple[str, ...] = ()


class Refused(Exception):
    """A zip member broke a safety limit while being read; `fatal` stops reading the whole zip."""

    def __init__(self, error_class: str, message: str, fatal: bool = False):
        super().__init__(message)
        self.error_class, self.fatal = error_class, fatal


# --- the export as a tree of members: a folder or a zip ---------------------------------------------------

def _hidden(part: str) -> bool:
    return part.startswith(".") or part == "__MACOSX"


class _Folder:
    """An unpacked export. Symlinks are refused, not followed."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def members(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        names, refused = [], []
        for dirpath, dirnames, filenames in os.walk(self.path):
            here = Path(dirpath)
            rel = here.relative_to(self.path)
            if rel.parts:  # a conversation folder: its day files are read, nothing below it
                dirnames[:] = []
            for d in sorted(dirnames):
                if (here / d).is_symlink() and not _hidden(d):
                    refused.append((d, "symlink", "symbolic links are not followed"))
            dirnames[:] = sorted(d for d in dirnames if not _hidden(d) and not (here / d).is_symlink())
            for f in sorted(filenames):
                name = (rel / f).as_posix()
                if _hidden(f):
                    continue
                if (here / f).is_symlink():
                    refused.append((name, "symlink", "symbolic links are not followed"))
                else:
                    names.append(name)
        return names, refused

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[BinaryIO]:
        with open(self.path / name, "rb") as f:
            yield f


class _Budget:
    """Uncompressed bytes read from one zip; a member re-read (jsonguard) is charged once."""

    def __init__(self, cap: int):
        self.cap, self.seen, self.total = cap, {}, 0

    def charge(self, name: str, upto: int) -> None:
        grown = upto - self.seen.get(name, 0)
        if grown > 0:
            self.seen[name] = upto
            self.total += grown
            if self.total > self.cap:
                raise Refused("zip_too_large", f"the zip expands past max_zip_bytes={self.cap}; the rest of it is "
                              "not read (raise max_zip_bytes or unzip the export)", fatal=True)


class _Limited:
    """A zip member's stream that counts what it really yields, whatever the header declared."""

    def __init__(self, f: BinaryIO, name: str, limit: int, budget: _Budget):
        self.f, self.name, self.limit, self.budget, self.count = f, name, limit, budget, 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(CHUNK if n is None or n < 0 else n)
        self.count += len(data)
        if self.count > self.limit:
            raise Refused("zip_bomb", f"member expands past {self.limit} bytes (compression ratio above the "
                          "limit): refused as a zip bomb")
        self.budget.charge(self.name, self.count)
        return data


class _Zip:
    """A zipped export, read through its central directory and streamed member by member."""

    def __init__(self, path: Path, config: SlackConfig):
        self.zf = zipfile.ZipFile(path)
        self.config = config
        self.infos: dict[str, zipfile.ZipInfo] = {}
        self.budget = _Budget(config.max_zip_bytes)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.zf.close()
        return False

    def members(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        refused, safe = [], []
        for info in self.zf.infolist():
            name = info.filename
            problem = _unsafe(name)
            if problem:
                refused.append((name, "unsafe_member", problem))
            elif stat.S_ISLNK(info.external_attr >> 16):
                refused.append((name, "symlink_member", "symlink members are refused, never followed"))
            elif not info.is_dir():
                safe.append(info)
        roots = sorted((PurePosixPath(i.filename).parent for i in safe if PurePosixPath(i.filename).name
                        in ROOT_FILES), key=lambda p: (len(p.parts), str(p)))
        root = roots[0] if roots else PurePosixPath(".")
        names = []
        for info in safe:
            p = PurePosixPath(info.filename)
            if root.parts != p.parts[:len(root.parts)]:
                continue
            name = PurePosixPath(*p.parts[len(root.parts):]).as_posix()
            if name in self.infos:
                refused.append((info.filename, "duplicate_member", "a second member with this name is ignored"))
                continue
            self.infos[name] = info
            names.append(name)
        return names, refused

    def check(self, name: str) -> None:
        """Refuse a member before reading it when its declared sizes already break a limit."""
        info = self.infos[name]
        if info.file_size > max(self.config.max_zip_ratio * info.compress_size, RATIO_FLOOR):
            raise Refused("zip_bomb", f"member declares {info.file_size} bytes from {info.compress_size} "
                          f"compressed (ratio above {self.config.max_zip_ratio:g}): refused as a zip bomb")

    def declared_total(self, names: list[str]) -> int:
        return sum(self.infos[n].file_size for n in names)

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[BinaryIO]:
        info = self.infos[name]
        limit = int(max(self.config.max_zip_ratio * info.compress_size, RATIO_FLOOR))
        with self.zf.open(info) as f:
            yield _Limited(f, name, limit, self.budget)


def _unsafe(name: str) -> str | None:
    """Why a zip member name could escape or confuse the export's tree (zip-slip), or None."""
    if name.startswith("/") or _UNSAFE.search(name):
        return "absolute path, drive letter, backslash or NUL in a member name (zip-slip): refused"
    parts = name.rstrip("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "'..', '.' or empty part in a member name (zip-slip): refused"
    return None


READ_ERRORS = (OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError)


# --- message fields ---------------------------------------------------------------------------------------

def parse_ts(value: Any) -> tuple[str, dt.datetime] | None:
    """A Slack ts ("1680618649.153859", Unix seconds) -> (the ts as written, aware UTC datetime), or None."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    raw = value.strip() if isinstance(value, str) else f"{value:.6f}" if isinstance(value, float) else str(value)
    m = _TS.fullmatch(raw)
    if m is None:
        return None
    try:
        when = dt.datetime.fromtimestamp(int(m[1]), UTC)
    except (OverflowError, ValueError, OSError):
        return None
    return raw, when.replace(microsecond=int((m[2] or "").ljust(6, "0")[:6]))


def _s(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _i(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _dicts(value: Any) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def user_from(obj: dict) -> User:
    """A users.json entry (or a message's `user_profile`) -> the fields kept."""
    profile = obj.get("profile") if isinstance(obj.get("profile"), dict) else obj
    return User(name=_s(obj.get("name")), real_name=_s(obj.get("real_name")) or _s(profile.get("real_name")),
                display_name=_s(profile.get("display_name")), email=_s(profile.get("email")),
                is_bot=obj.get("is_bot") is True)


class _Render:
    """Renders Slack mrkdwn for humans and records what it names: `<@U1>` -> "@Real Name", `<#C1|x>` -> "#x",
    `<url|label>` -> "label (url)". Collects mentions, channel mentions and links across a message's parts."""

    def __init__(self, users: dict[str, User], channel_names: dict[str, str]):
        self.users, self.channel_names = users, channel_names
        self.mentions: dict[str, str] = {}
        self.channel_mentions: dict[str, str] = {}
        self.links: list[str] = []

    def __call__(self, text: Any) -> str | None:
        if not isinstance(text, str):
            return None
        out, pos = [], 0
        for m in _TAG.finditer(text):
            out += [_unescape(text[pos:m.start()]), self._tag(m[1])]
            pos = m.end()
        out.append(_unescape(text[pos:]))
        return "".join(out)

    def link(self, url: Any) -> None:
        if isinstance(url, str) and url and url not in self.links:
            self.links.append(url)

    def _tag(self, inner: str) -> str:
        target, _, label = inner.partition("|")
        label = _unescape(label)
        if target.startswith("@"):
            uid = target[1:]
            user = self.users.get(uid)
            name = (user.shown if user else None) or label.lstrip("@") or uid
            self.mentions.setdefault(uid, name)
            return f"@{name}"
        if target.startswith("#"):
            cid = target[1:]
            name = self.channel_names.get(cid) or label or cid
            self.channel_mentions.setdefault(cid, name)
            return f"#{name}"
        if target.startswith("!"):  # <!here>, <!subteam^S1|@team>, <!date^...|fallback>
            command = target[1:]
            if command.startswith("date^"):
                return label or command
            return label if label.startswith("@") else f"@{label or command.split('^')[0]}"
        url = _unescape(target)
        self.link(url)
        if not label or label in (url, url.split("://", 1)[-1], url.removeprefix("mailto:")):
            return url
        return f"{label} ({url})"


# --- the extractor ----------------------------------------------------------------------------------------

@register_extractor("slack_export")
class SlackExportExtractor(Extractor):
    """A Slack workspace export, zipped or unpacked -> one event per message."""

    reference_attrs = ("links",)   # the URLs a message links (attachments, unfurls), rendered
    source: ClassVar[str] = "slack"
    medium: ClassVar[str] = "chat"
    directory: ClassVar[bool] = True
    patterns: ClassVar[tuple[str, ...]] = ("*.zip",)
    label: ClassVar[str] = "Slack export"
    expects: ClassVar[str] = "a Slack export (its .zip, or the folder with users.json, channels.json and " \
                             "<channel>/<YYYY-MM-DD>.json)"
    Config: ClassVar[type[ExtractorConfig]] = SlackConfig

    @classmethod
    def detect(cls, root: Path) -> list[Path]:
        """Export folders (users.json or channels.json beside day-file folders) and zips whose central
        directory lists the same; nothing inside an export folder is looked at twice."""
        found = []
        for dirpath, dirnames, filenames in walk(root):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if not _hidden(d))
            if set(ROOT_FILES) & set(filenames) and any(_has_day_file(here / d) for d in dirnames):
                found.append(here)
                dirnames[:] = []
                continue
            found += [here / f for f in sorted(filenames)
                      if f.lower().endswith(".zip") and not _hidden(f) and _is_export_zip(here / f)]
        return sorted(found)

    def iter_records(self, path: Path) -> Iterator[Row]:
        file = self.rel(path)
        try:
            export = _Folder(path) if path.is_dir() else _Zip(path, self.config)
        except (*READ_ERRORS, ValueError) as e:
            yield self.quarantine(file=file, error_class="unreadable",
                                  message=f"cannot open {file} as a Slack export folder or zip: {e}")
            return
        try:
            with export:
                yield from self._export(export, file)
        except Refused as e:  # a fatal zip limit
            yield self.quarantine(file=file, error_class=e.error_class, message=str(e))
        except READ_ERRORS as e:  # the folder or zip failed part-way; the rows before it stand
            yield self.quarantine(file=file, error_class="unreadable", message=f"cannot read {file}: {e}")

    def _export(self, export: _Folder | _Zip, file: str) -> Iterator[Row]:
        names, refused = export.members()
        for name, error_class, message in refused:
            yield self.quarantine(file=file, member=name, error_class=error_class, message=message)
        lists = sorted(n for n in names if n in LISTS or n == "users.json")
        days = sorted((n for n in names if _is_day_member(n)), key=lambda n: n.split("/"))
        if isinstance(export, _Zip) and export.declared_total(lists + days) > self.config.max_zip_bytes:
            yield self.quarantine(file=file, error_class="zip_too_large",
                                  message=f"the zip declares more than max_zip_bytes={self.config.max_zip_bytes} "
                                  "uncompressed bytes; raise max_zip_bytes or unzip the export")
            return
        users: dict[str, User] = {}
        channels: dict[str, Channel] = {}  # by folder name
        for name in lists:
            for item in self._items(export, file, name):
                obj = item.value if isinstance(item, JsonItem) else None
                if not isinstance(item, JsonItem):
                    yield item
                elif not (isinstance(obj, dict) and _s(obj.get("id"))):
                    yield self.quarantine(file=file, offset=item.offset, member=name, error_class="missing_id",
                                          message=f"{name}: an entry without an 'id'", excerpt=safe_repr(obj))
                elif name == "users.json":
                    users[obj["id"]] = user_from(obj)
                else:
                    kind = LISTS[name]
                    folder = obj["id"] if kind == "dm" else _s(obj.get("name")) or obj["id"]
                    channels[folder] = Channel(obj["id"], _s(obj.get("name")) or obj["id"], kind,
                                               tuple(_strs(obj.get("members"))))
        names_by_id = {c.id: c.name for c in channels.values()}
        for name in days:
            folder = name.split("/")[0]
            ctx = _Context(file, name, channels.get(folder) or Channel(folder, folder, None), users, names_by_id,
                           seen=set())
            for item in self._items(export, file, name):
                yield self._row(item, ctx) if isinstance(item, JsonItem) else item

    def _items(self, export: _Folder | _Zip, file: str, name: str) -> Iterator[JsonItem | Row]:
        """The good JSON items of member `name`, streamed; anything unreadable comes as a Quarantine row."""
        try:
            if isinstance(export, _Zip):
                export.check(name)
            for item in iter_items(lambda: export.open(name), max_item_bytes=self.config.max_message_bytes):
                if item.error_class:
                    yield self.quarantine(file=file, offset=item.offset, member=name, error_class=item.error_class,
                                          message=f"{name}: {item.message}", excerpt=item.excerpt)
                else:
                    yield item
        except Refused as e:
            if e.fatal:
                raise
            yield self.quarantine(file=file, member=name, error_class=e.error_class, message=f"{name}: {e}")
        except READ_ERRORS as e:
            yield self.quarantine(file=file, member=name, error_class="unreadable", message=f"{name}: {e}")

    # -- one message -------------------------------------------------------------------------------------
    def _row(self, item: JsonItem, ctx: _Context) -> Row:
        def bad(error_class: str, message: str) -> Row:
            return self.quarantine(file=ctx.file, offset=item.offset, member=ctx.member, error_class=error_class,
                                   message=f"{ctx.member}: {message}", excerpt=safe_repr(item.value))

        m = item.value
        if not isinstance(m, dict):
            return bad("not_an_object", f"expected a message object, found {type(m).__name__}")
        ts = parse_ts(m.get("ts"))
        if ts is None:
            return bad("bad_ts", f"message without a readable 'ts' ({safe_repr(m.get('ts'), 40)})")
        native_id = f"{ctx.channel.id}:{ts[0]}"
        if native_id in ctx.seen:
            return bad("duplicate_message", f"a second message with ts {ts[0]} in this day file")
        try:
            event = self._message(m, ts, native_id, item, ctx)
        except (ValueError, TypeError, RecursionError) as e:  # a shape no rule above foresaw: this message only
            return bad("bad_message", f"{type(e).__name__}: {e}")
        ctx.seen.add(native_id)
        return event

    def _message(self, m: dict, ts: tuple[str, dt.datetime], native_id: str, item: JsonItem, ctx: _Context):
        channel = ctx.channel
        subtype = _s(m.get("subtype"))
        # message_changed carries the edited message inside it; the row is the change, at the change's ts
        src = m["message"] if subtype == "message_changed" and isinstance(m.get("message"), dict) else m
        kind = ("message" if subtype in CHAT else "message_deleted" if subtype in DELETED
                else subtype if _KIND.fullmatch(subtype) else "message_other")
        root_ts = parse_ts(src.get("thread_ts")) or parse_ts(src.get("ts")) or ts
        target = parse_ts(src.get("ts")) if src is not m else parse_ts(m.get("deleted_ts"))
        parent = None
        if root_ts[0] != ts[0]:
            parent = event_id(self.dataset, self.source, f"{channel.id}:{root_ts[0]}")
        if target and target[0] != ts[0] and subtype in ("message_changed", "message_deleted"):
            parent = event_id(self.dataset, self.source, f"{channel.id}:{target[0]}")

        render = _Render(ctx.users, ctx.names_by_id)
        body = render(src.get("text")) if kind != "message_deleted" else None
        attachments = [_attachment(a, render) for a in _dicts(src.get("attachments"))]
        if not body and attachments:  # integrations (e.g. GitHub commit notices) write into attachments
            body = "\n".join("\n".join(filter(None, (a["pretext"], a["title"], a["text"]))) or a["fallback"] or ""
                             for a in attachments).strip() or body

        comment = src.get("comment") if isinstance(src.get("comment"), dict) else {}  # file_comment
        uid, bot_id = _s(src.get("user")) or _s(comment.get("user")), _s(src.get("bot_id"))
        profile = src.get("user_profile") if isinstance(src.get("user_profile"), dict) else None
        user = ctx.users.get(uid) if uid else None
        if uid and user is None and profile:
            user = user_from(profile)
        bot_profile = src.get("bot_profile") if isinstance(src.get("bot_profile"), dict) else {}
        is_bot = (subtype == "bot_message" or bool(bot_profile) or bool(user and user.is_bot)
                  or bool(bot_id and not uid))
        if is_bot and bot_id:
            name = _s(bot_profile.get("name")) or _s(src.get("username")) or (user.shown if user else None)
            author = {"handle": f"slack:bot:{bot_id}", "display_name": name, "real_name": None, "email": None,
                      "username": _s(src.get("username")), "role": "author"}
        elif uid:
            author = _person(uid, user, "author")
        else:
            author = None
        people = [author] if author else []
        for mid in render.mentions:
            people.append(_person(mid, ctx.users.get(mid), "mentioned"))

        attrs: dict[str, Any] = {
            "channel_id": channel.id, "channel_name": channel.name, "channel_type": channel.type,
            "subtype": subtype, "ts": ts[0], "thread_ts": (parse_ts(src.get("thread_ts")) or (None,))[0],
            "bot": is_bot,
            "mentions": [{"id": k, "name": v} for k, v in render.mentions.items()],
            "channel_mentions": [{"id": k, "name": v} for k, v in render.channel_mentions.items()],
            "links": render.links, "people": people,
        }
        if author is None and _s(src.get("username")):
            attrs["username"] = src["username"]
        edited = src.get("edited")
        if isinstance(edited, dict):
            when = parse_ts(edited.get("ts"))
            attrs["edited"] = {"user": _s(edited.get("user")), "ts": when[1].isoformat() if when else None}
        if target and subtype in ("message_changed", "message_deleted"):
            attrs["target_ts"] = target[0]
        files = _files(src)
        if files:
            attrs["files"] = files
        reactions = [{"name": _s(r.get("name")), "count": _i(r.get("count")), "users": _strs(r.get("users"))}
                     for r in _dicts(src.get("reactions"))]
        if reactions:
            attrs["reactions"] = reactions
        if _i(src.get("reply_count")) is not None:
            attrs["reply_count"] = src["reply_count"]
            attrs["replies"] = [{"user": _s(r.get("user")), "ts": _s(r.get("ts"))} for r in _dicts(src.get("replies"))]
            attrs["reply_users"] = _strs(src.get("reply_users"))
        if attachments:
            attrs["attachments"] = attachments
        for key in ("topic", "purpose", "name", "old_name"):  # channel_topic, channel_purpose, channel_name
            if _s(m.get(key)):
                attrs[key] = m[key]
        if item.encoding_error:
            attrs["encoding_error"] = True
        actor = author["handle"] if author else None
        recipients = [f"slack:{u}" for u in channel.members if channel.type in ("dm", "mpim") and u != uid]
        return self.event(kind=kind, native_id=native_id, thread_key=f"slack:{channel.id}:{root_ts[0]}",
                          parent_id=parent, ts=ts[1], actor=actor, automated=_automated(kind, subtype, is_bot),
                          actor_name=(author["real_name"] or author["display_name"]) if author else None,
                          recipients=recipients, body=body or None, attrs=attrs,
                          provenance={"file": ctx.file, "member": ctx.member, "offset": item.offset})


# Subtypes Slack writes itself (joins, topic changes, pins) or that a bot integration posts.
NOTICES = {"channel_join", "channel_leave", "channel_topic", "channel_purpose", "channel_name", "channel_archive",
           "channel_unarchive", "pinned_item", "bot_message", "bot_add", "bot_remove", "reminder_add", "tombstone"}


def _automated(kind: str, subtype: str | None, bot: bool) -> str:
    """Event.automated of a Slack message: Slack's own notices and bots' posts."""
    if kind in NOTICES or (subtype or "") in NOTICES:
        return f"slack {subtype or kind}"
    return "slack bot" if bot else ""


@dataclass(frozen=True)
class _Context:
    """What a message needs to know about where it was read."""

    file: str
    member: str
    channel: Channel
    users: dict[str, User]
    names_by_id: dict[str, str]
    seen: set[str]


def _person(uid: str, user: User | None, role: str) -> dict:
    u = user or User(None, None, None, None)
    return {"handle": f"slack:{uid}", "display_name": u.display_name or u.real_name or u.name,
            "real_name": u.real_name, "email": u.email, "username": u.name, "role": role}


def _attachment(a: dict, render: _Render) -> dict:
    for key in ("title_link", "from_url", "original_url"):
        render.link(a.get(key))
    return {"title": render(a.get("title")), "title_link": _s(a.get("title_link")), "pretext": render(a.get("pretext")),
            "text": render(a.get("text")), "fallback": render(a.get("fallback")), "from_url": _s(a.get("from_url")),
            "service_name": _s(a.get("service_name"))}


def _files(m: dict) -> list[dict]:
    """File shares as metadata: never content, never URLs (url_private and permalinks carry tokens)."""
    files = _dicts(m.get("files")) or _dicts([m.get("file")])
    return [{"id": _s(f.get("id")), "name": _s(f.get("name")), "title": _s(f.get("title")),
             "filetype": _s(f.get("filetype")), "mimetype": _s(f.get("mimetype")), "size": _i(f.get("size")),
             "mode": _s(f.get("mode"))} for f in files]



def _is_day_member(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and parts[1].endswith(".json") and not any(_hidden(p) for p in parts)


def _has_day_file(folder: Path) -> bool:
    try:
        with os.scandir(folder) as it:
            return any(DAY_FILE.fullmatch(e.name) for e in it)
    except OSError:
        return False


def _is_export_zip(path: Path) -> bool:
    """Peek at the central directory only: a root file (users.json/channels.json) and a day file beside it."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = [PurePosixPath(n) for n in zf.namelist()]
    except (*READ_ERRORS, ValueError):
        return "slack" in path.name.lower()  # a broken Slack download: claimed, so it is reported, not ignored
    roots = {n.parent for n in names if n.name in ROOT_FILES}
    return any(n.parent.parent in roots and DAY_FILE.fullmatch(n.name) for n in names if len(n.parts) >= 2)
