"""Work items from mail, chat and tickets: what becomes an item, and the reason counted for what does not."""

import datetime as dt

from core.config import DatasetConfig
from task_builders.mining import build_work_items, funnel_by_source
from warehouse.ids import event_id
from warehouse.schemas import Event

T0 = dt.datetime(2021, 3, 1, 9, tzinfo=dt.UTC)


def mail(native, h, who, body, title="Help with export", parent=None, new_text=None, headers=None):
    return Event(event_id=event_id("d", "email", native), dataset="d", source="email", kind="email",
                 native_id=native, thread_key=parent[1] if parent else native,
                 parent_id=event_id("d", "email", parent[0]) if parent else None,
                 ts=T0 + dt.timedelta(hours=h), actor=f"email:{who}", actor_name=who.title(), title=title,
                 body=body, attrs={"new_text": body if new_text is None else new_text, "headers": headers or {}})


def chat(native, h, who, text, parent=None, channel="C1", bot=False, mentions=()):
    return Event(event_id=event_id("d", "slack", f"{channel}:{native}"), dataset="d", source="slack",
                 kind="bot_message" if bot else "message", native_id=f"{channel}:{native}",
                 thread_key=f"slack:{channel}:{parent or native}",
                 parent_id=event_id("d", "slack", f"{channel}:{parent}") if parent else None,
                 ts=T0 + dt.timedelta(hours=h), actor=f"slack:{who}", actor_name=who.title(), body=text,
                 attrs={"channel_id": channel, "channel_name": "dev", "bot": bot,
                        "mentions": [{"name": m.title()} for m in mentions]})


def mine(events, **cfg):
    items, rejections = build_work_items("d", events, config=DatasetConfig(**cfg))
    return items, {r.subject_id: r.reason for r in rejections if r.stage == "work_items"}


def test_email_request_and_the_reply_that_answered_it():
    events = [
        mail("q1", 0, "ann", "Could you send me last month's export?"),
        mail("r1", 2, "bob", "> Could you send...\n\nAttached, the numbers are in tab 2.", parent=("q1", "q1"),
             new_text="Attached, the numbers are in tab 2.", title="Re: Help with export"),
        mail("q2", 0, "cat", "Can someone reset the staging DB?"),
        mail("r2", 1, "cat", "Never mind, done.", parent=("q2", "q2")),                      # the asker herself
        mail("q3", 0, "dan", "Please review the draft?"),
        mail("r3", 1, "eve", "> Please review the draft?", parent=("q3", "q3"), new_text=""),  # only a quote
        mail("q4", 0, "fay", "Is the VPN down?"),
        mail("r4", 0.1, "gus", "I am out of the office until Monday.", parent=("q4", "q4"),
             headers={"auto-submitted": "auto-replied"}),
        mail("q5", 0, "hal", "The release went out today.", title="Release notes"),           # asks nothing
        mail("q6", 0, "ivy", "Could you check the invoice?"),
        mail("r6", 200, "jon", "Checked, it is right.", parent=("q6", "q6")),                 # 200 h later
        mail("q7", 0, "kim", "Out of office", title="Out of office: back Monday"),
    ]
    items, skipped = mine(events)
    emails = [i for i in items if i.kind == "email_reply"]
    assert len(emails) == 1
    item = emails[0]
    assert item.request_event_id == event_id("d", "email", "q1")
    assert item.outcome_event_ids == [event_id("d", "email", "r1")]
    assert set(item.lineage) == {event_id("d", "email", "q1"), event_id("d", "email", "r1")}
    assert skipped == {"q2": "answered only by the asker", "q3": "reply adds nothing beyond the quote",
                       "q4": "reply is automated", "q5": "asks for nothing", "q6": "answer outside the window",
                       "q7": "request is automated", "r1": "asks for nothing", "r2": "asks for nothing",
                       "r3": "asks for nothing", "r4": "request is automated", "r6": "asks for nothing"}


def test_slack_question_answered_in_thread_or_in_channel():
    events = [
        chat("1.0", 0, "ann", "old chatter about lunch"),
        chat("2.0", 1, "bob", "how do I run the tests locally?"),
        chat("2.5", 1.5, "ci", "build passed", bot=True, parent="2.0"),
        chat("3.0", 2, "ann", "`make test`, pytest works too", parent="2.0"),
        chat("4.0", 3, "cat", "who owns billing?"),
        chat("4.1", 3.1, "cat", "anyone?"),
        chat("5.0", 4, "dan", "re your question: Eve does", mentions=("cat",)),
        chat("6.0", 10, "eve", "where is the deploy script?"),                                  # nobody answers
        chat("7.0", 20, "fay", "is main green?"),
        chat("8.0", 20.1, "gus", "yes, since the last push"),                                  # next message
    ]
    items, skipped = mine(events)
    qa = {i.request_event_id: i for i in items if i.kind == "chat_answer"}
    eid = lambda n: event_id("d", "slack", f"C1:{n}")  # noqa: E731
    assert set(qa) == {eid("2.0"), eid("4.0"), eid("7.0")}
    assert qa[eid("2.0")].outcome_event_ids == [eid("3.0")] and qa[eid("2.0")].attrs["in_thread"]
    assert qa[eid("2.0")].context_event_ids == [eid("1.0")]
    assert qa[eid("4.0")].outcome_event_ids == [eid("5.0")] and not qa[eid("4.0")].attrs["in_thread"]
    assert qa[eid("7.0")].outcome_event_ids == [eid("8.0")]
    assert skipped["C1:6.0"] == "no reply"
    assert skipped["C1:4.1"] == "its answer answers an earlier question"


def test_a_question_addressed_to_someone_is_answered_by_their_next_channel_message():
    """On the real R Contributors export "@<organizer> ... are the sessions still going ahead?" was answered by
    the organizer in the channel 23 minutes later, after someone else's message: it used to be "no reply"."""
    events = [
        chat("1.0", 0, "ann", "@Yva are the next sessions still on? meetup says cancelled", mentions=("yva",)),
        chat("1.5", 0.2, "bob", "I got the same mail"),                                  # not the one asked
        chat("2.0", 0.4, "yva", "Sorry, meetup made duplicates; they are on as planned"),
        chat("3.0", 10, "cat", "@Zed where is the deploy script?", mentions=("zed",)),
        chat("4.0", 15, "zed", "morning all"),                                            # after the window
    ]
    items, skipped = mine(events)
    qa = {i.request_event_id: i for i in items if i.kind == "chat_answer"}
    eid = lambda n: event_id("d", "slack", f"C1:{n}")  # noqa: E731
    assert qa[eid("1.0")].outcome_event_ids == [eid("2.0")] and not qa[eid("1.0")].attrs["in_thread"]
    assert skipped["C1:3.0"] == "no reply"


def test_ticket_resolved_with_a_comment():
    def jira(kind, native, h, thread, **kw):
        return Event(event_id=event_id("d", "jira", native), dataset="d", source="jira", kind=kind, native_id=native,
                     thread_key=thread, ts=T0 + dt.timedelta(hours=h), actor="jira:ann", **kw)

    events = [
        jira("issue_created", "P-1", 0, "P-1", title="Export is slow", body="It takes an hour."),
        jira("comment", "P-1#comment-1", 5, "P-1", body="Looking."),
        jira("comment", "P-1#comment-2", 30, "P-1", body="Added an index; down to 2 minutes."),
        jira("field_changed", "P-1#history-1-0", 30.5, "P-1", attrs={"field": "status", "toString": "Resolved"}),
        jira("issue_created", "P-2", 0, "P-2", title="Typo"),
        jira("field_changed", "P-2#history-2-0", 3, "P-2", attrs={"field": "resolution", "toString": "Fixed"}),
        jira("issue_created", "P-3", 0, "P-3", title="Open question"),
    ]
    items, skipped = mine(events)
    res = [i for i in items if i.kind == "resolution"]
    assert len(res) == 1 and res[0].outcome_event_ids == [event_id("d", "jira", "P-1#comment-2")]
    assert event_id("d", "jira", "P-1#comment-1") in res[0].context_event_ids
    assert skipped == {"P-2": "resolved without a comment", "P-3": "not resolved"}
    funnel = funnel_by_source(events, items, [])
    assert funnel["jira"]["events"] == 7 and funnel["jira"]["work_items"] == {"issue": 3, "resolution": 1}


def test_a_patch_threaded_under_its_cover_letter_asks_for_review():
    """git send-email threads a series under its cover letter (In-Reply-To): on the real LKML/notmuch archive
    "[PATCH 2/2] notmuch-new: ..." was taken for a reply, whose subject asks nothing of its own."""
    events = [
        mail("c0", 0, "dar", "This series adds maildir flags.", title="[PATCH 0/2] maildir flags"),
        mail("p2", 0.1, "dar", "Tag mails as seen when maildir says so.", title="[PATCH 2/2] notmuch-new: tags",
             parent=("c0", "c0")),
        mail("r2", 5, "val", "Use notmuch_message_get_flags() here.", title="Re: [PATCH 2/2] notmuch-new: tags",
             parent=("p2", "c0")),
        mail("r3", 6, "dar", "Right, will do.", title="Re: [PATCH 2/2] notmuch-new: tags", parent=("r2", "c0")),
    ]
    items, skipped = mine(events)
    asked = {i.request_event_id for i in items if i.kind == "email_reply"}
    assert event_id("d", "email", "p2") in asked
    assert skipped["r3"] == "asks for nothing"           # a reply's "[PATCH]" subject is its thread's, not its own
