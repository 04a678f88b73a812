"""Jira REST v2 JSON -> events.

Format followed: the Jira REST API v2 issue representation (`GET /rest/api/2/issue/{key}?expand=changelog`:
`{"id", "key", "fields": {...}, "changelog": {"histories": [...]}}`), its search result page
(`GET /rest/api/2/search`: `{"startAt", "maxResults", "total", "issues": [...]}`), a JSON array of
issues, and GrimoireLab Perceval's output (an array of `{"backend_name": "Jira", "data": <issue>}`
envelopes whose comments are in `data.comments_data`). Dates are Jira's ISO 8601 with a zone,
e.g. "2013-03-06T14:22:11.000+0000".

Invariants:
- A file is streamed issue by issue (extractors.jsonstream); one issue is at most `max_issue_bytes`.
- Per issue: one `issue_created` (native_id = key), one `comment` per comment
  ("KEY#comment-<id>"), one `field_changed` per changelog item ("KEY#history-<id>-<index>"); all share
  thread_key = key and point at the issue's event through parent_id.
- Issue links are kept in the issue's `attrs.issuelinks` and are not events of their own: the REST
  representation gives a link no date and no author (a link added later shows up as a changelog
  `field_changed` item with field "Link", which does carry both).
- An issue without a key, fields or a parseable `fields.created`, an element that is not an object and
  an element that is not JSON become one `Quarantine` row each; the other issues of the file are kept.
  A comment or changelog entry without id or date is quarantined alone and its issue is kept.
- Dates in attrs are normalised to ISO 8601 keeping the source's own offset ("+00:00").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from extractors.base import Extractor, ExtractorConfig, Row, parse_iso_ts, register_extractor
from extractors.jsonstream import iter_json_items

PEEK_BYTES = 64 * 1024
# What a Jira file shows in its first KBs (see `_looks_like_jira`): an issue key or a Perceval envelope;
# or an issue's "fields" object next to a Jira-style date (Slack's user profiles have "fields": {} too);
# or a search page, even an empty one.
_SIGNATURES = re.compile(rb'"key"\s*:\s*"[A-Z][A-Z0-9_]*-[0-9]+"|"backend_name"\s*:\s*"Jira"')
_FIELDS = (re.compile(rb'"fields"\s*:\s*\{'),
           re.compile(rb'"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}[+-][0-9]{4}"'))
_PAGE = (re.compile(rb'"startAt"\s*:\s*[0-9]'), re.compile(rb'"issues"\s*:\s*\['))
USER_FIELDS = {"assignee", "reporter", "creator"}  # changelog fields whose from/to are user names


class JiraConfig(ExtractorConfig):
    max_issue_bytes: int = 50 * 1024 * 1024


parse_ts = parse_iso_ts


def _iso(value: Any) -> Any:
    ts = parse_ts(value)
    return ts.isoformat() if ts else value


def _name(obj: Any, key: str = "name") -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _names(items: Any, key: str = "name") -> list:
    return [_name(i, key) for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def person(user: Any) -> dict | None:
    """A Jira user object -> {handle, display_name, email, username}; handle prefers name, key, accountId."""
    if not isinstance(user, dict):
        return None
    ident = next((user[k] for k in ("name", "key", "accountId") if isinstance(user.get(k), str) and user[k]),
                 None)
    if ident is None:
        return None
    return {"handle": f"jira:{ident}", "display_name": user.get("displayName"),
            "email": user.get("emailAddress"), "username": user.get("name") or user.get("key")}


def _people(*pairs: tuple[dict | None, str]) -> list[dict]:
    """[(person, role)] -> the attrs.people list, without missing persons or repeats of (handle, role)."""
    out, seen = [], set()
    for p, role in pairs:
        if p and (p["handle"], role) not in seen:
            seen.add((p["handle"], role))
            out.append({**p, "role": role})
    return out


def _links(fields: dict) -> list[dict]:
    out = []
    for link in fields.get("issuelinks") or []:
        if not isinstance(link, dict):
            continue
        for direction in ("outward", "inward"):
            other = link.get(f"{direction}Issue")
            if isinstance(other, dict):
                out.append({"type": _name(link.get("type")), "direction": direction, "key": other.get("key"),
                            "relation": _name(link.get("type"), direction)})
    return out


@register_extractor("jira_json")
class JiraJsonExtractor(Extractor):
    """Jira issues (REST v2 JSON: single issue, search page, array, Perceval output) -> events."""

    source: ClassVar[str] = "jira"
    medium: ClassVar[str] = "tracker"
    directory: ClassVar[bool] = True
    patterns: ClassVar[tuple[str, ...]] = ("*.json",)
    label: ClassVar[str] = "Jira JSON"
    expects: ClassVar[str] = "Jira REST v2 issue or search-page files (*.json)"
    Config: ClassVar[type[ExtractorConfig]] = JiraConfig

    @classmethod
    def detect(cls, root: Path) -> list[Path]:
        """The *.json files whose first KBs look like Jira (so Slack or GitHub JSON stays unclaimed)."""
        return [p for p in super().detect(root) if _looks_like_jira(p)]

    def iter_records(self, path: Path) -> Iterator[Row]:
        file, seen = self.rel(path), set()
        try:
            with open(path, "rb") as f:
                for item in iter_json_items(f, array_keys=("issues",),
                                            max_item_bytes=self.config.max_issue_bytes):
                    if item.error_class:
                        yield self.quarantine(file=file, offset=item.offset, error_class=item.error_class,
                                              message=item.message, excerpt=item.excerpt)
                    else:
                        yield from self._issue(item.value, file, item.offset, item.encoding_error, seen)
        except OSError as e:  # cannot open, or the read failed part-way (the rows before it stand)
            yield self.quarantine(file=file, error_class="unreadable", message=f"cannot read {file}: {e}")

    # -- one issue -------------------------------------------------------------------------------------
    def _issue(self, issue: Any, file: str, offset: int, encoding_error: bool, seen: set[str],
               where: str | None = None) -> Iterator[Row]:
        """Rows of one issue. `seen`: the keys already read from this file (a repeated key, e.g. from
        overlapping search pages, is quarantined so that event ids stay unique); `where`: the issue's
        place in a page nested in an array, naming a keyless issue apart from its siblings."""
        if isinstance(issue, dict) and isinstance(issue.get("data"), dict) and "backend_name" in issue:
            issue = issue["data"]  # a Perceval envelope
        if isinstance(issue, dict) and "fields" not in issue and isinstance(issue.get("issues"), list):
            for n, sub in enumerate(issue["issues"]):  # a search page inside an array of pages
                yield from self._issue(sub, file, offset, encoding_error, seen, f"issues[{n}]")
            return

        def bad(error_class: str, message: str, member: str | None = None) -> Row:
            return self.quarantine(file=file, offset=offset, member=member or where, error_class=error_class,
                                   message=message, excerpt=repr(issue)[:512])

        if not isinstance(issue, dict):
            yield bad("not_an_object", f"expected a Jira issue object, found {type(issue).__name__}")
            return
        key, fields = issue.get("key"), issue.get("fields")
        if not isinstance(key, str) or not key.strip():
            yield bad("missing_key", "issue has no 'key'")
            return
        if not isinstance(fields, dict):
            yield bad("missing_fields", f"issue {key} has no 'fields' object", key)
            return
        created = parse_ts(fields.get("created"))
        if created is None:
            yield bad("missing_created", f"issue {key} has no parseable fields.created "
                      f"({fields.get('created')!r})", key)
            return
        if key in seen:
            yield bad("duplicate_key", f"issue {key} appears twice in this file; the first one was kept", key)
            return
        seen.add(key)

        prov = {"file": file, "offset": offset}
        reporter, assignee, creator = (person(fields.get(k)) for k in ("reporter", "assignee", "creator"))
        comment = fields.get("comment") if isinstance(fields.get("comment"), dict) else {}
        changelog = issue.get("changelog") if isinstance(issue.get("changelog"), dict) else {}
        attrs = {
            "key": key, "id": issue.get("id"), "project": _name(fields.get("project"), "key"),
            "issuetype": _name(fields.get("issuetype")), "priority": _name(fields.get("priority")),
            "status": _name(fields.get("status")), "resolution": _name(fields.get("resolution")),
            "resolutiondate": _iso(fields.get("resolutiondate")), "updated": _iso(fields.get("updated")),
            "components": _names(fields.get("components")), "fixVersions": _names(fields.get("fixVersions")),
            "versions": _names(fields.get("versions")),
            "labels": [x for x in fields.get("labels") or [] if isinstance(x, str)],
            "assignee": assignee, "reporter": reporter, "creator": creator,
            "issuelinks": _links(fields), "parent": _name(fields.get("parent"), "key"),
            "subtasks": _names(fields.get("subtasks"), "key"), "epic": _name(fields.get("epic"), "key"),
            "comment_total": comment.get("total"), "changelog_total": changelog.get("total"),
            # Normalized: when the issue's own fields say it was resolved (Jira sets resolutiondate with the
            # resolution and clears it on reopening). Mining prefers the changelog and falls back to this.
            "resolved_at": _iso(fields.get("resolutiondate")),
            "resolution_evidence": "resolutiondate" if _iso(fields.get("resolutiondate")) else None,
            "people": _people((reporter, "reporter"), (assignee, "assignee"), (creator, "creator")),
        }
        if encoding_error:
            attrs["encoding_error"] = True
        head = self.event(kind="issue_created", native_id=key, thread_key=key, ts=created, **_actor(reporter),
                          title=_str(fields.get("summary")), body=_str(fields.get("description")),
                          attrs=attrs, provenance=prov)
        yield head
        yield from self._comments(issue, comment, key, head.event_id, file, offset, prov)
        yield from self._changes(changelog, key, head.event_id, file, offset, prov)

    def _comments(self, issue, comment, key, parent, file, offset, prov) -> Iterator[Row]:
        seen = set()
        for n, c in enumerate([*(comment.get("comments") or []), *(issue.get("comments_data") or [])]):
            cid = c.get("id") if isinstance(c, dict) else None
            ts = parse_ts(c.get("created")) if isinstance(c, dict) else None
            if cid is None or ts is None:
                yield self.quarantine(file=file, offset=offset, member=f"{key}#comment-{cid}[{n}]",
                                      error_class="bad_comment", excerpt=repr(c)[:512],
                                      message=f"comment on {key} has no id or no parseable 'created'")
                continue
            if str(cid) in seen:
                continue
            seen.add(str(cid))
            author, editor = person(c.get("author")), person(c.get("updateAuthor"))
            attrs = {"issue_key": key, "comment_id": str(cid), "updated": _iso(c.get("updated")),
                     "update_author": editor, "people": _people((author, "commenter"), (editor, "commenter"))}
            if c.get("visibility"):
                attrs["visibility"] = c["visibility"]
            yield self.event(kind="comment", native_id=f"{key}#comment-{cid}", thread_key=key,
                             parent_id=parent, ts=ts, **_actor(author), body=_str(c.get("body")),
                             attrs=attrs, provenance=prov)

    def _changes(self, changelog, key, parent, file, offset, prov) -> Iterator[Row]:
        for n, h in enumerate(changelog.get("histories") or []):
            hid = h.get("id") if isinstance(h, dict) else None
            ts = parse_ts(h.get("created")) if isinstance(h, dict) else None
            if hid is None or ts is None or not isinstance(h.get("items"), list):
                yield self.quarantine(file=file, offset=offset, member=f"{key}#history-{hid}[{n}]",
                                      error_class="bad_history", excerpt=repr(h)[:512],
                                      message=f"changelog entry of {key} lacks id, items or a parseable date")
                continue
            author = person(h.get("author"))
            for i, item in enumerate(h["items"]):
                if not isinstance(item, dict):
                    continue
                field = item.get("field")
                moved = []
                if str(field).lower() in USER_FIELDS:
                    moved = [(_moved(item.get("from"), item.get("fromString")), "from"),
                             (_moved(item.get("to"), item.get("toString")), "to")]
                attrs = {"field": field, "fieldtype": item.get("fieldtype"), "fieldId": item.get("fieldId"),
                         "from": item.get("from"), "fromString": item.get("fromString"),
                         "to": item.get("to"), "toString": item.get("toString"), "history_id": str(hid),
                         "issue_key": key, "people": _people((author, "changelog_author"), *moved)}
                yield self.event(kind="field_changed", native_id=f"{key}#history-{hid}-{i}", thread_key=key,
                                 parent_id=parent, ts=ts, **_actor(author), attrs=attrs, provenance=prov)


def _moved(ident: Any, shown: Any) -> dict | None:
    """The user named in a changelog item's from/to (a user name, or an accountId on Jira Cloud)."""
    if not isinstance(ident, str) or not ident:
        return None
    return {"handle": f"jira:{ident}", "display_name": shown, "email": None, "username": ident}


def _actor(p: dict | None) -> dict:
    return {"actor": p["handle"], "actor_name": p["display_name"]} if p else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _looks_like_jira(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(PEEK_BYTES)
    except OSError:
        return True  # claimed, so that iter_records reports it as unreadable instead of ignoring it
    if _SIGNATURES.search(head):
        return True
    return any(all(rx.search(head) for rx in pair) for pair in (_FIELDS, _PAGE))
