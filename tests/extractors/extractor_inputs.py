"""Synthetic inputs for the extractor tests. Every person, project and text here is invented."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

BASE_TS = "2013-03-06T14:22:11.000+0000"


def jira_user(name: str, *, with_name: bool = True) -> dict:
    user = {"key": f"key-{name}", "accountId": f"5570:{name}", "displayName": name.title(),
            "emailAddress": f"{name}@example.com"}
    return {"name": name, **user} if with_name else user


def jira_issue(key: str, *, created: str | None = BASE_TS, comments: int = 1, histories: int = 1,
               **fields) -> dict:
    """A Jira REST v2 issue as `GET /rest/api/2/issue/{key}?expand=changelog` returns it."""
    f = {"summary": f"Summary of {key}", "description": f"Steps for {key}", "reporter": jira_user("rita"),
         "assignee": jira_user("alan"), "creator": jira_user("rita"), "issuetype": {"name": "Bug"},
         "project": {"key": key.split("-")[0], "name": "Project"}, "priority": {"name": "Major"},
         "status": {"name": "Open"}, "resolution": None, "resolutiondate": None, "labels": ["ui"],
         "components": [{"name": "Core"}], "fixVersions": [], "versions": [{"name": "1.0"}],
         "updated": "2013-03-07T10:00:00.000+0200", "issuelinks": [],
         "comment": {"startAt": 0, "maxResults": comments, "total": comments, "comments": [
             {"id": str(100 + i), "author": jira_user("carl"), "body": f"comment {i} on {key}",
              "created": "2013-03-06T15:00:00.000+0000", "updated": "2013-03-06T15:00:00.000+0000"}
             for i in range(comments)]}}
    if created is not None:
        f["created"] = created
    f.update(fields)
    hist = [{"id": str(500 + i), "author": jira_user("alan"), "created": "2013-03-06T16:00:00.000+0000",
             "items": [{"field": "status", "fieldtype": "jira", "from": "1", "fromString": "Open",
                        "to": "3", "toString": "In Progress"},
                       {"field": "assignee", "fieldtype": "jira", "from": None, "fromString": None,
                        "to": "alan", "toString": "Alan"}]} for i in range(histories)]
    return {"expand": "changelog", "id": str(10000 + int(key.rsplit("-", 1)[1])), "key": key, "fields": f,
            "changelog": {"startAt": 0, "maxResults": histories, "total": histories, "histories": hist}}


def search_page(issues: list) -> dict:
    return {"expand": "schema,names", "startAt": 0, "maxResults": 50, "total": len(issues), "issues": issues}


def write_json(path: Path, value, **kw) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, **kw), encoding="utf-8")
    return path


# --- git -------------------------------------------------------------------------------------------

def git(repo: Path, *args: str, date: str = "2020-01-02T03:04:05+0100", name: str = "Ada Dev",
        email: str = "Ada.Dev@Example.com", cdate: str | None = None, stdin: bytes | None = None) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
           "GIT_COMMITTER_NAME": "Cy Merger", "GIT_COMMITTER_EMAIL": "cy@example.com",
           "GIT_COMMITTER_DATE": cdate or date}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, input=stdin,
                          env=env).stdout.decode()


def init_repo(repo: Path) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    return repo


def commit_file(repo: Path, rel: str, content: str | bytes, message: str, **kw) -> str:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, **kw)
    return git(repo, "rev-parse", "HEAD").strip()


def make_repo(repo: Path, n_commits: int) -> list[str]:
    """A repository with one new file per commit, a day apart; returns the SHAs oldest first."""
    init_repo(repo)
    return [commit_file(repo, f"src/f{i}.txt", f"line {i}\n", f"Add f{i} (PROJ-{i})",
                        date=f"2020-01-{i + 1:02d}T10:00:00+0000") for i in range(n_commits)]


def blob_path(repo: Path, rev_path: str) -> Path:
    sha = git(repo, "rev-parse", rev_path).strip()
    return repo / ".git" / "objects" / sha[:2] / sha[2:]
