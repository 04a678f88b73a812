"""E-mail reply: a request in its thread -> the reply the person who really answered sent.

The agent is that person (pseudonym; the list they answered on), at the moment the request arrived; it reads
the thread and the company through the tools and answers with `company mail reply`. The rubric checks the
reply's thread and recipients (the requester or the list reached, the real reply's cc's kept, nobody from
outside the thread added), one grounded fact of the real reply per check, forbidden content and, with a model,
four judge checks (task_builders.families.communication).
"""

from __future__ import annotations

from environments import actions as A
from graders.baselines import nearest_mail_reply
from graders.rubric import CheckSpec
from task_builders.families import READ_TOOLS, BuildContext, register_family
from task_builders.families.communication import Communication, Exchange, Tools, roles, thread_addresses
from task_builders.signals import new_text
from warehouse.schemas import Rejection, WorkItem

MAX_BODY = 6000


@register_family("email_reply")
class EmailReply(Communication):
    """An e-mail that asked for something -> the reply that answered it (the real reply is the reference)."""

    kinds = ("email_reply",)
    tools = (*READ_TOOLS, "mail_reply", "mail_send")
    baselines = (nearest_mail_reply,)
    medium = "mail"

    def exchange(self, ctx: BuildContext, item: WorkItem, tools: Tools) -> Exchange | Rejection:
        request = ctx.events.get(item.request_event_id)
        reply = ctx.events.get(item.outcome_event_ids[0]) if item.outcome_event_ids else None
        if request is None or reply is None:
            return self.reject(ctx, item, "the request or its reply is not among the anonymized events")
        thread = tools.thread(request, "mail")
        before = [e for e in thread if (e.ts, e.event_id) < (request.ts, request.event_id)]
        later = [e for e in thread if (e.ts, e.event_id) > (reply.ts, reply.event_id)]
        persona = tools.persona(reply)
        asker = tools.email_of(request)
        to = [a for a in roles(reply, "to") if a != persona.email]
        cc = [a for a in roles(reply, "cc") if a != persona.email and a not in to]
        reply_text = tools.text(tools.without_signature(reply, new_text(reply)))
        if not reply_text.strip():
            return self.reject(ctx, item, "the real reply has no text of its own")
        scope = {"medium": "mail", "target": request.native_id, "thread": request.thread_key}
        reach = sorted({asker, *to})
        people = thread_addresses([*before, request, reply]) - {persona.email}
        structure = [
            CheckSpec(id="action_type", check="action_type", weight=1, criterion="answers with a mail reply",
                      args={"scope": scope, "tool": "mail_reply"}),
            CheckSpec(id="in_thread", check="responds_in_thread", weight=1,
                      criterion="replies in the request's thread", args={"scope": scope}),
            CheckSpec(id="reaches_requester", check="reaches_requester", weight=1,
                      criterion="the requester (or the list the request came through) receives the reply",
                      args={"scope": scope, "any_of": reach}),
        ]
        extra_cc = [a for a in cc if a not in reach]
        if extra_cc:
            structure.append(CheckSpec(id="keeps_cc", check="recipients_cover", weight=1,
                                       criterion="copies the people the real reply copied",
                                       args={"scope": scope, "expected": extra_cc}))
        structure.append(CheckSpec(id="no_outsiders", check="recipients_within", weight=1,
                                   criterion="adds nobody from outside the thread",
                                   args={"scope": scope, "allowed": sorted(people | set(to) | set(cc) | {asker})}))
        subject = request.title or "(no subject)"
        listed = request.attrs.get("list_id")
        head = (f"You are {persona.name} <{persona.email}>"
                + (f", answering on the mailing list {listed}" if listed else "") + ". "
                f"On {request.ts:%Y-%m-%d %H:%M} UTC {request.actor_name or asker} <{asker}> wrote the message "
                f"below (Message-ID {request.native_id}); it is in the mail archive with its thread.\n\n"
                f"From: {request.actor_name or ''} <{asker}>\n"
                f"To: {', '.join(roles(request, 'to')) or '-'}\n"
                + (f"Cc: {', '.join(roles(request, 'cc'))}\n" if roles(request, "cc") else "")
                + f"Date: {request.ts.isoformat()}\nSubject: {subject}\n\n"
                f"{tools.text(request.body or '').strip()[:MAX_BODY]}")
        first = (request.actor_name or "the requester").split()[0]
        tail = (f"Reply to it as {persona.name} would: in its thread, to the right people, saying what they "
                "need. The company's tools show the mail archive, the chat and the issue tracker as they were "
                f"when it arrived: `company mail read {request.native_id}` (the message and its thread), "
                "`company mail search WORDS`, `company jira search WORDS`, `company slack search WORDS`. If "
                f"something is unclear you may ask {first} a question by replying to them; their answer appears "
                f"in the thread (`company mail read {request.native_id}`).\n"
                f"Send your reply with: company mail reply {request.native_id} --body 'TEXT' [--to ADDRESS ...] "
                "[--cc ADDRESS ...] (by default it goes to the sender)")
        return Exchange(item=item, request=request, reply=reply, medium="mail", cutoff=request.ts, persona=persona,
                        requester={"name": request.actor_name or asker, "address": asker,
                                   "handle": (request.actor or "").split(":", 1)[-1]},
                        scope=scope, request_text=tools.text(f"{subject}\n\n{request.body or ''}"),
                        reply_text=reply_text,
                        reference=[A.MailReply(message_id=request.native_id, body=reply_text, to=to or None, cc=cc)],
                        structure=structure, thread=before, later=later, hidden_events=[reply.event_id],
                        people=people | {asker}, prompt_head=head, prompt_tail=tail,
                        meta={"request": request.native_id, "reply": reply.native_id,
                              "reply_found_by": item.attrs.get("reply_found_by", "headers"),
                              "list": listed})
