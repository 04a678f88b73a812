"""A resolution note reads as one in the words trackers name resolutions by: Jira's (Won't Fix, Won't Do, Obsolete,
Declined), Bugzilla's (WONTFIX, WORKSFORME), GitHub's (not planned), written as one token or with spaces. A real
project closed two thirds of its first thirty issues with "WONTFIX (reason)" and all of them were refused as "no
note about the ticket's resolution". The texts here are invented."""

from __future__ import annotations

import datetime as dt

import pytest

from task_builders.families.resolution_note import not_a_note
from warehouse.schemas import Event

ISSUE = Event(event_id="e1", dataset="d", source="github", kind="issue_created", native_id="acme/widgets#4",
              thread_key="acme/widgets#4", ts=dt.datetime(2011, 3, 1, tzinfo=dt.UTC), title="Teach the linker stubs")


@pytest.mark.parametrize("note", [
    "WONTFIX (not needed for the first release)",
    "Won't fix: the new scheduler makes this moot.",
    "wont do, we keep the old behaviour",
    "Obsolete. The event loop picks these up now.",
    "This can be considered obsolete once receive is a library call.",
    "WORKSFORME on the current build.",
    "Declined by the steering group.",
    "Closing as not planned.",
    "Superseded by the new allocator work.",
    "Out of scope for this tracker.",
])
def test_the_words_trackers_name_resolutions_by_make_a_note(note):
    assert not_a_note(note, ISSUE, None) is None


@pytest.mark.parametrize("note", ["Sure.", "Can you take a look at this when you are back?"])
def test_a_reply_that_decides_nothing_is_no_note(note):
    assert not_a_note(note, ISSUE, None)
