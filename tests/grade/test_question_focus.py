"""What a question asks of its subject: the near-miss features read the focus words.

Invented companies and products (not the near-miss dev set's), in both languages.
"""

from __future__ import annotations

import pytest

from crag.grade.signals import focus_coverage, question_focus


@pytest.mark.parametrize(
    ("question", "subject", "focus"),
    [
        # a closing 的 ends nothing: the asked relation comes after the predicate
        ("白鹭电子西安工厂是哪一年投产的？", ["白鹭", "电子", "西安", "工厂"], ["投产"]),
        # no 的 and only a question word after the predicate: names are the subject
        (
            "白鹭电子员工出国出差每天补贴上限是多少？",
            ["白鹭", "电子"],
            ["员工", "出国", "出差", "每天", "补贴", "上限"],
        ),
        ("Heronfield 召回了多少台 Breeze 3 风扇？", ["heronfield", "breeze"], ["召回", "风扇"]),
        ("Heronfield Audio 成立于哪一年？", ["heronfield", "audio"], ["成立"]),
        # a name further on stays the subject, the post before it is asked about
        ("白鹭电子首席设计师李娜毕业于哪所大学？", ["白鹭", "电子", "李娜"], ["首席", "设计师", "毕业", "大学"]),
        # the 的 that a content word follows still cuts
        ("白鹭电子的首席执行官是谁？", ["白鹭", "电子"], ["首席", "执行官"]),
        ("Who is the CFO of Heronfield Audio?", ["heronfield", "audio"], ["cfo"]),
    ],
)
def test_subject_and_focus(question: str, subject: list[str], focus: list[str]) -> None:
    assert question_focus(question) == (subject, focus)


@pytest.mark.parametrize(
    ("question", "answer", "near_miss"),
    [
        (
            "白鹭电子西安工厂是哪一年投产的？",
            "白鹭电子西安工厂于 2019 年 6 月投产，年产能 80 万台。",
            "白鹭电子西安工厂位于高新区，有员工 300 人。",
        ),
        (
            "Heronfield 召回了多少台 Breeze 3 风扇？",
            "Heronfield 宣布召回 1200 台 Breeze 3 风扇。",
            "Heronfield Breeze 3 风扇售价 399 元，有白色和灰色两种。",
        ),
    ],
)
def test_the_focus_tells_the_answer_from_a_near_miss(question: str, answer: str, near_miss: str) -> None:
    _, focus = question_focus(question)
    assert focus_coverage(focus, answer, [answer]) == (1.0, 1.0)
    assert focus_coverage(focus, near_miss, [near_miss])[0] < 1.0
