"""Every check of graders.communication, on action logs made by a real in-process tool server, and the rubric's
handling of judge checks (not run, grader error, infrastructure error) with a judge of each kind."""

from __future__ import annotations

import datetime as dt

import pytest

from environments import actions as A
from environments.tools import Persona, ToolServer
from environments.world import World, build_world
from graders.communication import judge_agreement, judge_context, model_judge
from graders.rubric import CheckSpec, Context, Rubric, grade
from warehouse.ids import event_id
from warehouse.schemas import Event

T0 = dt.datetime(2021, 3, 5, 10, tzinfo=dt.UTC)
REQ = "q1@mail.orrin.example"
DANA, PAT, LIST, KOFI = ("dana@orrin.example", "pat@orrin.example", "tools@lists.orrin.example",
                         "kofi@orrin.example")
MAIL = {"medium": "mail", "target": REQ, "thread": REQ}
CHAT = {"medium": "chat", "target": "ops", "thread": "1614938400.000100"}
TICKET = {"medium": "ticket", "target": "TSM-88"}


@pytest.fixture(scope="module")
def view(tmp_path_factory):
    people = [{"handle": "email:dana", "display_name": "Dana Whitfield", "email": DANA, "role": "from"},
              {"handle": f"email:{LIST}", "display_name": None, "email": LIST, "role": "to"}]
    events = [
        Event(event_id=event_id("d", "email", REQ), dataset="d", source="email", kind="email", native_id=REQ,
              thread_key=REQ, ts=T0, actor="email:dana", actor_name="Dana Whitfield",
              title="tsm build fails with E1203", body="Does anyone know why `tsm build` fails with E1203?",
              attrs={"people": people}),
        Event(event_id=event_id("d", "slack", "C1:1614938400.000100"), dataset="d", source="slack", kind="message",
              native_id="C1:1614938400.000100", thread_key="slack:C1:1614938400.000100", ts=T0,
              actor="slack:dana", actor_name="Dana Whitfield", body="which release has the long path fix?",
              attrs={"channel_id": "C1", "channel_name": "ops", "ts": "1614938400.000100"}),
        Event(event_id=event_id("d", "jira", "TSM-88"), dataset="d", source="jira", kind="issue_created",
              native_id="TSM-88", thread_key="TSM-88", ts=T0 - dt.timedelta(days=1), title="Long paths fail",
              body="E1203", attrs={"project": "TSM"}),
    ]
    path = build_world(events, tmp_path_factory.mktemp("w") / "world.sqlite", "k")
    return World(path).at(T0 + dt.timedelta(minutes=1))


PAT_PERSONA = Persona("Pat Quill", PAT, "pat")


def log(view, *calls, persona=PAT_PERSONA):
    server = ToolServer(view, persona=persona)
    for c in calls:
        r = server.call(c.name(), c.arguments())
        assert not r.error, r.text
    return server.actions


def one(check, args, actions, ctx=None, kind="deterministic"):
    spec = CheckSpec(id="c", check=check, weight=1, kind=kind, args=args)
    g = grade(Rubric(checks=[spec]), actions, ctx or Context())
    return g.checks[0]["score"] if g.error_class is None else g


ANSWER = "E1203 is the long-path limit; set TSM_LONG_PATHS=1 on the runners (see TSM-88)."


def test_nothing_written_scores_zero_on_every_check(view):
    checks = [("responds_in_thread", {"scope": MAIL}), ("action_type", {"scope": MAIL, "tool": "mail_reply"}),
              ("reaches_requester", {"scope": MAIL, "any_of": [DANA]}),
              ("recipients_cover", {"scope": MAIL, "expected": [KOFI]}),
              ("recipients_within", {"scope": MAIL, "allowed": [DANA]}),
              ("states_fact", {"scope": MAIL, "fact": {"kind": "issue_key", "text": "TSM-88"}}),
              ("no_placeholders", {"scope": MAIL}), ("no_private_data", {"scope": MAIL}),
              ("no_future_facts", {"scope": MAIL, "facts": [{"kind": "version", "text": "2.5.0"}]})]
    for check, args in checks:
        assert one(check, args, []) == 0.0, check


def test_thread_action_and_recipients_of_a_mail_reply(view):
    reply = log(view, A.MailReply(message_id=REQ, body=ANSWER, to=[LIST], cc=[KOFI]))
    new = log(view, A.MailSend(to=[DANA, "boss@orrin.example"], subject="E1203", body=ANSWER))
    assert one("responds_in_thread", {"scope": MAIL}, reply) == 1.0
    assert one("responds_in_thread", {"scope": MAIL}, new) == 0.0
    assert one("action_type", {"scope": MAIL, "tool": "mail_reply"}, reply) == 1.0
    assert one("action_type", {"scope": MAIL, "tool": "mail_reply"}, new) == 0.0
    assert one("reaches_requester", {"scope": MAIL, "any_of": [DANA, LIST]}, reply) == 1.0
    assert one("reaches_requester", {"scope": MAIL, "any_of": [DANA]}, reply) == 0.0
    assert one("recipients_cover", {"scope": MAIL, "expected": [KOFI, "lena@customer.example"]}, reply) == 0.5
    assert one("recipients_within", {"scope": MAIL, "allowed": [DANA, LIST, KOFI]}, reply) == 1.0
    assert one("recipients_within", {"scope": MAIL, "allowed": [DANA, LIST, KOFI]}, new) == 0.0
    default = log(view, A.MailReply(message_id=REQ, body=ANSWER))          # to the sender by default
    assert one("reaches_requester", {"scope": MAIL, "any_of": [DANA]}, default) == 1.0


def test_a_chat_answer_in_the_thread_or_addressed_in_the_channel(view):
    scope = CHAT
    in_thread = log(view, A.SlackPost(channel="ops", text="2.4.0", thread_ts=scope["thread"]))
    top = log(view, A.SlackPost(channel="ops", text="2.4.0"))
    named = log(view, A.SlackPost(channel="ops", text="@Dana Whitfield 2.4.0"))
    elsewhere = log(view, A.SlackPost(channel="random", text="2.4.0", thread_ts=scope["thread"]))
    assert one("responds_in_thread", {"scope": scope}, in_thread) == 1.0
    assert one("responds_in_thread", {"scope": scope}, top) == 0.0
    assert one("responds_in_thread", {"scope": scope}, elsewhere) == 0.0          # not the question's channel
    assert one("reaches_requester", {"scope": scope, "any_of": ["Dana Whitfield"]}, named) == 1.0
    assert one("reaches_requester", {"scope": scope, "any_of": ["Dana Whitfield"]}, top) == 0.0
    assert one("action_type", {"scope": scope, "tool": "slack_post"}, top) == 1.0


def test_a_resolution_note_is_a_comment_on_the_ticket(view):
    note = log(view, A.JiraUpdate(key="TSM-88", resolution="Fixed"), A.JiraComment(key="TSM-88", body=ANSWER))
    other = log(view, A.JiraComment(key="TSM-88", body="x"), persona=Persona())
    assert one("action_type", {"scope": TICKET, "tool": "jira_comment"}, note) == 1.0
    assert one("responds_in_thread", {"scope": TICKET}, note) == 1.0
    assert one("field_equals", {"key": "TSM-88", "field": "resolution", "expected": "Fixed"}, note) == 1.0
    assert one("states_fact", {"scope": TICKET, "fact": {"kind": "identifier", "text": "TSM_LONG_PATHS"}},
               other) == 0.0


def test_one_check_per_fact_over_the_whole_response(view):
    """A clarifying question and then the answer: the response is read whole."""
    actions = log(view, A.MailReply(message_id=REQ, body="Which runner image?"),
                  A.MailReply(message_id=REQ, body=ANSWER))
    assert one("states_fact", {"scope": MAIL, "fact": {"kind": "issue_key", "text": "TSM-88"}}, actions) == 1.0
    assert one("states_fact", {"scope": MAIL, "fact": {"kind": "version", "text": "2.4.0"}}, actions) == 0.0


def test_forbidden_content(view):
    leaky = log(view, A.MailReply(message_id=REQ, body="Use [SECRET:PASSWORD] as [PERSON] said; call +44 161 "
                                                       "496 0494 or mail lena@customer.example. Fixed in 2.5.0."))
    clean = log(view, A.MailReply(message_id=REQ, body="Hi [PERSON], " + ANSWER))
    assert one("no_placeholders", {"scope": MAIL, "allowed": ["[PERSON]"]}, clean) == 1.0
    assert one("no_placeholders", {"scope": MAIL, "allowed": ["[PERSON]"]}, leaky) == 0.0
    assert one("no_private_data", {"scope": MAIL, "allowed_addresses": [DANA]}, clean) == 1.0
    assert one("no_private_data", {"scope": MAIL, "allowed_addresses": [DANA, "lena@customer.example"]}, leaky) == 0.0
    assert one("no_private_data", {"scope": MAIL, "allowed_addresses": ["lena@customer.example"],
                                   "allowed_numbers": ["+44 161 496 0494"]}, leaky) == 1.0
    future = {"scope": MAIL, "facts": [{"kind": "version", "text": "2.5.0"}]}
    assert one("no_future_facts", future, leaky) == 0.0 and one("no_future_facts", future, clean) == 1.0


def test_check_arguments_are_validated_when_the_rubric_is_built():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="medium"):
        CheckSpec(id="c", check="responds_in_thread", weight=1, args={"scope": {"medium": "fax", "target": "x"}})
    with pytest.raises(ValidationError, match="any_of"):
        CheckSpec(id="c", check="reaches_requester", weight=1, args={"scope": MAIL, "any_of": []})
    with pytest.raises(ValidationError, match="question"):
        CheckSpec(id="c", check="judge", kind="judge", weight=1,
                  args={"scope": MAIL, "question": "is nice", "request": "r", "guidance": "g"})
    with pytest.raises(ValidationError, match="judge check"):
        CheckSpec(id="c", check="judge", weight=1,
                  args={"scope": MAIL, "question": "answers", "request": "r", "guidance": "g"})


def _judge_rubric():
    return Rubric(checks=[
        CheckSpec(id="fact", check="states_fact", weight=2, args={"scope": MAIL, "fact": {"kind": "issue_key",
                                                                                         "text": "TSM-88"}}),
        CheckSpec(id="judge_answers", check="judge", kind="judge", weight=1, criterion="answers what was asked",
                  args={"scope": MAIL, "question": "answers", "request": "why E1203?", "guidance": ANSWER})])


def test_judge_checks_without_a_model_are_not_run_and_left_out(view):
    g = grade(_judge_rubric(), log(view, A.MailReply(message_id=REQ, body=ANSWER)), judge_context(view, None))
    assert g.score == 1.0 and g.not_run == 1 and g.mode == "deterministic" and g.summary() == \
        "2/2, 1 judge checks not run"


def test_the_judge_through_a_stand_in_model(view, llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM (tests/llm/standin.py): the verdict and its rationale come from the
    model and are kept with the grade; the criterion, request, candidate and real reply reach it."""
    from standin import json_reply, last_user

    from llm import LLM

    def verdict(body):
        user = last_user(body)
        ok = "TSM_LONG_PATHS" in user.split("<response>")[1].split("</response>")[0]
        return json_reply({"passed": ok, "rationale": "Names the fix." if ok else "Says nothing useful."})

    llm_standin.responder = verdict
    llm = LLM(llm_standin.config(tmp_path))
    good = grade(_judge_rubric(), log(view, A.MailReply(message_id=REQ, body=ANSWER)), judge_context(view, llm))
    bad = grade(_judge_rubric(), log(view, A.MailReply(message_id=REQ, body="Thanks, will look.")),
                judge_context(view, llm))
    assert (good.score, good.points, good.max_points) == (1.0, 3.0, 3.0)
    assert good.mode == "judge:" + llm.describe() and good.checks[1]["explanation"] == "pass: Names the fix."
    assert bad.score == 0.0 and bad.checks[1]["explanation"] == "fail: Says nothing useful."
    sent = llm_standin.requests[0].body["messages"]
    assert "answers what the request asked" in sent[0]["content"] and ANSWER in sent[1]["content"]


def test_an_unusable_verdict_is_a_grader_error_and_a_silent_model_an_infrastructure_error(view, llm_standin,
                                                                                         tmp_path):
    """Uses a stand-in for a hosted LLM that answers malformed JSON, then keeps failing with 503."""
    from standin import error, reply

    from llm import LLM

    actions = log(view, A.MailReply(message_id=REQ, body=ANSWER))
    llm_standin.script(reply("PASS, looks fine"))
    g = grade(_judge_rubric(), actions, judge_context(view, LLM(llm_standin.config(tmp_path))))
    assert g.score is None and g.error_class == "grader_error" and "LLMOutputError" in g.message
    llm_standin.script(*[error(503)] * 3)
    g = grade(_judge_rubric(), actions, judge_context(view, LLM(llm_standin.config(tmp_path / "b", max_retries=2))))
    assert g.score is None and g.error_class == "infra"


def test_a_spent_budget_leaves_judge_checks_not_run(view, llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM; the run's token budget is spent by the first verdict."""
    from standin import json_reply

    from llm import LLM

    llm_standin.responder = lambda body: json_reply({"passed": True, "rationale": "Fine."}, prompt_tokens=500)
    llm = LLM(llm_standin.config(tmp_path, budget_tokens=100))
    actions = log(view, A.MailReply(message_id=REQ, body=ANSWER))
    first = grade(_judge_rubric(), actions, judge_context(view, llm))
    second = grade(_judge_rubric(), log(view, A.MailReply(message_id=REQ, body=ANSWER + " Thanks.")),
                   judge_context(view, llm))
    assert first.not_run == 0 and first.score == 1.0
    assert second.not_run == 1 and second.score == 1.0 and "budget" in second.checks[1]["explanation"]
    assert llm_standin.count == 1


def test_judge_agreement_runs_each_judge_check_three_times(view, llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM whose verdicts on the acknowledgement flip between attempts."""
    from standin import json_reply, last_user

    from llm import LLM

    answers = iter([True, False, True])

    def verdict(body):
        candidate = last_user(body).split("<response>")[1].split("</response>")[0]
        ok = "TSM_LONG_PATHS" in candidate or next(answers)
        return json_reply({"passed": ok, "rationale": "Because."})

    llm_standin.responder = verdict
    llm = LLM(llm_standin.config(tmp_path))
    runs = {"oracle": log(view, A.MailReply(message_id=REQ, body=ANSWER)),
            "probe:acknowledgement": log(view, A.MailReply(message_id=REQ, body="Thanks, will look."))}
    out = judge_agreement(_judge_rubric(), runs, view, llm)
    assert out["judge_answers"]["oracle"] == {"passes": 3, "runs": 3, "errors": 0, "majority": True,
                                              "agreement": 1.0}
    assert out["judge_answers"]["probe:acknowledgement"]["agreement"] == pytest.approx(0.6667)
    assert llm_standin.count == 6
    assert judge_agreement(_judge_rubric(), runs, view, llm) == out and llm_standin.count == 6   # cached


def test_model_judge_declares_only_anonymized_text(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: the judge adapter sends the texts as Anonymized, declared with a source."""
    from standin import json_reply

    from llm import LLM

    llm_standin.script(json_reply({"passed": True, "rationale": "Yes."}))
    run = model_judge(LLM(llm_standin.config(tmp_path)))
    assert run("answers what was asked", "why?", "because", "because") == (True, "Yes.")
    assert run.model.startswith("openai/standin")


def test_a_rate_limited_judge_is_retried_and_a_slow_one_is_an_infrastructure_error(view, llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that answers 429 once and then a verdict (retried: the verdict counts),
    and then one slower than the client's timeout on every attempt (no verdict: infrastructure, no score)."""
    from standin import error, json_reply

    from llm import LLM

    actions = log(view, A.MailReply(message_id=REQ, body=ANSWER))
    llm_standin.script(error(429), json_reply({"passed": True, "rationale": "It answers."}))
    g = grade(_judge_rubric(), actions, judge_context(view, LLM(llm_standin.config(tmp_path / "a"))))
    assert g.score == 1.0 and g.checks[1]["explanation"] == "pass: It answers." and llm_standin.count == 2
    slow = json_reply({"passed": True, "rationale": "late"}, delay=1.5)
    llm_standin.script(slow, slow)
    config = llm_standin.config(tmp_path / "b", timeout_s=0.5, max_retries=1)
    g = grade(_judge_rubric(), actions, judge_context(view, LLM(config)))
    assert g.score is None and g.error_class == "infra" and "judge_answers" in g.message


def test_facts_count_only_in_a_reply_in_the_requests_conversation(view):
    """The probes' findings (task_builders.probes): the real reply's facts sent to another thread, as a list
    of keywords, or among everything the world names, are not credited; quoted mail is not the reply's own."""
    fact = {"scope": MAIL, "fact": {"kind": "issue_key", "text": "TSM-88"}, "prose": True, "max_mentions": 10}
    chat = {"scope": CHAT, "fact": {"kind": "issue_key", "text": "TSM-88"}, "prose": True}
    assert one("states_fact", fact, log(view, A.MailReply(message_id=REQ, body=ANSWER))) == 1.0
    assert one("states_fact", chat, log(view, A.SlackPost(channel="ops", text=ANSWER,
                                                          thread_ts=CHAT["thread"]))) == 1.0
    # another thread of the channel answers someone else; the channel itself still reaches the asker
    assert one("states_fact", chat, log(view, A.SlackPost(channel="ops", text=ANSWER, thread_ts="1.000200"))) == 0.0
    assert one("states_fact", chat, log(view, A.SlackPost(channel="ops", text=ANSWER))) == 1.0
    # keywords without a sentence; every key at once; the fact only in quoted mail
    assert one("states_fact", fact, log(view, A.MailReply(message_id=REQ, body="TSM-88 E1203 TSM_LONG_PATHS"))) == 0.0
    everything = " ".join(f"TSM-{n}" for n in range(80, 100)) + " is what you want to look at"
    assert one("states_fact", fact, log(view, A.MailReply(message_id=REQ, body=everything))) == 0.0
    quoted = "I am not sure what to do about this.\n\n> see TSM-88"
    assert one("states_fact", fact, log(view, A.MailReply(message_id=REQ, body=quoted))) == 0.0
    # without `prose` (rubrics built before the probes) the old reading holds
    old = {"scope": MAIL, "fact": {"kind": "issue_key", "text": "TSM-88"}}
    assert one("states_fact", old, log(view, A.MailReply(message_id=REQ, body="TSM-88 E1203"))) == 1.0
