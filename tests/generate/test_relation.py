"""A claim is held by a source that states its relation, not by one about the same thing.

Unit tests of :mod:`crag.generate.relation` and of the sentence gate with it, on near misses
in both languages: the same company with another role, the same product with another figure,
a yes/no question no source answers. The judge here is a function (the model's reading is
tested end to end in tests/test_nearmiss_e2e.py).
"""

from __future__ import annotations

import pytest

from crag.generate.answer import generate
from crag.generate.relation import RelationCheck, missing_terms, negative_reply, windows
from crag.testing.fakes import ScriptedLLM
from crag.types import Strip

pytestmark = pytest.mark.unit

SALES = Strip("Wang Lei is the sales director for southern China at Kestrel Labs.", "sales.md", "internal",
              "Wang Lei (sales)", score=0.9)  # fmt: skip
SHIPMENTS = Strip(
    "Units shipped by product and quarter.\n\nYunque S5 | Q2 2023: 6,120 | Q3 2023: 8,640\n\n"
    "Yunque S3 | Q2 2023: 5,240 | Q3 2023: 4,615",
    "shipments.md", "internal", "Kestrel Labs quarterly shipments", score=0.9,
)  # fmt: skip
SPEC_ZH = Strip("参数 | 云雀 S5\n\n电池容量 | 云雀 S5: 5200 毫安时\n\n重量 | 云雀 S5: 198 克", "spec.md", "internal",
                "云雀 S5（Yunque S5）产品规格", score=0.9)  # fmt: skip
HANDBOOK = Strip(
    "Employees receive a monthly transport allowance of 800 yuan. Parking at the Hangzhou office is free.",
    "handbook.md", "internal", "Employee handbook", score=0.9,
)  # fmt: skip


def always(p: float):
    return lambda question, passage, claim=None: p


def test_a_role_the_source_does_not_give_is_not_held_by_its_name() -> None:
    check = RelationCheck("Who is the CEO of Kestrel Labs?")
    verdict = check.lexical("The CEO of Kestrel Labs is Wang Lei.", SALES)
    assert not verdict.held and verdict.missing == ["ceo"]
    assert not check.settle("The CEO of Kestrel Labs is Wang Lei.", SALES, judge=None).held  # no model: words decide
    assert check.lexical("Wang Lei is the sales director for southern China.", SALES).held  # what it does say
    zh = RelationCheck("红隼实验室的首席执行官是谁？")
    assert not zh.settle("红隼实验室的首席执行官是王磊。", Strip("王磊是红隼实验室华南区销售总监。", "a", "internal"),
                         judge=None).held  # fmt: skip


def test_a_figure_is_read_with_its_own_headers_and_unit() -> None:
    check = RelationCheck("What is the Yunque S5 battery capacity?")
    # 8,640 is a Q3 shipment count: no unit, no capacity, and a judge that agrees cannot save it
    assert not check.settle("The Yunque S5 battery capacity is 8,640 mAh.", SHIPMENTS, judge=always(0.99)).held
    assert not check.settle("It is 8,640 [1].", SHIPMENTS, judge=always(0.2)).held
    # the Chinese spec states it in other words: the model's reading holds the English claim
    held = check.settle("The Yunque S5 battery capacity is 5200 mAh.", SPEC_ZH, judge=always(0.9))
    assert held.held and held.how == "judge" and "电池容量" in held.window and "5200" in held.window
    # and the Chinese claim is held by its words alone
    zh = RelationCheck("云雀S5的电池容量是多少？")
    assert zh.lexical("云雀S5的电池容量是5200毫安时。", SPEC_ZH).held
    assert not zh.lexical("云雀S5的电池容量是198克。", SPEC_ZH).held  # the weight's row, not the battery's


def test_a_table_row_gives_one_window_per_cell_under_the_line_that_introduces_it() -> None:
    cells = windows(SHIPMENTS)
    assert "Kestrel Labs quarterly shipments: Units shipped by product and quarter. Yunque S5 | Q3 2023: 8,640" in cells
    assert not any("6,120" in w and "8,640" in w for w in cells)


def test_silence_is_not_no() -> None:
    question = "Does Kestrel Labs give employees a company car?"
    check = RelationCheck(question)
    no = "No, Kestrel Labs does not give employees a company car."
    assert negative_reply(no) and not check.settle(no, HANDBOOK, judge=always(0.95)).held  # a "no" must be written
    written = Strip("Kestrel Labs does not provide company cars; employees receive a transport allowance.",
                    "b.md", "internal", "Benefits")  # fmt: skip
    assert check.settle(no, written, judge=None).held
    zh = RelationCheck("红隼实验室给员工配公司车吗？")
    assert not zh.settle("不，红隼实验室不给员工配公司车。", Strip("员工每月可领取800元交通补贴。", "a", "internal"),
                         judge=always(0.95)).held  # fmt: skip


def test_a_count_for_another_group_is_not_the_asked_one() -> None:
    check = RelationCheck("How many days of annual leave do new employees get?")
    senior = Strip("Employees with more than five years of service get 15 days of annual leave.", "h.md", "internal")
    assert not check.settle("New employees get 15 days of annual leave.", senior, judge=always(0.2)).held
    first = Strip("New employees receive 10 days of paid annual leave in their first year.", "h.md", "internal")
    assert check.settle("New employees get 10 days of annual leave.", first, judge=None).held


def test_the_gate_refuses_near_misses_and_says_what_is_missing() -> None:
    g = generate("Who is the CEO of Kestrel Labs?", [SALES], ScriptedLLM(["The CEO of Kestrel Labs is Wang Lei [1]."]))
    assert g.refused and "“CEO”" in g.text and "Wang Lei (sales) [1]" in g.text
    assert g.checks and g.checks[0]["held"] is False and g.checks[0]["missing"] == ["ceo"]
    no = ScriptedLLM(["No, Kestrel Labs does not give employees a company car [1]."])
    car = generate("Does Kestrel Labs give employees a company car?", [HANDBOOK], no, judge=always(0.9))
    assert car.refused and car.text.startswith("The sources found do not answer this question.")
    assert "Employee handbook [1]" in car.text and [c.id for c in car.citations] == [1]
    sales = Strip("王磊是红隼实验室华南区销售总监。", "a.md", "internal", "王磊")
    zh = generate("红隼实验室的首席执行官是谁？", [sales], ScriptedLLM(["红隼实验室的首席执行官是王磊[1]。"]))
    assert zh.refused and zh.text.startswith("找到的资料没有回答这个问题。") and "“首席”" in zh.text


def test_the_gate_moves_a_claim_to_the_source_that_states_it() -> None:
    battery = "The Yunque S5 battery capacity is 5200 mAh [1]."
    g = generate("What is the Yunque S5 battery capacity?", [SHIPMENTS, SPEC_ZH], ScriptedLLM([battery]),
                 judge=always(0.9))  # fmt: skip
    assert not g.refused and [c.id for c in g.citations] == [2] and "5200" in g.citations[0].quote


def test_a_judge_that_cannot_be_asked_leaves_the_words_to_decide() -> None:
    # A server without token log-probabilities: the check is what it is without a judge, and an
    # irregular verb's other form ("won" for "win") still states the relation.
    chess = Strip("Wang Lei won the national chess title in 2004 and won it again in 2011.", "c.md", "internal",
                  "Wang Lei (chess player)")  # fmt: skip
    check = RelationCheck("When did Wang Lei win the national chess title for the very first time?")
    held = check.settle(
        "Wang Lei won the national chess title in 2004 [1].", chess, judge=lambda q, p: None, answers=True
    )
    assert held.held, held
    assert not check.settle("Wang Lei won the title in 2004.", SALES, judge=lambda q, p: None, answers=True).held


def test_a_unit_written_as_a_symbol_holds_its_spelled_name() -> None:
    turbine = Strip(
        "In steam turbines, entry temperatures are typically 565 °C and condensers run near 30 °C.", "w", "web"
    )
    check = RelationCheck("What is the turbine entry temperature of a steam turbine, in degrees Celsius?")
    assert check.settle("The turbine entry temperature is 565 degrees Celsius [1].", turbine, judge=None).held
    weight = RelationCheck("How heavy is the Yunque S5?")
    assert weight.lexical("The Yunque S5 weighs 185 g.", Strip("Yunque S5 | weight: 185g", "s", "internal")).held
    # "gram" is not in "kilograms": 185 g is not held by a row giving 185 kg
    assert not weight.lexical(
        "The Yunque S5 weighs 185 g.", Strip("The Yunque S5 weighs 185 kilograms.", "s", "x")
    ).held


def test_a_derived_word_and_the_slot_the_question_fills_are_not_missing() -> None:
    # "confusion" is stated by "confused" (one root); "叫什么名字" / "什么地方" ask for a name and a
    # place, which an answer gives without the words 名字 and 地方
    war = Strip("The French and Indian War is often confused with the Seven Years' War.", "w", "internal", "War")
    check = RelationCheck("What is the confusion of the French and Indian war?")
    held = check.settle("It is often confused with the Seven Years' War [1].", war, judge=always(0.0), answers=True)
    assert held.held and held.how == "words", held
    school = Strip("2012年，该校校长为钟铣玲。", "s", "internal", "黄楚标中学")
    zh = RelationCheck("黄楚标中学2012年在任的校长叫什么名字？")
    assert zh.settle("2012年在任的校长名字是钟铣玲[1]。", school, judge=None, answers=True).held
    club = Strip("上海豫园足球俱乐部是一家足球俱乐部。", "c", "internal", "上海豫园足球俱乐部")
    assert missing_terms("上海豫园足球俱乐部总部设在什么地方？", [club]) == ["总部", "设在"]
    # a root shorter than five letters is no root: nothing stands in for "CEO"
    ceo = RelationCheck("Who is the CEO of Kestrel Labs?")
    assert not ceo.settle("The CEO of Kestrel Labs is Wang Lei.", SALES, judge=None, answers=True).held


def test_an_answer_about_another_row_is_not_held_by_the_asked_one() -> None:
    # the Suzhou office's head count is no answer for the Rotterdam office: a table row must
    # name what the question asks about, in either language (the judge reads the rest)
    offices = Strip("Office | Employees\n\nSuzhou HQ | Employees: 540\n\nRotterdam | Employees: 48", "o.docx",
                    "internal", "Larkspur offices")  # fmt: skip
    for question, wrong, right in [
        ("How many employees work at the Rotterdam office of Larkspur?", "The Suzhou HQ has 540 employees [1].",
         "It has 48 employees [1]."),
        ("Larkspur 鹿特丹办公室有多少员工？", "苏州总部有540名员工[1]。", "鹿特丹办公室有48名员工[1]。"),
    ]:  # fmt: skip
        check = RelationCheck(question)
        assert not check.settle(wrong, offices, judge=always(0.3), answers=True).held
        assert check.settle(right, offices, judge=always(0.9), answers=True).held
    # a page names its subject once: a sentence of it holds a claim that leaves the subject out
    about = Strip("Kestrel Labs was set up by two engineers. It was founded in 2014.", "a", "internal", "About")
    held = RelationCheck("When was Kestrel Labs founded?").settle("It was founded in 2014 [1].", about,
                                                                   judge=always(0.0), answers=True)  # fmt: skip
    assert held.held and held.how == "words"


def test_a_relation_word_and_its_exact_synonym_are_one() -> None:
    founder = Strip("赵启明于 2012 年在苏州创办青岚科技。", "t.md", "internal", "青岚科技管理团队")
    held = RelationCheck("青岚科技成立于哪一年？").settle(
        "青岚科技成立于2012年[1]。", founder, judge=always(0.0), answers=True
    )
    assert held.held and held.how == "words", held
    # a chairman is no CEO: only exact synonyms count
    chair = Strip("Lin Qiao is the chairman of Kestrel Labs.", "c.md", "internal", "Kestrel Labs")
    ceo = RelationCheck("Who is the CEO of Kestrel Labs?")
    assert not ceo.settle("The CEO of Kestrel Labs is Lin Qiao [1].", chair, judge=always(0.0), answers=True).held
