"""``TimeoutLLM``: no LLM call outlives the request deadline by more than a grace."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crag.deadline import Deadline, with_deadline
from crag.errors import LLMUnavailableError
from crag.protocols import LLM, Completion, CompletionOptions, Messages

if TYPE_CHECKING:  # Unpack of a TypedDict for **options (typing.Unpack from 3.11)
    from typing_extensions import Unpack

__all__ = ["GENERATION_GRACE", "TimeoutLLM"]

GENERATION_GRACE = 0.25  # share of the deadline an LLM call may run past it (to answer at all)


class TimeoutLLM:
    """Wrap an ``LLM`` so no call outlives the request deadline by more than a grace.

    Correction may use the whole deadline; the answer still needs one LLM call, so each
    call may end up to ``GENERATION_GRACE`` × the deadline after it. A model that has not
    answered by then (down, hung, trickling) raises ``LLMUnavailableError``: the request
    is refused with that one line instead of waiting for ``llm.timeout``.

    ### Usage example
    >>> from crag.testing.fakes import ScriptedLLM
    >>> llm = TimeoutLLM(ScriptedLLM(["Paris [1]."]), Deadline(5))
    >>> llm.complete([{"role": "user", "content": "Capital of France?"}]).text
    'Paris [1].'
    """

    def __init__(self, inner: LLM, deadline: Deadline) -> None:
        self.inner = inner
        self.deadline = deadline
        self.model_id = inner.model_id

    def complete(self, messages: Messages, **options: Unpack[CompletionOptions]) -> Completion:
        if self.deadline.seconds is None:
            return self.inner.complete(messages, **options)
        budget = self.deadline.remaining() + self.deadline.seconds * GENERATION_GRACE
        return with_deadline(
            lambda: self.inner.complete(messages, **options),
            budget,
            what=f"LLM {self.model_id} (past correction.deadline_seconds = {self.deadline.seconds:g})",
            error=LLMUnavailableError,
            backend_id=self.model_id,
            step="complete",
        )
