"""The text a ground-truth "pii" item points into: company.OFFSETS, executable.

Invariant: for every item of a truth file written by `write_sample`,
`text_at(out, item)[item["start"]:item["end"]] == item["value"]`.
"""

from __future__ import annotations

import email
import email.policy
import json
import mailbox
import subprocess
from pathlib import Path

from sample.gitstream import git_env


def mail_body(msg: email.message.EmailMessage) -> str | None:
    """The first text/plain part, else the first text/html part, decoded (`get_content()`)."""
    for subtype in ("plain", "html"):
        for part in msg.walk():
            if part.get_content_type() == f"text/{subtype}" and not part.is_attachment():
                return part.get_content()
    return None


def text_at(out: Path, item: dict, cache: dict | None = None) -> str:
    """The string `item["location"]` names under the output directory `out` (see company.OFFSETS).

    `cache` (any dict, reused across calls) keeps parsed Jira files, mailboxes and Slack day files."""
    cache = {} if cache is None else cache
    loc, path = item["location"], out / item["file"]
    kind = loc.split(":", 1)[0]
    if kind == "commit":
        _, sha, what = loc.split(":")
        args = ["show", f"{sha}:{item['path']}"] if what == "diff" else ["cat-file", "commit", sha]
        raw = subprocess.run(["git", "-C", str(path), *args], env=git_env(), capture_output=True, check=True).stdout
        text = raw.decode("utf-8")
        return text if what == "diff" else text.split("\n\n", 1)[1]
    if kind == "mbox":
        if path not in cache:
            box = mailbox.mbox(path, create=False)
            msgs = (email.message_from_bytes(box.get_bytes(k), policy=email.policy.default) for k in box.iterkeys())
            cache[path] = {m["Message-ID"].strip("<>"): m for m in msgs}
        return mail_body(cache[path][loc[len("mbox:"):].rsplit(":", 1)[0]])
    if kind == "slack":
        ts = loc.rsplit(":", 2)[1]
        if path not in cache:
            cache[path] = json.loads(path.read_text(encoding="utf-8"))
        return next(m["text"] for m in cache[path] if m["ts"] == ts)
    if path not in cache:
        cache[path] = json.loads(path.read_text(encoding="utf-8"))
    doc = cache[path]
    for part in loc.split("/")[1:]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc
