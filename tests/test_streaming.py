"""Control flow of streamed answers with fakes: token order, replacements, cancel, timeouts.

The real model, server and OpenAI-compatible endpoint are proven in test_streaming_real.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag.budget import Budget
from crag.config import CragSettings, RetrievalSettings
from crag.deadline import Deadline
from crag.errors import LLMError, LLMUnavailableError, RequestCancelled
from crag.generate import generate
from crag.generate.answer import NOT_IN_SOURCES
from crag.kb import KnowledgeBase
from crag.llm.guard import GuardedLLM
from crag.llm.openai_chat import OpenAIChatLLM
from crag.pipeline import Deps, run_crag, run_rag
from crag.pipeline.live import AnswerStream
from crag.protocols import Completion, StreamingLLM, stream_completion
from crag.redact import StreamRedactor, redact_text
from crag.testing.fakes import EchoLLM, HashEmbedder, MarkerEvaluator, ScriptedLLM, StaticWebSearch
from crag.trace.spans import Tracer
from crag.types import Strip, WebResult

pytestmark = pytest.mark.unit

MESSAGES = [{"role": "user", "content": "Who wrote it?"}]


class PlainLLM:
    """An LLM without ``stream``: streaming falls back to one delta."""

    model_id = "plain"

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        return Completion("Ann wrote it [1].", 5, 4, self.model_id)


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Zebras live in Africa. This gold fact says zebras have stripes.", "utf-8")
    (docs / "c.txt").write_text("The stock market closed higher on Friday.", "utf-8")
    base = KnowledgeBase(tmp_path / "kb", HashEmbedder(), retrieval=RetrievalSettings(top_k=1))
    base.ingest([docs])
    return base


def strip(text: str, score: float) -> Strip:
    return Strip(text, "a.txt", "internal", score=score)


# -- the LLM side ---------------------------------------------------------------------------
def test_fallback_streams_one_delta_and_returns_the_completion() -> None:
    assert not isinstance(PlainLLM(), StreamingLLM) and isinstance(ScriptedLLM(["x"]), StreamingLLM)
    gen = stream_completion(PlainLLM(), MESSAGES)
    assert next(gen) == "Ann wrote it [1]."
    with pytest.raises(StopIteration) as end:
        next(gen)
    assert end.value.value.completion_tokens == 4


def test_timeout_llm_gives_up_a_slow_stream_and_stops_the_model() -> None:
    slow = ScriptedLLM(["one two three four five six seven eight"], token_delay=0.2)
    llm = GuardedLLM(slow, deadline=Deadline(0.4))  # budget: 0.4 s + 25% grace = 0.5 s
    pieces: list[str] = []
    with pytest.raises(LLMUnavailableError, match="timed out"):
        for piece in llm.stream(MESSAGES):
            pieces.append(piece)
    assert 1 <= len(pieces) < 8
    deadline = time.monotonic() + 2
    while slow.stopped == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert slow.stopped == 1 and slow.streamed < 8  # the worker closed the model's stream
    assert not slow.lock.locked()


def test_budgeted_stream_charges_what_was_written(tmp_path: Path) -> None:
    budget = Budget(tmp_path / "b.sqlite", per_request_tokens=10_000)
    llm = GuardedLLM(ScriptedLLM(["a b c d e f"]), budget=budget)
    assert "".join(llm.stream(MESSAGES)) == "a b c d e f"
    full = budget.used["tokens"]
    assert full == 10 + 6  # the fake's usage: 10 prompt tokens, one per word
    gen = llm.stream(MESSAGES)
    next(gen)
    gen.close()  # stopped early: the prompt estimate and what was written are charged
    assert full < budget.used["tokens"] < 2 * full


# -- the generator --------------------------------------------------------------------------
def test_generate_streams_verified_sentences_that_join_to_the_answer() -> None:
    tokens: list[str] = []
    src = [strip("Ann wrote it in 1901. Bob read it.", 0.9)]
    llm = ScriptedLLM(["Ann wrote it in 1901 [1]. Bob read it [1]. Carl sold it for 400 pounds [1]."])
    g = generate("Who wrote it?", src, llm, on_token=tokens.append)
    assert tokens == ["Ann wrote it in 1901 [1].", " Bob read it [1]."] and "".join(tokens) == g.text
    assert llm.streamed == 17 and g.trimmed == "Carl sold it for 400 pounds [1]."  # the model wrote it; none saw it


def test_generate_shows_nothing_of_a_refusal_that_a_reask_replaces() -> None:
    seen: list[object] = []
    llm = ScriptedLLM(["The sources do not say.", "Ann wrote it [1]."])
    g = generate("Who wrote it?", [strip("Ann wrote it.", 0.9)], llm, reask_above=0.8, on_token=seen.append)
    assert seen == ["Ann wrote it [1]."] == [g.text] and g.refusal_overridden


def test_generate_streams_no_unsupported_reply_and_cites_what_it_shows() -> None:
    seen: list[object] = []
    g = generate(
        "Who wrote it?",
        [strip("Ann wrote it.", 0.2)],
        ScriptedLLM(["Bob Smith wrote it in 1820."]),
        on_token=seen.append,
    )
    assert seen == [] and g.refused and g.text.startswith(NOT_IN_SOURCES["en"])  # the pipeline shows a final refusal
    g = generate("Who wrote it?", [strip("Ann wrote it.", 0.9)], ScriptedLLM(["Ann wrote it."]), on_token=seen.append)
    assert g.citations_inferred and seen == [g.text] == ["Ann wrote it[1]."]


def test_generate_without_on_token_calls_complete_once() -> None:
    class CompleteOnly(ScriptedLLM):
        def stream(self, *a: Any, **kw: Any) -> Any:  # must not be used
            raise AssertionError("streamed without a listener")

    g = generate("Who wrote it?", [strip("Ann wrote it.", 0.9)], CompleteOnly(["Ann wrote it [1]."]))
    assert g.text == "Ann wrote it [1]."


# -- the pipeline ---------------------------------------------------------------------------
def test_stage_events_come_before_tokens_and_tokens_before_generate(kb: KnowledgeBase) -> None:
    seen: list[tuple[str, object]] = []
    llm = EchoLLM()
    answer = run_crag(
        "How did the stock market close on Friday?",
        Deps(kb, MarkerEvaluator(), llm, StaticWebSearch([WebResult("Zebra", "https://e.org/z", "Web gold text.")])),
        CragSettings(retrieval={"top_k": 1}),
        Tracer(),
        on_step=lambda n, v: seen.append((n, v)),
    )
    names = [n for n, _ in seen]
    first, last = names.index("token"), len(names) - 1 - names[::-1].index("token")
    assert names[:first] == ["query", "retrieve", "evaluate", "decide", "rewrite", "search", "refine_external",
                             "correct", "fuse", "bearers"]  # fmt: skip
    assert names[last + 1 :] == ["generate", "answer"] or names[last - 1 :] == ["generate", "token", "answer"]
    assert "".join(str(v) for n, v in seen if n == "token") == answer.answer


def test_plain_rag_streams_too_and_without_on_step_nothing_streams(kb: KnowledgeBase) -> None:
    seen: list[str] = []
    llm = ScriptedLLM(["Zebras have stripes [1]."])
    deps = Deps(kb, MarkerEvaluator(), llm, None)
    run_rag(
        "Do zebras have stripes?",
        deps,
        CragSettings(retrieval={"top_k": 1}),
        Tracer(),
        on_step=lambda n, v: seen.append(n),
    )
    assert seen.count("token") == 1 and llm.streamed == 4  # four pieces, one verified sentence
    run_rag("Do zebras have stripes?", deps, CragSettings(retrieval={"top_k": 1}), Tracer())
    assert llm.streamed == 4  # the second run called complete()


def live_run(kb: KnowledgeBase, llm: ScriptedLLM, tracer: Tracer) -> Any:
    deps = Deps(kb, MarkerEvaluator(), llm, None)
    return lambda on_step: run_crag("Do zebras have stripes?", deps, CragSettings(retrieval={"top_k": 1}), tracer,
                                    on_step=on_step)  # fmt: skip


def test_answer_stream_yields_summaries_then_tokens_then_the_answer(kb: KnowledgeBase) -> None:
    tracer = Tracer()
    with AnswerStream(live_run(kb, ScriptedLLM(["Zebras have stripes [1]."]), tracer), trace_id=tracer.id) as s:
        events = list(s)
    names = [e.name for e in events]
    assert names[0] == "query" and names[-2:] == ["generate", "answer"]
    decide = next(e for e in events if e.name == "decide")
    assert decide.data["action"] == tracer.to_dict()["action"] == "correct"
    json.dumps([e.data for e in events])  # every summary is JSON-ready
    assert "".join(e.data["delta"] for e in events if e.name == "token") == events[-1].value.answer


def test_closing_the_stream_stops_the_model_between_tokens(kb: KnowledgeBase) -> None:
    words = "Zebras have stripes [1]. " * 40
    llm = ScriptedLLM([words], token_delay=0.05)
    tracer = Tracer()
    s = AnswerStream(live_run(kb, llm, tracer), trace_id=tracer.id)
    tokens = 0
    for event in s:
        tokens += event.name == "token"
        if tokens == 1:
            break
    s.close()
    assert s.wait(timeout=5), "the run did not stop after close()"
    assert llm.stopped == 1 and llm.streamed < 15 and not llm.lock.locked()
    with pytest.raises(RequestCancelled):  # the run's end, as the reader would see it
        while True:
            next(s)
    assert any(span.name == "generate" and span.error and "RequestCancelled" in span.error for span in tracer.spans)


class ReadingLLM(ScriptedLLM):
    """A model that first reads a long prompt: an empty piece per block read (0.05 s each)."""

    def __init__(self, reply: str, blocks: int) -> None:
        super().__init__([reply])
        self.blocks, self.read = blocks, 0

    def stream(self, messages: Sequence[dict[str, str]], **kw: Any) -> Any:
        with self.lock:
            for _ in range(self.blocks):
                time.sleep(0.05)
                self.read += 1
                yield ""
        return (yield from super().stream(messages, **kw))


def test_a_reader_that_leaves_while_the_prompt_is_read_stops_the_model_there(kb: KnowledgeBase) -> None:
    llm = ReadingLLM("Zebras have stripes [1].", blocks=100)
    tracer = Tracer()
    s = AnswerStream(live_run(kb, llm, tracer), trace_id=tracer.id)
    assert next(iter(s)).name == "query"
    while llm.read < 3:  # reading the prompt: no token yet
        time.sleep(0.01)
    s.close()
    assert s.wait(timeout=5), "the run did not stop after close()"
    assert llm.read < 20 and llm.streamed == 0 and not llm.lock.locked()
    assert "first_token_s" not in tracer.events.get("stream", {})  # an empty piece is no first token


def test_a_reader_that_leaves_while_a_follow_up_is_condensed_stops_that_call(kb: KnowledgeBase) -> None:
    """Not only the answer: every LLM call of a run watched live stops between two pieces."""
    slow_rewrite = "Do zebras have stripes? " + "Really, " * 60
    llm = ScriptedLLM([slow_rewrite, "Zebras have stripes [1]."], token_delay=0.05)
    history = [{"role": "user", "content": "Where do zebras live?"}, {"role": "assistant", "content": "In Africa."}]
    deps, cfg, tracer = Deps(kb, MarkerEvaluator(), llm, None), CragSettings(retrieval={"top_k": 1}), Tracer()
    run = lambda on_step: run_crag("Do they have stripes?", deps, cfg, tracer, history=history, on_step=on_step)  # noqa: E731
    s = AnswerStream(run, trace_id=tracer.id)
    while llm.streamed < 3:  # condensing the follow-up: the first LLM call, no event yet
        time.sleep(0.01)
    s.close()
    assert s.wait(timeout=5), "the run did not stop after close()"
    assert llm.stopped == 1 and llm.streamed < 20 and len(llm.prompts) == 1 and not llm.lock.locked()
    assert any(span.name == "condense" and "RequestCancelled" in (span.error or "") for span in tracer.spans)


def test_a_run_nobody_watches_asks_complete_once(kb: KnowledgeBase) -> None:
    """Without a live reader a call is one ``complete``, as before (nothing could stop it anyway)."""
    llm = ScriptedLLM(["Do zebras have stripes?", "Zebras have stripes [1]."])
    history = [{"role": "user", "content": "Where do zebras live?"}, {"role": "assistant", "content": "In Africa."}]
    answer = run_crag("Do they have stripes?", Deps(kb, MarkerEvaluator(), llm, None),
                      CragSettings(retrieval={"top_k": 1}), Tracer(), history=history)  # fmt: skip
    assert answer.answer == "Zebras have stripes [1]." and llm.streamed == 0 and len(llm.prompts) == 2


def test_empty_pieces_are_not_text_and_not_a_first_token(kb: KnowledgeBase) -> None:
    tracer = Tracer()
    with AnswerStream(live_run(kb, ReadingLLM("Zebras have stripes [1].", blocks=3), tracer), trace_id=tracer.id) as s:
        events = list(s)
    assert "".join(e.data["delta"] for e in events if e.name == "token") == events[-1].value.answer
    assert events[-1].value.answer == "Zebras have stripes [1]."
    stream = tracer.events["stream"]
    assert isinstance(stream, dict) and 0 < stream["first_token_s"] <= stream["first_shown_s"]


def test_a_reader_that_falls_behind_holds_the_run_and_close_releases_it(kb: KnowledgeBase) -> None:
    llm = ScriptedLLM(["Zebras have stripes [1]. " * 50])
    tracer = Tracer()
    s = AnswerStream(live_run(kb, llm, tracer), trace_id=tracer.id, max_events=3)
    assert next(e for e in s if e.name == "token")
    time.sleep(0.5)
    assert llm.streamed <= 25  # bounded: the worker waits for the reader (4 pieces a sentence)
    s.close()
    assert s.wait(timeout=5) and llm.stopped == 1


def test_a_stream_dropped_without_close_stops_the_run(kb: KnowledgeBase) -> None:
    import gc

    llm = ScriptedLLM(["Zebras have stripes [1]. " * 200], token_delay=0.01)
    tracer = Tracer()
    s = AnswerStream(live_run(kb, llm, tracer), trace_id=tracer.id, max_events=3)
    assert next(e for e in s if e.name == "token")
    worker = s._worker
    del s
    gc.collect()
    worker.join(timeout=5)
    assert not worker.is_alive() and llm.stopped == 1 and not llm.lock.locked()


def test_an_error_of_the_run_reaches_the_reader(kb: KnowledgeBase) -> None:
    class Down(ScriptedLLM):
        def stream(self, *a: Any, **kw: Any) -> Any:
            raise LLMUnavailableError("down: endpoint unreachable", backend_id="down")

    tracer = Tracer()
    with AnswerStream(live_run(kb, Down(["x"]), tracer), trace_id=tracer.id) as s:
        with pytest.raises(LLMUnavailableError, match="unreachable"):
            list(s)


# -- the OpenAI-compatible stream over MockTransport ------------------------------------------
def sse_body(*events: object) -> bytes:
    return b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events)


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def openai_llm(handler: Any, retries: int = 1) -> OpenAIChatLLM:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return OpenAIChatLLM("http://127.0.0.1:9/v1", "m", client=client, retries=retries)


def drain(gen: Iterator[str]) -> tuple[list[str], Completion]:
    pieces: list[str] = []
    while True:
        try:
            pieces.append(next(gen))
        except StopIteration as end:
            return pieces, end.value


def test_openai_stream_parses_deltas_and_usage() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        usage = {"prompt_tokens": 12, "completion_tokens": 3}
        body = sse_body(chunk(""), chunk("Ann "), chunk("wrote it."), chunk(finish="stop"),
                        {"choices": [], "usage": usage}, "[DONE]")  # fmt: skip
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    pieces, done = drain(openai_llm(handler).stream(MESSAGES, max_tokens=20))
    assert pieces == ["Ann ", "wrote it."] and done.text == "Ann wrote it."
    assert (done.prompt_tokens, done.completion_tokens) == (12, 3)
    assert bodies[0]["stream"] is True and bodies[0]["max_tokens"] == 20


def test_openai_stream_retries_before_the_first_token() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(503)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                               content=sse_body(chunk("ok"), chunk(finish="stop"), "[DONE]"))  # fmt: skip

    assert drain(openai_llm(handler).stream(MESSAGES))[1].text == "ok" and len(calls) == 2
    with pytest.raises(LLMUnavailableError, match="failed after 2 attempt"):
        drain(openai_llm(lambda r: httpx.Response(503)).stream(MESSAGES))


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (sse_body(chunk("Ann "), chunk("wrote")), "without a finish_reason"),  # truncated
        (sse_body(chunk("Ann "), "{not json"), "garbled stream"),
        (sse_body(chunk("Ann "), {"error": {"message": "model crashed"}}), "error mid-stream"),
    ],
)
def test_openai_stream_truncated_or_garbled_is_a_clear_llm_error(body: bytes, match: str) -> None:
    llm = openai_llm(lambda r: httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body))
    with pytest.raises(LLMError, match=match) as err:
        drain(llm.stream(MESSAGES))
    assert not isinstance(err.value, LLMUnavailableError)


def test_openai_stream_broken_after_text_is_not_retried() -> None:
    calls = []

    def body() -> Iterator[bytes]:
        yield sse_body(chunk("Ann "))
        raise httpx.ReadError("connection reset")

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    with pytest.raises(LLMError, match="broke after 1 piece"):
        drain(openai_llm(handler).stream(MESSAGES))
    assert len(calls) == 1


def test_openai_stream_from_a_server_that_answers_json() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": [{"message": {"content": "Whole."}}], "usage": {}})

    assert drain(openai_llm(handler).stream(MESSAGES)) == (["Whole."], Completion("Whole.", 0, 0, "m"))


def test_openai_stream_auth_failure_names_no_key() -> None:
    llm = OpenAIChatLLM(
        "http://127.0.0.1:9/v1", "m", api_key="sk-secret-123456",
        client=httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(401))),
    )  # fmt: skip
    with pytest.raises(LLMError, match="check the API key") as err:
        drain(llm.stream(MESSAGES))
    assert "sk-secret" not in str(err.value)


def test_stream_thread_does_not_outlive_a_closed_consumer() -> None:
    slow = ScriptedLLM([" ".join(["x"] * 30)], token_delay=0.02)
    gen = GuardedLLM(slow, deadline=Deadline(30)).stream(MESSAGES)
    next(gen)
    gen.close()
    deadline = time.monotonic() + 2
    while slow.stopped == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert slow.stopped == 1
    assert not [t for t in threading.enumerate() if t.name.startswith("crag-stream-scripted") and t.is_alive()]


# -- redaction of text that arrives in pieces -------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "The key is canary-secret-4242 and nothing else.",
        "Send Authorization: Bearer abc123def456ghi789 to the server, then stop.",
        "Use api_key = sk-proj-abcdefghijklmnop1234 here. 天津犹太会堂建成于1940年。",
        "Basic auth: Authorization: Basic dXNlcjpwYXNzMTIz works too.",
    ],
)
def test_stream_redactor_catches_a_secret_however_the_text_is_cut(text: str) -> None:
    secrets = ["canary-secret-4242"]
    whole = redact_text(text, secrets)
    assert "***" in whole
    for size in (1, 2, 3, 5, 8):
        for offset in range(size):
            cuts = [text[:offset]] + [text[i : i + size] for i in range(offset, len(text), size)]
            r = StreamRedactor(secrets)
            out = "".join(r.push(c) for c in cuts) + r.flush()
            assert out == whole, (size, offset, out)


def test_stream_redactor_releases_text_one_word_behind() -> None:
    r = StreamRedactor([])
    assert r.push("The") == "" and r.push(" Tianjin") == "The " and r.push(" Synagogue") == "Tianjin "
    assert [r.push(c) for c in "天津犹太"] == ["Synagogue", "天", "津", "犹"] and r.flush() == "太"
