"""What a message is: automated or human, a request or a question, and the text it adds.

These are heuristics over anonymized events, shared by the work-item miner. Each is a pure function of
one event so that the funnel can say exactly why an event did not become (part of) a work item.

Invariants:
- `automated` is true for bots (Slack bot messages and bot users, `[bot]` accounts, CI/notifier names),
  auto-replies (RFC 3834 `Auto-Submitted` other than `no`, `Precedence: auto_reply`), out-of-office
  notes (subject or first line) and mailing-list digests, and for Slack join/leave/topic notices.
- `is_request` reads what a message asks: questions, direct and indirect requests, problem reports, and the
  review/vote tags of a thread starter's subject. A reply's subject is its thread's, never its own ask.
- `new_text` never contains the quoted part of a reply or a signature: for e-mail it is the extractor's
  `new_text` (the quote already removed) cut at the RFC 3676 signature separator.
"""

from __future__ import annotations

import re

from warehouse.schemas import Event

BOT_NAME = re.compile(r"(\[bot\]$|(^|[-_. ])(bot|ci|jenkins|buildbot|travis|github-actions|dependabot|renovate|"
                      r"noreply|no-reply|donotreply|do-not-reply|mailer-daemon|notifications?)($|[-_. @]))", re.I)
OUT_OF_OFFICE = re.compile(r"^\s*(re:\s*)?(out of (the )?office|ooo\b|automatic reply|auto(matic)?[- ]?reply|"
                           r"autoreply|away from (my|the) (desk|office)|on (vacation|holiday|leave)|abwesenheit|"
                           r"absence du bureau|fuera de la oficina|i am out of|i'm out of|i will be out of)", re.I)
REQUEST = re.compile(r"\?|\b(please|pls|plz|could you|can you|can someone|could someone|would you|"
                     r"can anyone|could anyone|does anyone|anyone know|any (update|idea|news)|need (help|you|to know)|"
                     r"help( me)?\b|how (do|can|should|to)|what is the|is there a way|i(')?d like|"
                     r"we need|kindly|bitte|pourriez|pouvez-vous|merci de|"
                     # indirect asks, common on mailing lists ("I was wondering if ...", "any advice appreciated")
                     r"(i was |i am |i'm |just )?wondering (if|whether|why|how|what)|"
                     r"would (love|appreciate|be grateful)|"
                     r"(appreciate|grateful for) (any|your|some|a)|any (advice|hints?|suggestions?|pointers?|thoughts|"
                     r"ideas|input|feedback|tips|help|comments)|let (me|us) know|would be (great|nice|good|helpful) if|"
                     r"if (you|someone|anyone|somebody) could|anybody know|has anyone|does anybody|is it possible|"
                     r"comments welcome|feedback welcome|please (review|vote|test|comment))\b", re.I)
# A thread starter whose subject asks for review or a vote asks for something even without a question mark:
# patch series ("[PATCH v2 3/7]"), requests for comments, release votes.
SUBJECT_ASK = re.compile(r"^\s*(?:\[[^\]]{0,60}\]\s*)*?\[(?:[^\]]*\b)?(?:patch|rfc|vote|"
                         r"review|discuss|proposal|question|help)\b[^\]]{0,40}\]", re.I)
# A problem report asks for help implicitly ("X fails with ...", "I get an error", "stack smashing detected").
PROBLEM = re.compile(r"\b(does ?n[o']t work|do ?n[o']t work|not working|stopped working|is broken|are broken|"
                     r"fails? (to|with|on|when)|failing|error:|exception|traceback|crash(es|ed|ing)?|"
                     r"(can ?not|can't|unable to) (get|find|make|build|compile|run|install|log ?in|access|open|"
                     r"figure)|i('m| am)? (stuck|getting|get) (on|with|an?|the|this)|has the wrong|is wrong|"
                     r"(i'?m|i am) (a bit |very |really |quite |so )?confused|(do ?n[o']t|can'?t|cannot) "
                     r"(even )?understand)\b", re.I)
DIGEST = re.compile(r"\bdigest\b[^\n]{0,40}\b(vol(ume)?\.?|issue|#)\s*\d+", re.I)
SIGNATURE = re.compile(r"\n-- ?\n")
TRIVIAL = re.compile(r"^\W*(thanks?( you)?|thx|ty|\+1|ok(ay)?|lgtm|great|cool|nice|done|ack(ed)?|"
                     r"will do|got it|:[a-z_+-]+:)\W*$", re.I)


def person_of(e: Event) -> str:
    """Who acted, comparable across sources: pseudonymized handles carry one username per person."""
    actor = (e.actor or "").split(":", 1)[-1].strip().lower()
    return actor or (e.actor_name or "").strip().lower()


def automated(e: Event) -> str:
    """Why `e` was written by a machine ("" when a person wrote it): what its extractor read in the source
    (`Event.automated`: a bot flag, an auto-reply header, a join notice), else what its text and sender show
    whatever the source (an out-of-office reply, a list digest, a bot's account name)."""
    if e.automated:
        return e.automated
    if e.medium in ("mail", "chat"):
        first = (e.body or "").lstrip().split("\n", 1)[0]
        if OUT_OF_OFFICE.match(e.title or "") or OUT_OF_OFFICE.match(first):
            return "out of office"
        if is_digest(e):
            return "mailing-list digest"
    for name in (e.actor or "", e.actor_name or ""):
        if name and BOT_NAME.search(name.split(":", 1)[-1]):
            return "bot account"
    return ""


def new_text(e: Event) -> str:
    """The text `e` adds: no quote of what it replies to (`attrs["new_text"]`, which an extractor whose messages
    quote sets), no signature."""
    text = (e.attrs or {}).get("new_text")
    text = (e.body if text is None else text) or ""
    m = SIGNATURE.search("\n" + text)
    if m:
        text = ("\n" + text)[:m.start()]
    return text.strip()


def is_request(text: str, subject: str | None = None) -> bool:
    """Does the text ask for something (a question, a request, a call for help, a problem report), or does the
    subject of a thread starter ask for review or a vote (`[PATCH]`, `[RFC]`, `[VOTE]`)?"""
    return bool(REQUEST.search(text or "") or PROBLEM.search(text or "") or SUBJECT_ASK.match(subject or ""))


REPLY_SUBJECT = re.compile(r"^\s*(?:\[[^\]]{0,80}\]\s*)*(?:re|fwd?|aw|wg|sv|antw|r|res|tr)\s*(?:\[\d+\])?\s*:", re.I)


def is_reply(e: Event) -> bool:
    """Does `e` answer or forward an earlier message (a parent, or a Re:/Fwd: subject when headers are missing)?"""
    return bool(e.parent_id) or bool(REPLY_SUBJECT.match(e.title or ""))


def is_digest(e: Event) -> bool:
    """A mailing list's digest: many messages in one (its subject names a volume or issue), not a reply to one."""
    title = e.title or ""
    return e.medium == "mail" and bool(DIGEST.search(title)) and not re.match(r"\s*(\[[^\]]*\]\s*)*re\s*:", title,
                                                                              re.I)


def is_trivial(text: str) -> bool:
    """A reply that answers nothing: "thanks", "+1", an emoji."""
    return not text.strip() or bool(TRIVIAL.match(text.strip()))


def request_text(e: Event, limit: int = 2000) -> str:
    """The text of an event as a request: its title (subject) and what it adds, bounded."""
    parts = [p for p in ((e.title or "").strip(), new_text(e)) if p]
    return "\n\n".join(parts)[:limit]
