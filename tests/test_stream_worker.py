"""One worker per streamed request: the run's thread reads the model, times it against the
deadline and hands events to a reader that is woken (``async for``), never polling.

Control flow with fakes; the real model behind the server is proven in
tests/server/test_streaming_real.py and tests/server/test_hangup_real.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from crag.config import CragSettings, RetrievalSettings
from crag.deadline import Deadline
from crag.errors import LLMUnavailableError, RequestCancelled
from crag.event_names import QUERY, TOKEN
from crag.kb import KnowledgeBase
from crag.llm.guard import GuardedLLM
from crag.llm.openai_chat import OpenAIChatLLM
from crag.pipeline import Deps, live, run_crag
from crag.pipeline.events import StepEvent, TokenEvent
from crag.pipeline.live import AnswerStream
from crag.protocols import TokenStream
from crag.testing.fakes import HashEmbedder, MarkerEvaluator, ScriptedLLM
from crag.trace.spans import Tracer
from crag.types import Action, Answer, Query

pytestmark = pytest.mark.unit

MESSAGES = [{"role": "user", "content": "Who wrote it?"}]


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Zebras live in Africa. This gold fact says zebras have stripes.", "utf-8")
    base = KnowledgeBase(tmp_path / "kb", HashEmbedder(), retrieval=RetrievalSettings(top_k=1))
    base.ingest([docs])
    return base


class ThreadCountingLLM(ScriptedLLM):
    """Notes the threads alive at each piece it writes (the run's worker writes them)."""

    def __init__(self, replies: Sequence[str], *, token_delay: float = 0.0) -> None:
        super().__init__(replies, token_delay=token_delay)
        self.alive: list[set[str]] = []

    def stream(self, messages: Sequence[dict[str, str]], **kw: Any) -> TokenStream:
        gen = super().stream(messages, **kw)
        try:
            while True:
                try:
                    piece = next(gen)
                except StopIteration as end:
                    return end.value  # type: ignore[no-any-return]
                self.alive.append({t.name for t in threading.enumerate()})
                yield piece
        finally:
            gen.close()


def live_run(kb: KnowledgeBase, llm: ScriptedLLM, tracer: Tracer, deadline: float | None = None) -> Any:
    cfg = CragSettings(retrieval={"top_k": 1}, correction={"deadline_seconds": deadline})
    deps = Deps(kb, MarkerEvaluator(), llm, None)
    return lambda on_step: run_crag("Do zebras have stripes?", deps, cfg, tracer, on_step=on_step)


async def read_all(stream: AnswerStream) -> list[StepEvent[Any]]:
    return [e async for e in stream]


def test_async_reader_gets_what_the_thread_reader_gets(kb: KnowledgeBase) -> None:
    reply = "Zebras have stripes [1]. They live in Africa [1]."
    with AnswerStream(live_run(kb, ScriptedLLM([reply]), Tracer()), trace_id="a") as s:
        by_thread = list(s)
    by_loop = asyncio.run(read_all(AnswerStream(live_run(kb, ScriptedLLM([reply]), Tracer()), trace_id="b")))
    assert [e.name for e in by_loop] == [e.name for e in by_thread] and by_thread[-1].name == "answer"
    tokens = [e.data["delta"] for e in by_loop if isinstance(e, TokenEvent)]
    assert tokens == [e.data["delta"] for e in by_thread if isinstance(e, TokenEvent)] and len(tokens) == 2
    assert "".join(tokens) == by_loop[-1].value.answer == by_thread[-1].value.answer == reply


def test_a_stream_runs_on_one_thread_and_its_reader_takes_none(kb: KnowledgeBase) -> None:
    """The model is read, timed and stopped by the run's worker: no thread per stream watches
    the deadline, and the async reader waits on the loop, not in a threadpool."""
    llm = ThreadCountingLLM(["Zebras have stripes [1]. " * 5], token_delay=0.01)
    before = {t.name for t in threading.enumerate()}
    events = asyncio.run(read_all(AnswerStream(live_run(kb, llm, Tracer(), deadline=30), trace_id="one")))
    assert any(isinstance(e, TokenEvent) for e in events) and llm.alive
    added = set().union(*llm.alive) - before
    assert added == {"crag-stream-one"}, added  # the worker alone: no crag-stream-scripted, no pool thread


def test_a_cancelled_wait_loses_no_event() -> None:
    go = threading.Event()

    def run(on_step: Any) -> Answer:
        on_step(QUERY, Query("Who?", "en"))
        go.wait(5)
        on_step(TOKEN, "Ann [1].")
        return Answer("Who?", "Ann [1].", Action.CORRECT, 0.9, [], [], "t", {})

    async def read() -> list[str]:
        stream = AnswerStream(run, trace_id="t")
        names = [(await anext(stream)).name]
        with pytest.raises(TimeoutError):  # the run holds its token: the wait is cancelled
            await asyncio.wait_for(anext(stream), 0.05)
        go.set()
        return names + [e.name async for e in stream]

    assert asyncio.run(read()) == ["query", "token", "answer"]


def test_an_error_of_the_run_reaches_the_async_reader(kb: KnowledgeBase) -> None:
    class Down(ScriptedLLM):
        def stream(self, *a: Any, **kw: Any) -> Any:
            raise LLMUnavailableError("down: endpoint unreachable", backend_id="down")

    with pytest.raises(LLMUnavailableError, match="unreachable"):
        asyncio.run(read_all(AnswerStream(live_run(kb, Down(["x"]), Tracer()), trace_id="e")))


def test_closing_a_stream_read_async_stops_the_model(kb: KnowledgeBase) -> None:
    llm = ScriptedLLM(["Zebras have stripes [1]. " * 40], token_delay=0.02)
    stream = AnswerStream(live_run(kb, llm, Tracer()), trace_id="c")

    async def first_token() -> None:
        async for event in stream:
            if isinstance(event, TokenEvent):
                return

    asyncio.run(first_token())
    stream.close()
    assert stream.wait(timeout=5), "the run did not stop after close()"
    assert llm.stopped == 1 and llm.streamed < 40 and not llm.lock.locked()
    with pytest.raises(RequestCancelled):
        list(stream)


def test_the_deadline_stops_a_streamed_answer_in_the_worker(kb: KnowledgeBase) -> None:
    llm = ThreadCountingLLM(["Zebras have stripes [1]. " * 40], token_delay=0.05)
    tracer = Tracer()
    stream = AnswerStream(live_run(kb, llm, tracer, deadline=1.0), trace_id="late")
    with pytest.raises(LLMUnavailableError, match="timed out"):
        asyncio.run(read_all(stream))
    assert stream.wait(timeout=5)
    assert llm.stopped == 1 and llm.streamed < 40 and not llm.lock.locked()  # closed at the deadline
    assert not [name for names in llm.alive for name in names if name.startswith("crag-stream-scripted")]
    generate = next(span for span in tracer.spans if span.name == "generate")
    assert generate.error and "timed out" in generate.error  # recorded in the trace


def test_a_guarded_stream_is_timed_between_its_pieces_without_a_thread() -> None:
    slow = ThreadCountingLLM(["one two three four five six seven eight"], token_delay=0.1)
    pieces: list[str] = []
    with pytest.raises(LLMUnavailableError, match="timed out"):
        for piece in GuardedLLM(slow, deadline=Deadline(0.2)).stream(MESSAGES):  # 0.2 s + 25 % grace
            pieces.append(piece)
    assert 1 <= len(pieces) < 8 and slow.stopped == 1 and not slow.lock.locked()
    assert not [name for names in slow.alive for name in names if name.startswith("crag-stream")]  # read here


def test_a_remote_models_wait_is_bounded_by_the_time_left() -> None:
    reads: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        reads.append(request.extensions["timeout"]["read"])
        body = b'data: {"choices": [{"index": 0, "delta": {"content": "Ann"}, "finish_reason": "stop"}]}\n\n'
        return httpx.Response(200, content=body + b"data: [DONE]\n\n", headers={"content-type": "text/event-stream"})

    llm = OpenAIChatLLM("http://127.0.0.1:9/v1", "m", client=httpx.Client(transport=httpx.MockTransport(handler)))
    assert "".join(GuardedLLM(llm, deadline=Deadline(2)).stream(MESSAGES)) == "Ann"
    assert "".join(llm.stream(MESSAGES)) == "Ann"
    assert 0 < reads[0] <= 2.5 and reads[1] == llm.timeout  # 2 s + 25 % grace; unguarded: its own


class _HandOvers:
    """Counts the worker's hand-overs: the GIL given to the reader (``sleep(0)``), the loop woken."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.yields = self.wakes = 0
        real_wake = live._Channel.wake

        def sleep(seconds: float) -> None:
            self.yields += seconds == 0
            time.sleep(seconds)

        def wake(channel: Any) -> None:
            self.wakes += 1
            real_wake(channel)

        monkeypatch.setattr(live, "time", SimpleNamespace(monotonic=time.monotonic, sleep=sleep))
        monkeypatch.setattr(live._Channel, "wake", wake)


def _burst(n: int) -> Any:
    def run(on_step: Any) -> Answer:
        for _ in range(n):
            on_step(TOKEN, "x")
        return Answer("Q", "x" * n, Action.CORRECT, 1.0, [], [], "t-burst", {})

    return run


@pytest.mark.parametrize("reader", ["thread", "async"])
def test_a_burst_reaches_a_waiting_reader_in_batches(monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    # A switch of threads per event costs ~0.1 ms of CPU: events put closer together than
    # HANDOVER_GAP are left to queue and read in one go, not handed over one by one.
    counted = _HandOvers(monkeypatch)
    n = 3000
    stream = AnswerStream(_burst(n), trace_id="t-burst")
    got = list(stream) if reader == "thread" else asyncio.run(read_all(stream))
    assert sum(isinstance(e, TokenEvent) for e in got) == n
    assert counted.yields < n / 10, counted.yields
    assert counted.wakes < n / 10, counted.wakes


def test_an_event_after_a_pause_is_handed_over_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A model's token comes after a pause (~80 ms here): the waiting reader gets the GIL with it.
    counted = _HandOvers(monkeypatch)
    started: list[AnswerStream] = []

    def run(on_step: Any) -> Answer:
        for _ in range(3):
            while not (started and started[0]._channel.waiting):  # the reader waits for the next event
                time.sleep(0.001)
            time.sleep(2 * live.HANDOVER_GAP)
            on_step(TOKEN, "x")
        return Answer("Q", "xxx", Action.CORRECT, 1.0, [], [], "t-pause", {})

    stream = AnswerStream(run, trace_id="t-pause")
    started.append(stream)
    assert [e.name for e in stream].count("token") == 3
    assert counted.yields >= 3
