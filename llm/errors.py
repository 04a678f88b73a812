"""What the LLM layer raises. Every error is an `LLMError`; none of them is ever a pass or a fail.

- `LLMUnavailable`: no model is configured (the default). Callers use their no-model path: template
  instructions, judge checks recorded as not run, the requester's fixed "No further information.".
- `BudgetExceeded`: this run's token or cost budget is spent; raised before a call, so nothing is sent.
- `LLMCallError`: the provider did not answer (after the retries, or a 4xx other than 429 at once).
  An infrastructure failure, recorded apart from task results.
- `LLMOutputError`: the model answered, but not with what was asked (not JSON, or JSON that fails the
  pydantic schema). A grader counts it as a grader error.
"""

from __future__ import annotations


class LLMError(Exception):
    """Base of the LLM layer's errors."""


class LLMUnavailable(LLMError):
    """No model is configured."""


class BudgetExceeded(LLMError):
    """The run's LLM budget (tokens or USD) is spent; the call was not made."""


class LLMCallError(LLMError):
    """The provider call failed. `status` is the HTTP status when there was one; `retries` how many
    retries were made before giving up."""

    def __init__(self, message: str, *, status: int | None = None, retries: int = 0):
        super().__init__(message)
        self.status = status
        self.retries = retries


class LLMOutputError(LLMError):
    """The reply could not be parsed or validated. `raw` is the reply text (bounded), `receipt` what the
    call cost (the call happened and counts against the budget)."""

    def __init__(self, message: str, *, raw: str = "", receipt=None):
        super().__init__(message)
        self.raw = raw[:2000]
        self.receipt = receipt
