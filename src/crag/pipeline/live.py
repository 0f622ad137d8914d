"""A run watched live: the pipeline in a worker thread, its events handed over as they happen.

:class:`AnswerStream` runs a request (``run(on_step)``, e.g. ``run_crag`` with the engine's
tracer) in a worker thread. Each step's value becomes its typed event
(:func:`crag.pipeline.events.event_for`), summarised as the step finishes, and is put on a
bounded queue; the caller iterates the stream and gets them in order, then the ``answer``
event. An error of the run is raised to the caller from ``next()``. An event loop iterates it
with ``async for`` (:meth:`AnswerStream.__aiter__`): the worker wakes the loop when it puts an
event (``loop.call_soon_threadsafe``), so no thread waits for the reader and nothing polls.
A reader that waits is handed an event at once (the worker yields the GIL to it), but events
that come in a burst are left to queue and read in one go: a switch of threads per event
would cost more CPU than the event.

That worker is the run's only thread: the model streams in it, and the request's deadline is
checked there between two of the model's pieces (:class:`~crag.llm.guard.GuardedLLM`), as the
reader's cancel is (its heartbeat).

The caller may stop early: :meth:`AnswerStream.close` (also called by ``with``, or when the
stream is garbage collected) sets a cancel flag; the worker sees it at its next event and
raises :class:`~crag.errors.RequestCancelled`, which stops the model between two tokens
and ends the run (the engine still records its trace, once). ``close`` never blocks, so
an event loop may call it.

>>> from crag.types import Action, Answer, Query
>>> def run(on_step):
...     on_step("query", Query("Who?", "en"))
...     for piece in ("Ann ", "[1]."):
...         on_step("token", piece)
...     return Answer("Who?", "Ann [1].", Action.CORRECT, 0.9, [], [], "t1", {})
>>> with AnswerStream(run, trace_id="t1") as events:
...     [(e.name, e.data.get("delta")) for e in events]
[('query', None), ('token', 'Ann '), ('token', '[1].'), ('answer', None)]
>>> import asyncio
>>> async def read():
...     return [e.name async for e in AnswerStream(run, trace_id="t2")]
>>> asyncio.run(read())
['query', 'token', 'token', 'answer']
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from crag.errors import RequestCancelled
from crag.event_names import ANSWER, EventName
from crag.pipeline.events import AnswerEvent, StepEvent, event_for
from crag.pipeline.steps import OnStep

__all__ = ["AnswerStream"]

QUEUE_EVENTS = 256  # a reader this far behind holds the run back (the worker waits to put)
_POLL_SECONDS = 0.1  # how often a worker waiting on a full queue checks for a cancel
HANDOVER_GAP = 0.001  # items put closer than this after a hand-over reach the reader as one batch


class AnswerStream(Iterator[StepEvent[Any]], AsyncIterator[StepEvent[Any]]):
    """The events of one run, in order: step events, ``token``/``replace``, then ``answer``;
    read with ``for`` in a thread, or with ``async for`` in an event loop (one reader).

    ### Usage example
    >>> from crag import CRAG                                           # doctest: +SKIP
    >>> with CRAG.from_config().ask_stream("What is CRAG?") as events:  # doctest: +SKIP
    ...     for e in events:
    ...         if isinstance(e, TokenEvent):  # from crag.pipeline.events
    ...             print(e.value, end="", flush=True)
    >>> async def show(events: AnswerStream) -> None:                   # doctest: +SKIP
    ...     async for e in events:  # the loop is woken by each event, never blocked
    ...         ...
    """

    def __init__(self, run: Callable[[OnStep], Any], *, trace_id: str, max_events: int = QUEUE_EVENTS) -> None:
        self.trace_id = trace_id
        # The worker holds the channel, not this object: a stream dropped without close()
        # is collected, and its __del__ stops the run.
        self._channel = _Channel(max_events)
        self._finished = False
        ctx = contextvars.copy_context()  # spans opened in the run nest under the caller's
        channel = self._channel
        self._worker = threading.Thread(
            target=lambda: ctx.run(channel.work, run), name=f"crag-stream-{trace_id}", daemon=True
        )
        self._worker.start()

    def __iter__(self) -> AnswerStream:
        return self

    def __next__(self) -> StepEvent[Any]:
        while True:
            event = self.next_event(timeout=None)
            if event is not None:
                return event

    def next_event(self, timeout: float | None) -> StepEvent[Any] | None:
        """The next event, or ``None`` when none came within ``timeout`` seconds.

        Raises ``StopIteration`` after the ``answer`` event and the run's error if it failed.
        """
        if self._finished:
            raise StopIteration
        channel = self._channel
        channel.woken = False
        channel.waiting = True  # the worker hands over at once (see _Channel.hand_over)
        try:
            item = channel.queue.get(timeout=timeout)
        except queue.Empty:
            return None
        finally:
            channel.waiting = False
        event = self._take(item)
        if event is None:
            raise StopIteration
        return event

    def __aiter__(self) -> AnswerStream:
        return self

    async def __anext__(self) -> StepEvent[Any]:
        """The next event, awaited without blocking the loop: the worker wakes the loop when it
        puts one. Cancelling the wait (a timeout, a client that left) loses no event."""
        if self._finished:
            raise StopAsyncIteration
        channel = self._channel
        ready = channel.wake_on(asyncio.get_running_loop())
        while True:
            ready.clear()
            channel.woken = False
            channel.waiting = True  # before the look, so a put right after it wakes us
            try:
                item = channel.queue.get_nowait()
            except queue.Empty:
                await ready.wait()
                continue
            finally:
                channel.waiting = False
            event = self._take(item)
            if event is None:
                raise StopAsyncIteration
            return event

    def _take(self, item: tuple[str, Any]) -> StepEvent[Any] | None:
        """The event an item of the queue carries; ``None`` at the end; the run's error raised."""
        kind, value = item
        if kind == "event":
            return value  # type: ignore[no-any-return]
        self._finished = True
        if kind == "error":
            raise value
        return None

    def close(self) -> None:
        """Stop the run at its next event (between two tokens while the model writes)."""
        self._channel.cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._channel.cancel.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the worker to end (the model is free again); True if it did."""
        self._worker.join(timeout)
        return not self._worker.is_alive()

    def __enter__(self) -> AnswerStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self._channel.cancel.set()


class _Channel:
    """The worker's side: runs the pipeline and queues its events; stops once cancelled."""

    def __init__(self, max_events: int) -> None:
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=max(1, max_events))
        self.cancel = threading.Event()
        self.waiting = False  # a reader waits for the next item
        self.woken = False  # ... and has been woken for it (reset by the reader before it waits)
        self._handed_at = 0.0  # time.monotonic() of the last hand-over that yielded the GIL
        self._ready: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def wake_on(self, loop: asyncio.AbstractEventLoop) -> asyncio.Event:
        """The event an async reader on ``loop`` waits on; set (from the worker) by each put."""
        if self._ready is None or self._loop is not loop:
            self._ready, self._loop = asyncio.Event(), loop
        return self._ready

    def wake(self) -> None:
        """Wake an async reader that waits (called in the worker after a put)."""
        ready, loop = self._ready, self._loop
        if ready is None or loop is None:
            return
        try:
            loop.call_soon_threadsafe(ready.set)
        except RuntimeError:  # the reader's loop has closed: nobody to wake
            pass

    def work(self, run: Callable[[OnStep], Any]) -> None:
        try:
            last = AnswerEvent(run(_Observer(self)))
            last.data  # noqa: B018  # summarised here, in the worker
        except BaseException as exc:  # handed to the caller's thread
            self.put(("error", exc), final=True)
            return
        self.put(("event", last), final=True)
        self.put(("end", None), final=True)

    def observe(self, name: EventName, value: Any) -> None:
        if name == ANSWER:
            return  # sent once the run has returned (after the trace is saved)
        self.heartbeat()
        event = event_for(name, value)
        event.data  # noqa: B018  # summarised now, as the step finishes: a value changed later is not seen
        self.put(("event", event), final=False)

    def heartbeat(self) -> None:
        if self.cancel.is_set():
            raise RequestCancelled("the streamed answer was closed by its reader; generation stopped")

    def put(self, item: tuple[str, Any], *, final: bool) -> None:
        """Queue ``item``, waiting while the reader is behind; give up once it has gone."""
        while True:
            if self.cancel.is_set() and not final:
                raise RequestCancelled("the streamed answer was closed by its reader; generation stopped")
            try:
                self.queue.put(item, timeout=_POLL_SECONDS)
            except queue.Full:
                if self.cancel.is_set() and final:
                    return  # nobody reads any more: drop the end marker
                continue
            if self.waiting:  # a reader waits for this item
                self.hand_over()
            return

    def hand_over(self) -> None:
        """Wake the reader that waits for the item just put, once per wait; and let it take the GIL
        at once, unless the last hand-over was under ``HANDOVER_GAP`` ago.

        The worker would else go on in Python (the model's sampling, the gate) and a waiting thread
        asks for the GIL only after 5 ms. But a switch of threads costs ~0.1 ms of CPU: items that
        come in a burst (a server's chunks read at once, a fast source) are left to queue, and the
        reader, awake, takes them in one go when it gets the GIL.
        """
        if self.woken:
            return
        self.woken = True
        self.wake()
        now = time.monotonic()
        if now - self._handed_at >= HANDOVER_GAP:
            self._handed_at = now
            time.sleep(0)


class _Observer:
    """The run's view of a channel: an ``on_step`` observer that also hears the model's heartbeat."""

    def __init__(self, channel: _Channel) -> None:
        self.channel = channel

    def __call__(self, name: EventName, value: Any) -> None:
        self.channel.observe(name, value)

    def heartbeat(self) -> None:
        self.channel.heartbeat()
