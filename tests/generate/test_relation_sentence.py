"""The sentence that answers states its relation in one sentence of its source.

Two neighbouring sentences can hold every word of a claim without stating it: "保险公司表示…。
…鑫诺卫星通信有限公司表示…" holds "鑫诺卫星通信有限公司是保险公司" word for word, and so does
"Insurers said… . Sinosat Ltd. said…" for "Sinosat is an insurer". Such a claim is left to the
judge's reading of the window; one sentence (under its page's title) that holds it is enough.
"""

from __future__ import annotations

import pytest

from crag.generate.relation import ACROSS, Judge, RelationCheck
from crag.types import Strip

NEAR = [
    (
        "鑫诺卫星通信有限公司是什么性质的公司？",
        "鑫诺卫星通信有限公司是保险公司。",
        "保险公司表示，保险额度属于保密条款，不能对外公布。针对鑫诺二号的故障，鑫诺卫星通信有限公司表示将发射备份卫星。",
    ),
    (
        "What kind of company is Sinosat Communications?",
        "Sinosat Communications is an insurance company.",
        "The insurance company said the sum insured was confidential. Sinosat Communications said it would launch a "
        "backup satellite.",
    ),
]


@pytest.mark.parametrize(("question", "sentence", "text"), NEAR, ids=["zh", "en"])
def test_two_sentences_side_by_side_are_not_held_by_their_words(question: str, sentence: str, text: str) -> None:
    verdict = RelationCheck(question).lexical(sentence, Strip(text, "a.md", "internal", "鑫诺二号"), answers=True)
    assert not verdict.held and verdict.missing == [ACROSS], verdict


@pytest.mark.parametrize(("question", "sentence", "text"), NEAR, ids=["zh", "en"])
def test_the_judge_decides_them(question: str, sentence: str, text: str) -> None:
    check = RelationCheck(question, threshold=0.6)
    src = Strip(text, "a.md", "internal", "Sinosat")

    def judge(answers: float, states: float) -> Judge:
        def read(q: str, p: str, claim: str | None = None) -> float:
            return answers if claim is None else states

        return read

    no = check.settle(sentence, src, judge=judge(0.2, 0.99), answers=True)
    yes = check.settle(sentence, src, judge=judge(0.65, 0.95), answers=True)
    # the relation words are written, only not together: the usual bar, not the strict one
    assert (no.held, no.how, yes.held, yes.how) == (False, "judge", True, "judge")
    # read as the question it passes (0.73 for the insurer), read as the claim it does not
    unstated = check.settle(sentence, src, judge=judge(0.73, 0.21), answers=True)
    assert not unstated.held and unstated.probability == 0.21


@pytest.mark.parametrize(
    ("question", "sentence", "text", "title"),
    [
        (
            "Where is Kestrel Labs headquartered?",
            "Kestrel Labs is headquartered in Chengdu.",
            "Kestrel Labs was founded in 2014. It is headquartered in Chengdu.",
            "Kestrel Labs",
        ),
        (
            "红隼实验室的总部在哪里？",
            "红隼实验室的总部在成都。",
            "红隼实验室成立于2014年。总部设在成都。",
            "红隼实验室",
        ),
        (
            "What kind of company is Sinosat Communications?",
            "Sinosat Communications is a state-owned company.",
            "The launch was delayed. Sinosat Communications is a state-owned company based in Beijing.",
            "Sinosat",
        ),
    ],
)
def test_one_sentence_under_its_title_still_holds_the_claim(
    question: str, sentence: str, text: str, title: str
) -> None:
    verdict = RelationCheck(question).lexical(sentence, Strip(text, "a.md", "internal", title), answers=True)
    assert verdict.held and verdict.how == "words", verdict


@pytest.mark.parametrize(
    ("question", "sentence", "text", "title"),
    [
        (
            "「香港四大才子」是指哪四位？",
            "倪匡、黄霑、刘国勋、金庸。",
            "倪匡曾替金庸捉刀《天龙八部》。黄霑原名黄湛森，生于广东广州。",
            "香港四大才子",
        ),
        (
            "Who founded Kestrel Labs?",
            "Kestrel Labs was founded by Wang Lei and Peter Shaw.",
            "Kestrel Labs was founded in 2014 by Wang Lei, an engineer from Chengdu.",
            "Kestrel Labs",
        ),
    ],
    ids=["zh", "en"],
)
def test_a_name_the_window_lacks_is_not_held_even_by_the_judge(
    question: str, sentence: str, text: str, title: str
) -> None:
    # half the claim's words are in the window; one named person is made up
    check = RelationCheck(question)
    src = Strip(text, "a.md", "internal", title)
    assert not check.lexical(sentence, src, answers=True).held
    assert not check.settle(sentence, src, judge=lambda q, p, claim=None: 0.99, answers=True).held
    shorter = sentence.replace("刘国勋、", "").replace(" and Peter Shaw", "")
    assert check.settle(
        shorter, src, judge=lambda q, p, claim=None: 0.99, answers=True
    ).held  # the names it has are written


def test_a_month_is_a_date_not_a_name() -> None:
    check = RelationCheck("How many Yunque S5 units did Kestrel Labs ship in Q3 2023?")
    sentence = "The Yunque S5 went on sale in April 2023, and Kestrel Labs shipped 8,640 units in Q3 2023."
    assert check.names(sentence) == []
    assert check.names("Kestrel Labs hired Marcus Hale on Monday.") == ["marcus", "hale"]
