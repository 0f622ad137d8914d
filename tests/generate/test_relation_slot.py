"""The slot a question asks to fill is named by the answer, not written by its source."""

from __future__ import annotations

import pytest

from crag.generate.relation import RelationCheck
from crag.types import Strip


@pytest.mark.parametrize(
    ("question", "sentence", "text"),
    [
        (
            "What is Hattie Brennock's occupation?",
            "Hattie Brennock was an American botanist.",
            "Hattie Brennock (1871–1950) was an American botanist who catalogued the ferns of Oregon.",
        ),
        ("柯文淑的职业是什么？", "柯文淑是一名陶艺家。", "柯文淑（1962 年出生）是一名陶艺家，作品收藏于台北故宫。"),
        (
            "What is the address of Brennock Press?",
            "Brennock Press is at 14 Fern Lane, Salem.",
            "Brennock Press, a small publisher, has its office at 14 Fern Lane, Salem.",
        ),
        (
            "望溪车站的地址是哪里？",
            "望溪车站位于青州市望溪镇站前路1号。",
            "望溪车站位于青州市望溪镇站前路1号，1931年启用。",
        ),
        ("柯氏陶坊是什么性质的公司？", "柯氏陶坊是一家民营公司。", "柯氏陶坊是一家民营公司，由柯文淑于1990年创办。"),
    ],
)
def test_the_asked_slot_is_named_not_written(question: str, sentence: str, text: str) -> None:
    check = RelationCheck(question)
    # the page's title is its subject (the question's own words would hold the slot word)
    title = text.split("（")[0].split("(")[0].split("，")[0].split(",")[0]
    verdict = check.lexical(sentence, Strip(text, "a.md", "internal", title), answers=True)
    assert verdict.held, verdict


def test_a_role_the_source_never_writes_is_still_missing() -> None:
    check = RelationCheck("Who is the CEO of Hattie Labs?")
    src = Strip("Hattie Brennock founded Hattie Labs in 2009.", "a.md", "internal", "Hattie Labs")
    verdict = check.lexical("The CEO of Hattie Labs is Hattie Brennock.", src, answers=True)
    assert not verdict.held and "ceo" in verdict.missing
