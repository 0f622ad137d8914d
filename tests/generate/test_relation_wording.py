"""Wordings a source states a relation in without the question's words, held with no model call.

Each of these made the bundled model read the window (~2 s on two cores) before the answer's first
sentence could be shown (data/hard, stream_gate): an adverb of frequency the source does not
repeat, a demonstrative jieba glued to a name (该雅芳河), an exact synonym (栖居 for 居住). What a
near miss lacks — the relation itself — is still asked.
"""

from __future__ import annotations

import pytest

from crag.generate.relation import RelationCheck
from crag.types import Strip

HELD = [
    (
        "What concept is frequently used to define complexity classes?",
        "The concept of a reduction is used to define complexity classes.",
        "Many complexity classes are defined using the concept of a reduction.",
    ),
    (
        "这种鱼通常在什么季节产卵？",
        "这种鱼在春季产卵。",
        "这种鱼在春季产卵，产卵后亲鱼离开浅滩。",
    ),
    (
        "该雅芳河最终注入什么地方？",
        "雅芳河最终注入英伦海峡。",
        "雅芳河在多塞特郡的基督城与斯陶尔河汇流，注入英伦海峡。",
    ),
    (
        "新加坡鹦嘴鱼居住在什么地方？",
        "新加坡鹦嘴鱼栖居在珊瑚礁斜坡水域。",
        "新加坡鹦嘴鱼成群地栖居于陡峭的珊瑚礁斜坡水域。",
    ),
    (
        "Where is the Kestrel Labs factory located?",
        "The Kestrel Labs factory is located in Chengdu.",
        "The Kestrel Labs factory is situated in Chengdu, near the airport.",
    ),
]


@pytest.mark.parametrize(
    ("question", "claim", "text"), HELD, ids=["en-frequently", "zh-通常", "zh-该", "zh-栖居", "en-situated"]
)
def test_held_in_words_without_a_model_call(question: str, claim: str, text: str) -> None:
    asked: list[str] = []
    verdict = RelationCheck(question, threshold=0.7).settle(
        claim, Strip(text, "a.txt", "internal"), judge=lambda q, p, claim=None: asked.append(p) or 0.0, answers=True
    )
    assert verdict.held and verdict.how == "words", verdict
    assert asked == []


@pytest.mark.parametrize(
    ("question", "claim", "text", "missing"),
    [
        (
            "Who usually chairs the Kestrel Labs board?",
            "Wang Lei usually chairs the Kestrel Labs board.",
            "Wang Lei is the sales director of Kestrel Labs for southern China.",
            "chairs",
        ),
        (
            "该公司的首席执行官是谁？",
            "该公司的首席执行官是王磊。",
            "王磊是该公司华南区的销售总监。",
            "执行官",
        ),
    ],
    ids=["en-chairs", "zh-首席执行官"],
)
def test_the_relation_itself_is_still_asked(question: str, claim: str, text: str, missing: str) -> None:
    verdict = RelationCheck(question, threshold=0.7).lexical(claim, Strip(text, "a.txt", "internal"), answers=True)
    assert not verdict.held
    assert missing in verdict.missing
