"""``GuardedLLM``: the one funnel for a request's LLM calls (deadline, token budget, usage).

Every LLM call of a request — grading with an LLM judge, the Correct-path check, query
rewriting and decomposition, compression, generation — goes through one ``GuardedLLM``
built for that request (``crag.pipeline.guard``). It implements each method of the LLM
protocols explicitly, so none can slip past it:

* **deadline** — no call outlives the request deadline by more than ``GENERATION_GRACE``
  × the deadline (correction may use the whole deadline; the answer still needs one
  call). A model that has not answered by then raises ``LLMUnavailableError``. A stream is
  timed in the thread that reads it, between two of its pieces (no thread per stream
  watches the clock), and closed there, which frees the model;
* **budget** — a call whose prompt the token budget cannot cover is refused
  (``LLMBudgetExceeded``) before it is made; what it spent is charged afterwards, even
  past the limit (those tokens are spent);
* **usage** — the tokens and calls of the request, for ``Answer.usage``;
* **heartbeat** — in a run someone watches live, the watcher's heartbeat (which raises
  ``RequestCancelled`` once the reader has left) is called before every call and between
  two pieces of every reply: a free-form ``complete`` of a model that streams is read as a
  stream (the same reply), so a condensed follow-up or a rewrite stops as the answer does.

A capability the guarded model lacks (P(yes) from an LLM that only writes text) raises
``LLMError``; ask :func:`crag.protocols.offers` first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from crag.budget import Budget
from crag.deadline import Deadline, call_ends_at, with_deadline
from crag.errors import LLMError, LLMUnavailableError
from crag.protocols import (
    LLM,
    Completion,
    Messages,
    ScoringLLM,
    SessionLLM,
    StreamingLLM,
    TokenStream,
    YesNoLLM,
    read_out,
    stream_completion,
)
from crag.text import approx_tokens
from crag.types import Usage

__all__ = ["GENERATION_GRACE", "GuardedLLM"]

GENERATION_GRACE = 0.25  # share of the deadline an LLM call may run past it (to answer at all)
T = TypeVar("T")


class GuardedLLM:
    """An LLM bound to one request's deadline and token budget, counting what it spends.

    ### Usage example
    >>> from crag.testing.fakes import ScriptedLLM
    >>> budget = Budget(None, per_request_tokens=1000)
    >>> llm = GuardedLLM(ScriptedLLM(["Paris [1]."]), budget=budget, deadline=Deadline(5))
    >>> llm.complete([{"role": "user", "content": "Capital of France?"}]).text
    'Paris [1].'
    >>> llm.usage.calls, llm.usage.total_tokens  # the fake reports 10 + 5 tokens
    (1, 15)
    """

    def __init__(
        self,
        model: LLM,
        *,
        budget: Budget | None = None,
        deadline: Deadline | None = None,
        heartbeat: Callable[[], None] | None = None,
    ) -> None:
        self.model = model
        self.model_id = model.model_id
        self.budget = budget if budget is not None else Budget(None)
        self.deadline = deadline if deadline is not None else Deadline(None)
        self.heartbeat = heartbeat if heartbeat is not None else _still_wanted
        self._watched = heartbeat is not None  # a reader may leave: every reply is read piece by piece
        self._usage = Usage()
        self._lock = threading.Lock()  # correction may call from worker threads

    @property
    def usage(self) -> Usage:
        """What this request's calls have cost so far (a copy)."""
        with self._lock:
            return Usage(self._usage.prompt_tokens, self._usage.completion_tokens, self._usage.calls)

    def session(self) -> GuardedLLM:
        """This request's guard over a second context of the model (:class:`SessionLLM`), sharing
        the deadline, the budget and the usage; the guard itself when the model has one context
        per request anyway (a server)."""
        if not isinstance(self.model, SessionLLM):
            return self
        side = GuardedLLM(
            self.model.session(),
            budget=self.budget,
            deadline=self.deadline,
            heartbeat=self.heartbeat if self._watched else None,  # a reader who leaves stops it too
        )
        side._usage, side._lock = self._usage, self._lock  # one request, one account
        return side

    def offers(self, capability: type[Any]) -> bool:
        """Whether the guarded model has ``capability`` (a protocol of :mod:`crag.protocols`)."""
        return isinstance(self.model, capability)

    # -- the LLM protocols, one method each ---------------------------------------------------
    def complete(
        self,
        messages: Messages,
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        if self._watched and json_schema is None and isinstance(self.model, StreamingLLM):
            return self._complete_by_stream(messages, max_tokens, temperature)
        self.heartbeat()
        estimate = self._charge_prompt(messages)
        out = self._within(
            lambda: self.model.complete(
                messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema
            ),
            "complete",
        )
        self._spent(estimate, out.prompt_tokens or estimate, out.completion_tokens or approx_tokens(out.text))
        return out

    def stream(self, messages: Messages, *, max_tokens: int = 512, temperature: float = 0.0) -> TokenStream:
        """As ``complete``, token by token; a reply stopped early is charged for what it wrote."""
        self.heartbeat()
        estimate = self._charge_prompt(messages)

        def start() -> TokenStream:
            return stream_completion(self.model, messages, max_tokens=max_tokens, temperature=temperature)

        pieces: list[str] = []
        out: Completion | None = None
        if self.deadline.seconds is None:
            gen = start()
        else:
            gen = _stream_within(start, self._time_left(), self._what(), self.model_id)
        try:
            while True:
                try:
                    piece = next(gen)
                except StopIteration as end:
                    out = end.value
                    break
                pieces.append(piece)
                yield piece
        finally:
            gen.close()  # a caller that stopped early stops the model too
            if out is None:
                self._spent(estimate, estimate, approx_tokens("".join(pieces)))
            else:  # servers that send no usage count 0 prompt tokens: use the estimate for those
                self._spent(estimate, out.prompt_tokens or estimate, out.completion_tokens or approx_tokens(out.text))
        return out

    def yes_probability(self, messages: Messages) -> float:
        """P("yes") of the first answer token: charged its prompt and one token."""
        model = self.model
        if not isinstance(model, YesNoLLM):
            raise LLMError(f"{self.model_id} gives no token probabilities", backend_id=self.model_id, step="guard")
        self.heartbeat()
        estimate = self._charge_prompt(messages, answer_tokens=1)
        p = self._within(lambda: model.yes_probability(messages), "yes_probability")
        self._spent(estimate + 1, estimate, 1)
        return p

    def choice_probabilities(self, messages: Messages, choices: Sequence[str]) -> list[float]:
        """The probability of each choice as the first answer token: charged its prompt and one token."""
        model = self.model
        if not isinstance(model, ScoringLLM):
            raise LLMError(f"{self.model_id} gives no choice probabilities", backend_id=self.model_id, step="guard")
        self.heartbeat()
        estimate = self._charge_prompt(messages, answer_tokens=1)
        probs = self._within(lambda: model.choice_probabilities(messages, choices), "choice_probabilities")
        self._spent(estimate + 1, estimate, 1)
        return probs

    def _complete_by_stream(self, messages: Messages, max_tokens: int, temperature: float) -> Completion:
        """``complete`` read as the stream of the same reply, with a heartbeat between two pieces."""
        reply = self.stream(messages, max_tokens=max_tokens, temperature=temperature)
        try:
            return read_out(reply, between=self.heartbeat)
        finally:
            reply.close()  # a heartbeat that raised stops the model here

    # -- the guard -----------------------------------------------------------------------------
    def _charge_prompt(self, messages: Messages, *, answer_tokens: int = 0) -> int:
        """Charge the prompt's estimate before the call (refused when the budget cannot cover it)."""
        estimate = sum(approx_tokens(m.get("content", "")) for m in messages)
        self.budget.charge_tokens(estimate + answer_tokens)
        return estimate

    def _spent(self, charged: int, prompt: int, completion: int) -> None:
        """Charge what the call spent beyond what was charged before it, and count it."""
        self.budget.charge_tokens(max(0, prompt + completion - charged), force=True)
        with self._lock:
            self._usage.prompt_tokens += prompt
            self._usage.completion_tokens += completion
            self._usage.calls += 1

    def _within(self, call: Callable[[], T], step: str) -> T:
        if self.deadline.seconds is None:
            return call()
        return with_deadline(
            call, self._time_left(), what=self._what(), error=LLMUnavailableError, backend_id=self.model_id, step=step
        )

    def _time_left(self) -> float:
        assert self.deadline.seconds is not None
        return self.deadline.remaining() + self.deadline.seconds * GENERATION_GRACE

    def _what(self) -> str:
        return f"LLM {self.model_id} (past correction.deadline_seconds = {self.deadline.seconds:g})"


def _still_wanted() -> None:
    """The heartbeat of a run nobody watches live: it is never stopped by a reader."""


def _stream_within(start: Callable[[], TokenStream], budget: float, what: str, backend_id: str) -> TokenStream:
    """Pass a stream's deltas on, in the caller's thread, until ``budget`` seconds have passed.

    The deadline is checked between two deltas (the worker's heartbeat, no thread watching the
    clock): a delta that comes after it is dropped and the stream is closed at once, which frees
    the model. While one delta is awaited, the call's time left is published
    (:func:`crag.deadline.call_time_left`) so a model that waits on a server (``OpenAIChatLLM``)
    bounds that wait by it; the embedded model hands on a piece after each token and each
    prompt block, so a deadline is seen within one of those.
    """
    if budget <= 0:
        raise LLMUnavailableError(
            f"{what} skipped: no time left before the deadline", backend_id=backend_id, step="stream"
        )
    end = time.monotonic() + budget
    gen = start()
    try:
        while True:
            with call_ends_at(end):
                try:
                    piece = next(gen)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]  # a whole reply is kept, even a late one
            if time.monotonic() > end:
                raise LLMUnavailableError(f"{what} timed out after {budget:g}s", backend_id=backend_id, step="stream")
            yield piece
    finally:
        gen.close()  # the model stops here: budget spent, or the caller closed this stream
