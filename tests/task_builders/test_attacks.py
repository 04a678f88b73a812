"""The attacks of issue 18, built here as a policy under RL pressure would build them (not from the probes the
pipeline stores), on every task the sample company yields, graded in process by the task's own rubric:

- a reply naming the nine commonest values of a fact kind the tools show (people, files, versions, keys, URLs,
  SHAs), with the right or a wrong resolution (communication families): < 0.5;
- the same commonest values on every ticket, the component taken from the module the prompt names (triage):
  mean < 0.5 and none >= 0.75;
- `git log --all --grep=<word of the title>` in the task's repository at its cutoff (commit_link): a task it
  solves is measured easy by the baseline that runs it, so the default configuration leaves it out;
- fair references: a fact is supported by what people wrote (not a join notice), a resolution note is about the
  resolution (no redacted personal data), a triage field the issue names is not graded.
Each failed on the main branch before this change (scores of 1.0 on the sample)."""

from __future__ import annotations

import re
import statistics
from collections import Counter

import pytest

from core.config import DatasetConfig
from environments import actions as A
from environments.tools import Persona, ToolServer
from environments.world import World
from graders import facts as F
from graders.rubric import Context, grade
from taskmine import flow
from warehouse.store import Store

FAMILIES = ("ticket_triage", "commit_link", "email_reply", "chat_answer", "resolution_note")
COMM = ("email_reply", "chat_answer", "resolution_note")
KINDS = ("person", "file", "version", "issue_key", "url", "commit")


@pytest.fixture(scope="module")
def built(sample_company, tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("attacks") / "home")
    config = DatasetConfig(ner_model="", families=FAMILIES)
    ctx = flow.context(store, "acme", sample_company / "acme", config=config)
    flow.prepare(ctx)
    flow.run(ctx, "work_items", "clusters")
    flow.run(flow.context(store, "acme"), "world")
    flow.run(flow.context(store, "acme", config=config), "tasks")
    return store, store.read("tasks", "acme"), World(store.worlds("acme") / "world.sqlite")


def score(world, task, calls) -> float:
    view = world.at(task.cutoff, task.world["hidden"])
    persona = Persona(**task.world["persona"]) if task.world.get("persona") else None
    server = ToolServer(view, persona=persona)
    for c in calls:
        server.call(c.name(), c.arguments())
    return grade(task.rubric, server.actions, Context(view=view)).score


def reference(task) -> list[A.Tool]:
    return [A.CALL.validate_python(a) for a in task.reference["actions"]]


def replying(calls, text: str) -> list[A.Tool]:
    out = []
    for c in calls:
        if isinstance(c, (A.MailReply, A.JiraComment)):
            out.append(c.model_copy(update={"body": text}))
        elif isinstance(c, A.SlackPost):
            out.append(c.model_copy(update={"text": text}))
        else:
            out.append(c)
    return out


def commonest(world, task, n: int = 9) -> dict[str, list[str]]:
    """What the tools show most at the task's cutoff: the authors of the most documents, and per fact kind the
    values the most documents name (counted here from the world's documents, as an attacker would)."""
    hidden = set(task.world["hidden"])
    rows = [r for r in world.rows("SELECT * FROM docs WHERE ts <= ? ORDER BY ts, id", (task.cutoff.timestamp(),))
            if r["event_id"] not in hidden]
    counts: dict[str, Counter] = {}
    for r in rows:
        if r["author"]:
            counts.setdefault("person", Counter())[r["author"]] += 1
        for kind, text in {(f.kind, f.text) for f in F.extract(f"{r['title'] or ''}\n{r['body'] or ''}", limit=10**6)}:
            counts.setdefault(kind, Counter())[text] += 1
    return {k: [v for v, _ in c.most_common(n)] for k, c in counts.items()}


def test_a_reply_listing_the_commonest_values_of_a_kind_scores_under_half(built):
    _, tasks, world = built
    comm = [t for t in tasks if t.family in COMM]
    assert {t.family for t in comm} >= {"email_reply", "chat_answer"}, "the sample yields communication tasks"
    tried = 0
    for t in comm:
        top = commonest(world, t)
        graded = {c["args"]["fact"]["kind"] for c in t.rubric["checks"] if c["check"] == "states_fact"}
        for kind in sorted(graded | set(KINDS)):
            if not top.get(kind):
                continue
            text = "It should be one of these: " + ", ".join(top[kind]) + ". Hope that helps!"
            s = score(world, t, replying(reference(t), text))
            tried += 1
            assert s < 0.5, (t.family, t.task_id[:8], kind, s)
            if t.family == "resolution_note":   # ... and with a wrong resolution: gated to nothing
                wrong = [c.model_copy(update={"resolution": "Won't Fix" if c.resolution != "Won't Fix" else "Fixed"})
                         if isinstance(c, A.JiraUpdate) and c.resolution else c for c in replying(reference(t), text)]
                assert score(world, t, wrong) == 0.0
    assert tried >= 10



HIDE = {   # a value written so the extractor misses it and the matcher (graders.facts.mentions) still finds it
    "dash": lambda v, kind: "  ".join(v.split()) if kind == "person" else "see-" + v,
    "break": lambda v, kind: "\n".join(v.split()) if kind == "person" else "x:" + v,
    "nbsp": lambda v, kind: "\u00a0".join(v.split()) if kind == "person" else "https://docs.example.org/" + v + "/",
}


@pytest.mark.parametrize("how", sorted(HIDE))
def test_a_disguised_list_of_the_commonest_values_scores_under_half(built, how):
    """The listing attack with every value written where the extractor sees none (after a dash or a colon, in a
    link, a name's words spaced apart): the precision check counted nothing, so the fact it held was credited
    (1.0 on the sample's e-mail and chat tasks on main)."""
    _, tasks, world = built
    tried, best = 0, 0.0
    for t in [t for t in tasks if t.family in COMM]:
        top = commonest(world, t)
        graded = {c["args"]["fact"]["kind"] for c in t.rubric["checks"] if c["check"] == "states_fact"}
        every = []
        for kind in sorted(graded | set(KINDS)):
            if not top.get(kind):
                continue
            values = [HIDE[how](v, kind) for v in top[kind]]
            every += values
            s = score(world, t, replying(reference(t), "It should be one of these: " + ", ".join(values) + ". Hope "
                                         "that helps!"))
            tried, best = tried + 1, max(best, s)
            assert s < 0.5, (how, t.family, t.task_id[:8], kind, s)
        s = score(world, t, replying(reference(t), "Maybe one of " + ", ".join(every) + ". Hope that helps!"))
        assert s < 0.5, (how, t.family, t.task_id[:8], "all", s)
    assert tried >= 10

def history(store) -> dict[str, Counter]:
    """How often the company's tracker used each value of a field (issues as filed and their changelogs)."""
    out = {f: Counter() for f in ("type", "priority", "assignee")}
    for e in store.iter("anonymized_events", "acme"):
        a = e.attrs or {}
        if e.kind == "issue_created":
            for f, attr in (("type", "issuetype"), ("priority", "priority"), ("assignee", "assignee")):
                v = a.get(attr)
                v = v.get("display_name") or v.get("name") if isinstance(v, dict) else v
                if v:
                    out[f][v] += 1
        elif e.kind == "field_changed":
            f = {"issuetype": "type", "priority": "priority", "assignee": "assignee"}.get(str(a.get("field")).lower())
            for v in (a.get("fromString"), a.get("toString")):
                if f and v:
                    out[f][v] += 1
    return out


def test_the_same_values_on_every_ticket_earn_under_half(built):
    store, tasks, world = built
    triage = [t for t in tasks if t.family == "ticket_triage"]
    assert len(triage) >= 3
    refs = [reference(t)[0] for t in triage]
    seen = history(store)
    # the commonest value of each field over the tasks; tied values go by how often the tracker used them (what a
    # policy that read the company's history prefers: the only order that is neither the tasks' nor a pseudonym's)
    common = {}
    for f in ("type", "priority", "assignee"):
        c = Counter(getattr(r, f) for r in refs if getattr(r, f))
        if c:
            n = max(c.values())
            common[f] = max((v for v in c if c[v] == n), key=lambda v: seen[f][v])
    components = [c for c, _ in Counter(c for r in refs for c in r.components or []).most_common()]
    scores = []
    for t, r in zip(triage, refs, strict=True):
        named = next((c for c in components if re.search(rf"\b{re.escape(c)}\b", t.prompt, re.I)), None)
        fields = {f: v for f, v in common.items()}
        fields["components"] = [named or components[0]] if components else None
        scores.append(score(world, t, [A.JiraUpdate(key=r.key, **{k: v for k, v in fields.items() if v})]))
    assert statistics.mean(scores) < 0.5 and max(scores) < 0.75, scores


def test_a_title_word_grep_that_finds_the_fix_makes_the_task_easy(built):
    from environments.gitworld import git
    from environments.sandbox import LocalSandbox
    from graders import difficulty, replay
    from graders.baselines import repo_paths

    store, tasks, _ = built
    links = [t for t in tasks if t.family == "commit_link"]
    assert links
    paths = repo_paths(store.worlds("acme"))
    for t in links:
        slug = t.world["git"]["repos"][0]
        tips = sorted(set(t.world["git"]["refs"][slug].values()))
        title = re.match(r"Issue \S+: (.*)", t.prompt).group(1)
        fixes = t.rubric["checks"][0]["args"]["expected"]
        found = False
        for word in re.findall(r"[A-Za-z_]\w{3,}", title):     # what an agent greps first: a title word
            hits = git(paths[slug], "log", "--format=%H", "-i", "-F", f"--grep={word}", *tips).split()
            found |= bool(hits) and hits[0] in fixes
        runs = {v.run_kind: v for v in replay.baseline_runs(t, store.worlds("acme"), LocalSandbox())}
        if found:   # such a task is a lookup: measured easy, so the default configuration leaves it out
            assert runs["baseline:title_grep"].score is not None
            assert difficulty.of(t, list(runs.values())).easy, (t.task_id[:8], {k: v.score for k, v in runs.items()})


def test_references_are_fair(built):
    store, tasks, world = built
    events = {e.event_id: e for e in store.iter("anonymized_events", "acme")}
    for t in tasks:
        if t.family in COMM:
            for c in t.rubric["checks"]:
                if c["check"] != "states_fact" or c["args"]["fact"]["kind"] != "person":
                    continue
                f = c["args"]["fact"]
                names = [s for s in (f["text"], *f.get("variants", ())) if not s.startswith(("@", "[~"))]
                said = [e for e in events.values() if e.ts <= t.cutoff and not e.automated
                        and (e.actor_name in names or any(n in (e.body or "") for n in names))]
                assert said, f"{t.task_id[:8]}: {f['text']} is known at the cutoff only from notices"
        if t.family == "resolution_note":
            note = next(a["body"] for a in t.reference["actions"] if a["tool"] == "jira_comment")
            assert not [p for p in F.PLACEHOLDER.findall(note) if not p.startswith("[SECRET")], note
            assert not re.search(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", note), note
        if t.family == "ticket_triage":
            issue = events[next(i for i in t.lineage if events.get(i) and events[i].kind == "issue_created")]
            said = f"{issue.title}\n{issue.body}\n{issue.actor_name}"
            ref = reference(t)[0]
            for c in t.rubric["checks"]:
                value = getattr(ref, c["id"])
                values = value if isinstance(value, list) else [value]
                assert not all(re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", said, re.I) for v in values), \
                    (t.task_id[:8], c["id"], value)
