"""What a message is: automated or human, a request or a question, and the text it adds.

These are heuristics over anonymized events, shared by the work-item miner. Each is a pure function of
one event so that the funnel can say exactly why an event did not become (part of) a work item.

Invariants:
- `automated` is true for bots (Slack bot messages and bot users, `[bot]` accounts, CI/notifier names),
  auto-replies (RFC 3834 `Auto-Submitted` other than `no`, `Precedence: auto_reply`) and out-of-office
  notes (subject or first line), and for Slack join/leave/topic notices.
- `new_text` never contains the quoted part of a reply or a signature: for e-mail it is the extractor's
  `new_text` (the quote already removed) cut at the RFC 3676 signature separator.
"""

from __future__ import annotations

import re

from warehouse.schemas import Event

SLACK_NOTICES = {"channel_join", "channel_leave", "channel_topic", "channel_purpose", "channel_name",
                 "channel_archive", "channel_unarchive", "pinned_item", "bot_message", "bot_add", "bot_remove",
                 "reminder_add", "tombstone"}
BOT_NAME = re.compile(r"(\[bot\]$|(^|[-_. ])(bot|ci|jenkins|buildbot|travis|github-actions|dependabot|renovate|"
                      r"noreply|no-reply|donotreply|do-not-reply|mailer-daemon|notifications?)($|[-_. @]))", re.I)
OUT_OF_OFFICE = re.compile(r"^\s*(re:\s*)?(out of (the )?office|ooo\b|automatic reply|auto(matic)?[- ]?reply|"
                           r"autoreply|away from (my|the) (desk|office)|on (vacation|holiday|leave)|abwesenheit|"
                           r"absence du bureau|fuera de la oficina|i am out of|i'm out of|i will be out of)", re.I)
REQUEST = re.compile(r"\?|\b(please|pls|plz|could you|can you|can someone|could someone|would you|"
                     r"can anyone|could anyone|does anyone|anyone know|any (update|idea|news)|need (help|you|to know)|"
                     r"help( me)?\b|how (do|can|should|to)|what is the|is there a way|i(')?d like|"
                     r"we need|kindly|bitte|pourriez|pouvez-vous|merci de)\b", re.I)
SIGNATURE = re.compile(r"\n-- ?\n")
TRIVIAL = re.compile(r"^\W*(thanks?( you)?|thx|ty|\+1|ok(ay)?|lgtm|great|cool|nice|done|ack(ed)?|"
                     r"will do|got it|:[a-z_+-]+:)\W*$", re.I)


def person_of(e: Event) -> str:
    """Who acted, comparable across sources: pseudonymized handles carry one username per person."""
    actor = (e.actor or "").split(":", 1)[-1].strip().lower()
    return actor or (e.actor_name or "").strip().lower()


def automated(e: Event) -> str:
    """Why `e` was written by a machine ("" when a person wrote it)."""
    a = e.attrs or {}
    if e.source == "slack":
        if e.kind in SLACK_NOTICES or (a.get("subtype") or "") in SLACK_NOTICES:
            return f"slack {a.get('subtype') or e.kind}"
        if a.get("bot") or a.get("bot_id"):
            return "slack bot"
    if e.source == "email":
        h = a.get("headers") or {}
        auto = (h.get("auto-submitted") or "").strip().lower()
        if auto and auto != "no":
            return f"auto-submitted: {auto}"
        if (h.get("precedence") or "").strip().lower() in ("auto_reply", "auto-reply", "junk"):
            return "precedence: auto_reply"
        first = (e.body or "").lstrip().split("\n", 1)[0]
        if OUT_OF_OFFICE.match(e.title or "") or OUT_OF_OFFICE.match(first):
            return "out of office"
    for name in (e.actor or "", e.actor_name or ""):
        if name and BOT_NAME.search(name.split(":", 1)[-1]):
            return "bot account"
    return ""


def new_text(e: Event) -> str:
    """The text `e` adds: no quote of what it replies to, no signature."""
    if e.source == "email":
        text = (e.attrs or {}).get("new_text")
        text = e.body if text is None else text
    else:
        text = e.body
    text = text or ""
    m = SIGNATURE.search("\n" + text)
    if m:
        text = ("\n" + text)[:m.start()]
    return text.strip()


def is_request(text: str) -> bool:
    """Does the text ask for something (a question, a request, a call for help)?"""
    return bool(REQUEST.search(text or ""))


def is_trivial(text: str) -> bool:
    """A reply that answers nothing: "thanks", "+1", an emoji."""
    return not text.strip() or bool(TRIVIAL.match(text.strip()))


def request_text(e: Event, limit: int = 2000) -> str:
    """The text of an event as a request: its title (subject) and what it adds, bounded."""
    parts = [p for p in ((e.title or "").strip(), new_text(e)) if p]
    return "\n\n".join(parts)[:limit]
