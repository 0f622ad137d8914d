"""The year or figure a question asks with is part of what the answer must be stated for.

"Who described a steam turbine in 1629?" answered from a page about an earlier turbine ("Taqi
al-Din described one in 1551") is the near miss of the same event in another year: the claim is
true of its source and no answer to the question. Invented documents, both languages.
"""

from __future__ import annotations

import pytest

from crag.generate.relation import RelationCheck
from crag.types import Strip

pytestmark = pytest.mark.unit

CASES = [
    (
        "Who opened the Larkspur Rotterdam office in 2019?",
        Strip(
            "Mira Oosten opened the Larkspur Rotterdam office in 2016. It moved to the harbour in 2021.",
            "r.md",
            "internal",
            "Larkspur Rotterdam",
        ),
        "Mira Oosten opened the Larkspur Rotterdam office in 2016.",
        Strip(
            "In 2019 Joris Haak opened the second Larkspur Rotterdam office, near the station.",
            "s.md",
            "internal",
            "Larkspur Rotterdam",
        ),
        "Joris Haak opened the Larkspur Rotterdam office in 2019.",
    ),
    (
        "青岚科技2021年的营收是多少？",
        Strip("青岚科技 2020 年营收为 3.7 亿元，同比增长 12%。", "f.md", "internal", "青岚科技财务摘要"),
        "青岚科技的营收为3.7亿元。",
        Strip("青岚科技 2021 年营收为 4.5 亿元，创历史新高。", "g.md", "internal", "青岚科技财务摘要"),
        "青岚科技2021年的营收为4.5亿元。",
    ),
]


@pytest.mark.parametrize(("question", "other", "wrong", "source", "right"), CASES)
def test_an_answer_for_another_year_is_not_held(
    question: str, other: Strip, wrong: str, source: Strip, right: str
) -> None:
    check = RelationCheck(question)
    verdict = check.settle(wrong, other, judge=lambda q, p, claim=None: 0.99, answers=True)
    assert not verdict.held and verdict.probability is None, verdict  # written or not: no reading saves it
    assert check.settle(right, source, judge=lambda q, p, claim=None: 0.0, answers=True).held
    # a later sentence of the answer is not held to the question's year
    assert check.lexical(wrong, other, answers=False).held


CASES_YEAR = [
    (
        "Who built a tidal mill at Harrow Bay in 1788?",
        "Edda Lune built a tidal mill at Harrow Bay in 1761.",
        "Tomas Verre built a tidal mill at Harrow Bay in 1788.",
        "A tidal mill was built at Harrow Bay by Edda Lune in 1761 and by Tomas Verre in 1788.",
    ),
    (
        "1788年谁在哈罗湾建了潮汐磨坊？",
        "1761年，艾达·卢恩在哈罗湾建了潮汐磨坊。",
        "1788年，托马斯·维尔在哈罗湾建了潮汐磨坊。",
        "哈罗湾的潮汐磨坊先后由艾达·卢恩于1761年、托马斯·维尔于1788年建造。",
    ),
]


@pytest.mark.parametrize(("question", "wrong", "right", "text"), CASES_YEAR)
def test_an_answer_dated_to_another_year_is_not_held_by_a_source_naming_both(
    question: str, wrong: str, right: str, text: str
) -> None:
    source = Strip(text, "m.md", "internal", "Harrow Bay")
    check = RelationCheck(question)
    assert not check.settle(wrong, source, judge=lambda q, p, claim=None: 0.99, answers=True).held
    assert check.settle(right, source, judge=lambda q, p, claim=None: 0.99, answers=True).held
    # a question that asks for the time is answered by another year
    en = Strip(CASES_YEAR[0][3], "m.md", "internal", "Harrow Bay")
    when = RelationCheck("When did Tomas Verre build a tidal mill at Harrow Bay, after the 1760 flood?")
    assert when.settle("Tomas Verre built a tidal mill at Harrow Bay in 1788.", en, judge=lambda q, p, claim=None: 0.99,
                       answers=True).held  # fmt: skip
