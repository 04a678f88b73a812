"""The sample company's mail archive and Slack export: real formats, coherent with Jira and git, exact truth."""

from __future__ import annotations

import datetime as dt
import email.policy
import email.utils
import json
import mailbox
import random
import re
import subprocess
from email.message import EmailMessage
from pathlib import Path

import pytest

from sample.company import _Company, write_sample
from sample.gitstream import git_env

KEY = re.compile(r"\b[A-Z][A-Z0-9]+-\d+\b")
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
MENTION = re.compile(r"<@(U[A-Z0-9]+)>")
CHANNEL = re.compile(r"<#(C[A-Z0-9]+)\|([a-z0-9_-]+)>")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env=git_env(), capture_output=True, text=True,
                          check=True).stdout


def body_of(msg: EmailMessage) -> str:
    """The truth's "decoded body": the first text/plain part, else the first text/html part."""
    for subtype in ("plain", "html"):
        for part in msg.walk():
            if part.get_content_type() == f"text/{subtype}" and not part.is_attachment():
                return part.get_content()
    raise AssertionError(f"no text part in {msg['Message-ID']}")


@pytest.fixture(scope="module")
def mails(out, truth) -> dict[str, tuple[str, str, EmailMessage, bytes]]:
    """Message-ID (no <>) -> (list, mbox From line, message parsed with the modern policy, raw bytes)."""
    found = {}
    for source in truth["sources"]["mail"]:
        box = mailbox.mbox(out / source["file"], create=False)
        keys = list(box.keys())
        assert len(keys) == source["messages"] > 0
        for key in keys:
            raw = box.get_bytes(key)
            msg = email.message_from_bytes(raw, policy=email.policy.default)
            mid = msg["Message-ID"].strip("<>")
            assert mid not in found
            found[mid] = (source["list"], box.get_message(key).get_from(), msg, raw)
    return found


@pytest.fixture(scope="module")
def slack(out, truth) -> dict:
    root = out / truth["sources"]["slack"]["dir"]
    users = json.loads((root / "users.json").read_text(encoding="utf-8"))
    channels = json.loads((root / "channels.json").read_text(encoding="utf-8"))
    messages = {}  # "<channel id>:<ts>" -> (file relative to out, message)
    for ch in channels:
        for day in sorted((root / ch["name"]).glob("*.json")):
            for m in json.loads(day.read_text(encoding="utf-8")):
                native = f"{ch['id']}:{m['ts']}"
                assert native not in messages
                messages[native] = (day.relative_to(out).as_posix(), m)
    return {"users": users, "channels": channels, "messages": messages}


def test_mbox_parses_and_every_message_has_id_date_and_threading(mails):
    zones, features = set(), set()
    for from_line, msg, raw in (v[1:] for v in mails.values()):
        assert re.fullmatch(r"\S+@\S+ \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", from_line), from_line
        assert msg["Date"].datetime.tzinfo is not None and msg["From"] and msg["To"] and msg["Subject"]
        zones.add(msg["Date"].datetime.utcoffset())
        if not msg["From"].addresses[0].display_name.isascii():  # Zoë, Joaquín...: RFC 2047 encoded words
            assert re.search(rb"^From: =\?utf-8\?[qb]\?", raw, re.M | re.I)
        if msg["In-Reply-To"]:
            parent = msg["In-Reply-To"].strip("<>")
            refs = [r.strip("<>") for r in msg["References"].split()]
            assert parent in mails and refs[-1] == parent and all(r in mails for r in refs)
            assert mails[parent][2]["Date"].datetime < msg["Date"].datetime
            assert msg["Subject"].startswith("Re: ")
        body = body_of(msg)
        features |= {
            "html_only": msg.get_content_type() == "text/html",
            "qp": b"Content-Transfer-Encoding: quoted-printable" in raw,
            "base64_body": msg.get_content_type() == "text/plain" and msg["Content-Transfer-Encoding"] == "base64",
            "rfc2047_subject": re.search(rb"^Subject: =\?utf-8\?", raw, re.M) and not msg["Subject"].isascii(),
            "from_escape": "\n>From " in body,
            "attachment": any(p.get_filename() for p in msg.iter_attachments()) if msg.is_multipart() else False,
            "quote": re.search(r"^On .+ wrote:\n> ", body, re.M) is not None,
            "signature": "\n-- \n" in body,
            "customer": not msg["From"].addresses[0].domain.endswith("acme-corp.example"),
        }.items()
    assert {k for k, v in features if v} == {"html_only", "qp", "base64_body", "rfc2047_subject", "from_escape",
                                             "attachment", "quote", "signature", "customer"}
    assert len(zones) >= 3


def test_slack_export_shape_and_mentions_resolve(slack, truth):
    users = {u["id"]: u for u in slack["users"]}
    assert all(re.fullmatch(r"U0[A-Z0-9]{8}", u) for u in users)
    staff = {p["email"]: p for p in truth["people"]}
    humans = [u for u in slack["users"] if not u["is_bot"]]
    assert {u["profile"]["email"] for u in humans} == set(staff)
    for u in humans:
        assert u["profile"]["real_name"] == staff[u["profile"]["email"]]["name"] == u["real_name"]
    channels = {c["id"]: c for c in slack["channels"]}
    assert {c["name"] for c in channels.values()} >= {"general", "dev", "support"}
    assert all(m in users for c in channels.values() for m in c["members"])
    subtypes, seen = set(), set()
    for native, (file, m) in slack["messages"].items():
        assert re.fullmatch(r"\d{10}\.\d{6}", m["ts"]) and m["type"] == "message"
        day = dt.datetime.fromtimestamp(float(m["ts"]), dt.UTC).strftime("%Y-%m-%d")
        assert file.endswith(f"/{channels[native.split(':')[0]]['name']}/{day}.json")
        for uid in MENTION.findall(m["text"]):
            assert uid in users, (native, uid)
        for cid, name in CHANNEL.findall(m["text"]):
            assert channels[cid]["name"] == name
        if "user" in m:
            assert m["user"] in users
        subtypes.add(m.get("subtype"))
        if "thread_ts" in m and m["thread_ts"] != m["ts"]:
            parent = slack["messages"][f"{native.split(':')[0]}:{m['thread_ts']}"][1]
            assert {"user": m["user"], "ts": m["ts"]} in parent["replies"] and m["parent_user_id"] == parent["user"]
            assert float(m["ts"]) > float(parent["ts"])
        if m.get("replies"):
            assert m["reply_count"] == len(m["replies"]) and m["latest_reply"] == m["replies"][-1]["ts"]
        for r in m.get("reactions", []):
            assert r["count"] == len(r["users"]) and all(u in users for u in r["users"]) and m["user"] not in r["users"]
        seen |= {k for k in ("edited", "files", "reactions", "replies") if k in m}
    assert {"channel_join", "bot_message", None} <= subtypes and seen == {"edited", "files", "reactions", "replies"}
    assert any(MENTION.search(m["text"]) and not m.get("subtype") for _, m in slack["messages"].values())
    assert any(CHANNEL.search(m["text"]) for _, m in slack["messages"].values())


def source_text(link_from: dict, fld: str, mails, slack, repo: Path) -> str:
    source, native = link_from["source"], link_from["native_id"]
    if source == "email":
        msg = mails[native][2]
        return msg["Subject"] if fld == "subject" else body_of(msg)
    if source == "slack":
        return slack["messages"][native][1][fld]
    assert source == "git" and fld == "message"
    return git(repo, "cat-file", "commit", native).split("\n\n", 1)[1]


def test_every_link_exists_and_its_text_is_in_its_source(out, truth, mails, slack):
    repo = out / "acme" / "repo"
    keys = {i["key"] for i in truth["issues"]}
    shas = {c["sha"] for c in truth["commits"]}
    kinds = set()
    for link in truth["links"]:
        text, (kind, value) = link["text"], (link["to"]["kind"], link["to"]["value"])
        assert text in source_text(link["from"], link["field"], mails, slack, repo), link
        kinds.add((link["from"]["source"], kind))
        if kind == "jira_key":
            assert value in keys and text == value
        elif kind == "issue_url":
            assert value in keys and text == f"https://jira.acme-corp.example/browse/{value}"
        elif kind == "commit":
            assert value in shas and value.startswith(text) and (7 <= len(text) <= 12 or text == value)
            assert sum(s.startswith(text) for s in shas) == 1
        elif kind == "commit_url":
            assert value in shas and text == f"https://git.acme-corp.example/acme/repo/commit/{value}"
        else:
            assert kind == "message_id" and value in mails and value != link["from"]["native_id"]
    assert {("git", "jira_key"), ("email", "jira_key"), ("email", "issue_url"), ("email", "commit"),
            ("email", "commit_url"), ("email", "message_id"), ("slack", "jira_key"), ("slack", "issue_url"),
            ("slack", "commit"), ("slack", "commit_url")} <= kinds
    full = [x for x in truth["links"] if x["to"]["kind"] == "commit" and x["text"] == x["to"]["value"]]
    assert full and any(x["to"]["kind"] == "commit" and len(x["text"]) < 40 for x in truth["links"])
    assert any(x["to"]["value"] == "CORE-12" and x["from"]["source"] == "slack" for x in truth["links"])


def test_every_key_and_sha_written_in_mail_and_slack_is_a_truth_link(truth, mails, slack):
    """No unrecorded references: a linker scored against the truth is not punished for finding real ones."""
    shas = [c["sha"] for c in truth["commits"]]
    recorded: dict[tuple[str, str], set[str]] = {}
    for x in truth["links"]:
        recorded.setdefault((x["from"]["native_id"], x["field"]), set()).add(x["to"]["value"])
    texts = [((mid, "subject"), m["Subject"]) for mid, (_, _, m, _) in mails.items()]
    texts += [((mid, "body"), body_of(m)) for mid, (_, _, m, _) in mails.items()]
    texts += [((native, "text"), m["text"]) for native, (_, m) in slack["messages"].items()]
    for where, text in texts:
        found = set(KEY.findall(text))
        found |= {s for token in HEX.findall(text) for s in shas if s.startswith(token)}
        found |= {mid for mid in mails if f"<{mid}>" in text and where[0] != mid}
        assert found == recorded.get(where, set()), where


def test_links_are_coherent_in_time(truth, mails, slack):
    created = {i["key"]: dt.datetime.strptime(i["created"], "%Y-%m-%dT%H:%M:%S.%f%z") for i in truth["issues"]}
    committed = {c["sha"]: dt.datetime.strptime(c["date"], "%Y-%m-%dT%H:%M:%S%z") for c in truth["commits"]}
    for link in truth["links"]:
        source, native = link["from"]["source"], link["from"]["native_id"]
        if source == "email":
            when = mails[native][2]["Date"].datetime
        elif source == "slack":
            when = dt.datetime.fromtimestamp(float(native.split(":")[1]), dt.UTC)
        else:
            continue
        value = link["to"]["value"]
        if link["to"]["kind"] in ("jira_key", "issue_url"):
            assert when > created[value], link
        elif link["to"]["kind"] in ("commit", "commit_url"):
            assert when > committed[value], link
        else:
            assert when > mails[value][2]["Date"].datetime, link


def test_pii_offsets_in_mail_and_slack_slice_exactly(truth, mails, slack):
    items = [i for i in truth["pii"] if i["location"].split(":")[0] in ("mbox", "slack")]
    for item in items:
        kind, rest = item["location"].split(":", 1)
        if kind == "mbox":
            mid, part = rest.rsplit(":", 1)
            assert part == "body" and item["file"].endswith(f"/{mails[mid][0]}.mbox")
            text = body_of(mails[mid][2])
        else:
            path, ts, fld = rest.rsplit(":", 2)
            file, m = next(v for v in slack["messages"].values() if v[1]["ts"] == ts and v[0].endswith(path))
            assert file == item["file"] and fld == "text"
            text = m["text"]
        assert text[item["start"]:item["end"]] == item["value"], item
    by_source = {(i["location"].split(":")[0], i["type"], i["person"] is None) for i in items}
    assert {("mbox", t, False) for t in ("name", "first_name", "email", "phone")} <= by_source
    assert {("mbox", t, True) for t in ("name", "first_name", "email", "phone")} <= by_source
    assert {("slack", "name", True), ("slack", "first_name", False), ("slack", "email", True),
            ("slack", "phone", True), ("slack", "phone", False)} <= by_source


def test_identities_cover_all_sources_and_every_handle_exists(out, truth, mails, slack):
    repo = out / "acme" / "repo"
    found = {f"git:{e.lower()}" for e in git(repo, "log", "--format=%ae%n%ce", "HEAD").split()}
    for _, _, m, _ in mails.values():
        found |= {f"email:{a.addr_spec.lower()}" for h in ("From", "To", "Cc") if m[h] for a in m[h].addresses}
    found |= {f"slack:{u['id']}" for u in slack["users"]}
    for path in (out / "acme" / "jira").glob("*.json"):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for issue in doc.get("issues", [doc]):
            f = issue["fields"]
            users = [f["reporter"], f["assignee"], f["creator"], *(c["author"] for c in f["comment"]["comments"]),
                     *(h["author"] for h in issue["changelog"]["histories"])]
            found |= {f"jira:{u['name']}" for u in users if u}
            found |= {f"jira:{i[k]}" for h in issue["changelog"]["histories"] for i in h["items"]
                      if i["field"] == "assignee" for k in ("from", "to") if i[k]}
    ids = truth["identities"]
    for ident in ids:
        assert set(ident["handles"]) <= found, ident
    staff = [i for i in ids if i["kind"] == "staff"]
    assert [i["person"] for i in staff] == [p["jira"]["name"] for p in truth["people"]]
    committers = {c["author"]["person"] for c in truth["commits"]}
    for ident, person in zip(staff, truth["people"], strict=True):
        kinds = {h.split(":")[0] for h in ident["handles"]}
        assert {"email", "slack"} <= kinds and ("git" in kinds) == (ident["person"] in committers), ident
        assert f"email:{person['email']}" in ident["handles"] or any(
            h.endswith("@mail.example") for h in ident["handles"])
    assert sum({h.split(":")[0] for h in i["handles"]} == {"jira", "git", "email", "slack"} for i in staff) >= 6
    assert any(i["kind"] == "customer" for i in ids)
    every = [h for i in ids for h in i["handles"]]
    assert len(every) == len(set(every))  # one handle, one person
    # anyone who writes in mail or Slack is someone in the identities
    assert {f"email:{m['From'].addresses[0].addr_spec.lower()}" for _, _, m, _ in mails.values()} <= set(every)
    assert {f"slack:{m['user']}" for _, m in slack["messages"].values() if "user" in m} <= set(every)


def test_threads_partition_mail_and_match_slack_threads(truth, mails, slack):
    threads = truth["threads"]
    listed = [mid for t in threads["email"] for mid in t["messages"]]
    assert sorted(listed) == sorted(mails) and any(len(t["messages"]) >= 3 for t in threads["email"])
    for t in threads["email"]:
        root, *rest = t["messages"]
        assert mails[root][2]["In-Reply-To"] is None and mails[root][2]["Subject"] == t["subject"]
        for mid in rest:
            assert mails[mid][2]["References"].split()[0].strip("<>") == root
    for t in threads["slack"]:
        parent = slack["messages"][t["messages"][0]][1]
        assert parent["thread_ts"] == t["thread_ts"] and len(t["messages"]) == parent["reply_count"] + 1
        assert all(slack["messages"][n][1]["thread_ts"] == t["thread_ts"] for n in t["messages"])
    assert len(threads["slack"]) == sum(1 for _, m in slack["messages"].values() if m.get("replies"))


def test_questions_are_answered_later_by_someone_else(truth, mails, slack):
    kinds = set()
    for qa in truth["qa"]:
        kinds.add((qa["source"], qa["kind"], qa["in_thread"]))
        assert qa["asker"] != qa["answerer"]
        if qa["source"] == "email":
            q, a = mails[qa["question"]][2], mails[qa["answer"]][2]
            assert a["In-Reply-To"].strip("<>") == qa["question"] and q["Date"].datetime < a["Date"].datetime
            text = body_of(a)
        else:
            q, a = slack["messages"][qa["question"]][1], slack["messages"][qa["answer"]][1]
            assert float(q["ts"]) < float(a["ts"]) and (a.get("thread_ts") == q["ts"]) == qa["in_thread"]
            assert qa["answerer"] == f"slack:{a['user']}" and qa["asker"] == f"slack:{q['user']}"
            text = a["text"]
        assert all(f in text for f in qa["facts"]), qa
    assert {("email", "support", True), ("slack", "status", True)} <= kinds
    assert {k[1] for k in kinds if k[0] == "slack"} >= {"status", "owner", "tests"}


def test_support_mail_comes_from_customers_and_is_answered_by_staff(truth, mails):
    customers = {h.removeprefix("email:") for i in truth["identities"] if i["kind"] == "customer"
                 for h in i["handles"]}
    for t in truth["threads"]["email"]:
        if t["list"] != "support":
            continue
        first = mails[t["messages"][0]][2]
        assert first["From"].addresses[0].addr_spec.lower() in customers
        assert any(mails[m][2]["From"].addresses[0].domain == "acme-corp.example" for m in t["messages"][1:])


def test_channels_do_not_change_jira_or_git(out, tmp_path):
    """The Jira files and commits are those of the company alone: the new sources use their own stream."""
    company = _Company(random.Random(0), 1, "acme")
    company.write(tmp_path)
    for path in sorted((out / "acme" / "jira").iterdir()):
        assert path.read_bytes() == (tmp_path / "acme" / "jira" / path.name).read_bytes()
    assert git(out / "acme" / "repo", "rev-parse", "HEAD") == git(tmp_path / "acme" / "repo", "rev-parse", "HEAD")


def test_counts_grow_linearly_with_scale(out, truth, tmp_path):
    """Mail and Slack grow with the number of issues; only channel_join messages follow the head count."""
    def counts(root: Path, sources: dict) -> tuple[int, int]:
        joins = sum(m.get("subtype") == "channel_join" for p in (root / sources["slack"]["dir"]).glob("*/*.json")
                    for m in json.loads(p.read_text(encoding="utf-8")))
        return sum(x["messages"] for x in sources["mail"]), sources["slack"]["messages"] - joins

    small = truth["sources"]
    assert 20 <= sum(x["messages"] for x in small["mail"]) <= 50 and 40 <= small["slack"]["messages"] <= 80
    summary = write_sample(tmp_path, seed=0, scale=4)
    big = json.loads(summary.truth_path.read_text(encoding="utf-8"))["sources"]
    (m1, s1), (m4, s4) = counts(out, small), counts(tmp_path, big)
    assert 3 <= m4 / m1 <= 5 and 3 <= s4 / s1 <= 5, (m1, m4, s1, s4)
    assert summary.mails == m4 and summary.slack_messages == big["slack"]["messages"]
