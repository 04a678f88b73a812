"""The LLM layer: one client (litellm underneath) and the uses built on it.

Nothing here imports litellm or dagster at import time; litellm is imported on the first real call.

    from llm import LLM, LLMConfig, declare_anonymized, fill
    llm = LLM(LLMConfig(model="openai/qwen2.5", api_base="http://127.0.0.1:8000/v1"))   # or LLM.from_env()
    llm.enabled                      # False when no model is configured (the default)
    verdict = judge(llm, "answers what was asked", request, candidate, guidance)

Modules: `anonymized` (the only text a model is sent), `config`, `client` (cache, retries, budget,
concurrency, structured output, receipts), `errors`, `judge`, `instruction`, `requester`.
"""

from llm.anonymized import Anonymized, declare_anonymized, fill, join
from llm.client import LLM, Message, Receipt, Reply, Usage
from llm.config import LLMConfig
from llm.errors import BudgetExceeded, LLMCallError, LLMError, LLMOutputError, LLMUnavailable
from llm.instruction import rewrite_instruction
from llm.judge import JudgeAgreement, JudgeVerdict, judge, repeat
from llm.requester import (
    MAX_REQUESTER_TURNS,
    NO_FURTHER_INFORMATION,
    RequesterAnswer,
    answer_as_requester,
    requester_reply,
    turns_left,
)

__all__ = [
    "LLM", "MAX_REQUESTER_TURNS", "NO_FURTHER_INFORMATION", "Anonymized", "BudgetExceeded", "JudgeAgreement",
    "JudgeVerdict", "LLMCallError", "LLMConfig", "LLMError", "LLMOutputError", "LLMUnavailable", "Message",
    "Receipt", "Reply", "RequesterAnswer", "Usage", "answer_as_requester", "declare_anonymized", "fill", "join",
    "judge", "repeat", "requester_reply", "rewrite_instruction", "turns_left",
]
