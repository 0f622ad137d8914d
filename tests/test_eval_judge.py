"""The LLM judge: blind labels, seeded order, tolerant parsing, failures not scored."""

from __future__ import annotations

import json

import pytest

from crag.errors import LLMError
from crag.eval.judge import CRITERIA, LLMJudge, parse_scores
from crag.testing.fakes import ScriptedLLM

pytestmark = pytest.mark.unit

ANSWERS = {"rag": ("RAG-TEXT about 1816 [1].", ["ctx rag"]), "crag": ("CRAG-TEXT 1816 [1].", ["ctx crag"])}


def reply(first: int, second: int) -> str:
    return json.dumps({"answer_1": dict.fromkeys(CRITERIA, first), "answer_2": dict.fromkeys(CRITERIA, second)})


def test_scores_map_back_to_the_mode_shown_in_each_slot() -> None:
    llm = ScriptedLLM([reply(5, 2)])
    v = LLMJudge(llm, seed=0).judge("When was it founded?", ["1816"], ANSWERS)
    user = llm.prompts[0][1]["content"]
    first_shown = "RAG-TEXT" if user.index("RAG-TEXT") < user.index("CRAG-TEXT") else "CRAG-TEXT"
    assert v.order[0] == first_shown.split("-")[0].lower()
    assert v.scores[v.order[0]] == dict.fromkeys(CRITERIA, 5) and v.scores[v.order[1]]["clarity"] == 2
    assert "ctx rag" in user and "1816" in user  # contexts and gold reach the judge
    assert "mode" not in user.lower() and "(crag)" not in user.lower()


def test_order_is_seeded_and_varies_across_questions() -> None:
    def order(seed: int, q: str) -> list[str]:
        return LLMJudge(ScriptedLLM([reply(3, 3)]), seed=seed).judge(q, ["a"], ANSWERS).order

    assert order(1, "q0") == order(1, "q0")
    assert len({tuple(order(1, f"q{i}")) for i in range(12)}) == 2  # both orders occur


@pytest.mark.parametrize(
    ("text", "n", "ok"),
    [
        ('{"answer_1": {"accuracy": 4, "completeness": 4, "clarity": 4, "faithfulness": 4}}', 1, True),
        ('{"accuracy": "4/5", "completeness": 3, "clarity": 5, "faithfulness": 4.2}', 1, True),  # unwrapped
        (
            'Here you go:\n```json\n{"answer_1": {"Accuracy": 2, "Completeness": 2, "Clarity": 2, '
            '"Faithfulness": 2}}\n```',
            1,
            True,
        ),
        ('{"answer_1": {"accuracy": 9, "completeness": 4, "clarity": 4, "faithfulness": 4}}', 1, False),
        ('{"answer_1": {"accuracy": 4}}', 1, False),
        ('{"answer_1": {"accuracy": 4, "completeness": 4, "clarity": 4, "faithfulness": 4}}', 2, False),
        ("no json {here", 1, False),
    ],
)
def test_parse_scores_is_tolerant_but_strict_on_values(text: str, n: int, ok: bool) -> None:
    scores, problem = parse_scores(text, n)
    assert (scores is not None) is ok
    assert bool(problem) is not ok


def test_failures_are_recorded_not_scored() -> None:
    class Down(ScriptedLLM):
        def complete(self, messages, **kw):  # type: ignore[no-untyped-def]
            raise LLMError("server down", backend_id="x", step="complete")

    v = LLMJudge(Down(["-"])).judge("q", ["a"], ANSWERS)
    assert v.scores == {} and "server down" in (v.error or "")
    bad = LLMJudge(ScriptedLLM(['{"answer_1": {"accuracy": 0}}'])).judge("q", ["a"], ANSWERS)
    assert bad.scores == {} and bad.error and bad.raw
