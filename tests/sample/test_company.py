"""The sample company: deterministic, real formats, and coherent enough for the pipeline's tests."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from sample.codebase import BUGS, Fn
from sample.company import write_sample
from sample.gitstream import git_env

TS = "%Y-%m-%dT%H:%M:%S.%f%z"
KEY = re.compile(r"\b[A-Z][A-Z0-9]+-\d+\b")
TRIAGE_FIELDS = {"issuetype", "priority", "Component", "assignee"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env=git_env(), capture_output=True, text=True,
                          check=True).stdout


def message(repo: Path, sha: str) -> str:
    raw = git(repo, "cat-file", "commit", sha)
    return raw.split("\n\n", 1)[1]


def jira_ts(value: str) -> dt.datetime:
    return dt.datetime.strptime(value, TS)


def load(out: Path, file: str) -> dict:
    return json.loads((out / file).read_text(encoding="utf-8"))


def resolve(doc, pointer: str):
    for part in pointer.split("/")[1:]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def all_issues(jira: Path) -> list[dict]:
    issues = []
    for path in sorted(jira.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        issues += doc["issues"] if path.name.startswith("search-page-") else [doc]
    return issues


@pytest.fixture(scope="module")
def repo(out) -> Path:
    return out / "acme" / "repo"


def test_same_seed_gives_identical_files_and_shas(out, repo, tmp_path):
    # Second write in another process, time zone and hash seed: nothing may depend on them.
    other = tmp_path / "again"
    code = f"from pathlib import Path; from sample.company import write_sample; write_sample(Path({str(other)!r}))"
    env = {**os.environ, "TZ": "Asia/Tokyo", "PYTHONHASHSEED": "123"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    a, b = out / "acme", other / "acme"
    names = sorted(p.relative_to(a) for sub in ("jira", "mail", "slack") for p in (a / sub).rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(b) for sub in ("jira", "mail", "slack") for p in (b / sub).rglob("*")
                           if p.is_file())
    assert {p.parts[0] for p in names} == {"jira", "mail", "slack"}
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (out / ".truth/acme.json").read_bytes() == (other / ".truth/acme.json").read_bytes()
    repo2 = other / "acme" / "repo"
    assert git(repo, "rev-parse", "HEAD") == git(repo2, "rev-parse", "HEAD")
    assert git(repo, "log", "--format=%H") == git(repo2, "log", "--format=%H")


def test_other_seed_gives_other_company(out, repo, tmp_path):
    write_sample(tmp_path, seed=1)
    assert (tmp_path / ".truth/acme.json").read_bytes() != (out / ".truth/acme.json").read_bytes()
    assert git(tmp_path / "acme" / "repo", "rev-parse", "HEAD") != git(repo, "rev-parse", "HEAD")


def test_jira_files_have_rest_v2_shape(out, truth):
    jira = out / "acme" / "jira"
    pages = sorted(jira.glob("search-page-*.json"))
    assert [p.name for p in pages] == ["search-page-0.json"]
    page = json.loads(pages[0].read_text(encoding="utf-8"))
    assert page["startAt"] == 0 and page["maxResults"] == 50 and page["total"] == len(page["issues"]) > 0
    assert {i["key"].split("-")[0] for i in page["issues"]} == {"WEB"}
    for path in jira.glob("CORE-*.json"):
        assert json.loads(path.read_text(encoding="utf-8"))["key"] == path.stem
    issues = all_issues(jira)
    keys = [i["key"] for i in issues]
    assert len(keys) == len(set(keys)) == len(truth["issues"]) == 16
    for issue in issues:
        f = issue["fields"]
        assert isinstance(issue["id"], str) and issue["self"].endswith(f"/rest/api/2/issue/{issue['id']}")
        assert "changelog" in issue["expand"]
        assert jira_ts(f["created"]) <= jira_ts(f["updated"])
        assert f["issuetype"]["subtask"] is False and f["project"]["key"] == issue["key"].split("-")[0]
        assert f["status"]["statusCategory"]["key"] in {"new", "indeterminate", "done"}
        assert (f["resolution"] is None) == (f["resolutiondate"] is None)
        for user in (f["reporter"], f["creator"], f["assignee"]):
            if user is not None:
                assert set(user) >= {"self", "name", "key", "displayName", "emailAddress", "timeZone", "active"}
        comments = f["comment"]
        assert comments["total"] == len(comments["comments"]) and comments["startAt"] == 0
        log = issue["changelog"]
        assert log["total"] == len(log["histories"]) and log["startAt"] == 0
        for h in log["histories"]:
            jira_ts(h["created"])
            for item in h["items"]:
                assert set(item) == {"field", "fieldtype", "from", "fromString", "to", "toString"}
    zones = {i["fields"]["created"][-5:] for i in issues} | {
        c["created"][-5:] for i in issues for c in i["fields"]["comment"]["comments"]}
    assert len(zones) >= 3


def test_changelog_replays_to_as_filed_and_triage_values(out, truth):
    """Undoing the changelog from the final fields gives the issue as filed; triage values are final."""
    by_key = {i["key"]: i for i in all_issues(out / "acme" / "jira")}
    for t in truth["issues"]:
        f = by_key[t["key"]]["fields"]
        state = {"type": f["issuetype"]["name"], "priority": f["priority"]["name"],
                 "components": {c["name"] for c in f["components"]},
                 "assignee": f["assignee"] and f["assignee"]["name"]}
        handle = t["triage"]["assignee"]["handle"] if t["triage"] and t["triage"]["assignee"] else None
        if t["triage"]:
            assert (state["type"], state["priority"]) == (t["triage"]["type"], t["triage"]["priority"])
            assert state["components"] == set(t["triage"]["components"])
            assert state["assignee"] == (handle and handle.removeprefix("jira:"))
        touched = False
        for h in reversed(by_key[t["key"]]["changelog"]["histories"]):
            for item in h["items"]:
                touched |= item["field"] in TRIAGE_FIELDS
                if item["field"] == "issuetype":
                    state["type"] = item["fromString"]
                elif item["field"] == "priority":
                    state["priority"] = item["fromString"]
                elif item["field"] == "assignee":
                    assert state["assignee"] == item["to"]
                    state["assignee"] = item["from"]
                elif item["field"] == "Component":
                    state["components"] = (state["components"] - {item["toString"]}) | (
                        {item["fromString"]} if item["fromString"] else set())
        filed = t["as_filed"]
        assert state == {"type": filed["type"], "priority": filed["priority"],
                         "components": set(filed["components"]),
                         "assignee": filed["assignee"] and filed["assignee"]["handle"].removeprefix("jira:")}
        assert touched == (t["triage"] is not None), t["key"]


def test_untriaged_issues_and_key_prefixes(truth):
    untriaged = [i for i in truth["issues"] if i["triage"] is None]
    assert 1 <= len(untriaged) <= 0.3 * len(truth["issues"])
    assert all(i["untriaged_reason"] for i in untriaged)
    linked = [i["key"] for i in truth["issues"] if i["fixing_commits"]]
    assert {"CORE-1", "CORE-10", "CORE-12"} <= set(linked)  # a linker must not read CORE-12 as CORE-1
    assert any(a != b and b.startswith(a) for a in linked for b in linked)
    assert any(i["duplicate_of"] for i in truth["issues"])


def test_commits_exist_and_fixing_messages_name_their_keys(repo, truth):
    shas = {c["sha"] for c in truth["commits"]}
    assert shas == set(git(repo, "log", "--format=%H", "HEAD").split())
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git(repo, "status", "--porcelain") == ""
    fixes = {}
    for c in truth["commits"]:
        msg = message(repo, c["sha"])
        for key in c["fixes"]:
            assert re.search(rf"\b{re.escape(key)}\b", msg), (key, msg)
            fixes.setdefault(key, []).append(c["sha"])
        if not c["fixes"]:
            assert not KEY.search(msg), msg
    assert fixes == {i["key"]: i["fixing_commits"] for i in truth["issues"] if i["fixing_commits"]}
    assert any(len(c["fixes"]) == 2 for c in truth["commits"])
    assert len(git(repo, "rev-list", "--merges", "HEAD").split()) >= 1


def test_fixing_commits_fall_between_triage_and_resolution(repo, truth):
    when = dict(line.split() for line in git(repo, "log", "--format=%H %at", "HEAD").splitlines())
    for issue in truth["issues"]:
        if not issue["fixing_commits"]:
            continue
        start = jira_ts(issue["triage"]["at"] if issue["triage"] else issue["created"]).timestamp()
        end = jira_ts(issue["resolutiondate"]).timestamp()
        for sha in issue["fixing_commits"]:
            assert start < int(when[sha]) < end, issue["key"]


def test_each_issue_function_exists_when_the_issue_is_filed(repo, truth):
    for issue in truth["issues"]:
        created = int(jira_ts(issue["created"]).timestamp())
        rev = git(repo, "rev-list", "-1", "--first-parent", f"--before={created}", "HEAD").strip()
        module, name = issue["function"].rsplit(".", 1)
        source = git(repo, "show", f"{rev}:{module.replace('.', '/')}.py")
        assert f"\ndef {name}(" in source, issue["key"]


def test_every_pii_offset_is_exact(out, repo, truth):
    docs: dict[str, dict] = {}
    for item in truth["pii"]:
        if item["location"].startswith(("mbox:", "slack:")):
            continue  # mail and Slack offsets: tests/sample/test_channels.py
        if item["location"].startswith("commit:"):
            _, sha, what = item["location"].split(":")
            text = git(repo, "show", f"{sha}:{item['path']}") if what == "diff" else message(repo, sha)
        else:
            doc = docs.setdefault(item["file"], load(out, item["file"]))
            text = resolve(doc, item["location"])
        assert text[item["start"]:item["end"]] == item["value"], item
    kinds = {i["type"] for i in truth["pii"]}
    assert kinds >= {"name", "first_name", "email", "phone", "username"}
    assert any(i["person"] is None for i in truth["pii"]) and any(i["person"] for i in truth["pii"])
    assert any(i["location"].startswith("commit:") for i in truth["pii"])
    for i in truth["pii"]:
        if i["type"] == "email":
            assert i["value"].endswith(".example")


def test_people_have_mergeable_identities(truth):
    people = truth["people"]
    assert len(people) == 8
    for p in people:
        assert p["jira"]["name"] == p["jira"]["name"].lower() and p["email"].endswith("@acme-corp.example")
        assert all(g["email"] == p["email"] or g["name"] == p["name"] for g in p["git"])
    identities = [(g["name"], g["email"]) for p in people for g in p["git"]]
    assert any(n not in {p["name"] for p in people} for n, _ in identities)  # "M. Lopez" form
    assert any(not e.endswith("@acme-corp.example") for _, e in identities)  # personal e-mail
    authors = {c["author"]["person"] for c in truth["commits"]}
    assert authors == {p["jira"]["name"] for p in people}
    used = {(c["author"]["name"], c["author"]["email"]) for c in truth["commits"]}
    assert used <= set(identities)


def test_repo_tests_pass_at_head_and_a_fix_makes_its_test_pass(repo, truth, tmp_path):
    def run_tests(tree: Path) -> int:
        return subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."],
                              cwd=tree, capture_output=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                              check=False).returncode

    def export(rev: str, dest: Path) -> Path:
        raw = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", rev], env=git_env(),
                             capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            tar.extractall(dest, filter="data")
        return dest

    assert run_tests(repo) == 0
    fix = next(c for c in truth["commits"] if c["kind"] == "fix" and c["fixes"] and any(
        p.startswith("tests/") for p in git(repo, "show", "--format=", "--name-only", c["sha"]).split()))
    touched = [p for p in git(repo, "show", "--format=", "--name-only", fix["sha"]).split() if p.startswith("tests/")]
    before = export(fix["parents"][0], tmp_path / "before")
    for path in touched:
        (before / path).write_text(git(repo, "show", f"{fix['sha']}:{path}"))
    assert run_tests(before) != 0
    assert run_tests(export(fix["sha"], tmp_path / "after")) == 0


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.name)
def test_each_bug_template_fails_buggy_and_passes_fixed(bug, tmp_path):
    params = {"fn": "f", "noun": "thing", "lo": "5", "hi": "55", "mid": "30", "over": "62", "under": "2",
              "default": "-1"}
    for fixed in (False, True):
        fn = Fn("f", "m", bug, params, "note", fixed=fixed)
        script = tmp_path / f"fixed_{fixed}.py"
        script.write_text(fn.render() + "\n" + fn.sub(bug.test) + "\n")
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, check=False)
        assert (proc.returncode == 0) == fixed, proc.stderr


def test_issue_count_grows_linearly_with_scale(truth, tmp_path):
    summary = write_sample(tmp_path, seed=0, scale=3)
    big = load(tmp_path, ".truth/acme.json")
    assert summary.issues == len(big["issues"]) == 3 * len(truth["issues"])
    assert len(big["people"]) > len(truth["people"])
    assert summary.merges == 3 and summary.untriaged == sum(1 for i in big["issues"] if i["triage"] is None)
    keys = {i["key"] for i in big["issues"]}
    assert {"CORE-1", "CORE-12", "CORE-36"} <= keys


def test_refuses_to_overwrite_and_rejects_bad_arguments(out):
    with pytest.raises(FileExistsError, match="already exists"):
        write_sample(out)
    with pytest.raises(ValueError, match="dataset"):
        write_sample(out / "x", dataset="Acme Corp")
    with pytest.raises(ValueError, match="scale"):
        write_sample(out / "x", scale=0)
