"""The simulated requester: the tool server's hook (answers shown in the result and in later reads, never in the
action log, turns bounded) with no model, and with a stand-in for a hosted LLM (grounded answers, the guard
against revealing the real reply, failures answered with the fixed text)."""

from __future__ import annotations

import datetime as dt

import pytest

from environments import actions as A
from environments.requester import SimulatedRequester
from environments.tools import Persona, ToolServer
from environments.world import World, build_world
from warehouse.ids import event_id
from warehouse.schemas import Event

T0 = dt.datetime(2021, 3, 5, 10, tzinfo=dt.UTC)
REQ = "q1@mail.orrin.example"
DANA = "dana@orrin.example"
REAL_REPLY = "E1203 is the long-path limit; set TSM_LONG_PATHS=1 on the runners (see TSM-88)."
SPEC = {"name": "Dana Whitfield", "address": DANA, "handle": "dana", "medium": "mail", "target": REQ,
        "thread": REQ, "forbidden": REAL_REPLY,
        "messages": ["Does anyone know why `tsm build` fails with E1203 on our Windows runners?",
                     "Forgot to say: this is toolsmith 2.3.1 on the new build agents."]}


@pytest.fixture(scope="module")
def view(tmp_path_factory):
    people = [{"handle": "email:dana", "display_name": "Dana Whitfield", "email": DANA, "role": "from"}]
    events = [
        Event(event_id=event_id("d", "email", REQ), dataset="d", source="email", kind="email", native_id=REQ,
              thread_key=REQ, ts=T0, actor="email:dana", actor_name="Dana Whitfield", title="tsm build fails",
              body=SPEC["messages"][0], attrs={"people": people}),
        Event(event_id=event_id("d", "slack", "C1:1614938400.000100"), dataset="d", source="slack", kind="message",
              native_id="C1:1614938400.000100", thread_key="slack:C1:1614938400.000100", ts=T0, actor="slack:dana",
              actor_name="Dana Whitfield", body="which release has the long path fix?",
              attrs={"channel_id": "C1", "channel_name": "ops", "ts": "1614938400.000100"}),
        Event(event_id=event_id("d", "jira", "TSM-88"), dataset="d", source="jira", kind="issue_created",
              native_id="TSM-88", thread_key="TSM-88", ts=T0, title="Long paths fail", body="E1203",
              attrs={"project": "TSM"}),
    ]
    return World(build_world(events, tmp_path_factory.mktemp("w") / "world.sqlite", "k")).at(T0)


def server(view, spec=SPEC, llm=None, **kw):
    return ToolServer(view, persona=Persona("Pat Quill", "pat@orrin.example", "pat"),
                      requester=SimulatedRequester(spec, llm, **kw))


def test_without_a_model_the_requester_has_no_further_information(view):
    s = server(view)
    r = s.call("mail_reply", {"message_id": REQ, "body": "Which runner image do you use?"})
    assert not r.error and "Dana Whitfield answered:\nNo further information." in r.text
    thread = s.call("mail_read", {"message_id": REQ}).data["message"]["thread_messages"]
    assert [t["from"] for t in thread][-1] == "Dana Whitfield <dana@orrin.example>"
    answer = thread[-1]["message_id"]
    assert s.call("mail_read", {"message_id": answer}).data["message"]["body"] == "No further information."
    assert [type(e.action).__name__ for e in s.actions] == ["MailReply"]          # the answer is no action of ours


def test_only_a_question_to_the_requester_is_answered_and_turns_are_bounded(view):
    s = server(view, max_turns=2)
    assert "answered" not in s.call("mail_reply", {"message_id": REQ, "body": "Set TSM_LONG_PATHS=1."}).text
    assert "answered" not in s.call("mail_send", {"to": ["kofi@orrin.example"], "subject": "E1203",
                                                  "body": "Do you know?"}).text          # not to the requester
    for _ in range(2):
        assert "answered" in s.call("mail_reply", {"message_id": REQ, "body": "Which version?"}).text
    assert "answered" not in s.call("mail_reply", {"message_id": REQ, "body": "And the OS?"}).text
    assert len(s.actions) == 5 and len(s.replies) == 2


def test_chat_and_ticket_questions_are_answered_where_they_were_asked(view):
    chat = server(view, {**SPEC, "medium": "chat", "target": "ops", "thread": "1614938400.000100"})
    chat.call("slack_post", {"channel": "ops", "text": "Which agents?", "thread_ts": "1614938400.000100"})
    thread = chat.call("slack_history", {"channel": "ops", "thread_ts": "1614938400.000100"}).data["messages"]
    assert [(m["author"], m["text"]) for m in thread][-1] == ("Dana Whitfield", "No further information.")
    assert "answered" not in chat.call("slack_post", {"channel": "ops", "text": "Anyone?"}).text  # not her thread
    ticket = server(view, {**SPEC, "medium": "ticket", "target": "TSM-88", "thread": None})
    ticket.call("jira_comment", {"key": "TSM-88", "body": "Does it happen on 2.3.0 too?"})
    comments = ticket.call("jira_show", {"key": "TSM-88"}).data["issue"]["comments"]
    assert [c["author"] for c in comments] == ["Pat Quill", "Dana Whitfield"]


def test_with_a_model_the_requester_answers_from_her_own_messages(view, llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: it is sent the requester's messages and the question, never the real
    reply; its answer is shown in the thread."""
    from standin import json_reply

    from llm import LLM

    llm_standin.responder = lambda body: json_reply({"reply": "It is toolsmith 2.3.1 on the new build agents."})
    s = server(view, llm=LLM(llm_standin.config(tmp_path)))
    r = s.call("mail_reply", {"message_id": REQ, "body": "Which toolsmith version is it?"})
    assert r.text.endswith("It is toolsmith 2.3.1 on the new build agents.")
    sent = llm_standin.requests[0].body["messages"]
    assert "Dana Whitfield" in sent[0]["content"] and "toolsmith 2.3.1" in sent[1]["content"]
    assert "TSM_LONG_PATHS" not in str(sent) and "Which toolsmith version" in sent[1]["content"]


def test_an_answer_that_would_reveal_the_real_reply_is_withheld(view, llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that leaks the fix: the guard answers the fixed text instead."""
    from standin import json_reply

    from llm import LLM

    llm_standin.responder = lambda body: json_reply({"reply": "Just set TSM_LONG_PATHS=1, see TSM-88."})
    s = server(view, llm=LLM(llm_standin.config(tmp_path)))
    assert s.call("mail_reply", {"message_id": REQ, "body": "What should I do?"}).text.endswith(
        "No further information.")


@pytest.mark.parametrize("failure", ["malformed", "unavailable", "budget"])
def test_a_failing_model_leaves_the_requester_with_no_further_information(view, llm_standin, tmp_path, failure):
    """Uses a stand-in for a hosted LLM that answers malformed JSON, or keeps answering 503, or a run whose
    budget is spent: the episode goes on, the requester answers the fixed text, the error is kept."""
    from standin import error, reply

    from llm import LLM

    config = llm_standin.config(tmp_path, max_retries=1, budget_tokens=0 if failure == "budget" else None)
    llm_standin.script(*([reply("not json")] if failure == "malformed" else [error(503)] * 2))
    requester = SimulatedRequester(SPEC, LLM(config))
    s = ToolServer(view, persona=Persona("Pat Quill", "pat@orrin.example", "pat"), requester=requester)
    assert s.call("mail_reply", {"message_id": REQ, "body": "Which version?"}).text.endswith("No further information.")
    assert len(requester.errors) == 1
    assert {"malformed": "LLMOutputError", "unavailable": "LLMCallError", "budget": "BudgetExceeded"}[failure] \
        in requester.errors[0]


def test_a_replayed_episode_gets_the_same_answers_from_the_cache(view, llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: turn i is asked with attempt i, so a replay costs nothing."""
    from standin import json_reply

    from llm import LLM

    answers = iter(["Version 2.3.1.", "Windows Server 2019."])
    llm_standin.responder = lambda body: json_reply({"reply": next(answers)})
    llm = LLM(llm_standin.config(tmp_path))
    runs = []
    for _ in range(2):
        s = server(view, llm=llm)
        runs.append([s.call("mail_reply", {"message_id": REQ, "body": q}).text.rsplit("\n", 1)[-1]
                     for q in ("Which version?", "Which version?")])
    assert runs == [["Version 2.3.1.", "Windows Server 2019."]] * 2 and llm_standin.count == 2
    assert A.MailReply(message_id=REQ, body="x").name() == "mail_reply"
