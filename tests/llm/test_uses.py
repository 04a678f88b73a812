"""The judge, the instruction rewrite and the simulated requester, against a stand-in for a hosted LLM
(tests/llm/standin.py): real HTTP through litellm to a local OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from standin import anon, json_reply, last_user, reply

from llm import (
    LLM,
    MAX_REQUESTER_TURNS,
    NO_FURTHER_INFORMATION,
    Anonymized,
    LLMConfig,
    LLMOutputError,
    LLMUnavailable,
    answer_as_requester,
    judge,
    repeat,
    requester_reply,
    rewrite_instruction,
    turns_left,
)
from llm.requester import reveals

REQUEST = anon("Could you tell me when the 4.2 release of the billing service goes out? We need it for the "
               "customer demo on Friday.")
REAL_REPLY = anon("Hi Dana, release 4.2.1 ships Thursday evening after the migration in BILL-118 is merged; "
                  "run deploy.sh --canary first.")


# --- judge ----------------------------------------------------------------------------------------------------

def test_judge_passes_and_fails_by_the_models_verdict(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that judges by the candidate it is sent: the verdict and its
    rationale come from the model, the criterion and the reference reach it."""
    def grade(body):
        user = last_user(body)
        candidate = user.split("<response>")[1].split("</response>")[0]
        ok = "thursday" in candidate.lower()
        return json_reply({"passed": ok, "rationale": "It gives the date.  " if ok else "It gives no date."})

    llm_standin.responder = grade
    client = LLM(llm_standin.config(tmp_path))
    good = judge(client, "answers what was asked", REQUEST, anon("It ships on Thursday."), REAL_REPLY)
    bad = judge(client, "answers what was asked", REQUEST, anon("Thanks for your message!"), REAL_REPLY)
    assert (good.passed, good.rationale) == (True, "It gives the date.")
    assert (bad.passed, bad.rationale) == (False, "It gives no date.")
    assert good.receipt.cached is False and good.receipt.key != bad.receipt.key
    body = llm_standin.requests[0].body
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "Criterion: answers what was asked" in system
    assert str(REQUEST) in user and "<reference>" in user and str(REAL_REPLY) in user
    assert body["response_format"]["json_schema"]["name"] == "VerdictReply"


def test_judge_without_guidance_sends_no_reference(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM."""
    llm_standin.script(json_reply({"passed": True, "rationale": "Fine."}))
    v = judge(LLM(llm_standin.config(tmp_path)), "is polite", REQUEST, anon("Sure, Thursday."))
    assert v.passed and "<reference>" not in llm_standin.requests[0].body["messages"][1]["content"]


@pytest.mark.parametrize("content", ['{"passed": "maybe", "rationale": "unsure"}', '{"passed": true}',
                                     '{"passed": true, "rationale": ""}', "PASS - looks good"])
def test_an_unusable_verdict_is_a_grader_error(llm_standin, tmp_path, content):
    """Uses a stand-in for a hosted LLM that answers a verdict of the wrong shape: LLMOutputError, never a
    pass or a fail."""
    llm_standin.script(reply(content))
    with pytest.raises(LLMOutputError):
        judge(LLM(llm_standin.config(tmp_path)), "answers what was asked", REQUEST, anon("Thursday."), REAL_REPLY)


def test_judge_takes_only_anonymized_text_and_says_when_no_model(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM only to show nothing is sent."""
    client = LLM(llm_standin.config(tmp_path))
    with pytest.raises(TypeError, match="got str"):
        judge(client, "answers what was asked", REQUEST, "raw candidate text", REAL_REPLY)
    with pytest.raises(TypeError, match="got str"):
        judge(client, "answers what was asked", REQUEST, anon("x"), "raw reference")
    with pytest.raises(ValueError, match="criterion"):
        judge(client, "", REQUEST, anon("x"))
    with pytest.raises(LLMUnavailable):
        judge(LLM(), "answers what was asked", REQUEST, anon("x"), REAL_REPLY)
    assert llm_standin.count == 0


def test_repeat_asks_n_times_and_reports_agreement(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that answers pass, fail, pass: three requests (distinct attempts),
    majority pass, agreement 2/3; a re-run is answered from the cache."""
    llm_standin.script(json_reply({"passed": True, "rationale": "Yes."}),
                       json_reply({"passed": False, "rationale": "No."}),
                       json_reply({"passed": True, "rationale": "Yes."}))
    client = LLM(llm_standin.config(tmp_path))

    def run(attempt):
        return judge(client, "answers what was asked", REQUEST, anon("Thursday."), REAL_REPLY, attempt=attempt)

    result = repeat(run, n=3)
    assert [v.passed for v in result.verdicts] == [True, False, True]
    assert result.majority is True and result.agreement == pytest.approx(2 / 3, abs=1e-3) and result.errors == []
    assert llm_standin.count == 3 and len({v.receipt.key for v in result.verdicts}) == 3
    bodies = [json.dumps(r.body, sort_keys=True) for r in llm_standin.requests]
    assert len(set(bodies)) == 1                     # the attempt number is not sent, only keyed
    again = repeat(run, n=3)
    assert [v.passed for v in again.verdicts] == [True, False, True] and llm_standin.count == 3
    assert all(v.receipt.cached for v in again.verdicts)


def test_repeat_keeps_unusable_outputs_apart(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that answers one verdict and one unparsable reply."""
    llm_standin.script(json_reply({"passed": False, "rationale": "No."}), reply("no idea"))
    client = LLM(llm_standin.config(tmp_path))
    result = repeat(lambda a: judge(client, "is polite", REQUEST, anon("x"), attempt=a), n=2)
    assert len(result.verdicts) == 1 and len(result.errors) == 1 and "not JSON" in result.errors[0]
    assert result.majority is False and result.agreement == 1.0


# --- the instruction rewrite ----------------------------------------------------------------------------------

def test_rewrite_instruction_returns_anonymized_text(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: the request and the hidden facts reach the model; its instruction
    comes back as Anonymized."""
    llm_standin.script(json_reply({"instruction": "  Find out when the 4.2 release of the billing service ships, "
                                                  "in time for Friday's customer demo.  "}))
    out = rewrite_instruction(LLM(llm_standin.config(tmp_path)), REQUEST, [anon("4.2.1"), anon("BILL-118")])
    assert isinstance(out, Anonymized)
    assert out == ("Find out when the 4.2 release of the billing service ships, in time for Friday's "
                   "customer demo.")
    user = llm_standin.requests[0].body["messages"][1]["content"]
    assert str(REQUEST) in user and "- 4.2.1\n- BILL-118" in user


def test_rewrite_instruction_errors(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM that answers without the instruction."""
    llm_standin.script(json_reply({"text": "..."}))
    with pytest.raises(LLMOutputError):
        rewrite_instruction(LLM(llm_standin.config(tmp_path)), REQUEST, [])
    with pytest.raises(TypeError, match="got str"):
        rewrite_instruction(LLM(llm_standin.config(tmp_path)), REQUEST, ["raw hidden fact"])
    with pytest.raises(LLMUnavailable):
        rewrite_instruction(LLM(), REQUEST, [anon("4.2.1")])
    assert llm_standin.count == 1


# --- the simulated requester ----------------------------------------------------------------------------------

PERSONA = anon("Dana Moss, account manager")
THREAD = [REQUEST, anon("Also: the demo is for the Northwind account, so only the invoicing screens matter.")]


def test_the_requester_answers_in_character_from_her_own_messages(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM: the persona and the requester's messages reach the model, the real
    reply does not; the answer comes back as Anonymized."""
    llm_standin.script(json_reply({"reply": "Only the invoicing screens matter for the Northwind demo."}))
    out = answer_as_requester(LLM(llm_standin.config(tmp_path)), PERSONA, THREAD,
                              anon("Which screens will you show?"), REAL_REPLY)
    assert out.text == "Only the invoicing screens matter for the Northwind demo."
    assert isinstance(out.text, Anonymized) and not out.guarded and out.receipt is not None
    body = json.dumps(llm_standin.requests[0].body)
    assert "Dana Moss, account manager" in body and "Northwind" in body and "Which screens" in body
    assert "BILL-118" not in body and "deploy.sh" not in body            # the real reply is never sent


@pytest.mark.parametrize("leak", [
    "I think release 4.2.1 will be out, ask them.",                                     # a version it never wrote
    "Ask about the migration in BILL-118.",                                             # an issue key
    "Sure: ships Thursday evening after the migration in the ticket is merged.",        # six words in a row
])
def test_an_answer_that_reveals_the_real_reply_becomes_no_further_information(llm_standin, tmp_path, leak):
    """Uses a stand-in for a hosted LLM whose answer overlaps the real reply."""
    llm_standin.script(json_reply({"reply": leak}))
    out = answer_as_requester(LLM(llm_standin.config(tmp_path)), PERSONA, THREAD, anon("When?"), REAL_REPLY)
    assert out.guarded and out.text == "No further information." and isinstance(out.text, Anonymized)


def test_the_requester_may_repeat_her_own_words():
    """No model: the guard alone. Words and facts the requester wrote are hers to repeat."""
    forbidden = "Yes, the 4.2 release of the billing service goes out on Thursday with 4.2.1 fixes."
    mine = [str(REQUEST)]
    assert not reveals("As I said, the 4.2 release of the billing service goes out soon.", forbidden, allowed=mine)
    assert reveals("It goes out with 4.2.1 fixes.", forbidden, allowed=mine)
    assert not reveals("No idea.", forbidden, allowed=mine)


def test_without_a_model_the_requester_has_no_further_information(llm_standin):
    """Uses a stand-in for a hosted LLM only to show nothing is sent."""
    out = requester_reply(LLM(LLMConfig()), PERSONA, THREAD, anon("When?"), REAL_REPLY)
    assert out == NO_FURTHER_INFORMATION == "No further information." and isinstance(out, Anonymized)
    with pytest.raises(TypeError, match="got str"):
        requester_reply(LLM(), "Dana", THREAD, anon("When?"), REAL_REPLY)
    assert llm_standin.count == 0


def test_turns_are_bounded():
    assert MAX_REQUESTER_TURNS == 3
    assert [turns_left(n) for n in range(5)] == [3, 2, 1, 0, 0]
    assert turns_left(1, max_turns=1) == 0
