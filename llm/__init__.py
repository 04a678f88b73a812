"""The LLM layer: one client (litellm underneath) and the uses built on it.

Nothing here imports litellm or dagster at import time; litellm is imported on the first real call.

    from llm import LLM, LLMConfig, declare_anonymized, fill
    llm = LLM(LLMConfig(model="openai/qwen2.5", api_base="http://127.0.0.1:8000/v1"))   # or LLM.from_env()
    llm.enabled                      # False when no model is configured (the default)
    reply = llm.complete([("system", fill("You are terse.")), ("user", question)], schema=Answer)

Modules: `anonymized` (the only text a model is sent), `config`, `client` (cache, retries, budget,
concurrency, structured output, receipts), `errors`.
"""

from llm.anonymized import Anonymized, declare_anonymized, fill, join
from llm.client import LLM, Message, Receipt, Reply, Usage
from llm.config import LLMConfig
from llm.errors import BudgetExceeded, LLMCallError, LLMError, LLMOutputError, LLMUnavailable

__all__ = [
    "LLM", "Anonymized", "BudgetExceeded", "LLMCallError", "LLMConfig", "LLMError", "LLMOutputError",
    "LLMUnavailable", "Message", "Receipt", "Reply", "Usage", "declare_anonymized", "fill", "join",
]
