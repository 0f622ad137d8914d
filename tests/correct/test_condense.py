"""The condense step's control flow: when the LLM is asked, when its rewrite is trusted, the fallback.

The LLM is scripted here (control flow only). That the bundled model condenses real
follow-ups is measured by ``benchmarks/dialogues.py`` and run end to end in
``tests/server/test_conversations.py`` and ``tests/cli/test_chat.py``.
"""

from __future__ import annotations

import pytest

from crag.correct.condense import check_rewrite, condense, history_turns, needs_context, topic_of
from crag.errors import InputError, LLMError
from crag.testing.fakes import ScriptedLLM

pytestmark = pytest.mark.unit

EN = [
    {"role": "user", "content": "When was the Royal University of Warsaw established?"},
    {
        "role": "assistant",
        "content": "It was established in 1816 [1].\n\nSources:\n[1] Warsaw https://en.wikipedia.org",
    },
]
ZH = [
    {"role": "user", "content": "天津犹太会堂是哪一年开始筹建的？"},
    {"role": "assistant", "content": "天津犹太会堂于1937年开始筹建[1]。"},
]


def test_a_first_turn_costs_no_call() -> None:
    llm = ScriptedLLM(["unused?"])
    for history in (None, [], [{"role": "system", "content": "Be brief."}]):
        c = condense("Who designed it?", history, llm)
        assert (c.question, c.method, c.llm_calls) == ("Who designed it?", "kept", 0)
    assert llm.prompts == []


def test_a_follow_up_that_names_its_subject_is_kept_without_a_call() -> None:
    llm = ScriptedLLM(["unused?"])
    asked = "When was the Scottish Parliament convened?"
    c = condense(asked, EN, llm)
    assert (c.question, c.method, c.llm_calls, c.history) == (asked, "kept", 0, 2)
    assert condense("柴郡的东北方与哪个郡相邻？", ZH, llm).llm_calls == 0
    assert llm.prompts == []


@pytest.mark.parametrize(
    ("history", "asked", "rewrite"),
    [
        (EN, "Which city is it in?", "Which city is the Royal University of Warsaw in?"),
        (ZH, "它是哪一年建成的？", "天津犹太会堂是哪一年建成的？"),
        (ZH, "那建成呢？", "天津犹太会堂是哪一年建成的？"),
    ],
)
def test_a_checked_rewrite_is_the_question_with_one_call(
    history: list[dict[str, str]], asked: str, rewrite: str
) -> None:
    llm = ScriptedLLM([f"Standalone question: {rewrite}\nanything after the first line is ignored"])
    c = condense(asked, history, llm)
    assert (c.asked, c.question, c.method, c.llm_calls, c.degradations) == (asked, rewrite, "llm", 1, [])
    prompt = llm.prompts[0][-1]["content"]
    # crag's own sources list and citation markers are not history
    assert asked in prompt and "Sources:" not in prompt and "[1]" not in prompt


@pytest.mark.parametrize(
    ("asked", "reply", "why", "fallback"),
    [
        ("Who founded it?", "It was founded by Tsar Alexander I.", "not a question",
         "Who founded Royal University of Warsaw?"),
        ("Who founded it?", "Who founded it?", "names nothing from the conversation",
         "Who founded Royal University of Warsaw?"),
        ("Who founded it?", "谁创立了它？", "not in the question's language",
         "Who founded Royal University of Warsaw?"),
        ("How many students does it have?", "When was the Royal University of Warsaw established?",
         "drops the question's own words", "How many students does Royal University of Warsaw have?"),
        ("Who founded it?", "Who founded the Royal University of Warsaw and the Jagiellonian Library in Krakow?",
         "adds words from neither", "Who founded Royal University of Warsaw?"),
    ],
)  # fmt: skip
def test_a_bad_rewrite_falls_back_to_the_topic_and_says_why(asked: str, reply: str, why: str, fallback: str) -> None:
    c = condense(asked, EN, ScriptedLLM([reply]))
    assert (c.question, c.method, c.llm_calls, c.rewrite) == (fallback, "fallback", 1, reply)
    assert len(c.degradations) == 1 and why in c.degradations[0] and "Royal University of Warsaw" in c.degradations[0]


def test_the_chinese_fallback_puts_the_topic_for_the_pronoun() -> None:
    copied = "天津犹太会堂是哪一年开始筹建的？"  # the model repeated the first question
    c = condense("它是哪一年建成的？", ZH, ScriptedLLM([copied]))
    assert (c.question, c.method) == ("天津犹太会堂是哪一年建成的？", "fallback")
    assert "drops the question's own words" in c.degradations[0]


def test_he_and_she_stand_for_the_person_the_last_answer_named() -> None:
    history = [
        {"role": "user", "content": "Who was Harvard's president from 1933 to 1953?"},
        {"role": "assistant", "content": "James Bryant Conant [1]."},
    ]
    c = condense("What did he ask the faculty for?", history, ScriptedLLM(["What did he ask the faculty for?"]))
    assert c.question == "What did James Bryant Conant ask the faculty for?"


def test_an_llm_failure_falls_back_in_one_call() -> None:
    c = condense("Who founded it?", EN, ScriptedLLM([LLMError("llama-cpp: timed out")]))
    assert (c.method, c.llm_calls) == ("fallback", 1) and "the LLM failed" in c.degradations[0]


def test_malformed_history_is_a_one_line_input_error() -> None:
    with pytest.raises(InputError, match=r"history\[0\]"):
        history_turns(["just text"])  # type: ignore[list-item]
    with pytest.raises(InputError, match=r"history\[1\]\.content"):
        history_turns([{"role": "user", "content": "a"}, {"role": "assistant", "content": None}])


def test_checks_and_topics() -> None:
    turns = history_turns(EN)
    assert check_rewrite("Who founded the Royal University of Warsaw?", "Who founded it?", turns) == ""
    assert needs_context("And the average case?") and needs_context("What about Harvard?")
    assert needs_context("那雌鱼呢？") and not needs_context("北斗阿南鱼的雌鱼是什么颜色？")
    assert topic_of([("user", "侯活·韦比在2011年新年获授什么勋章？")]) == "侯活·韦比"


def test_an_ellipsis_fallback_fills_the_last_question() -> None:
    history = [
        {"role": "user", "content": "北斗阿南鱼的雄鱼是什么颜色？"},
        {"role": "assistant", "content": "雄鱼体暗橘棕色[1]。"},
    ]
    answered = "雌鱼的体暗橘棕色。"  # the model answered instead of rewriting (seen with the 1.5B model)
    c = condense("那雌鱼呢？", history, ScriptedLLM([answered]))
    assert (c.question, c.method, c.rewrite) == ("北斗阿南鱼的雌鱼是什么颜色？", "fallback", answered)
