"""Mining requests and replies from mail archives that look like real ones: clients that send no In-Reply-To
(Outlook, Lotus Notes forwards), a reply from another address of the asker, a reply to a mailing-list digest,
patch series that ask for review without a question mark. The archive goes through the real pipeline
(extractors, identities, anonymization, mining); every name in it is invented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config import DatasetConfig
from taskmine import flow
from warehouse.store import Store

LIST = "tools-users@lists.toolsmith.example"


def msg(mid: str, date: str, frm: str, to: str, subject: str, body: str, *, cc: str = "", irt: str = "",
        extra: str = "") -> str:
    head = [f"From {frm.split('<')[-1].rstrip('>')} {date}", f"Message-ID: <{mid}>", f"Date: {date}",
            f"From: {frm}", f"To: {to}", f"Subject: {subject}"]
    if cc:
        head.append(f"Cc: {cc}")
    if irt:
        head += [f"In-Reply-To: <{irt}>", f"References: <{irt}>"]
    if extra:
        head.append(extra)
    head += ["MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8"]
    return "\n".join(head) + "\n\n" + body.strip("\n") + "\n\n"


DANA = "Dana Whitfield <dana@orrinfreight.example>"
DANA_HOME = "Dana Whitfield <dana.whitfield@homemail.example>"
PAT = "Pat Quill <pat.quill@orrinfreight.example>"
KOFI = "Kofi Mensah <kofi.mensah@orrinfreight.example>"
LENA = "Lena Ortiz <lena.ortiz@customer.example>"

OUTLOOK = [
    msg("nom1@mail.orrin.example", "Fri, 02 Mar 2001 09:12:00 -0600", DANA, PAT, "Gas nomination for March", """
Pat,

Could you send me the final nomination volumes for March by Thursday? Trading needs them for the
10 AM call with the pipeline scheduler.

Thanks,
Dana"""),
    # Outlook: no In-Reply-To, no References; the request quoted under "-----Original Message-----"
    msg("nom2@mail.orrin.example", "Fri, 02 Mar 2001 14:40:00 -0600", PAT, DANA, "RE: Gas nomination for March", """
Dana,

The final March volumes are 42,500 MMBtu/day at Katy; the sheet is nominations/2001-03.xls on the share.

Pat

 -----Original Message-----
From: \tWhitfield, Dana
Sent:\tFriday, March 02, 2001 9:12 AM
To:\tQuill, Pat
Subject:\tGas nomination for March

Pat,

Could you send me the final nomination volumes for March by Thursday? Trading needs them for the
10 AM call with the pipeline scheduler.

Thanks,
Dana""", cc=KOFI),
]

LOTUS = [
    msg("inv1@customer.example", "Sun, 04 Mar 2001 17:10:22 -0600", LENA, KOFI, "Invoice 7731 discrepancy", """
Kofi, our invoice 7731 shows 1,200 units of pallet wrap but we received 1,150. Can you correct it
before the month closes?

Lena"""),
    # Lotus Notes forward chain: a note on top, the original under "Forwarded by"
    msg("inv2@mail.orrin.example", "Mon, 05 Mar 2001 08:03:00 -0600", KOFI, PAT, "Fw: Invoice 7731 discrepancy", """
Pat - can you look into this and reply to Lena? Receiving logged the delivery on the 28th.

---------------------- Forwarded by Kofi Mensah/HOU/ORRIN on 03/05/2001 08:03 AM ---------------------------


Lena Ortiz <lena.ortiz@customer.example> on 03/04/2001 05:10:22 PM
To:\tKofi Mensah/HOU/ORRIN@ORRIN
cc:
Subject:\tInvoice 7731 discrepancy

Kofi, our invoice 7731 shows 1,200 units of pallet wrap but we received 1,150. Can you correct it
before the month closes?

Lena"""),
    msg("inv3@mail.orrin.example", "Mon, 05 Mar 2001 11:30:00 -0600", PAT, KOFI, "RE: Fw: Invoice 7731 discrepancy", """
Kofi, I checked the receiving log: 50 units were short-shipped. I issued credit memo CM-2211 and told Lena.

 -----Original Message-----
From: \tMensah, Kofi
Sent:\tMonday, March 05, 2001 8:03 AM
To:\tQuill, Pat
Subject:\tFw: Invoice 7731 discrepancy

Pat - can you look into this and reply to Lena? Receiving logged the delivery on the 28th."""),
]

LIST_HEADERS = f"List-Id: <tools-users.lists.toolsmith.example>\nList-Post: <mailto:{LIST}>"
GMAIL = [
    msg("w1@mail.orrin.example", "Mon, 05 Mar 2001 10:00:00 +0000", DANA, LIST,
        "[tools-users] tsm build fails with E1203 on Windows", """
Does anyone know why `tsm build` fails with E1203 on our Windows runners? Linux is fine.

Dana""", extra=LIST_HEADERS),
    # the asker again, from her home address, before anyone answered: not an answer
    msg("w2@homemail.example", "Mon, 05 Mar 2001 10:20:00 +0000", DANA_HOME, LIST,
        "Re: [tools-users] tsm build fails with E1203 on Windows", """
Forgot to say: this is toolsmith 2.3.1 on the new build agents.

On Mon, Mar 5, 2001 at 10:00 AM Dana Whitfield <dana@orrinfreight.example> wrote:
> Does anyone know why `tsm build` fails with E1203 on our Windows runners? Linux is fine.""",
        irt="w1@mail.orrin.example", extra=LIST_HEADERS),
    msg("w3@mail.orrin.example", "Mon, 05 Mar 2001 13:05:00 +0000", KOFI, LIST,
        "Re: [tools-users] tsm build fails with E1203 on Windows", """
E1203 is the long-path limit; set TSM_LONG_PATHS=1 on the runners (see TSM-88).

On Mon, Mar 5, 2001 at 10:00 AM Dana Whitfield <dana@orrinfreight.example> wrote:
> Does anyone know why `tsm build` fails with E1203 on our Windows runners? Linux is fine.""",
        irt="w1@mail.orrin.example", extra=LIST_HEADERS),
]

DIGEST = [
    msg("pin1@customer.example", "Tue, 06 Mar 2001 09:00:00 +0000", LENA, LIST,
        "[tools-users] How to pin plugin versions?", """
Is there a way to pin plugin versions in tsm.toml? Our CI picks up every new plugin release and
breaks on Mondays.

Lena""", extra=LIST_HEADERS),
    msg("dig1@lists.toolsmith.example", "Tue, 06 Mar 2001 12:00:00 +0000",
        "tools-users-request@lists.toolsmith.example", LIST, "tools-users Digest, Vol 12, Issue 3", """
Send tools-users mailing list submissions to
\ttools-users@lists.toolsmith.example

Today's Topics:

   1. How to pin plugin versions? (Lena Ortiz)

----------------------------------------------------------------------

Message: 1
Date: Tue, 06 Mar 2001 09:00:00 +0000
From: Lena Ortiz <lena.ortiz@customer.example>
Subject: [tools-users] How to pin plugin versions?

Is there a way to pin plugin versions in tsm.toml? Our CI picks up every new plugin release and
breaks on Mondays.

Lena""", extra=LIST_HEADERS),
    # a digest subscriber answers the digest: the question is the message the reply quotes
    msg("pin2@mail.orrin.example", "Tue, 06 Mar 2001 15:30:00 +0000", PAT, LIST,
        "Re: tools-users Digest, Vol 12, Issue 3", """
> Is there a way to pin plugin versions in tsm.toml? Our CI picks up every new plugin release and
> breaks on Mondays.

Yes: set plugins.lock = true in tsm.toml and commit the tsm.lock file that `tsm lock` writes.""",
        irt="dig1@lists.toolsmith.example", extra=LIST_HEADERS),
]

PATCHES = [
    msg("p1@mail.orrin.example", "Wed, 07 Mar 2001 08:00:00 +0000", KOFI, LIST,
        "[PATCH 2/3] parser: accept empty sections", """
An empty [section] made the parser raise; treat it as an empty table.

Signed-off-by: Kofi Mensah <kofi.mensah@orrinfreight.example>
---
 src/parser.c | 4 ++--
 1 file changed, 2 insertions(+), 2 deletions(-)""", extra=LIST_HEADERS),
    msg("p2@mail.orrin.example", "Wed, 07 Mar 2001 09:30:00 +0000", DANA, LIST,
        "Re: [PATCH 2/3] parser: accept empty sections", """
This breaks parse_section() on a header with only spaces; add a case to tests/test_parser.c and resend.

On Wed, Mar 7, 2001 at 08:00 AM Kofi Mensah <kofi.mensah@orrinfreight.example> wrote:
> An empty [section] made the parser raise; treat it as an empty table.""",
        irt="p1@mail.orrin.example", extra=LIST_HEADERS),
]


def slack_directory(root: Path) -> None:
    """A Slack export whose users anchor the mail senders' names to one person each (the identity graph)."""
    users = [{"id": f"U{i:09d}", "name": name.split()[0].lower(), "real_name": name, "deleted": False,
              "profile": {"real_name": name, "display_name": name.split()[0].lower()}}
             for i, name in enumerate(["Dana Whitfield", "Pat Quill", "Kofi Mensah"])]
    (root / "slack").mkdir(parents=True)
    (root / "slack" / "users.json").write_text(json.dumps(users))
    (root / "slack" / "channels.json").write_text(json.dumps([{"id": "C000000001", "name": "ops", "created": 0,
                                                                "members": [u["id"] for u in users]}]))
    (root / "slack" / "ops").mkdir()
    (root / "slack" / "ops" / "2001-03-01.json").write_text(json.dumps([
        {"type": "message", "user": "U000000000", "text": "morning", "ts": "983437200.000100"}]))


@pytest.fixture(scope="module")
def mined(tmp_path_factory):
    root = tmp_path_factory.mktemp("orrin")
    exports = root / "exports" / "orrin"
    (exports / "mail").mkdir(parents=True)
    (exports / "mail" / "archive.mbox").write_text("".join(OUTLOOK + LOTUS + GMAIL + DIGEST + PATCHES))
    slack_directory(exports)
    store = Store(root / "home")
    config = DatasetConfig(ner_model="", answer_window_hours=72)
    ctx = flow.context(store, "orrin", exports, config=config)
    flow.prepare(ctx)
    result = flow.run(flow.context(store, "orrin", config=config), "work_items")
    events = {e.event_id: e for e in store.read("anonymized_events", "orrin")}
    items = [i for i in store.read("work_items", "orrin") if i.kind == "email_reply"]
    rejections = [r for r in store.read("rejections", "orrin") if r.stage == "work_items"]
    return events, items, rejections, result


def _subjects(events, item):
    return events[item.request_event_id].title, events[item.outcome_event_ids[0]].title


def _item(events, items, subject):
    found = [i for i in items if events[i.request_event_id].title == subject]
    assert len(found) == 1, [_subjects(events, i) for i in items]
    return found[0]


def test_an_outlook_reply_without_in_reply_to_is_found_by_what_it_quotes(mined):
    events, items, _, _ = mined
    item = _item(events, items, "Gas nomination for March")
    reply = events[item.outcome_event_ids[0]]
    assert reply.title == "RE: Gas nomination for March" and reply.parent_id is None
    assert item.attrs["reply_found_by"] == "quote"


def test_a_forward_with_a_note_is_the_request_and_its_reply_is_found(mined):
    events, items, _, _ = mined
    item = _item(events, items, "Fw: Invoice 7731 discrepancy")
    request = events[item.request_event_id]
    assert "can you look into this" in request.attrs["new_text"]     # names are pseudonyms by now
    assert "1,200 units" not in request.attrs["new_text"]          # the forwarded original is not its own text
    assert events[item.outcome_event_ids[0]].title == "RE: Fw: Invoice 7731 discrepancy"
    assert item.attrs["reply_found_by"] == "quote"


def test_the_askers_own_follow_up_from_another_address_is_not_the_answer(mined):
    """The two addresses of Dana Whitfield are one person (a directory account anchors the name), so her
    follow-up from home is skipped and Kofi's reply answers."""
    events, items, _, _ = mined
    item = _item(events, items, "[tools-users] tsm build fails with E1203 on Windows")
    reply = events[item.outcome_event_ids[0]]
    assert "TSM_LONG_PATHS" in reply.body and item.attrs["reply_found_by"] == "headers"
    request = events[item.request_event_id]
    follow_up = next(e for e in events.values() if "Forgot to say" in (e.body or ""))
    assert follow_up.actor == request.actor          # one pseudonymous handle for both addresses


def test_a_reply_to_a_digest_answers_the_message_it_quotes(mined):
    events, items, rejections, _ = mined
    item = _item(events, items, "[tools-users] How to pin plugin versions?")
    assert events[item.outcome_event_ids[0]].title == "Re: tools-users Digest, Vol 12, Issue 3"
    assert item.attrs["reply_found_by"] == "quote"
    digest = next(e for e in events.values() if e.title == "tools-users Digest, Vol 12, Issue 3")
    assert any(r.subject_id == digest.native_id and r.reason == "request is automated"
               and "digest" in r.detail for r in rejections)


def test_a_patch_asks_for_review_without_a_question(mined):
    events, items, _, _ = mined
    item = _item(events, items, "[PATCH 2/3] parser: accept empty sections")
    assert "parse_section()" in events[item.outcome_event_ids[0]].body


def test_the_funnel_counts_every_skip_reason_per_source(mined):
    _, items, rejections, result = mined
    row = next(r for r in result.preview if r["source"] == "email")
    assert f"email_reply {len(items)}" in row["work items"]
    skipped = sum(1 for r in rejections if r.detail.startswith("email:"))
    assert sum(int(part.rsplit(" ", 1)[1]) for part in row["skipped"].split("; ")) == skipped


def test_what_counts_as_a_request():
    from task_builders.signals import is_request

    asks = ["I was wondering if there is a reason why equal() ignores masked values.",
            "If anyone has seen this, I would love to get any advice you may have.",
            "would be great if you could pick this up",
            "BTW, the build crashed with `*** stack smashing detected ***` after the merge",
            "Could someone who knows the cache take a look",
            "I'm a bit confused by how the operators relate; Challenge 4 I can't even understand."]
    for text in asks:
        assert is_request(text), text
    assert is_request("", subject="[RFC][PATCH 03/10] cifs: register for caching")
    assert is_request("", subject="[VOTE] Release toolsmith 2.4.0")
    for text in ("The release went out today.", "Attached, the numbers are in tab 2.", "+1"):
        assert not is_request(text), text
    assert not is_request("", subject="Re: [PATCH] parser")       # a reply's subject is its thread's


def test_a_bulk_closed_ticket_without_changelog_keeps_its_last_note():
    """An export without a changelog dates the resolution when the ticket was bulk-closed, weeks after the last
    word on it: the last comment before that date that reads like a resolution note is the note."""
    import datetime as dt

    from task_builders.mining import build_work_items
    from warehouse.ids import event_id
    from warehouse.schemas import Event

    t0 = dt.datetime(2018, 3, 1, tzinfo=dt.UTC)

    def comment(n, days, text):
        return Event(event_id=event_id("d", "jira", f"TS-1#c{n}"), dataset="d", source="jira", kind="comment",
                     native_id=f"TS-1#c{n}", thread_key="TS-1", parent_id=event_id("d", "jira", "TS-1"),
                     ts=t0 + dt.timedelta(days=days), actor="jira:kmensah", actor_name="Kofi Mensah", body=text)

    issue = Event(event_id=event_id("d", "jira", "TS-1"), dataset="d", source="jira", kind="issue_created",
                  native_id="TS-1", thread_key="TS-1", ts=t0, actor="jira:dwhitfield", title="Lock file ignored",
                  attrs={"project": "TS", "resolution": {"name": "Fixed"}, "status": {"name": "Closed"},
                         "resolved_at": (t0 + dt.timedelta(days=40)).isoformat()})
    events = [issue, comment(1, 2, "I can reproduce it on 2.3."),
              comment(2, 9, "Verified the fix in 2.4.0-rc.2. Closing.")]
    items, rejections = build_work_items("d", events)
    notes = [i for i in items if i.kind == "resolution"]
    assert len(notes) == 1 and notes[0].outcome_event_ids == [event_id("d", "jira", "TS-1#c2")]
    assert notes[0].attrs["note_by"] == "last note before the resolution date"


def test_of_equally_quoted_messages_the_one_whose_subject_the_reply_continues_is_its_parent():
    """A patch series shares its boilerplate: a review whose In-Reply-To names a message the archive lacks
    quotes as much of patch 3 as of patch 10; its subject says it answers patch 3."""
    import datetime as dt

    from task_builders.mining import build_work_items
    from warehouse.ids import event_id
    from warehouse.schemas import Event

    t0 = dt.datetime(2010, 6, 22, 15, tzinfo=dt.UTC)
    common = "Signed-off-by: Kofi Mensah <kofi@orrin.example>\n fs/cache/init.c | 4 ++--\n 1 file changed"

    def mail(n, minutes, who, subject, body, own, irt=None):
        return Event(event_id=event_id("d", "email", n), dataset="d", source="email", kind="email", native_id=n,
                     thread_key=n if irt is None else irt, ts=t0 + dt.timedelta(minutes=minutes),
                     parent_id=event_id("d", "email", irt) if irt else None, actor=f"email:{who}",
                     actor_name=who.title(), title=subject, body=body, attrs={"new_text": own})

    p3 = mail("p3", 0, "kofi", "[PATCH 03/10] cache: register", f"Register the cache.\n{common}",
              f"Register the cache.\n{common}")
    p10 = mail("p10", 2, "kofi", "[PATCH 10/10] cache: mount option", f"Add the option.\n{common}",
               f"Add the option.\n{common}")
    review = mail("r3", 60, "dana", "Re: [PATCH 03/10] cache: register",
                  f"> {common}\n\nThis is incorrect: unregister the cache if init fails.",
                  "This is incorrect: unregister the cache if init fails.", irt="missing@archive")
    items, _ = build_work_items("d", [p3, p10, review])
    (item,) = [i for i in items if i.kind == "email_reply"]
    assert item.request_event_id == p3.event_id and item.attrs["reply_found_by"] == "quote"
