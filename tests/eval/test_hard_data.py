"""Consistency of the hard benchmark (data/hard, built by scripts/build_hard_data.py).

What makes it hard must stay true: every action is needed, the internal KB really lacks
the answers of ambiguous and incorrect questions, unanswerable questions have their
answer nowhere, and same-name distractors and same-article passages are present.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from crag.eval.datasets import load_dataset
from crag.eval.metrics import gold_match

pytestmark = pytest.mark.unit

HARD = Path(__file__).resolve().parents[2] / "data" / "hard"
ACTIONS = ("correct", "ambiguous", "incorrect")


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def data() -> dict[str, list[dict]]:
    internal = _read(HARD / "internal" / "zh.jsonl") + _read(HARD / "internal" / "en.jsonl")
    return {"internal": internal, "external": _read(HARD / "external" / "corpus.jsonl"),
            "questions": _read(HARD / "questions.jsonl")}  # fmt: skip


def test_loads_as_an_eval_dataset_with_enough_questions_per_language_and_action() -> None:
    items = load_dataset(HARD / "questions.jsonl")
    answerable = Counter((it.lang, it.extra["expected_action"]) for it in items if it.answerable)
    assert sum(answerable.values()) >= 200
    for lang in ("zh", "en"):
        assert all(answerable[(lang, a)] >= 30 for a in ACTIONS), answerable
        assert sum(1 for it in items if it.lang == lang and not it.answerable) >= 10


def test_gold_passage_location_matches_the_expected_action(data: dict[str, list[dict]]) -> None:
    internal = {p["id"] for p in data["internal"]}
    external = {p["id"] for p in data["external"]}
    passages = {p["id"]: p for p in data["internal"] + data["external"]}
    assert not internal & external
    for q in data["questions"]:
        where = {"correct": internal, "ambiguous": external, "incorrect": external}.get(q["expected_action"])
        if where is None:  # unanswerable
            assert q["answerable"] is False and q["expected_action"] == "unanswerable"
            continue
        assert q["gold_passage_id"] in where, q["id"]
        assert any(a in passages[q["gold_passage_id"]]["text"] for a in q["answers"]), q["id"]


def test_the_internal_kb_lacks_what_correction_must_find(data: dict[str, list[dict]]) -> None:
    for q in data["questions"]:
        same_lang = [p["text"] for p in data["internal"] if p["metadata"]["lang"] == q["lang"]]
        if q["expected_action"] in ("ambiguous", "incorrect"):
            assert not gold_match("\n".join(same_lang), q["answers"]), q["id"]
        if q["expected_action"] == "ambiguous":  # the article itself is partly internal
            titles = {p["title"] for p in data["internal"]}
            assert q["title"] in titles, q["id"]


def test_chinese_unanswerable_gold_segments_are_nowhere(data: dict[str, list[dict]]) -> None:
    ids = {p["id"] for p in data["internal"] + data["external"]}
    titles = {p["title"] for p in data["internal"] + data["external"]}
    everything = "\n".join(p["text"] for p in data["internal"] + data["external"])
    zh = [q for q in data["questions"] if q["lang"] == "zh" and not q.get("answerable", True)]
    assert zh
    for q in zh:
        assert q["gold_passage_id"] not in ids and q["title"] in titles  # the rest of the article stays
        assert not gold_match(everything, q["answers"]), q["id"]  # and the answer is nowhere


def test_hard_negatives_are_present(data: dict[str, list[dict]]) -> None:
    # Same-name families (Chinese) and many passages per article (English).
    assert sum(q["same_name_distractors"] for q in data["questions"]) >= 30
    per_title = Counter(p["title"] for p in data["internal"] + data["external"] if p["metadata"]["lang"] == "en")
    assert min(per_title.values()) >= 10


def test_attribution_is_shipped() -> None:
    text = (HARD / "ATTRIBUTION.md").read_text("utf-8")
    assert "CC BY-SA 4.0" in text and "CMRC 2018" in text and "SQuAD 2.0" in text


def test_the_trained_evaluator_never_saw_these_questions(data: dict[str, list[dict]]) -> None:
    # The benchmark and the evaluator's training pairs come from the same two data sets;
    # a question of one in the other would let the evaluator route it from memory.
    pairs = Path(__file__).resolve().parents[2] / "data" / "eval_pairs" / "train.jsonl"
    trained_on = {row["query"] for row in _read(pairs)}
    seen = [q["id"] for q in data["questions"] if q["question"] in trained_on]
    assert not seen, f"{len(seen)} data/hard questions are in the evaluator's training pairs: {seen[:5]}"
