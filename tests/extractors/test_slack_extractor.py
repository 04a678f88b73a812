"""The Slack export extractor: contract, message mapping, zip safety, fuzzing. Every person and text here
is invented; the real exports are read in place by the `real` tests at the end."""

import datetime as dt
import io
import json
import os
import stat
import struct
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors.detect import plan
from extractors.github import GitHubJsonExtractor
from extractors.jira import JiraJsonExtractor
from extractors.slack import Refused, SlackExportExtractor, _Budget, _Limited, parse_ts
from extractors.testing import ExtractorContract
from warehouse.ids import canonical_json, event_id
from warehouse.schemas import Event, Quarantine, to_table

UTC = dt.UTC
T0 = 1577872800  # 2020-01-01T10:00:00Z

USERS = [
    {"id": "U1", "name": "ada", "real_name": "Ada Lovelace", "is_bot": False,
     "profile": {"real_name": "Ada Lovelace", "display_name": "ada", "email": "ada@example.com"}},
    {"id": "U2", "name": "bob", "profile": {"real_name": "Bob Stone", "display_name": "bobby",
                                            "email": "bob@example.com"}},
    {"id": "U9", "name": "deploybot", "is_bot": True, "profile": {"real_name": "Deploy Bot"}},
]
CHANNELS = [{"id": "C1", "name": "general", "members": ["U1", "U2"]}, {"id": "C2", "name": "random"}]


def ts(i: int) -> str:
    return f"{T0 + i}.{i:06d}"


def msg(i: int, text: str = "hello", user: str | None = "U1", **extra) -> dict:
    m = {"type": "message", "text": text, "ts": ts(i), **extra}
    if user:
        m["user"] = user
    return m


def write_json(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1))
    return path


def make_export(root: Path, days: dict[str, list], *, users=USERS, channels=CHANNELS, **lists) -> Path:
    """An unpacked export: users.json, channels.json (+ groups/dms/mpims), one file per day."""
    write_json(root / "users.json", users)
    write_json(root / "channels.json", channels)
    for name, value in lists.items():
        write_json(root / f"{name}.json", value)
    for day, messages in days.items():
        write_json(root / day, messages)
    return root


def zip_export(folder: Path, target: Path, prefix: str = "") -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, prefix + p.relative_to(folder).as_posix())
    return target


def run(path: Path, root: Path | None = None, **config) -> tuple[list[Event], list[Quarantine]]:
    rows = list(SlackExportExtractor("ds", config, "r", root=root or path.parent).iter_records(path))
    assert all(isinstance(r, (Event, Quarantine)) for r in rows)
    return [r for r in rows if isinstance(r, Event)], [r for r in rows if isinstance(r, Quarantine)]


def by_ts(events: list[Event]) -> dict[str, Event]:
    return {e.attrs["ts"]: e for e in events}


class TestSlackContract(ExtractorContract):
    extractor = SlackExportExtractor
    record_kind = "message"

    def make_input(self, tmp_path, n_records):
        # No mentions here: the kit's role vocabulary (extractors.testing.ROLES) has no "mentioned" yet.
        return make_export(tmp_path / "export", {"general/2020-01-01.json": [msg(i) for i in range(n_records)]})

    def make_bad_input(self, tmp_path):
        good = [json.dumps(msg(i)) for i in range(3)]
        root = make_export(tmp_path / "export", {})
        (root / "general").mkdir()
        (root / "general" / "2020-01-01.json").write_text(
            "[" + ",".join([good[0], '{"type": "message", "ts": }', good[1], good[2]]) + "]")
        return root, 3


# --- message mapping --------------------------------------------------------------------------------------

def test_text_is_rendered_and_what_it_names_is_recorded(tmp_path):
    text = ("hi <@U2> and <@U7|carol>, see <#C2|random> <#C1> <!here> &lt;b&gt; &amp; "
            "<https://example.com/a?x=1&amp;y=2|the doc> <https://example.com/b> <mailto:x@example.com|x@example.com>")
    events, quarantined = run(make_export(tmp_path / "e", {"general/2020-01-01.json": [msg(1, text)]}))
    assert quarantined == []
    (e,) = events
    assert e.body == ("hi @Bob Stone and @carol, see #random #general @here <b> & "
                      "the doc (https://example.com/a?x=1&y=2) https://example.com/b mailto:x@example.com")
    assert e.attrs["mentions"] == [{"id": "U2", "name": "Bob Stone"}, {"id": "U7", "name": "carol"}]
    assert e.attrs["channel_mentions"] == [{"id": "C2", "name": "random"}, {"id": "C1", "name": "general"}]
    assert e.attrs["links"] == ["https://example.com/a?x=1&y=2", "https://example.com/b", "mailto:x@example.com"]
    assert e.attrs["people"] == [
        {"handle": "slack:U1", "display_name": "ada", "real_name": "Ada Lovelace", "email": "ada@example.com",
         "username": "ada", "role": "author"},
        {"handle": "slack:U2", "display_name": "bobby", "real_name": "Bob Stone", "email": "bob@example.com",
         "username": "bob", "role": "mentioned"},
        {"handle": "slack:U7", "display_name": None, "real_name": None, "email": None, "username": None,
         "role": "mentioned"}]
    assert (e.actor, e.actor_name, e.kind) == ("slack:U1", "Ada Lovelace", "message")
    assert (e.attrs["channel_id"], e.attrs["channel_name"], e.attrs["channel_type"]) == ("C1", "general", "public")
    assert e.native_id == f"C1:{ts(1)}" and e.event_id == event_id("ds", "slack", f"C1:{ts(1)}")
    assert e.ts == dt.datetime.fromtimestamp(T0 + 1, UTC).replace(microsecond=1)
    assert e.provenance == {"file": "e", "member": "general/2020-01-01.json", "offset": 3}


def test_threads_point_at_their_root(tmp_path):
    root_msg = msg(1, "question?", thread_ts=ts(1), reply_count=2, reply_users=["U2"],
                   replies=[{"user": "U2", "ts": ts(2)}, {"user": "U1", "ts": ts(3)}])
    day = [root_msg, msg(2, "answer", "U2", thread_ts=ts(1), parent_user_id="U1"),
           msg(3, "also in channel", thread_ts=ts(1), subtype="thread_broadcast"), msg(4, "unrelated")]
    events = by_ts(run(make_export(tmp_path / "e", {"general/2020-01-01.json": day}))[0])
    root, reply, broadcast, other = (events[ts(i)] for i in range(1, 5))
    assert root.thread_key == reply.thread_key == broadcast.thread_key == f"slack:C1:{ts(1)}"
    assert root.parent_id is None and reply.parent_id == broadcast.parent_id == root.event_id
    assert broadcast.kind == "message" and broadcast.attrs["subtype"] == "thread_broadcast"
    assert root.attrs["reply_count"] == 2 and root.attrs["replies"][0] == {"user": "U2", "ts": ts(2)}
    assert other.thread_key == f"slack:C1:{ts(4)}" and other.parent_id is None and other.attrs["thread_ts"] is None


def test_subtypes_bots_edits_and_deletions(tmp_path):
    day = [
        msg(1, "<@U2> has joined the channel", "U2", subtype="channel_join"),
        msg(2, "", None, subtype="bot_message", bot_id="B1", username="ci",
            attachments=[{"pretext": "Build passed", "text": "<https://ci.example.com/1|#1> for abc123",
                          "fallback": "Build passed"}]),
        msg(3, "deployed", "U9", bot_id="B9", bot_profile={"id": "B9", "name": "Deployer"}),
        msg(4, "fixed typo", edited={"user": "U1", "ts": f"{T0 + 60}.000000"}),
        {"type": "message", "subtype": "message_deleted", "hidden": True, "deleted_ts": ts(4), "ts": ts(5)},
        msg(6, "This message was deleted.", "USLACKBOT", subtype="tombstone", hidden=True),
        msg(7, "new topic", subtype="channel_topic", topic="Release plans"),
        {"type": "message", "subtype": "message_changed", "ts": ts(8), "hidden": True,
         "message": msg(4, "fixed the typo", edited={"user": "U1", "ts": ts(8)})},
    ]
    events, quarantined = run(make_export(tmp_path / "e", {"general/2020-01-01.json": day}))
    assert quarantined == []
    e = by_ts(events)
    assert [x.kind for x in events] == ["channel_join", "bot_message", "message", "message", "message_deleted",
                                        "message_deleted", "channel_topic", "message_changed"]
    assert e[ts(1)].body == "@Bob Stone has joined the channel" and e[ts(1)].actor == "slack:U2"
    bot = e[ts(2)]
    assert (bot.actor, bot.attrs["bot"]) == ("slack:bot:B1", True)
    assert bot.attrs["people"][0]["handle"] == "slack:bot:B1" and bot.actor_name == "ci"
    assert bot.body == "Build passed\n#1 (https://ci.example.com/1) for abc123"
    assert bot.attrs["links"] == ["https://ci.example.com/1"]
    app = e[ts(3)]
    assert (app.kind, app.actor, app.actor_name, app.attrs["bot"]) == ("message", "slack:bot:B9", "Deployer", True)
    assert e[ts(4)].attrs["edited"] == {"user": "U1", "ts": "2020-01-01T10:01:00+00:00"}
    assert e[ts(4)].attrs["bot"] is False
    deleted = e[ts(5)]
    assert deleted.body is None and deleted.parent_id == e[ts(4)].event_id and deleted.attrs["target_ts"] == ts(4)
    assert e[ts(6)].body is None and e[ts(6)].attrs["subtype"] == "tombstone"
    assert e[ts(7)].attrs["topic"] == "Release plans"
    changed = e[ts(8)]
    assert changed.body == "fixed the typo" and changed.parent_id == e[ts(4)].event_id
    assert changed.attrs["edited"]["ts"] == dt.datetime.fromtimestamp(T0 + 8, UTC).replace(microsecond=8).isoformat()


def test_file_shares_are_metadata_without_urls_or_tokens(tmp_path):
    token_url = "https://files.slack.com/files-pri/T1-F1/plan.pdf?t=xoxe-1234-secret"
    day = [msg(1, "<@U1> uploaded a file: <https://x.slack.com/files/U1/F1/plan.pdf|plan>", subtype="file_share",
               file={"id": "F1", "name": "plan.pdf", "title": "plan", "filetype": "pdf", "mimetype": "application/pdf",
                     "size": 1234, "url_private": token_url, "url_private_download": token_url,
                     "permalink_public": token_url, "preview": "secret content", "thumb_64": token_url}),
           msg(2, "two files", files=[{"id": "F2", "mode": "hidden_by_limit"},
                                      {"id": "F3", "name": "a.txt", "size": 3, "url_private": token_url}]),
           msg(3, "see", reactions=[{"name": "tada", "users": ["U2", "U1"], "count": 2}])]
    e = by_ts(run(make_export(tmp_path / "e", {"general/2020-01-01.json": day}))[0])
    assert e[ts(1)].kind == "file_share"
    assert e[ts(1)].attrs["files"] == [{"id": "F1", "name": "plan.pdf", "title": "plan", "filetype": "pdf",
                                       "mimetype": "application/pdf", "size": 1234, "mode": None}]
    assert [f["id"] for f in e[ts(2)].attrs["files"]] == ["F2", "F3"] and e[ts(2)].kind == "message"
    assert e[ts(3)].attrs["reactions"] == [{"name": "tada", "count": 2, "users": ["U2", "U1"]}]
    for event in e.values():
        dumped = canonical_json(event.to_row())
        assert "xoxe" not in dumped and "files-pri" not in dumped and "secret content" not in dumped


def test_dms_private_channels_and_unknown_folders(tmp_path):
    root = make_export(tmp_path / "e", {"D123/2020-01-01.json": [msg(1, "psst", "U2")],
                                        "secret-club/2020-01-01.json": [msg(2)],
                                        "lost-and-found/2020-01-01.json": [msg(3)]},
                       dms=[{"id": "D123", "members": ["U1", "U2"]}], groups=[{"id": "G5", "name": "secret-club"}])
    e = by_ts(run(root)[0])
    assert (e[ts(1)].attrs["channel_type"], e[ts(1)].recipients) == ("dm", ["slack:U1"])
    assert e[ts(1)].native_id == f"D123:{ts(1)}"
    assert (e[ts(2)].attrs["channel_id"], e[ts(2)].attrs["channel_type"]) == ("G5", "private")
    assert (e[ts(3)].attrs["channel_id"], e[ts(3)].attrs["channel_type"]) == ("lost-and-found", None)


def test_user_profile_in_the_message_fills_in_for_users_missing_from_users_json(tmp_path):
    day = [msg(1, "hi", "U5", user_profile={"real_name": "Eve Moss", "display_name": "eve", "name": "eve.m"})]
    (e,) = run(make_export(tmp_path / "e", {"general/2020-01-01.json": day}))[0]
    assert (e.actor, e.actor_name) == ("slack:U5", "Eve Moss") and e.attrs["people"][0]["username"] == "eve.m"


@pytest.mark.parametrize("raw, expected", [
    ("1577872800.000100", ("1577872800.000100", dt.datetime(2020, 1, 1, 10, 0, 0, 100, tzinfo=UTC))),
    ("1577872800", ("1577872800", dt.datetime(2020, 1, 1, 10, tzinfo=UTC))),
    (1577872800, ("1577872800", dt.datetime(2020, 1, 1, 10, tzinfo=UTC))),
    (1577872800.5, ("1577872800.500000", dt.datetime(2020, 1, 1, 10, 0, 0, 500000, tzinfo=UTC))),
    ("yesterday", None), ("", None), (None, None), (True, None), ("99999999999999", None), (float("nan"), None),
])
def test_parse_ts(raw, expected):
    assert parse_ts(raw) == expected


# --- bad input ------------------------------------------------------------------------------------------

def test_bad_day_files_cost_only_their_damaged_part(tmp_path):
    root = make_export(tmp_path / "e", {"general/2020-01-01.json": [msg(1)], "general/2020-01-03.json": [msg(5)]})
    (root / "general" / "2020-01-02.json").write_text("this is not json")
    cut = json.dumps([msg(2), msg(3), msg(4)])
    (root / "random").mkdir()
    (root / "random" / "2020-01-02.json").write_text(cut[:cut.index(ts(4)) - 10])
    (root / "random" / "2020-01-04.json").write_bytes(b"")
    events, quarantined = run(root)
    assert sorted(e.attrs["ts"] for e in events) == [ts(1), ts(2), ts(3), ts(5)]
    assert [(q.member, q.error_class) for q in quarantined] == [
        ("general/2020-01-02.json", "json_decode"), ("general/2020-01-02.json", "trailing_data"),
        ("random/2020-01-02.json", "truncated"),
        ("random/2020-01-04.json", "empty")]
    assert all(q.file == "e" and q.offset is not None and q.message for q in quarantined)
    assert quarantined[2].offset == cut.index(f'{{"type": "message", "text": "hello", "ts": "{ts(4)}"')


def test_bad_messages_are_quarantined_alone(tmp_path):
    day = [msg(1), 42, {"type": "message", "text": "no ts"}, msg(2, ts="soon"), msg(3), msg(3, "again"), msg(4)]
    day[3]["ts"] = "soon"
    events, quarantined = run(make_export(tmp_path / "e", {"general/2020-01-01.json": day}))
    assert [e.attrs["ts"] for e in events] == [ts(1), ts(3), ts(4)]
    assert [q.error_class for q in quarantined] == ["not_an_object", "bad_ts", "bad_ts", "duplicate_message"]
    assert len({q.quarantine_id for q in quarantined}) == 4


def test_bad_users_json_entries_are_quarantined_and_the_rest_used(tmp_path):
    root = make_export(tmp_path / "e", {"general/2020-01-01.json": [msg(1, "hi <@U2>")]},
                       users=[{"name": "no id"}, "junk", *USERS])
    events, quarantined = run(root)
    assert [(q.member, q.error_class) for q in quarantined] == [("users.json", "missing_id")] * 2
    assert events[0].body == "hi @Bob Stone"


def test_symlinks_in_a_folder_are_refused(tmp_path):
    outside = write_json(tmp_path / "outside" / "2020-01-09.json", [msg(9)])
    root = make_export(tmp_path / "e", {"general/2020-01-01.json": [msg(1)]})
    os.symlink(outside, root / "general" / "2020-01-09.json")
    os.symlink(outside.parent, root / "linked")
    events, quarantined = run(root)
    assert [e.attrs["ts"] for e in events] == [ts(1)]
    assert sorted((q.member, q.error_class) for q in quarantined) == [
        ("general/2020-01-09.json", "symlink"), ("linked", "symlink")]


def test_unknown_config_key_is_an_error():
    with pytest.raises(ValueError):
        SlackExportExtractor("ds", {"max_zip_byte": 1})


# --- zip ----------------------------------------------------------------------------------------------------

def rich_export(root: Path) -> Path:
    return make_export(root, {
        "general/2020-01-01.json": [msg(1, "hi <@U2>", thread_ts=ts(1), reply_count=1),
                                    msg(2, "yo", "U2", thread_ts=ts(1))],
        "general/2020-01-02.json": [msg(3, "", None, subtype="bot_message", bot_id="B1")],
        "random/2020-01-01.json": [msg(4, "<#C1|general>", reactions=[{"name": "x", "count": 1, "users": ["U1"]}])],
    })


@pytest.mark.parametrize("prefix", ["", "export-2020/"])
def test_zip_and_folder_give_the_same_events(tmp_path, prefix):
    folder = rich_export(tmp_path / "export")
    archive = zip_export(folder, tmp_path / "export.zip", prefix)
    (f_events, f_q), (z_events, z_q) = run(folder), run(archive)
    assert f_q == z_q == [] and len(f_events) == 4

    def strip(e):
        return {**e.to_row(), "provenance": {**e.provenance, "file": None}}

    assert [strip(e) for e in z_events] == [strip(e) for e in f_events]
    assert {e.provenance["file"] for e in z_events} == {"export.zip"}
    assert SlackExportExtractor.detect(tmp_path) == [folder, archive]


def bomb_member(size: int = 30 * 1024 * 1024) -> bytes:
    return b"[" + b" " * size + b"]"


def test_zip_slip_absolute_and_drive_names_are_refused(tmp_path):
    archive = tmp_path / "slack.zip"
    evil = ["../escape/2020-01-02.json", "general/../../2020-01-03.json", "/abs/2020-01-04.json",
            "C:/win/2020-01-05.json", "general\\..\\2020-01-06.json", "./general/2020-01-07.json"]
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("users.json", json.dumps(USERS))
        zf.writestr("channels.json", json.dumps(CHANNELS))
        zf.writestr("general/2020-01-01.json", json.dumps([msg(1)]))
        for i, name in enumerate(evil):
            zf.writestr(zipfile.ZipInfo(name), json.dumps([msg(10 + i)]))
    before = sorted(p for p in tmp_path.parent.rglob("*"))
    events, quarantined = run(archive)
    assert [e.attrs["ts"] for e in events] == [ts(1)]
    assert sorted(q.member for q in quarantined) == sorted(evil)
    assert {q.error_class for q in quarantined} == {"unsafe_member"}
    assert sorted(p for p in tmp_path.parent.rglob("*")) == before  # nothing was written anywhere


def test_symlink_members_are_refused_unread(tmp_path):
    archive = tmp_path / "slack.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("users.json", json.dumps(USERS))
        zf.writestr("channels.json", json.dumps(CHANNELS))
        zf.writestr("general/2020-01-01.json", json.dumps([msg(1)]))
        link = zipfile.ZipInfo("general/2020-01-02.json")
        link.create_system = 3
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, json.dumps([msg(2)]))  # were it read, msg 2 would appear
    events, quarantined = run(archive)
    assert [e.attrs["ts"] for e in events] == [ts(1)]
    assert [(q.member, q.error_class) for q in quarantined] == [("general/2020-01-02.json", "symlink_member")]


def test_zip_bomb_member_is_refused_and_the_rest_read(tmp_path):
    archive = tmp_path / "slack.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("users.json", json.dumps(USERS))
        zf.writestr("channels.json", json.dumps(CHANNELS))
        zf.writestr("general/2020-01-01.json", json.dumps([msg(1)]))
        zf.writestr("general/2020-01-02.json", bomb_member())
        zf.writestr("general/2020-01-03.json", json.dumps([msg(3)]))
    events, quarantined = run(archive)
    assert [e.attrs["ts"] for e in events] == [ts(1), ts(3)]
    assert [(q.member, q.error_class) for q in quarantined] == [("general/2020-01-02.json", "zip_bomb")]


def test_zip_bomb_with_a_lying_header_is_not_read_past_its_limit(tmp_path):
    """The central directory declares a harmless size; the bytes read are still bounded and the member is
    quarantined, its neighbours kept."""
    archive = tmp_path / "slack.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("users.json", json.dumps(USERS))
        zf.writestr("channels.json", json.dumps(CHANNELS))
        zf.writestr("general/2020-01-01.json", json.dumps([msg(1)]))
        zf.writestr("general/2020-01-02.json", bomb_member())
        zf.writestr("general/2020-01-03.json", json.dumps([msg(3)]))
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("general/2020-01-02.json")
    lie = info.compress_size * 50
    cd = data.index(b"PK\x01\x02")  # central directory entries: signature, fields, name at +46
    while data[cd + 46:cd + 46 + len(info.filename)] != info.filename.encode():
        cd = data.index(b"PK\x01\x02", cd + 4)
    struct.pack_into("<I", data, cd + 24, lie)              # central directory: uncompressed size
    struct.pack_into("<I", data, info.header_offset + 22, lie)  # local header: uncompressed size
    archive.write_bytes(bytes(data))
    events, quarantined = run(archive)
    assert [e.attrs["ts"] for e in events] == [ts(1), ts(3)]
    assert [q.member for q in quarantined] and {q.member for q in quarantined} == {"general/2020-01-02.json"}


def test_byte_limits_are_counted_while_reading():
    budget = _Budget(cap=3 * 1024 * 1024)
    limited = _Limited(io.BytesIO(b"x" * (5 * 1024 * 1024)), "m", limit=2 * 1024 * 1024, budget=budget)
    with pytest.raises(Refused) as err:
        while limited.read(64 * 1024):
            pass
    assert err.value.error_class == "zip_bomb" and limited.count <= 2 * 1024 * 1024 + 64 * 1024
    budget = _Budget(cap=3 * 1024 * 1024)
    budget.charge("a", 2 * 1024 * 1024)
    budget.charge("a", 2 * 1024 * 1024)  # a re-read of the same bytes is not charged twice
    with pytest.raises(Refused) as err:
        budget.charge("b", 2 * 1024 * 1024)
    assert err.value.error_class == "zip_too_large" and err.value.fatal


def test_total_uncompressed_cap(tmp_path):
    folder = rich_export(tmp_path / "export")
    archive = zip_export(folder, tmp_path / "export.zip")
    events, quarantined = run(archive, max_zip_bytes=1000)
    assert events == [] and [q.error_class for q in quarantined] == ["zip_too_large"]
    assert "max_zip_bytes" in quarantined[0].message


@pytest.mark.parametrize("content", [b"", b"not a zip", b"PK\x03\x04truncated"])
def test_broken_zip_is_one_quarantine_row(tmp_path, content):
    path = tmp_path / "slack-export.zip"
    path.write_bytes(content)
    assert SlackExportExtractor.detect(tmp_path) == [path]  # named like an export: claimed, so it is reported
    events, quarantined = run(path)
    assert events == [] and [q.error_class for q in quarantined] == ["unreadable"]


# --- detection ----------------------------------------------------------------------------------------------

def test_detect_claims_exports_only(tmp_path):
    folder = rich_export(tmp_path / "a" / "export")
    archive = zip_export(folder, tmp_path / "b" / "download.zip")
    write_json(tmp_path / "c" / "users.json", USERS)  # no day-file folder: not an export
    write_json(tmp_path / "c" / "notes" / "readme.json", [])
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as zf:
        zf.writestr("data/2020-01-01.json", "[]")
    assert SlackExportExtractor.detect(tmp_path) == [folder, archive]
    assert JiraJsonExtractor.detect(folder) == [] and GitHubJsonExtractor.detect(folder) == []
    assert plan(tmp_path) == [("slack_export", folder), ("slack_export", archive)]


# --- fuzzing ------------------------------------------------------------------------------------------------

HOSTILE = {
    "deep": lambda: b"[" * 100_000 + b"]" * 100_000,
    "unclosed_deep": lambda: b"{\"a\": " + b"[" * 100_000,
    "huge_string": lambda: json.dumps("x" * 10_000_000).encode(),
    "huge_message": lambda: json.dumps(msg(99, "y" * 10_000_000)).encode(),
    "long_line": lambda: b'{"ts": "1.0", "text": "' + b"z" * 10_000_000 + b'", "broken": }',
}


def fuzz_export(root: Path) -> tuple[Path, list[bytes]]:
    """An export with two intact day files and a victim day file, returned with its messages' JSON."""
    make_export(root, {"general/2020-01-01.json": [msg(i) for i in range(3)],
                       "random/2020-01-03.json": [msg(i) for i in range(10, 13)]})
    parts = [json.dumps(msg(i, f"message {i} <@U2>", reactions=[{"name": "ok", "count": 1, "users": ["U1"]}]))
             .encode() for i in range(3, 9)]
    return root / "general" / "2020-01-02.json", parts


SAFE = {ts(i) for i in (0, 1, 2, 10, 11, 12)}
VICTIM = [ts(i) for i in range(3, 9)]


def day(parts: list[bytes]) -> bytes:
    return b"[" + b",".join(parts) + b"]"


def check_fuzzed(root: Path, must: set[str], as_zip: bool) -> None:
    path = zip_export(root, root.parent / "e.zip") if as_zip else root
    events, quarantined = run(path)  # never raises
    got = {e.attrs["ts"] for e in events}
    if as_zip and ("general/2020-01-02.json", "zip_bomb") in {(q.member, q.error_class) for q in quarantined}:
        must -= set(VICTIM)  # 10 MB of one letter deflates past 100:1: the zip policy refuses the whole member
    assert must <= got, sorted(must - got)
    assert to_table(Event, events).num_rows == len(events)
    assert len({e.event_id for e in events}) == len(events)
    assert all(q.file == path.name for q in quarantined)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(mode=st.sampled_from(["truncate", "random", "flip"]), where=st.floats(0, 1), junk=st.binary(max_size=64),
       bit=st.integers(0, 7), as_zip=st.booleans())
def test_fuzz_damaged_day_file(mode, where, junk, bit, as_zip):
    """Truncation, random bytes, a bit flip: every message wholly before the damage, and every other day
    file's messages, still come out."""
    with tempfile.TemporaryDirectory() as tmp:
        victim, parts = fuzz_export(Path(tmp) / "e")
        data = bytearray(day(parts))
        at = int(where * (len(data) - 1))
        if mode == "truncate":
            data = data[:at]
        elif mode == "random":
            data[at:at + len(junk)] = junk
        else:
            data[at] ^= 1 << bit
        victim.write_bytes(bytes(data))
        ends = [1 + sum(len(p) + 1 for p in parts[:k + 1]) - 1 for k in range(len(parts))]
        check_fuzzed(victim.parents[1], SAFE | {t for t, end in zip(VICTIM, ends) if end <= at}, as_zip)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(hostile=st.sampled_from(sorted(HOSTILE)), slot=st.integers(0, 6), as_zip=st.booleans())
def test_fuzz_hostile_element_between_good_messages(hostile, slot, as_zip):
    """100k nested lists, a 10 MB string, a 10 MB message, a 10 MB broken line: its neighbours come out
    (an unclosed one swallows what follows it, so only what precedes it must)."""
    with tempfile.TemporaryDirectory() as tmp:
        victim, parts = fuzz_export(Path(tmp) / "e")
        victim.write_bytes(day(parts[:slot] + [HOSTILE[hostile]()] + parts[slot:]))
        must = VICTIM[:slot] if hostile == "unclosed_deep" else VICTIM
        check_fuzzed(victim.parents[1], SAFE | set(must), as_zip)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=st.floats(0, 1), junk=st.binary(min_size=1, max_size=32), truncate=st.booleans())
def test_fuzz_damaged_zip_never_raises(where, junk, truncate):
    with tempfile.TemporaryDirectory() as tmp:
        archive = zip_export(rich_export(Path(tmp) / "e"), Path(tmp) / "e.zip")
        data = bytearray(archive.read_bytes())
        at = int(where * (len(data) - 1))
        if truncate:
            data = data[:at]
        else:
            data[at:at + len(junk)] = junk
        archive.write_bytes(bytes(data))
        events, quarantined = run(archive)
        assert to_table(Event, events).num_rows == len(events)
        assert len({e.event_id for e in events}) == len(events)


# --- the real exports (read in place, never copied) -----------------------------------------------------------

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "real"
R_CONTRIB = REAL / "slack-r-contributors"
VIEWER_ZIP = REAL / "slack-export-viewer-fixture" / "testarchive.zip"


def real(test):
    return pytest.mark.real(pytest.mark.skipif(not REAL.is_dir(), reason=f"real exports not present at {REAL}")(test))


def count_messages(files: dict[str, bytes]) -> Counter:
    """Independently of the extractor: messages per kind, from the day files' JSON."""
    kinds = Counter()
    for name, raw in files.items():
        if name.count("/") == 1 and name.endswith(".json"):
            for m in json.loads(raw):
                sub = m.get("subtype")
                kinds["message" if sub in (None, "thread_broadcast", "me_message") else sub] += 1
    return kinds


def folder_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.json")}


def zip_files(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist() if not n.endswith("/")}


def assert_accounted(events: list[Event], quarantined: list[Quarantine], expected: Counter) -> None:
    assert len(events) + len(quarantined) == sum(expected.values())
    assert quarantined == [], [(q.member, q.error_class, q.message) for q in quarantined]
    assert Counter(e.kind for e in events) == expected
    assert to_table(Event, events).num_rows == len(events)
    assert len({e.event_id for e in events}) == len(events)


@real
def test_real_r_contributors_folder_and_zip(tmp_path):
    expected = count_messages(folder_files(R_CONTRIB))
    assert sum(expected.values()) == 377
    events, quarantined = run(R_CONTRIB)
    assert_accounted(events, quarantined, expected)
    assert all(e.actor and e.actor.startswith("slack:U") for e in events)
    replies = [e for e in events if e.parent_id]
    assert replies and all(e.thread_key != f"slack:{e.attrs['channel_id']}:{e.attrs['ts']}" for e in replies)
    assert any(e.attrs["mentions"] for e in events) and any(e.attrs.get("edited") for e in events)
    assert all(p["role"] in ("author", "mentioned") for e in events for p in e.attrs["people"])
    archive = zip_export(R_CONTRIB, tmp_path / "r-contributors.zip", "slack/")
    z_events, z_quarantined = run(archive)
    assert z_quarantined == [] and [e.event_id for e in z_events] == [e.event_id for e in events]


@real
def test_real_export_viewer_zip_and_its_unpacked_folder(tmp_path):
    files = zip_files(VIEWER_ZIP)
    expected = count_messages(files)
    assert sum(expected.values()) == 158
    events, quarantined = run(VIEWER_ZIP)
    assert_accounted(events, quarantined, expected)
    bots = [e for e in events if e.kind == "bot_message"]
    assert bots and all(e.attrs["bot"] and e.actor.startswith("slack:bot:B") for e in bots)
    assert all(len(e.body or "") > 0 for e in bots)  # integrations write into attachments
    shares = [e for e in events if e.kind == "file_share"]
    assert shares and all("xox" not in canonical_json(e.attrs) for e in shares)
    folder = tmp_path / "unpacked"
    for name, raw in files.items():  # the test's own unpacking (the extractor never extracts)
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(raw)
    f_events, f_quarantined = run(folder)
    assert f_quarantined == [] and [e.event_id for e in f_events] == [e.event_id for e in events]
    rezipped = zip_export(folder, tmp_path / "again.zip", "workspace/")
    assert [e.event_id for e in run(rezipped)[0]] == [e.event_id for e in events]


@real
def test_real_detect_finds_both_exports_and_nothing_else():
    claimed = [p for name, p in plan(REAL) if name == "slack_export"]
    assert claimed == [VIEWER_ZIP, R_CONTRIB]
