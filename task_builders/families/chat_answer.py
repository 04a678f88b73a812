"""Chat answer: a question in a Slack channel -> the answer the person who really answered posted.

The agent is that person at the moment of the question; it reads the channel and the company through the
tools and answers in the question's thread (`company slack post CHANNEL --thread-ts TS`), or in the channel
when the real answer was posted there. Rubric: task_builders.families.communication.
"""

from __future__ import annotations

from environments import actions as A
from graders.baselines import nearest_chat_reply
from graders.rubric import CheckSpec
from task_builders.families import READ_TOOLS, BuildContext, register_family
from task_builders.families.communication import Communication, Exchange, Tools, thread_addresses
from task_builders.signals import new_text
from warehouse.schemas import Rejection, WorkItem


@register_family("chat_answer")
class ChatAnswer(Communication):
    """A chat question -> the answer someone else gave (the real answer is the reference)."""

    kinds = ("chat_answer",)
    tools = (*READ_TOOLS, "slack_post")
    baselines = (nearest_chat_reply,)
    medium = "chat"

    def exchange(self, ctx: BuildContext, item: WorkItem, tools: Tools) -> Exchange | Rejection:
        q = ctx.events.get(item.request_event_id)
        a = ctx.events.get(item.outcome_event_ids[0]) if item.outcome_event_ids else None
        if q is None or a is None:
            return self.reject(ctx, item, "the question or its answer is not among the anonymized events")
        channel = str(q.attrs.get("channel_name") or q.attrs.get("channel_id") or "")
        ts = str(q.attrs.get("ts") or "")
        if not channel or not ts:
            return self.reject(ctx, item, "the question has no channel or timestamp")
        answer = tools.text(new_text(a))
        if not answer.strip():
            return self.reject(ctx, item, "the real reply has no text of its own")
        in_thread = bool(item.attrs.get("in_thread", True))
        context = [ctx.events[i] for i in item.context_event_ids if i in ctx.events]
        replies = tools.thread(q, "chat")
        later = [e for e in replies if (e.ts, e.event_id) > (a.ts, a.event_id)]
        persona = tools.persona(a)
        asker = q.actor_name or (q.actor or "").split(":", 1)[-1]
        handle = (q.actor or "").split(":", 1)[-1]
        scope = {"medium": "chat", "target": channel, "thread": ts if in_thread else None}
        structure = [CheckSpec(id="action_type", check="action_type", weight=1,
                               criterion=f"answers with a post in #{channel}",
                               args={"scope": scope, "tool": "slack_post"})]
        if in_thread:
            structure.append(CheckSpec(id="in_thread", check="responds_in_thread", weight=1,
                                       criterion="answers in the question's thread", args={"scope": scope}))
        else:
            structure.append(CheckSpec(id="reaches_requester", check="reaches_requester", weight=1,
                                       criterion="answers in the channel where the asker sees it",
                                       args={"scope": scope, "any_of": [x for x in (asker, handle) if x]}))
        where = f"in the thread of that message (--thread-ts {ts})" if in_thread else "in the channel"
        head = (f"You are {persona.name} (@{persona.handle}) in the company chat. On {q.ts:%Y-%m-%d %H:%M} UTC "
                f"{asker} asked in #{channel} (message ts={ts}):\n\n{tools.text(q.body or '').strip()[:4000]}")
        tail = (f"Answer as {persona.name} would, {where}. The company's tools show the chat, the mail archive and "
                f"the issue tracker as they were when it was asked: `company slack history {channel}`, "
                f"`company slack history {channel} --thread-ts {ts}`, `company slack search WORDS`, "
                "`company jira search WORDS`, `company mail search WORDS`. If something is unclear you may ask "
                f"{asker.split()[0] if asker else 'the asker'} in the thread; their answer appears there.\n"
                f"Post your answer with: company slack post {channel} "
                + (f"--thread-ts {ts} " if in_thread else "") + "--text 'TEXT'")
        people = thread_addresses([*context, q, a])
        return Exchange(item=item, request=q, reply=a, medium="chat", cutoff=q.ts, persona=persona,
                        requester={"name": asker, "address": tools.email_of(q), "handle": handle},
                        scope=scope, request_text=tools.text(q.body or ""), reply_text=answer,
                        reference=[A.SlackPost(channel=channel, text=answer, thread_ts=ts if in_thread else None)],
                        structure=structure, thread=context, later=later, hidden_events=[a.event_id],
                        people=people, prompt_head=head, prompt_tail=tail,
                        meta={"channel": channel, "question_ts": ts, "in_thread": in_thread})
