"""GitHub REST JSON (issues, pull requests, comments, reviews, timeline events) -> events.

Format followed: the GitHub REST API v3 JSON (https://docs.github.com/en/rest): issues
(`GET /repos/{owner}/{repo}/issues[/{n}]`; a pull request shows there with a `pull_request` member), pulls
(`/pulls[/{n}]`), issue comments (`/issues/{n}/comments`, `/issues/comments`), review comments
(`/pulls/{n}/comments`), reviews (`/pulls/{n}/reviews`), issue events (`/issues/{n}/events`,
`/issues/events`, each with its `issue`), the timeline (`/issues/{n}/timeline`), and search pages
(`{"total_count", "items": [...]}`): a file holds one object or an array of them. Also the layout of
brson/rust-issue-archive: `<NNNNNN>-main.json` (one issue), `<NNNNNN>-comments.json` and
`<NNNNNN>-xrefs.json`, the timeline filtered to `{"event", "actor": "<login>", "date", "commit" | "from"
+ "type"}`. Dates are ISO 8601 with a zone ("2010-06-21T15:10:39Z").

Invariants:
- A file is streamed record by record (extractors.jsonstream); a record is at most
  `max_record_bytes`. Each record gives one event, or one `Quarantine` row, and its neighbours are kept.
- Kinds and native ids ("o/r" = owner/repo, N = the issue or pull request number):
  issue_created / pr_created "o/r#N"; comment "o/r#N/comment-<id>"; review_comment
  "o/r#N/review-comment-<id>"; review "o/r#N/review-<id>"; a timeline event is its own kind (the event's
  name, "cross-referenced" -> "cross_reference") with "o/r#N/event-<id>", or, when it has no id (the
  archive, cross-references), "o/r#N/<event>-<commit or source>@<date>". All share thread_key "o/r#N" and
  point at the issue's event through parent_id (a review comment at the one it answers).
- A record names its issue itself (html_url, url, repository_url + number, issue_url, pull_request_url,
  an issue event's `issue`). Timeline records do not, so they take it from the file they are in: the
  archive's sibling "<prefix>-main.json". A record whose issue cannot be told, without a parseable date,
  without an id where one is needed, or that is not an object, is quarantined alone.
- actor "github:<login>"; attrs.people lists the login (as username) with name/e-mail when the record has
  them: the author, assignees, or an event's actor and subject. A commit on a timeline has no login: its
  author is "github:email:<e-mail>", so identity can match it to the git author.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from extractors.base import Extractor, ExtractorConfig, Row, parse_iso_ts, register_extractor
from extractors.jsonguard import iter_items, safe_repr
from extractors.jsonstream import JsonItem
from warehouse.ids import event_id

PEEK_BYTES = 64 * 1024
# Every REST object has a node_id, and an html_url or url on github.com (users inside it have both too);
# Jira, Slack and mail exports have neither.
_SIGNATURE = (re.compile(rb'"node_id"\s*:\s*"'),
              re.compile(rb'"(?:html_url|url)"\s*:\s*"https://(?:api\.)?github\.com/'))
_SIDECAR = re.compile(r"(.+)-(?:comments|xrefs|timeline|events)\.json")
_ISSUE_URL = re.compile(r"https?://[^/\s]+/(?:api/v3/)?(?:repos/)?([^/\s]+)/([^/\s]+)/(?:issues|pulls?)/(\d+)"
                        r"(?:[/#?]|$)")
_REPO_URL = re.compile(r"https?://[^/\s]+/(?:api/v3/)?repos/([^/\s]+)/([^/\s]+?)/?$")
_KIND = re.compile(r"[a-z][a-z0-9_]{0,39}")


class GitHubConfig(ExtractorConfig):
    max_record_bytes: int = 50 * 1024 * 1024


parse_ts = parse_iso_ts


def _s(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _iso(value: Any) -> str | None:
    ts = parse_ts(value)
    return ts.isoformat() if ts else None


def person(user: Any, role: str) -> dict | None:
    """A GitHub user object (or a bare login, as the archive writes actors) -> an attrs.people entry."""
    login = user if isinstance(user, str) else _s(_dict(user).get("login"))
    if not login:
        return None
    user = _dict(user)
    return {"handle": f"github:{login}", "display_name": _s(user.get("name")), "email": _s(user.get("email")),
            "username": login, "role": role}


def _people(*entries: dict | None) -> list[dict]:
    out, seen = [], set()
    for p in entries:
        if p and (p["handle"], p["role"]) not in seen:
            seen.add((p["handle"], p["role"]))
            out.append(p)
    return out


def _is_bot(user: Any) -> bool:
    login = user if isinstance(user, str) else _s(_dict(user).get("login")) or ""
    return login.endswith("[bot]") or _dict(user).get("type") == "Bot"


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _reactions(value: Any) -> dict[str, int]:
    return {k: v for k, v in _dict(value).items() if isinstance(v, int) and not isinstance(v, bool)}


def issue_ref(record: dict) -> tuple[str, int] | None:
    """("owner/repo", number) of the issue or pull request `record` is, or belongs to, when it says so."""
    for key in ("issue_url", "pull_request_url", "html_url", "url"):
        m = _ISSUE_URL.match(record.get(key) or "") if isinstance(record.get(key), str) else None
        if m:
            return f"{m[1]}/{m[2]}", int(m[3])
    number = record.get("number")
    if isinstance(number, int) and not isinstance(number, bool):
        m = _REPO_URL.match(record.get("repository_url") or "") if isinstance(record.get("repository_url"),
                                                                                 str) else None
        full = m and f"{m[1]}/{m[2]}" or _s(_dict(_dict(record.get("base")).get("repo")).get("full_name"))
        if full:
            return full, number
    return None


@register_extractor("github_json")
class GitHubJsonExtractor(Extractor):
    """GitHub REST JSON of issues, pull requests, comments and timeline events -> events."""

    reference_attrs = ("commit_id",)   # the commit a review comment or a timeline event names
    source: ClassVar[str] = "github"
    medium: ClassVar[str] = "tracker"
    directory: ClassVar[bool] = True
    patterns: ClassVar[tuple[str, ...]] = ("*.json",)
    label: ClassVar[str] = "GitHub JSON"
    expects: ClassVar[str] = "GitHub REST issue, pull request, comment or timeline files (*.json)"
    Config: ClassVar[type[ExtractorConfig]] = GitHubConfig

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._file_issue: dict[Path, tuple[str, int] | None] = {}

    @classmethod
    def detect(cls, root: Path) -> list[Path]:
        """*.json files whose first KBs are GitHub REST JSON, and the archive's comments/xrefs files beside
        such a "<prefix>-main.json" (an empty `[]` or a filtered timeline carries no signature of its own)."""
        files = super().detect(root)
        github = {p for p in files if _looks_like_github(p)}
        for p in files:
            m = _SIDECAR.fullmatch(p.name)
            if m and p.with_name(f"{m[1]}-main.json") in github:
                github.add(p)
        return sorted(github)

    def iter_records(self, path: Path) -> Iterator[Row]:
        file, seen = self.rel(path), set()
        try:
            for item in iter_items(partial(open, path, "rb"), array_keys=("items",),
                                   max_item_bytes=self.config.max_record_bytes):
                if item.error_class:
                    yield self.quarantine(file=file, offset=item.offset, error_class=item.error_class,
                                          message=item.message, excerpt=item.excerpt)
                else:
                    yield self._row(item, path, file, seen)
        except OSError as e:  # cannot open, or the read failed part-way (the rows before it stand)
            yield self.quarantine(file=file, error_class="unreadable", message=f"cannot read {file}: {e}")

    # -- one record ------------------------------------------------------------------------------------
    def _row(self, item: JsonItem, path: Path, file: str, seen: set[str]) -> Row:
        r = item.value

        def bad(error_class: str, message: str, member: str | None = None) -> Row:
            return self.quarantine(file=file, offset=item.offset, member=member, error_class=error_class,
                                   message=message, excerpt=safe_repr(r))

        if not isinstance(r, dict):
            return bad("not_an_object", f"expected a GitHub object, found {type(r).__name__}")
        shape = _shape(r)
        if shape is None:
            return bad("unknown_record", "not an issue, pull request, comment, review or timeline event")
        ref = issue_ref(_dict(r.get("issue"))) or issue_ref(r)
        if ref is None and shape == "event":
            ref = self._issue_of_file(path)
        if ref is None:
            return bad("unknown_issue", f"the {shape} names no issue (keep a timeline file beside its "
                       "<prefix>-main.json, as the archive layout does)")
        try:
            fields = getattr(self, f"_{shape}")(r, *ref)
        except _Bad as e:
            return bad(e.error_class, str(e), f"{ref[0]}#{ref[1]}")
        except (ValueError, TypeError, RecursionError) as e:  # a shape no rule foresaw: this record only
            return bad("bad_record", f"{type(e).__name__}: {e}", f"{ref[0]}#{ref[1]}")
        if fields["native_id"] in seen:
            return bad("duplicate", f"{fields['native_id']} appears twice in this file; the first was kept",
                       fields["native_id"])
        seen.add(fields["native_id"])
        attrs = fields.pop("attrs")
        if item.encoding_error:
            attrs["encoding_error"] = True
        key = f"{ref[0]}#{ref[1]}"
        fields.setdefault("parent_id", event_id(self.dataset, self.source, key) if fields["kind"] not in (
            "issue_created", "pr_created") else None)
        actor = next((p for p in attrs["people"] if p["role"] in ("author", "commenter")), None)
        return self.event(thread_key=key, actor=actor and actor["handle"],
                          actor_name=actor and (actor["display_name"] or actor["username"]),
                          attrs={"repo": ref[0], "number": ref[1], **attrs},
                          provenance={"file": file, "offset": item.offset}, **fields)

    def _issue_of_file(self, path: Path) -> tuple[str, int] | None:
        """The archive layout: "<prefix>-xrefs.json" belongs to the issue in "<prefix>-main.json"."""
        m = _SIDECAR.fullmatch(path.name)
        if not m:
            return None
        main = path.with_name(f"{m[1]}-main.json")
        if main not in self._file_issue:
            ref = None
            try:
                for item in iter_items(partial(open, main, "rb"), max_item_bytes=self.config.max_record_bytes):
                    ref = issue_ref(item.value) if isinstance(item.value, dict) else None
                    break
            except OSError:
                pass
            self._file_issue[main] = ref
        return self._file_issue[main]

    def _issue(self, r: dict, repo: str, number: int) -> dict:
        ts = _when(r, "created_at")
        is_pr = "pull_request" in r or "/pull/" in (_s(r.get("html_url")) or "") or ("head" in r and "base" in r)
        pr = _dict(r.get("pull_request"))
        assignees = [person(a, "assignee") for a in _list(r.get("assignees"))] or [
            person(r.get("assignee"), "assignee")]
        attrs = {
            "state": _s(r.get("state")), "state_reason": _s(r.get("state_reason")), "locked": r.get("locked") is True,
            "labels": [x for x in (_s(_dict(lb).get("name")) or _s(lb) for lb in _list(r.get("labels"))) if x],
            "milestone": _s(_dict(r.get("milestone")).get("title")),
            "assignees": [a["username"] for a in assignees if a], "comments": _int(r.get("comments")),
            "created_at": ts.isoformat(), "updated_at": _iso(r.get("updated_at")),
            "closed_at": _iso(r.get("closed_at")),
            "closed_by": _s(_dict(r.get("closed_by")).get("login")),
            # Normalized for mining (which needs no GitHub knowledge): closed = resolved, at closed_at.
            "resolved_at": _iso(r.get("closed_at")) if _s(r.get("state")) == "closed" else None,
            "resolution_evidence": "closed_at" if _s(r.get("state")) == "closed" and r.get("closed_at") else None,
            "author_association": _s(r.get("author_association")), "html_url": _s(r.get("html_url")),
            "reactions": _reactions(r.get("reactions")), "is_pull_request": is_pr, "bot": _is_bot(r.get("user")),
            "people": _people(person(r.get("user"), "author"), *assignees),
        }
        artifacts = []
        if is_pr:
            sha = _s(r.get("merge_commit_sha"))
            attrs.update(merged_at=_iso(r.get("merged_at") or pr.get("merged_at")), merge_commit_sha=sha,
                         merged_by=_s(_dict(r.get("merged_by")).get("login")), draft=r.get("draft") is True,
                         head=_s(_dict(r.get("head")).get("ref")), base=_s(_dict(r.get("base")).get("ref")))
            artifacts = [sha] if sha and r.get("merged_at") else []
        return {"kind": "pr_created" if is_pr else "issue_created", "native_id": f"{repo}#{number}", "ts": ts,
                "title": _s(r.get("title")), "body": _s(r.get("body")), "attrs": attrs, "artifacts": artifacts}

    def _comment(self, r: dict, repo: str, number: int, kind: str = "comment", label: str = "comment") -> dict:
        cid = _id(r)
        ts = _when(r, "created_at", "submitted_at")
        attrs = {"comment_id": cid, "updated_at": _iso(r.get("updated_at")),
                 "author_association": _s(r.get("author_association")), "html_url": _s(r.get("html_url")),
                 "reactions": _reactions(r.get("reactions")), "bot": _is_bot(r.get("user") or r.get("actor")),
                 "people": _people(person(r.get("user") or r.get("actor"), "commenter"))}
        fields = {"kind": kind, "native_id": f"{repo}#{number}/{label}-{cid}", "ts": ts, "body": _s(r.get("body")),
                  "attrs": attrs}
        commit = _s(r.get("commit_id"))
        if kind == "review_comment":
            attrs.update(path=_s(r.get("path")), line=_int(r.get("line")), commit_id=commit,
                         in_reply_to=_int(r.get("in_reply_to_id")))
            if attrs["in_reply_to"] is not None:
                fields["parent_id"] = event_id(self.dataset, self.source,
                                               f"{repo}#{number}/review-comment-{attrs['in_reply_to']}")
        if kind == "review":
            attrs.update(state=_s(r.get("state")), commit_id=commit)
        if commit:
            fields["artifacts"] = [commit]
        return fields

    def _review_comment(self, r: dict, repo: str, number: int) -> dict:
        return self._comment(r, repo, number, "review_comment", "review-comment")

    def _review(self, r: dict, repo: str, number: int) -> dict:
        return self._comment(r, repo, number, "review", "review")

    def _event(self, r: dict, repo: str, number: int) -> dict:
        name = r["event"]
        if name == "commented":
            return self._comment(r, repo, number)
        if name == "reviewed":
            return self._review(r, repo, number)
        kind = "cross_reference" if name == "cross-referenced" else name.replace("-", "_")
        kind = kind if _KIND.fullmatch(kind) else "timeline_other"
        commit = _s(r.get("commit_id")) or _s(r.get("commit")) or (_s(r.get("sha")) if name == "committed" else None)
        who = _dict(r.get("author")) if name == "committed" else {}
        ts = _when(r, "created_at", "date", "submitted_at") if not who else _when(who, "date")
        source = _source(r, repo)
        attrs = {"event": name, "commit_id": commit, "commit_url": _s(r.get("commit_url")), "source": source,
                 "label": _s(_dict(r.get("label")).get("name")), "assignee": _s(_dict(r.get("assignee")).get("login")),
                 "rename": {k: _s(v) for k, v in _dict(r.get("rename")).items()} or None,
                 "milestone": _s(_dict(r.get("milestone")).get("title")), "state_reason": _s(r.get("state_reason")),
                 "bot": _is_bot(r.get("actor")),
                 "people": _people(person(r.get("actor"), "author"), person(r.get("assignee"), "assignee"))}
        attrs = {k: v for k, v in attrs.items() if v is not None}
        if who and _s(who.get("email")):
            email = who["email"].strip().lower()
            attrs["people"] = [{"handle": f"github:email:{email}", "display_name": _s(who.get("name")),
                                "email": email, "username": None, "role": "author"}]
        if name == "committed":
            attrs["message"] = _s(r.get("message"))
        if _id(r, required=False) is not None:
            native = f"{repo}#{number}/event-{_id(r)}"
        elif name == "committed" and commit:
            native = f"{repo}#{number}/commit-{commit}"
        else:
            native = f"{repo}#{number}/{name}-{commit or (source or {}).get('ref') or ''}@{ts.isoformat()}"
        return {"kind": kind, "native_id": native, "ts": ts, "attrs": attrs, "artifacts": [commit] if commit else []}


class _Bad(Exception):
    def __init__(self, error_class: str, message: str):
        super().__init__(message)
        self.error_class = error_class


def _shape(r: dict) -> str | None:
    if isinstance(r.get("event"), str):
        return "event"
    if "issue_url" in r:
        return "comment"
    if "pull_request_url" in r:
        return "review_comment" if "diff_hunk" in r or "path" in r else "review"
    if "number" in r:
        return "issue"
    return None


def _when(r: dict, *keys: str) -> dt.datetime:
    for k in keys:
        if k in r:
            ts = parse_ts(r[k])
            if ts is None:
                raise _Bad("bad_date", f"{k} is not an ISO 8601 date with a zone: {str(r[k])[:40]!r}")
            return ts
    raise _Bad("missing_date", f"no {' or '.join(keys)}")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _id(r: dict, required: bool = True) -> str | None:
    value = r.get("id")
    if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "":
        if required:
            raise _Bad("missing_id", "record without an id")
        return None
    return str(value)


def _source(r: dict, repo: str) -> dict | None:
    """What a cross-reference came from: the raw timeline's `source.issue`, or the archive's `from` number."""
    if isinstance(r.get("from"), int) and not isinstance(r.get("from"), bool):
        return {"type": _s(r.get("type")), "ref": f"{repo}#{r['from']}"}
    issue = _dict(_dict(r.get("source")).get("issue"))
    ref = issue_ref(issue)
    if ref is None:
        return None
    return {"type": "pull_request" if "pull_request" in issue else _s(_dict(r.get("source")).get("type")),
            "ref": f"{ref[0]}#{ref[1]}", "title": _s(issue.get("title"))}



def _looks_like_github(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(PEEK_BYTES)
    except OSError:
        return False
    return all(rx.search(head) for rx in _SIGNATURE)
