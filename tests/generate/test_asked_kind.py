"""The kind of thing a question asks for is filled by the answer, not written by its source.

"What year was the University of Warsaw established?" is answered by "… in 1816": a source that
writes the founding and the year states it without the word "year", so no model reading is
needed (it cost the first sentence ~1.5 s). Its modifiers stay asked: "which *modern* language".
"""

from __future__ import annotations

import pytest

from crag.generate.relation import RelationCheck
from crag.grade.signals import asked_kind
from crag.types import Strip

HELD = [
    (
        "What year was the University of Warsaw established?",
        "The University of Warsaw was established in 1816.",
        "The University of Warsaw was established in 1816, when the partitions of Poland separated Warsaw from Kraków.",
    ),
    (
        "2010年东亚足球锦标赛由哪个机构举办？",
        "2010年东亚足球锦标赛由东亚足球协会举办。",
        "2010年东亚足球锦标赛由东亚足球协会举办，是第四届东亚足球锦标赛。",
    ),
    (
        "Which company manufactured the Yunque S5?",
        "The Yunque S5 was manufactured by Kestrel Labs.",
        "The Yunque S5 was manufactured by Kestrel Labs in Chengdu.",
    ),
]


@pytest.mark.parametrize(("question", "claim", "text"), HELD, ids=["en-year", "zh-机构", "en-company"])
def test_a_source_need_not_write_the_kind_the_answer_fills(question: str, claim: str, text: str) -> None:
    asked: list[str] = []
    verdict = RelationCheck(question, threshold=0.7).settle(
        claim, Strip(text, "a.txt", "internal"), judge=lambda q, p, claim=None: asked.append(p) or 0.0, answers=True
    )
    assert verdict.held and verdict.how == "words"
    assert asked == []


@pytest.mark.parametrize(
    ("question", "claim", "text", "missing"),
    [
        (
            "The word imperialism has its origins in which modern language?",
            "The word imperialism has its origins in Latin.",
            'Its name originated from the Latin word "imperium", which means to rule over large territories.',
            "modern",
        ),
        (
            "彼得·吕姆克尔夫在什么杂志上发表了诗歌？",
            "彼得·吕姆克尔夫在「konkret」杂志上发表了诗歌。",
            "彼得·吕姆克尔夫在「konkret」杂志上发表了文章。",
            "诗歌",
        ),
    ],
    ids=["en-modern", "zh-诗歌"],
)
def test_what_qualifies_the_kind_is_still_asked(question: str, claim: str, text: str, missing: str) -> None:
    verdict = RelationCheck(question, threshold=0.7).lexical(claim, Strip(text, "a.txt", "internal"), answers=True)
    assert not verdict.held
    assert missing in verdict.missing


def test_the_asked_kind_in_both_languages() -> None:
    assert asked_kind("In what types of organisms did the adaptive immune system first evolve?") == ["organisms"]
    assert asked_kind("意见领袖一词源自于什么理论？") == ["理论"]
    assert asked_kind("What is the lowest court in the European Union?") == []
    assert asked_kind("Who is the CEO of Kestrel Labs?") == []
    assert asked_kind("云雀S5的电池容量是多少？") == []
