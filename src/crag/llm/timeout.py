"""``TimeoutLLM``: no LLM call outlives the request deadline by more than a grace."""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crag.deadline import Deadline, with_deadline
from crag.errors import LLMUnavailableError
from crag.protocols import LLM, Completion, CompletionOptions, Messages, TokenStream, stream_completion

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
        return with_deadline(
            lambda: self.inner.complete(messages, **options),
            self._budget(),
            what=self._what(),
            error=LLMUnavailableError,
            backend_id=self.model_id,
            step="complete",
        )

    def stream(self, messages: Messages, *, max_tokens: int = 512, temperature: float = 0.0) -> TokenStream:
        """The inner model's stream, given up (``LLMUnavailableError``) once the same budget runs out."""

        def start() -> TokenStream:
            return stream_completion(self.inner, messages, max_tokens=max_tokens, temperature=temperature)

        if self.deadline.seconds is None:
            return (yield from start())
        return (yield from _stream_within(start, self._budget(), self._what(), self.model_id))

    def __getattr__(self, name: str) -> Any:
        # An optional capability of the inner model (yes_probability: Correct-path verification)
        # runs within the same budget as a completion.
        if name.startswith("__") or name == "inner":  # copy/pickle before __init__: no recursion
            raise AttributeError(name)
        attr = getattr(self.inner, name)
        if name != "yes_probability" or self.deadline.seconds is None:
            return attr

        def within(*args: Any, **kwargs: Any) -> Any:
            return with_deadline(
                lambda: attr(*args, **kwargs),
                self._budget(),
                what=self._what(),
                error=LLMUnavailableError,
                backend_id=self.model_id,
                step=name,
            )

        return within

    def _budget(self) -> float:
        assert self.deadline.seconds is not None
        return self.deadline.remaining() + self.deadline.seconds * GENERATION_GRACE

    def _what(self) -> str:
        return f"LLM {self.model_id} (past correction.deadline_seconds = {self.deadline.seconds:g})"


def _stream_within(start: Callable[[], TokenStream], budget: float, what: str, backend_id: str) -> TokenStream:
    """Run a stream in a worker thread and pass its deltas on until ``budget`` seconds have passed.

    The worker owns the inner generator (a generator cannot be closed from another thread):
    when this one ends early (budget spent, or the caller closed it), the worker stops at
    the inner stream's next delta and closes it, which frees the model.
    """
    if budget <= 0:
        raise LLMUnavailableError(
            f"{what} skipped: no time left before the deadline", backend_id=backend_id, step="stream"
        )
    items: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()
    ctx = contextvars.copy_context()

    def work() -> None:
        gen = start()
        try:
            while not stop.is_set():
                try:
                    items.put(("delta", next(gen)))
                except StopIteration as end:
                    items.put(("done", end.value))
                    return
                except BaseException as exc:  # handed to the caller's thread
                    items.put(("error", exc))
                    return
        finally:
            gen.close()

    threading.Thread(target=lambda: ctx.run(work), name=f"crag-stream-{backend_id}", daemon=True).start()
    end = time.monotonic() + budget
    try:
        while True:
            try:
                kind, value = items.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                raise LLMUnavailableError(
                    f"{what} timed out after {budget:g}s", backend_id=backend_id, step="stream"
                ) from None
            if kind == "delta":
                yield value
            elif kind == "done":
                return value  # type: ignore[no-any-return]
            else:
                raise value
    finally:
        stop.set()
