"""Gold-answer metrics for Chinese and English answers (SQuAD / CMRC-style normalisation)."""

from __future__ import annotations

import pytest

from crag.eval.metrics import (
    context_recall,
    exact_match,
    gold_match,
    normalize_answer,
    score_answer,
    token_f1,
    tokens_for_f1,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Ming Dynasty!", "ming dynasty"),
        ("  a   quick,  test. ", "quick test"),
        ("天津犹太会堂建成于1940年[1]。", "天津犹太会堂建成于1940年"),
        ("「Garamycin」", "garamycin"),
        ("1880 年代", "1880年代"),  # spaces next to Chinese carry no meaning
        ("ＡＢＣ１２３", "abc123"),  # full-width forms fold (NFKC)
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_f1_tokens_chinese_by_character_english_by_word() -> None:
    assert tokens_for_f1("庆大霉素 Garamycin") == ["庆", "大", "霉", "素", "garamycin"]
    assert tokens_for_f1("The Royal University of Warsaw") == ["royal", "university", "of", "warsaw"]


def test_token_f1_known_values() -> None:
    assert token_f1("在1880年代走向商业化", ["1880年代"]) == pytest.approx(0.5)  # P 3/9, R 1
    assert token_f1("Ming dynasty", ["the Ming dynasty"]) == 1.0  # articles dropped
    # P = 1/3, R = 1/2 -> 0.4; the best of several gold answers counts.
    assert token_f1("red big ship", ["blue ship", "zzz"]) == pytest.approx(0.4)
    assert token_f1("nothing shared", ["Paris"]) == 0.0
    assert token_f1("", ["Paris"]) == 0.0


def test_gold_match_and_exact_match() -> None:
    assert gold_match("It was established in 1816 [1].", ["1816"])
    assert not gold_match("It was established in 18160.", ["1816"])  # word boundary for Latin answers
    assert gold_match("天津犹太会堂于1940年建成[1]。", ["1940年"])
    assert gold_match("庆大霉素的商品名是Garamycin。", ["「Garamycin」", "Garamycin"])
    assert not gold_match("The provided sources do not contain the answer.", ["Ming dynasty"])
    assert exact_match("The Ming dynasty.", ["Ming dynasty"])
    assert not exact_match("It was the Ming dynasty.", ["Ming dynasty"])


def test_context_recall_and_score_answer() -> None:
    ctx = ["Warsaw is in Poland.", "The Royal University of Warsaw was established in 1816."]
    assert context_recall(ctx, ["1816"])
    assert not context_recall(ctx[:1], ["1816"])
    m = score_answer("The provided sources do not contain the answer.", ["1816"], ctx)
    assert (m.accuracy, m.success, m.context_recall) == (0.0, 0.0, 1.0)
    assert m.context_tokens > 10
    zh = score_answer("未能找到可靠的答案：没有找到与该问题相关的资料。", ["1940年"], [])
    assert zh.success == 0.0 and zh.context_tokens == 0
