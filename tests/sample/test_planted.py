"""Planted structured identifiers and secrets: exact offsets, every type and form, found by privacy.pii."""

from __future__ import annotations

import json
import random
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from sample.company import _Company, write_sample
from sample.gitstream import git_env
from sample.locate import text_at
from sample.planted import KEY_LIKE, SHA_LIKE, Planter
from sample.roster import Pii, Text
from privacy.pii import find

PEOPLE_TYPES = {"name", "first_name", "email", "phone", "username"}
IDENTIFIERS = {"ip", "postal_address", "url_personal", "credit_card", "iban", "us_ssn"}
SECRETS = {f"secret:{k}" for k in ("private_key", "aws_access_key_id", "aws_secret_key", "github_token",
                                   "slack_token", "google_api_key", "stripe_key", "jwt", "url_password",
                                   "connection_string", "password")}


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], env=git_env(), capture_output=True, text=True,
                          check=check)


def luhn_ok(digits: str) -> bool:
    total = sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2)
                for i, d in enumerate(int(c) for c in reversed(digits)))
    return total % 10 == 0


def iban_ok(iban: str) -> bool:
    compact = iban.replace(" ", "")
    return int("".join(str(int(c, 36)) for c in compact[4:] + compact[:4])) % 97 == 1


def ssn_ok(ssn: str) -> bool:
    area, group, serial = ssn.split("-")
    return (area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"
            and ssn not in ("078-05-1120", "219-09-9999"))


def where(item: dict) -> str:
    """jira | commit:message | commit:diff | mbox | slack"""
    loc = item["location"]
    return "jira" if loc.startswith("/") else ("commit:" + loc.rsplit(":", 1)[1] if loc.startswith("commit:")
                                               else loc.split(":", 1)[0])


def planted(truth: dict) -> list[dict]:
    return [i for i in truth["pii"] if i["type"] not in PEOPLE_TYPES]


@pytest.fixture(scope="module")
def texts(out, truth) -> list[tuple[dict, str]]:
    cache: dict = {}
    return [(item, text_at(out, item, cache)) for item in planted(truth)]


def test_schema_and_every_item_slices_exactly(out, truth):
    assert truth["schema"] == "taskmine.sample.truth/4" and "commit:<sha>:diff" in truth["offsets"]
    cache: dict = {}
    for item in truth["pii"]:  # people too: text_at must agree with the offsets of every location kind
        assert text_at(out, item, cache)[item["start"]:item["end"]] == item["value"], item
        assert ("path" in item) == item["location"].endswith(":diff")


def test_secret_files_are_only_in_history(out, truth):
    """A diff item's file is added by its commit (absent in the parent) and deleted later (absent at HEAD)."""
    repo = out / "acme" / "repo"
    diffs = [i for i in truth["pii"] if i["location"].endswith(":diff")]
    commits = {c["sha"]: c for c in truth["commits"]}
    assert diffs
    for item in diffs:
        sha, path = item["location"].split(":")[1], item["path"]
        assert item["file"] == "acme/repo" and commits[sha]["kind"] == "config"
        content = git(repo, "show", f"{sha}:{path}").stdout
        assert content[item["start"]:item["end"]] == item["value"]
        assert git(repo, "cat-file", "-e", f"{commits[sha]['parents'][0]}:{path}", check=False).returncode != 0
        added = [line[1:] for line in git(repo, "show", "--format=", sha, "--", path).stdout.splitlines()
                 if line.startswith("+") and not line.startswith("+++")]
        assert "\n".join(added) + "\n" == content  # the whole file is on the + side of the commit's diff
    assert git(repo, "ls-files", "deploy").stdout == ""
    config = [c for c in truth["commits"] if c["kind"] in ("config", "cleanup")]
    assert [c["kind"] for c in config] == ["config", "cleanup"] and not any(c["fixes"] for c in config)
    assert [c["sha"] for c in truth["commits"][-2:]] == [c["sha"] for c in config]  # appended last


def test_every_type_and_form_is_planted_at_scale_1(truth, texts):
    items = planted(truth)
    counts = Counter(i["type"] for i in items)
    assert set(counts) == IDENTIFIERS | SECRETS
    assert min(counts.values()) >= 2, counts
    by_type: dict[str, list[str]] = {}
    for i in items:
        by_type.setdefault(i["type"], []).append(i["value"])
    ips = by_type["ip"]
    assert any(re.fullmatch(r"[\d.]+", v) for v in ips) and any(v.startswith("2001:db8:") for v in ips)
    addresses = by_type["postal_address"]
    assert any(re.search(r", [A-Z]{2} \d{5}(-\d{4})?$", v) for v in addresses)  # US
    assert any(re.search(r"[A-Z]{1,2}\d[A-Z\d]? \d[A-Z]{2}$", v) for v in addresses)  # UK
    assert any("\n" in v for v in addresses) and any("\n" not in v for v in addresses)
    urls = by_type["url_personal"]
    assert any(v.startswith("https://github.com/") for v in urls)
    assert any(v.startswith("https://www.linkedin.com/in/") for v in urls)
    homes = [v for v in urls if "/" not in v]  # the user name of a home directory path
    assert homes and all(f"/home/{v}/" in t or f"/Users/{v}/" in t for i, t in texts for v in [i["value"]]
                         if i["value"] in homes)
    assert all(luhn_ok(re.sub(r"[ -]", "", v)) for v in by_type["credit_card"])
    assert all(iban_ok(v) for v in by_type["iban"]) and all(ssn_ok(v) for v in by_type["us_ssn"])
    assert all(v.startswith("sk_live_fake") for v in by_type["secret:stripe_key"])  # visibly fake
    assert all(v.startswith("-----BEGIN ") and v.endswith(" PRIVATE KEY-----") for v in by_type["secret:private_key"])
    assert all(i["person"] is None for i in items if i["type"] in SECRETS)
    assert any(i["person"] for i in items) and any(i["person"] is None for i in items if i["type"] in IDENTIFIERS)
    spread = {where(i) for i in items}
    assert spread == {"jira", "commit:message", "commit:diff", "mbox", "slack"}
    for kind in ("jira", "commit:diff", "mbox", "slack"):
        assert len({i["type"] for i in items if where(i) == kind}) >= 5, kind


def test_pii_find_reports_every_planted_item_at_its_exact_span(texts):
    """Recall 1.0 per type for structured identifiers and secrets (the privacy issue's bar)."""
    found: Counter[str] = Counter()
    misses = []
    for item, text in texts:
        spans = {(s.start, s.end, s.kind) for s in find(text)}
        if (item["start"], item["end"], item["type"]) in spans:
            found[item["type"]] += 1
        else:
            misses.append((item["type"], item["value"][:60], item["location"]))
    assert misses == []
    assert set(found) == IDENTIFIERS | SECRETS


def test_planting_keeps_every_sha_and_jira_field_of_the_plan(tmp_path):
    """Planted items are appended: same SHAs for the planned commits, same Jira except longer texts."""
    plain, full = tmp_path / "plain", tmp_path / "full"
    _Company(random.Random(0), 1, "acme", plant=False).write(plain)
    _Company(random.Random(0), 1, "acme").write(full)
    shas = {p: git(p / "acme" / "repo", "log", "--reverse", "--format=%H").stdout.split() for p in (plain, full)}
    assert shas[full][:len(shas[plain])] == shas[plain] and len(shas[full]) == len(shas[plain]) + 2
    longer = 0
    for path in sorted((plain / "acme" / "jira").iterdir()):
        a = json.loads(path.read_text(encoding="utf-8"))
        b = json.loads((full / "acme" / "jira" / path.name).read_text(encoding="utf-8"))
        for x, y in zip(a.get("issues", [a]), b.get("issues", [b]), strict=True):
            texts = [(x["fields"], y["fields"], "description")] + [
                (cx, cy, "body") for cx, cy in zip(x["fields"]["comment"]["comments"],
                                                   y["fields"]["comment"]["comments"], strict=True)]
            for fx, fy, key in texts:
                assert fy[key].startswith(fx[key])
                longer += fy[key] != fx[key]
                fx[key] = fy[key] = None
            assert x == y
    assert longer == 5  # three descriptions and two comments per scale unit


def test_counts_grow_linearly_with_scale(truth, tmp_path):
    write_sample(tmp_path, seed=0, scale=3)
    big = json.loads((tmp_path / ".truth/acme.json").read_text(encoding="utf-8"))
    one, three = (Counter(i["type"] for i in planted(t)) for t in (truth, big))
    assert three == Counter({k: 3 * v for k, v in one.items()})


def test_generators_hold_their_formats_over_many_draws():
    p = Planter(random.Random(7), "acme-corp.example")
    for _ in range(300):
        card = p.card().value
        assert luhn_ok(card.replace(" ", "").replace("-", "")) and re.fullmatch(r"[\d -]{14,19}", card)
        assert iban_ok(p.iban().value) and ssn_ok(p.ssn().value)
        tokens = [p.aws_key_id(), p.aws_secret(), p.github_token(), p.slack_token(), p.google_key(), p.stripe_key(),
                  p.jwt(1_600_000_000_000), p.private_key()]
        for token in tokens:
            assert not KEY_LIKE.search(token.value) and not SHA_LIKE.search(token.value), token
            head = "AWS_SECRET_ACCESS_KEY=" if token.type == "secret:aws_secret_key" else ""  # needs its name
            spans = [(s.start, s.end, s.kind) for s in find(head + token.value)]
            assert spans == [(len(head), len(head) + len(token.value), token.type)], token


def test_a_multi_line_item_cannot_be_quoted():
    text = Text().add("key:\n{k}", k=Pii("secret:private_key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END"))
    with pytest.raises(ValueError, match="line break"):
        Text().extend(text, "> ")
    assert str(Text().extend(text)) == str(text)  # unquoted, it is copied as is
