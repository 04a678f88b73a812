"""The constant answer a triage or resolution task is tried against (task_builders.probes.constants): the value the
tasks' references share most often, and where no two tasks share one, the dataset's commonest value, the same
whichever tasks are kept. Picking one of the tasks' own values when every value is a single task's made `settle`
drop a small family one task per round, each round's constant the answer of a task still kept, down to none (a
real tracker's two triage tasks both went that way). Values are invented."""

from __future__ import annotations

from types import SimpleNamespace

from environments import actions as A
from task_builders.probes import Entities, constants

HISTORY = Entities(values={"assignee": ["Wren Abbott", "Ola Berg", "Ines Cruz", "Tam Dube"],
                           "priority": ["Major", "Minor"]})


def draft(key: str, assignee: str, priority: str = "Major"):
    return SimpleNamespace(reference=[A.JiraUpdate(key=key, priority=priority, assignee=assignee)])


def test_no_two_tasks_share_a_value_the_constant_is_the_datasets_commonest():
    a, b, c = draft("P-1", "Ola Berg"), draft("P-2", "Ines Cruz"), draft("P-3", "Tam Dube")
    for kept in ([a, b, c], [b, c], [c]):       # every round of settle: the same constant, no task's own answer
        assert constants(kept, HISTORY) == {"assignee": "Wren Abbott", "priority": "Major"}
    # a lone task's constant is not its own answer
    assert constants([c], HISTORY)["assignee"] != "Tam Dube"


def test_a_value_two_tasks_share_is_the_constant():
    a, b, c = draft("P-1", "Ola Berg"), draft("P-2", "Ola Berg"), draft("P-3", "Tam Dube", "Minor")
    assert constants([a, b, c], HISTORY) == {"assignee": "Ola Berg", "priority": "Major"}
    # tied between values two tasks each give: the one the dataset used most
    d = draft("P-4", "Tam Dube", "Minor")
    assert constants([a, b, c, d], HISTORY) == {"assignee": "Ola Berg", "priority": "Major"}
