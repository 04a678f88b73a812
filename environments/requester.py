"""The simulated requester of a communication task: answers the agent's clarifying questions in character.

A communication task's world names its requester (`world["requester"]`, written by
task_builders.families.communication): who they are, where the agent's answer goes (a mail thread, a chat
thread, a ticket), what they wrote in that thread before and after the request, and the real reply (only as
the text an answer must not reveal). The episode gives the tool server a `SimulatedRequester`; when the agent
writes to the requester (a mail to their address, a post in the question's thread, a comment on the ticket)
and the write asks something (a question mark), the requester answers:

- with a model configured: `llm.requester.answer_as_requester`, grounded only in the requester's own messages,
  the answer replaced by "No further information." when it would reveal the real reply;
- without a model, or when the model fails (an error, the budget spent): "No further information.".

Invariants:
- At most `max_turns` questions are answered per episode (MAX_REQUESTER_TURNS); later ones get no answer.
- The requester's answers are not the agent's actions (the tool server keeps them out of the log).
- Turn i is asked with attempt number i, so a replayed episode that asks the same questions gets the same
  (cached) answers.
- Only `Anonymized` text reaches the model: the world's texts come from anonymized events and the agent's
  question was written in a world of anonymized text; both are declared so here.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from environments import actions as A
from environments.tools import Persona, Reply
from llm import NO_FURTHER_INFORMATION, LLMError, answer_as_requester, declare_anonymized, fill
from llm.requester import MAX_REQUESTER_TURNS

SOURCE_WORLD = "task world: the requester's messages, from anonymized_events"
SOURCE_AGENT = "agent question: written in a world of anonymized text"


class SimulatedRequester:
    """A `Requester` for ToolServer (see the module docstring)."""

    def __init__(self, spec: dict[str, Any], llm=None, max_turns: int | None = None):
        self.spec = spec
        self.llm = llm
        self.max_turns = MAX_REQUESTER_TURNS if max_turns is None else max_turns
        self.asked = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self.persona = Persona(name=spec.get("name") or "the requester",
                               email=spec.get("address") or "requester@company.invalid",
                               handle=spec.get("handle") or "requester")

    def addressed(self, entry: A.Logged) -> bool:
        """Is the write addressed to the requester, where they would see it?"""
        a, spec = entry.action, self.spec
        medium = spec.get("medium")
        if medium == "mail" and isinstance(a, (A.MailReply, A.MailSend)):
            m = entry.effect.get("message") or {}
            to = {str(x).lower() for x in [*(m.get("to") or []), *(m.get("cc") or [])]}
            return (spec.get("address") or "").lower() in to
        if medium == "chat" and isinstance(a, A.SlackPost) and a.channel == str(spec.get("target", "")).lstrip("#"):
            if spec.get("thread"):
                return a.thread_ts == spec["thread"]
            name = spec.get("name") or ""
            return bool(name) and re.search(rf"@?{re.escape(name.split()[0])}\b", a.text, re.I) is not None
        if medium == "ticket" and isinstance(a, A.JiraComment):
            return a.key.upper() == str(spec.get("target", "")).upper()
        return False

    def __call__(self, entry: A.Logged) -> Reply | None:
        text = getattr(entry.action, "body", None) or getattr(entry.action, "text", None) or ""
        if "?" not in text or not self.addressed(entry):
            return None
        with self._lock:
            if self.asked >= self.max_turns:
                return None
            turn = self.asked
            self.asked += 1
        return Reply(self.persona, self.answer(text, turn))

    def answer(self, question: str, turn: int = 0) -> str:
        if self.llm is None or not getattr(self.llm, "enabled", False):
            return str(NO_FURTHER_INFORMATION)
        name = declare_anonymized(self.spec.get("name") or "the requester", source=SOURCE_WORLD)
        persona = fill("$name, who made the request", name=name)
        messages = [declare_anonymized(m, source=SOURCE_WORLD) for m in self.spec.get("messages") or [] if m]
        forbidden = declare_anonymized(self.spec.get("forbidden") or "", source=SOURCE_WORLD)
        try:
            got = answer_as_requester(self.llm, persona, messages, declare_anonymized(question[:4000],
                                                                                      source=SOURCE_AGENT),
                                      forbidden, attempt=turn)
        except LLMError as e:
            self.errors.append(f"{type(e).__name__}: {e}"[:300])
            return str(NO_FURTHER_INFORMATION)
        return str(got.text)
