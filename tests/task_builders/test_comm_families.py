"""The communication families (email_reply, chat_answer, resolution_note) on the sample company: tasks of all
three, each hiding its real reply, grading its facts, passing its own reference and failing doing nothing and
every probe; without a model the reason a candidate is dropped; with a stand-in for a hosted LLM the rewritten
instruction, judge-only tasks and the judges' agreement."""

from __future__ import annotations

import re
import shutil

import pytest

from core.config import DatasetConfig
from environments import actions as A
from environments.tools import Persona, ToolServer
from environments.world import World
from graders import facts as F
from graders.rubric import Context, grade
from taskmine import flow
from warehouse.store import Store

FAMILIES = ("email_reply", "chat_answer", "resolution_note")


@pytest.fixture(scope="module")
def sample(sample_company, tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("comm") / "home")
    config = DatasetConfig(ner_model="", families=FAMILIES)
    ctx = flow.context(store, "acme", sample_company / "acme", config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items")
    flow.run(flow.context(store, "acme"), "world")
    flow.run(flow.context(store, "acme", config=config), "tasks")
    return store


def run(task, world, calls):
    view = world.at(task.cutoff, task.world["hidden"])
    server = ToolServer(view, persona=Persona(**task.world["persona"]))
    for c in calls:
        call = A.CALL.validate_python(c)
        assert not server.call(call.name(), call.arguments()).error
    return grade(task.rubric, server.actions, Context(view=view))


def test_the_sample_company_has_tasks_of_all_three_families(sample):
    tasks = sample.read("tasks", "acme")
    assert {t.family for t in tasks} == set(FAMILIES)


def test_each_task_hides_its_real_reply_and_grades_grounded_facts(sample):
    world = World(sample.worlds("acme") / "world.sqlite")
    events = {e.native_id: e for e in sample.read("anonymized_events", "acme")}
    for t in sample.read("tasks", "acme"):
        view = world.at(t.cutoff, t.world["hidden"])
        reply = t.world["requester"]["forbidden"]
        words = re.findall(r"\w+", reply.casefold())
        for i in range(0, max(1, len(words) - 7), 3):
            assert not view.phrase_hits(words[i:i + 8]), t.task_id            # no run of the reply is reachable
        facts = [c["args"]["fact"] for c in t.rubric["checks"] if c["check"] == "states_fact"]
        assert facts and facts == t.reference["facts"]
        for f in facts:
            assert F.mentions(reply, f) and not F.mentions(t.prompt, f)
            fact = F.Fact(f["kind"], f["text"], tuple(f["variants"]))
            assert F.supported(view, fact) or t.world["git"], f               # in a document or the repository
        assert t.reference["graded_by"] == "deterministic"
        assert t.reference["instruction"] == "template (no model configured)"
        if t.family == "email_reply":        # the persona is the person who really replied
            assert t.world["persona"]["name"] == events[t.reference["reply"]].actor_name


def test_each_reference_passes_and_nothing_and_every_probe_fail(sample):
    world = World(sample.worlds("acme") / "world.sqlite")
    for t in sample.read("tasks", "acme"):
        oracle = run(t, world, t.reference["actions"])
        assert oracle.score == 1.0 and oracle.points == oracle.max_points
        assert run(t, world, []).score == 0.0
        probes = {p["name"]: run(t, world, p["actions"]).score for p in t.reference["probes"]}
        assert {"acknowledgement", "request_quoted"} <= set(probes) and max(probes.values()) < 0.5, probes


def test_the_rubric_weighs_content_over_form(sample):
    for t in sample.read("tasks", "acme"):
        checks = t.rubric["checks"]
        form = sum(c["weight"] for c in checks if c["check"] != "states_fact")
        content = sum(c["weight"] for c in checks if c["check"] == "states_fact")
        assert content >= 2 * form and len(checks) >= 5
        assert {"no_placeholders", "no_private_data"} <= {c["id"] for c in checks}


def test_the_requester_is_part_of_the_world(sample):
    for t in sample.read("tasks", "acme"):
        r = t.world["requester"]
        assert r["medium"] in ("mail", "chat", "ticket") and r["messages"] and r["forbidden"]
        assert r["forbidden"] not in "\n".join(r["messages"])


def test_dropped_candidates_say_why(sample):
    reasons = {r.reason for r in sample.read("rejections", "acme") if r.family in FAMILIES}
    assert "too few gradable facts and no model for judge checks" in reasons


def _verdicts(body):
    """The stand-in's answers: an instruction (generic), or a judge's verdict that passes only the real reply."""
    import json

    from standin import json_reply, last_user

    name = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    system = body["messages"][0]["content"]
    if name == "InstructionReply" or "task instruction" in system:
        return json_reply({"instruction": "Answer the question below for the person who asked it."})
    user = last_user(body)
    candidate = user.split("<response>")[1].split("</response>")[0].strip()
    reference = user.split("<reference>")[1].split("</reference>")[0].strip()
    return json_reply({"passed": candidate == reference, "rationale": json.dumps(candidate == reference)})


@pytest.fixture(scope="module")
def with_model(sample, tmp_path_factory):
    """The same company built with a stand-in for a hosted LLM (tests/llm/standin.py)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
    from standin import StandIn

    from llm import LLM

    # A copy of the module's store with, per family, one item that became a task without a model and one
    # dropped for too few gradable facts (a model's judge makes it a judge-only task): every judged task costs
    # hundreds of model calls (judge agreement: 3 attempts of 4 criteria on the oracle and every probe), and
    # the other items add nothing these tests read.
    home = tmp_path_factory.mktemp("comm-model") / "home"
    shutil.copytree(sample.home, home)
    store = Store(home)
    built = {t.item_id: t.family for t in store.read("tasks", "acme")}
    few = {r.subject_id: r.family for r in store.read("rejections", "acme")   # a draft's rejection names its item
           if r.reason.startswith("too few gradable facts")}
    keep = set()
    for family in FAMILIES:
        keep |= set(sorted(k for k, f in built.items() if f == family)[:1])
        keep |= set(sorted(k for k, f in few.items() if f == family)[:1])
    store.replace("work_items", "acme", [i for i in store.read("work_items", "acme") if i.item_id in keep])
    server = StandIn()
    server.responder = _verdicts
    llm = LLM(server.config(tmp_path_factory.mktemp("llm")))
    config = DatasetConfig(ner_model="", families=FAMILIES)
    result = flow.run(flow.context(store, "acme", config=config, llm=llm), "tasks")
    yield store.read("tasks", "acme"), result, server
    server.close()


def test_with_a_model_instructions_are_rewritten_and_judge_checks_join(with_model):
    """Uses a stand-in for a hosted LLM: the instruction is the model's (the hidden-facts checks passed), the
    judge checks are in every rubric, and items without gradable facts become judge-only tasks."""
    tasks, _, server = with_model
    assert {t.family for t in tasks} == set(FAMILIES)
    for t in tasks:
        assert "Answer the question below for the person who asked it." in t.prompt
        assert t.reference["instruction"].startswith("rewritten by openai/standin")
        judges = [c for c in t.rubric["checks"] if c["kind"] == "judge"]
        assert [c["args"]["question"] for c in judges] == ["answers", "consistent", "commits", "audience"]
        assert t.reference["graded_by"].startswith("judge:openai/standin")
        agreement = t.reference["judge_agreement"]
        assert agreement["judge_answers"]["oracle"]["agreement"] == 1.0
        assert agreement["judge_answers"]["oracle"]["majority"] is True
        assert agreement["judge_answers"]["probe:acknowledgement"]["majority"] is False
    assert any(t.reference["grading"] == "judge" for t in tasks)          # judge-only: no gradable fact
    assert server.count > 0


def test_judge_only_rubrics_still_fail_a_polite_acknowledgement(with_model):
    tasks, _, _ = with_model
    judge_only = [t for t in tasks if t.reference["grading"] == "judge"]
    for t in judge_only:
        weights = {c["id"]: c["weight"] for c in t.rubric["checks"]}
        form = sum(w for i, w in weights.items() if not i.startswith("judge_"))
        assert weights["judge_answers"] == 2 * form


def test_a_rewrite_that_gives_the_answer_away_falls_back_to_the_template(llm_standin, tmp_path):
    """Uses a stand-in for a hosted LLM whose instruction names a fact of the real reply, then one that repeats
    a run of its words, then one that fails: each time the template instruction is used, and says why."""
    from types import SimpleNamespace

    from standin import error, json_reply

    from llm import LLM
    from task_builders.families.email_reply import EmailReply

    ex = SimpleNamespace(prompt_head="You are Pat.\n\nFrom: Dana", prompt_tail="Reply with company mail reply X.",
                         request_text="Why does tsm build fail with E1203?",
                         reply_text="E1203 is the long-path limit of the old runners; set TSM_LONG_PATHS=1 on them.")
    stated = F.extract(ex.reply_text)
    llm_standin.script(json_reply({"instruction": "Tell Dana to set TSM_LONG_PATHS=1."}),
                       json_reply({"instruction": "Explain that it is the long-path limit of the old runners."}),
                       error(500),
                       json_reply({"instruction": "Answer Dana's question about the build failure."}))
    family = EmailReply()
    for n, why in enumerate(("gave away part of the answer", "gave away part of the answer", "the rewrite failed")):
        ctx = SimpleNamespace(llm=LLM(llm_standin.config(tmp_path / str(n), max_retries=0)))   # no cache hit
        prompt, how = family.prompt(ctx, ex, stated)
        assert prompt == f"{ex.prompt_head}\n\n{ex.prompt_tail}" and why in how
    ctx = SimpleNamespace(llm=LLM(llm_standin.config(tmp_path / "ok")))
    prompt, how = family.prompt(ctx, ex, stated)
    assert prompt == ("You are Pat.\n\nAnswer Dana's question about the build failure.\n\n"
                      "Reply with company mail reply X.")
    assert how.startswith("rewritten by openai/standin")


def test_a_reply_loses_the_closing_lines_its_author_ends_other_mails_with():
    """Real list mail signs without the `-- ` separator (name, blog and social links) and carries the list's
    footer: on the Apache archive such a signature became url facts and made a reply 'reachable' through the
    author's earlier mail. The lines the author's other mails end with too are dropped; the answer stays."""
    import datetime as dt

    from task_builders.families import BuildContext
    from task_builders.families.communication import Tools
    from warehouse.ids import event_id
    from warehouse.schemas import Event

    sig = "Ann Example\n@annexample <https://blog.example/ann> | Github <https://github.com/annexample>"
    footer = "----\nTo unsubscribe, e-mail: list-unsubscribe@redacted.example"

    def mail(n, who, text):
        return Event(event_id=event_id("d", "email", n), dataset="d", source="email", kind="email", native_id=n,
                     thread_key=n, ts=dt.datetime(2017, 11, n.count("x") + 1, tzinfo=dt.UTC), actor=f"email:{who}",
                     actor_name=who, body=text, attrs={"new_text": text})

    earlier = mail("x", "oi", f"Shade does that already.\n\n{sig}\n\n{footer}")
    reply = mail("xx", "oi", f"Use resolvedArtifacts, not the dependencies.\nIt is set after resolution.\n\n{sig}"
                             f"\n\n2017-11-09 9:30 GMT+01:00 Bob Sample <bob@corp.example>:\n\n{footer}")
    other = mail("xxx", "kai", f"Thanks, that works.\n\n{footer}")
    alone = mail("xxxx", "ann", f"Try -X.\n\n{sig}")          # someone else's mail ending like oi's
    more = [mail("x" * (6 + i), who, f"Agreed.\n\n{footer}") for i, who in enumerate(("bo", "cy"))]
    tools = Tools(BuildContext("d", {e.event_id: e for e in (earlier, reply, other, alone, *more)}, [], None,
                               DatasetConfig(ner_model="")))
    assert tools.without_signature(reply, reply.body) == ("Use resolvedArtifacts, not the dependencies.\n"
                                                          "It is set after resolution.")
    assert tools.without_signature(other, other.body) == "Thanks, that works."      # the footer of 3 others
    assert tools.without_signature(alone, alone.body) == alone.body                # ann never signed so before
    only = mail("xxxxx", "oi", f"{sig}")                   # nothing but the closing lines: kept for the checks
    assert tools.without_signature(only, only.body) == only.body
