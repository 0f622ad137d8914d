"""Incorrect does not discard a passage the model reads the answer in (crag.correct.reread).

Unit tests of the control flow with a scripted reader; end to end with the embedded 1.5B, the
trained evaluator and the corpus provider on an invented company's handbook, whose remote-work
sentence the evaluator grades below τ_low, in English and Chinese.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crag import CRAG
from crag.config import CragSettings
from crag.correct.reread import READ, reread
from crag.testing.fakes import JudgingLLM
from crag.types import Chunk, Evaluation, Grade, Hit, Query, Retrieval
from llm_fixtures import project_cache_dir

NEARMISS = Path(__file__).resolve().parents[2] / "data" / "nearmiss"


def _hits(n: int) -> Retrieval:
    return Retrieval([Hit(Chunk(f"c{i}", f"Passage {i}.", "h.md", title="Handbook"), score=0.1) for i in range(n)])


def _low(n: int, score: float = 0.05) -> Evaluation:
    return Evaluation([Grade(f"c{i}", score) for i in range(n)], score, "", "trained")


class Reader(JudgingLLM):
    model_id = "qwen2.5-coder-1.5b"  # a calibrated reader: the claim check's threshold applies


@pytest.mark.unit
def test_a_passage_the_model_reads_the_answer_in_is_kept_between_the_thresholds() -> None:
    query, cfg = Query.of("How many days a week can employees work remotely?"), CragSettings()
    llm = Reader([], yes=[0.2, 0.9, 0.1])
    graded = reread(query, _hits(5), _low(5), llm, cfg)
    scores = [g.score for g in graded.grades]
    assert query.lower < scores[1] < query.upper and scores[0] == scores[2] == 0.05, scores  # Ambiguous, not Correct
    assert graded.grades[1].signals["reread"] == 0.9 and "reads the answer" in graded.grades[1].reason
    assert len(llm.scored) == READ == 3  # the first READ passages only


@pytest.mark.unit
@pytest.mark.parametrize(
    ("grading", "llm", "cfg"),
    [
        (_low(3, 0.5), Reader([], yes=[0.9] * 3), CragSettings()),  # not Incorrect: nothing to reread
        (_low(3), JudgingLLM([], yes=[0.9] * 3), CragSettings()),  # an uncalibrated reader is not asked
        (_low(3), Reader([], yes=[0.9] * 3), CragSettings(correction={"reread_incorrect": False})),
        (Evaluation([Grade("c0", 0.05)], 0.05, "", "llm"), Reader([], yes=[0.9]), CragSettings()),  # read already
    ],
)
def test_the_evaluator_stands_when_a_reread_does_not_apply(
    grading: Evaluation, llm: JudgingLLM, cfg: CragSettings
) -> None:
    assert reread(Query.of("Who?"), _hits(len(grading.grades)), grading, llm, cfg) is grading
    assert not llm.scored


@pytest.mark.unit
def test_a_reader_that_fails_leaves_the_grades() -> None:
    from crag.errors import LLMError

    llm = Reader([], yes=[LLMError("no logprobs")])
    grading = _low(3)
    assert reread(Query.of("Who?"), _hits(3), grading, llm, CragSettings()) is grading


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "gold"),
    [("How many days a week can Larkspur employees work remotely?", "three"), ("青岚科技的餐补是每月多少钱？", "600")],
)
def test_an_answer_graded_irrelevant_is_read_before_it_is_discarded(tmp_path: Path, question: str, gold: str) -> None:
    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    engine = CRAG.from_config(
        kb={"path": tmp_path / "kb"},
        search={"provider": "corpus", "corpus_path": NEARMISS / "external"},
        correction={"search_timeout": 120},
    )
    engine.ingest([NEARMISS / "internal", NEARMISS / "kestrel"])  # the benchmark's knowledge base
    a = engine.ask(question)
    trace = engine.traces.get(a.trace_id)
    reread_ = [g for g in trace["grades"] if "reread" in (g.get("signals") or {})]
    assert reread_, trace["grades"]  # every grade was at or below τ_low, and the model read the answer in one
    assert a.action.value == "ambiguous" and not a.refused and gold in a.answer, a.answer
    assert any(c.origin == "internal" for c in a.context)


@pytest.mark.unit
def test_a_model_that_is_down_fails_the_request_as_generation_would() -> None:
    from crag.errors import LLMUnavailableError

    llm = Reader([], yes=[LLMUnavailableError("timed out")])
    with pytest.raises(LLMUnavailableError):
        reread(Query.of("Who?"), _hits(3), _low(3), llm, CragSettings())
