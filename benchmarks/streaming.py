"""Streaming (issue 13): what streaming adds to the model's own first token, how early the
first token comes, and what cancelling mid-answer leaves behind.

The embedded model is wrapped so the time of its own first delta is known in every run;
each path is measured in this process against that time, one after another, same engine:

* ``llama.cpp``: a direct ``LlamaCppLLM.stream`` call on the generator's exact prompt;
* ``python``: ``CRAG.ask_stream`` (first ``token`` event);
* ``cli``: ``crag ask`` run in-process, its stdout timed at each write (first answer byte);
* ``sse``: ``POST /v1/ask`` with ``stream=true`` over uvicorn on 127.0.0.1 (first ``event: token``);
* ``chat``: ``/v1/chat/completions`` through the official ``openai`` client, ``stream=True``.

Then ``--cancels`` streamed requests are cut after their first token: how long until the
model is free, whether any generation is left running, and when the next request's model
call starts.

``--per-token`` measures only what the streaming machinery adds to each model token: the
embedded model's deltas are passed on as ``token`` events by a run in an ``AnswerStream``
(through the request's ``GuardedLLM`` with a deadline, as a real answer is), and each delta's
wait from llama.cpp handing it over to the reader getting it is timed, for the reader in this
thread (``for e in stream``) and for the server's async reader (``crag.server.live.live_events``,
what ``/v1/ask`` and the chat stream read). A source that writes instantly gives the CPU cost
per token of the same chain (no model time hides it).

    python benchmarks/streaming.py [--model qwen2.5-coder-1.5b] [--cancels 20] [--max-tokens 160]
    python benchmarks/streaming.py --per-token [--repeats 3] [--max-tokens 120]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from crag.config import CragSettings
from crag.deadline import Deadline
from crag.engine import CRAG
from crag.event_names import TOKEN
from crag.llm.guard import GuardedLLM
from crag.llm.llama_cpp import LlamaCppLLM
from crag.pipeline.events import AnswerEvent, TokenEvent
from crag.pipeline.live import AnswerStream
from crag.protocols import Completion, TokenStream
from crag.registry import LLMS
from crag.server.app import create_app
from crag.server.live import live_events
from crag.testing.net import serve_in_thread
from crag.types import Action, Answer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
QUESTION = "What happened to Warsaw between 1796 and 1816? Answer in three sentences."
# --per-token: a prompt the model answers at length (many tokens per stream)
COUNTING = "Write the numbers from one to one hundred in English words, separated by commas."


class TimedLLM:
    """The embedded model, noting when each stream's first delta came out of llama.cpp."""

    def __init__(self, inner: LlamaCppLLM) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.first: list[float] = []
        self.handed: list[float] = []  # when each non-empty delta of the last stream was handed on
        self.messages: Sequence[dict[str, str]] = []

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        return self.inner.complete(messages, **kw)

    def stream(self, messages: Sequence[dict[str, str]], **kw: Any) -> TokenStream:
        self.messages = messages
        gen = self.inner.stream(messages, **kw)
        noted = False
        self.handed = []
        try:
            while True:
                try:
                    delta = next(gen)
                except StopIteration as end:
                    return end.value  # type: ignore[no-any-return]
                if delta and not noted:  # "" while the prompt is read: no token yet
                    self.first.append(time.monotonic())
                    noted = True
                if delta:
                    self.handed.append(time.monotonic())
                yield delta
        finally:
            gen.close()


class TimedStdout(io.TextIOBase):
    """sys.stdout for the in-process CLI: remembers when each write happened."""

    def __init__(self) -> None:
        self.writes: list[tuple[float, str]] = []

    def write(self, s: str) -> int:
        self.writes.append((time.monotonic(), s))
        return len(s)

    def isatty(self) -> bool:
        return False


def run_python(engine: CRAG, timed: TimedLLM) -> dict[str, Any]:
    t0 = time.monotonic()
    first = None
    pieces = 0
    with engine.ask_stream(QUESTION) as events:
        for e in events:
            if isinstance(e, TokenEvent):
                pieces += 1
                first = first or time.monotonic()
            if isinstance(e, AnswerEvent):
                answer = e.value
    end = time.monotonic()
    assert first is not None
    return _row(t0, first, end, timed.first[-1], pieces, answer.answer)


def run_cli(kb: Path, config: Path, timed: TimedLLM) -> dict[str, Any]:
    from crag.cli import app

    out = TimedStdout()
    real = sys.stdout
    sys.stdout = out  # the CLI's RedactingStream looks sys.stdout up at each write
    t0 = time.monotonic()
    try:
        app(["ask", QUESTION, "--kb", str(kb), "-c", str(config), "--search", "none"], standalone_mode=False)
    finally:
        sys.stdout = real
    end = time.monotonic()
    writes = out.writes
    decided = next(i for i, (_, s) in enumerate(writes) if "confidence" in s)
    # The answer is written between the blank line after the decision (and any "searching:"
    # line) and the blank line before the sources.
    start = next(i for i in range(decided + 1, len(writes)) if writes[i][1] == "\n") + 1
    stop = next((i for i in range(start, len(writes)) if writes[i][1].startswith("\n")), len(writes))
    answer_writes = [(t, s) for t, s in writes[start:stop] if s]
    first = answer_writes[0][0]
    text = "".join(s for _, s in answer_writes)
    return _row(t0, first, end, timed.first[-1], len(answer_writes), text)


def run_sse(base: str, timed: TimedLLM) -> dict[str, Any]:
    t0 = time.monotonic()
    first = None
    pieces = 0
    text = ""
    with httpx.Client(base_url=base, timeout=600) as client:
        with client.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as r:
            event = ""
            for line in r.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "token":
                    pieces += 1
                    first = first or time.monotonic()
                    text += json.loads(line[6:])["delta"]
    end = time.monotonic()
    assert first is not None
    return _row(t0, first, end, timed.first[-1], pieces, text)


def run_chat(base: str, timed: TimedLLM) -> dict[str, Any]:
    import openai

    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=600)
    t0 = time.monotonic()
    first = None
    pieces = 0
    text = ""
    for chunk in client.chat.completions.create(
        model="crag", stream=True, messages=[{"role": "user", "content": QUESTION}]
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces += 1
            first = first or time.monotonic()
            text += chunk.choices[0].delta.content
    end = time.monotonic()
    assert first is not None
    return _row(t0, first, end, timed.first[-1], pieces, text)


def run_direct(timed: TimedLLM, max_tokens: int) -> dict[str, Any]:
    t0 = time.monotonic()
    first = None
    pieces = []
    for delta in timed.inner.stream(timed.messages, max_tokens=max_tokens):
        if not delta:  # still reading the prompt
            continue
        first = first or time.monotonic()
        pieces.append(delta)
    end = time.monotonic()
    assert first is not None
    return _row(t0, first, end, first, len(pieces), "".join(pieces))


def _row(t0: float, first: float, end: float, model_first: float, pieces: int, text: str) -> dict[str, Any]:
    return {
        "first_token_s": round(first - t0, 3),
        "total_s": round(end - t0, 3),
        "first_token_share": round((first - t0) / (end - t0), 3),
        "added_over_model_first_token_s": round(first - model_first, 3),
        "pieces": pieces,
        "sentences": sum(text.count(c) for c in ".。!?！？"),
        "text": text.strip()[:400],
    }


def cancels(base: str, engine: CRAG, timed: TimedLLM, n: int) -> dict[str, Any]:
    lock = timed.inner._loaded.lock  # type: ignore[union-attr]
    freed: list[float] = []
    next_start: list[float] = []
    with httpx.Client(base_url=base, timeout=600) as client:
        for _ in range(n):
            with client.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as r:
                for line in r.iter_lines():
                    if line.startswith("event: token"):
                        break
            cancelled = time.monotonic()  # the connection is closed here, mid-answer
            while lock.locked() and time.monotonic() - cancelled < 30:
                time.sleep(0.005)
            freed.append(time.monotonic() - cancelled)
            # The next request: when does its model call start (its first delta minus the
            # time its own steps before generation took is not needed: the lock was free)?
            before = len(timed.first)
            with client.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as r:
                for line in r.iter_lines():
                    if line.startswith("event: token"):
                        break
            assert len(timed.first) > before
            next_start.append(timed.first[before] - cancelled)
    deadline = time.monotonic() + 10
    while lock.locked() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)
    stuck = [t.name for t in threading.enumerate() if t.name.startswith("crag-stream") and t.is_alive()]
    return {
        "cancelled": n,
        "stuck_generations": len(stuck) + int(lock.locked()),
        "model_free_after_cancel_s": {"max": round(max(freed), 3), "median": round(statistics.median(freed), 3)},
        "next_request_first_token_after_cancel_s": {
            "max": round(max(next_start), 3),
            "median": round(statistics.median(next_start), 3),
        },
    }


# -- --per-token: what the streaming machinery adds to each model token --------------------------
def _token_run(model: Any, max_tokens: int) -> Any:
    """A run for an ``AnswerStream`` that passes each model delta on as a ``token`` event, through
    the request's guard with a deadline and the reader's heartbeat (as a streamed answer does)."""
    messages = [{"role": "user", "content": COUNTING}]

    def run(on_step: Any) -> Answer:
        llm = GuardedLLM(model, deadline=Deadline(600), heartbeat=on_step.heartbeat)
        for delta in llm.stream(messages, max_tokens=max_tokens):
            if delta:
                on_step(TOKEN, delta)
        return Answer(QUESTION, "", Action.CORRECT, 1.0, [], [], "bench", {})

    return run


def _read_sync(stream: AnswerStream) -> list[float]:
    return [time.monotonic() for e in stream if isinstance(e, TokenEvent)]


async def _read_async(stream: AnswerStream) -> list[float]:
    return [time.monotonic() async for e in live_events(stream) if isinstance(e, TokenEvent)]


def _waits(model: Any, max_tokens: int, reader: str, handed: Any) -> list[float]:
    """Seconds from each delta's hand-over (``handed()`` after the run) to its reader."""
    stream = AnswerStream(_token_run(model, max_tokens), trace_id="bench")
    got = _read_sync(stream) if reader == "thread" else asyncio.run(_read_async(stream))
    sent = handed()
    assert len(got) == len(sent) > 0, (len(got), len(sent))
    return [g - s for g, s in zip(got, sent, strict=True)]


class InstantLLM:
    """A model that writes ``n`` one-character tokens at once, noting when each is handed on."""

    model_id = "instant"

    def __init__(self, n: int) -> None:
        self.n = n
        self.handed: list[float] = []

    def stream(self, messages: Any, **kw: Any) -> TokenStream:
        self.handed = []
        for _ in range(self.n):
            self.handed.append(time.monotonic())
            yield "x"
        return Completion("x" * self.n, 10, self.n, self.model_id)

    def complete(self, messages: Any, **kw: Any) -> Completion:
        return Completion("x" * self.n, 10, self.n, self.model_id)


def _us(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_us": round(statistics.median(ordered) * 1e6, 1),
        "p90_us": round(ordered[int(0.9 * (len(ordered) - 1))] * 1e6, 1),
        "mean_us": round(statistics.fmean(ordered) * 1e6, 1),
    }


def per_token(model_name: str, max_tokens: int, repeats: int, instant_tokens: int) -> dict[str, Any]:
    """Per-token wait from the model to the reader (embedded model), and the CPU cost per token."""
    timed = TimedLLM(LlamaCppLLM(model_name, n_ctx=4096))
    timed.inner.warm_up()
    out: dict[str, Any] = {"model": model_name, "max_tokens": max_tokens, "repeats": repeats}
    waits: dict[str, list[float]] = {"thread": [], "async": []}
    for _ in range(repeats + 1):  # the first round reads the prompt: not counted
        for reader in waits:
            got = _waits(timed, max_tokens, reader, lambda: timed.handed)
            if _ > 0:
                waits[reader] += got
    for reader, values in waits.items():
        out[f"embedded_{reader}_reader"] = {"tokens": len(values), **_us(values)}
    instant = InstantLLM(instant_tokens)
    for reader in waits:
        t0 = time.monotonic()
        _waits(instant, instant_tokens, reader, lambda: instant.handed)
        out[f"instant_{reader}_reader_us_per_token"] = round((time.monotonic() - t0) / instant_tokens * 1e6, 1)
    return out


def _main_per_token(args: argparse.Namespace) -> None:
    result = per_token(args.model, args.max_tokens, args.repeats, args.instant_tokens)
    result["load_average"] = os.getloadavg()
    out = Path(args.out or ROOT / "benchmarks" / "out" / "streaming_per_token.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", default=str(ROOT / ".cache" / "bench-stream-kb"))
    ap.add_argument("--model", default=CragSettings().llm.model)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--cancels", type=int, default=20)
    ap.add_argument("--out", default=None, help="default: benchmarks/out/streaming.json (streaming_per_token.json)")
    ap.add_argument("--per-token", action="store_true", help="only the per-token overhead (no KB, no server)")
    ap.add_argument("--repeats", type=int, default=3, help="--per-token: timed streams per reader")
    ap.add_argument("--instant-tokens", type=int, default=20000, help="--per-token: tokens of the instant source")
    args = ap.parse_args()
    if args.per_token:
        _main_per_token(args)
        return

    timed = TimedLLM(LlamaCppLLM(args.model, n_ctx=4096))
    timed.inner.warm_up()
    LLMS.register("bench-timed", lambda settings, deps: timed)
    kb = Path(args.kb)
    overrides = {
        "kb": {"path": kb},
        "search": {"provider": "none"},
        "llm": {"backend": "bench-timed", "max_tokens": args.max_tokens},
    }
    engine = CRAG(CragSettings(**overrides))
    engine.ingest([SAMPLE / "internal"])
    config = kb.parent / "bench-stream.toml"
    config.write_text(
        f'[kb]\npath = "{kb}"\n[llm]\nbackend = "bench-timed"\nmax_tokens = {args.max_tokens}\n'
        '[search]\nprovider = "none"\n',
        encoding="utf-8",
    )
    # Warm the embedder, evaluator and model with another question: the timed question's own
    # prompt is new to llama.cpp on its first (python) run; the later paths find it cached.
    engine.ask("When was the Royal University of Warsaw established?")

    results: dict[str, Any] = {"model": args.model, "question": QUESTION, "load_average": os.getloadavg()}
    rows: dict[str, Any] = {}
    rows["python"] = run_python(engine, timed)
    rows["llama.cpp"] = run_direct(timed, args.max_tokens)
    rows["cli"] = run_cli(kb, config, timed)
    with serve_in_thread(create_app(engine, api_keys=[])) as base:
        rows["sse"] = run_sse(base, timed)
        rows["chat"] = run_chat(base, timed)
        results["cancel"] = cancels(base, engine, timed, args.cancels)
    results["paths"] = rows
    results["load_average_after"] = os.getloadavg()
    out = Path(args.out or ROOT / "benchmarks" / "out" / "streaming.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    for name, row in rows.items():
        print(f"{name:10} first {row['first_token_s']:6.2f}s of {row['total_s']:6.2f}s "
              f"({row['first_token_share']:.0%}), +{row['added_over_model_first_token_s']:.3f}s over the model, "
              f"{row['pieces']} pieces, {row['sentences']} sentence(s)")  # fmt: skip
    print(json.dumps(results["cancel"], indent=2))


if __name__ == "__main__":
    main()
