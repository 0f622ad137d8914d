"""The LLM judge: blind labels, seeded order, tolerant parsing, failures not scored."""

from __future__ import annotations

import json

import pytest

from crag.errors import LLMError
from crag.eval.judge import CRITERIA, LLMJudge, parse_scores
from crag.testing.fakes import ScriptedLLM
from crag.types import Query

pytestmark = pytest.mark.unit

ANSWERS = {"rag": ("RAG-TEXT about 1816 [1].", ["ctx rag"]), "crag": ("CRAG-TEXT 1816 [1].", ["ctx crag"])}


def reply(first: int, second: int) -> str:
    return json.dumps({"answer_1": dict.fromkeys(CRITERIA, first), "answer_2": dict.fromkeys(CRITERIA, second)})


def test_scores_map_back_to_the_mode_shown_in_each_slot() -> None:
    llm = ScriptedLLM([reply(5, 2)])
    v = LLMJudge(llm, seed=0).judge(Query.of("When was it founded?"), ["1816"], ANSWERS)
    user = llm.prompts[0][1]["content"]
    first_shown = "RAG-TEXT" if user.index("RAG-TEXT") < user.index("CRAG-TEXT") else "CRAG-TEXT"
    assert v.order[0] == first_shown.split("-")[0].lower()
    assert v.scores[v.order[0]] == dict.fromkeys(CRITERIA, 5) and v.scores[v.order[1]]["clarity"] == 2
    assert "ctx rag" in user and "1816" in user  # contexts and gold reach the judge
    assert "mode" not in user.lower() and "(crag)" not in user.lower()


def test_order_is_seeded_and_varies_across_questions() -> None:
    def order(seed: int, q: str) -> list[str]:
        return LLMJudge(ScriptedLLM([reply(3, 3)]), seed=seed).judge(Query.of(q), ["a"], ANSWERS).order

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

    v = LLMJudge(Down(["-"])).judge(Query.of("q"), ["a"], ANSWERS)
    assert v.scores == {} and "server down" in (v.error or "")
    bad = LLMJudge(ScriptedLLM(['{"answer_1": {"accuracy": 0}}'])).judge(Query.of("q"), ["a"], ANSWERS)
    assert bad.scores == {} and bad.error and bad.raw


class DigitLLM(ScriptedLLM):
    """Offers digit probabilities: confident 5 when the prompt's answer holds "1816", else 1."""

    def __init__(self) -> None:
        super().__init__([])
        self.seen: list[str] = []

    def yes_probability(self, messages: list[dict[str, str]]) -> float:
        raise AssertionError("the answer judge asks choice_probabilities only")  # completes ScoringLLM

    def choice_probabilities(self, messages: list[dict[str, str]], choices: list[str]) -> list[float]:
        user = messages[-1]["content"]
        self.seen.append(user)
        good = "1816" in user.split("The system's answer:")[1]
        return [0.0, 0.0, 0.0, 0.2, 0.8] if good else [0.7, 0.3, 0.0, 0.0, 0.0]


def test_auto_mode_uses_digit_probabilities_per_answer_and_criterion() -> None:
    llm = DigitLLM()
    judge = LLMJudge(llm, seed=0)
    answers = {"rag": ("I could not find it.", ["ctx one"]), "crag": ("Founded in 1816 [1].", ["ctx two"])}
    v = judge.judge(Query.of("When was it founded?"), ["1816"], answers)
    assert judge.mode == "logprob" and judge.label.endswith("(logprob)") and v.error is None
    assert v.scores["crag"] == dict.fromkeys(CRITERIA, 4.8) and v.scores["rag"] == dict.fromkeys(CRITERIA, 1.3)
    assert len(llm.seen) == 2 * len(CRITERIA) and not llm.prompts  # no JSON call
    # Each prompt shows one answer, never a mode name; the criterion comes last (prefix cache).
    assert all(("I could not" in u) != ("1816 [1]" in u) and "crag" not in u.lower() for u in llm.seen)
    assert all(u.rstrip().endswith("Score (1-5):") for u in llm.seen)


def test_logprob_mode_is_refused_for_a_model_without_probabilities() -> None:
    from crag.errors import ConfigError

    with pytest.raises(ConfigError, match="json"):
        LLMJudge(ScriptedLLM([]), mode="logprob")
    assert LLMJudge(ScriptedLLM([]), mode="auto").mode == "json"


def test_failed_probability_call_is_a_recorded_failure_not_a_score() -> None:
    class Broken(DigitLLM):
        def choice_probabilities(self, messages: list[dict[str, str]], choices: list[str]) -> list[float]:
            raise LLMError("llama-cpp: model crashed")

    v = LLMJudge(Broken()).judge(Query.of("Q?"), ["a"], ANSWERS)
    assert v.error and "model crashed" in v.error and v.scores == {}
