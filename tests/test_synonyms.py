"""Relation synonyms for grading and the claim check, and Chinese question words in tokens."""

from __future__ import annotations

import pytest

from crag.grade.signals import coverage
from crag.synonyms import align, synonyms
from crag.text import tokenize

pytestmark = pytest.mark.unit


def test_a_group_lists_its_other_words_in_either_case() -> None:
    assert "创办" in synonyms("成立") and "成立" in synonyms("创办")
    assert synonyms("Founded") == ("established",)
    assert synonyms("开始") == () and synonyms("started") == ()


def test_align_writes_the_question_word_for_its_synonym_only() -> None:
    assert align({"成立"}, "他于 2012 年创办了公司") == "他于 2012 年成立了公司"
    assert align({"cost"}, "The Aster X2 is priced at 349 euros; the costume is extra.") == (
        "The Aster X2 is cost at 349 euros; the costume is extra."
    )
    assert align({"ceo"}, "Ann Lee is the Chief Executive Officer.") == "Ann Lee is the ceo."
    assert align({"员工"}, "他于 2012 年创办了公司") == "他于 2012 年创办了公司"


def test_coverage_counts_a_synonym_as_the_question_word() -> None:
    assert coverage("青岚科技成立于哪一年？", "赵启明于 2012 年在苏州创办青岚科技。") == 1.0
    assert coverage("When was Kestrel Labs founded?", "Kestrel Labs was established in 2014.") == 1.0
    assert coverage("When was Kestrel Labs founded?", "Kestrel Labs started in 2014.") < 1.0


@pytest.mark.parametrize(
    ("question", "words"),
    [
        ("青岚科技成立于哪一年？", ["青岚", "科技", "成立"]),
        ("青岚科技计划什么时候 IPO？", ["青岚", "科技", "计划", "ipo"]),
        ("陈静毕业于哪所大学？", ["陈静", "毕业", "大学"]),
    ],
)
def test_a_chinese_question_word_is_no_term_nor_are_its_parts(question: str, words: list[str]) -> None:
    assert tokenize(question) == words  # 哪一年 gave 一年, a word no answer holds


def test_search_mode_still_gives_the_parts_of_content_words() -> None:
    assert tokenize("通信卫星发射") == ["通信", "卫星", "通信卫星", "发射"]
    assert "一年" in tokenize("一年有几天年假")
