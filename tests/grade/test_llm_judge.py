"""The llm evaluator and its tolerant reply parser.

Control flow runs on scripted fake LLMs (the LLM protocol, a queue of replies); one
integration test runs logprob mode on the real bundled 0.5B model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence

import pytest

from crag.config import CragSettings
from crag.errors import ConfigError, LLMError
from crag.grade.heuristic import HeuristicEvaluator
from crag.grade.llm_judge import (
    DEFAULT_CALIBRATION,
    LLMJudgeEvaluator,
    batch_messages,
    calibrate,
    yes_no_messages,
)
from crag.grade.parse import parse_batch, parse_judgement, parse_reason, parse_score, parse_yes_no
from crag.protocols import LLM, Evaluator
from crag.registry import EVALUATORS, BackendDeps
from crag.testing.fakes import ScriptedLLM
from crag.types import Passage, Query

# -- fakes -------------------------------------------------------------------------------


class YesNoLLM(ScriptedLLM):
    """Also answers ``yes_probability`` from a function of the user prompt."""

    def __init__(self, p_yes: Callable[[str], float]) -> None:
        super().__init__([])
        self.p_yes = p_yes

    def yes_probability(self, messages: Sequence[dict[str, str]]) -> float:
        self.prompts.append(messages)
        return self.p_yes(messages[-1]["content"])

    def choice_probabilities(self, messages: Sequence[dict[str, str]], choices: Sequence[str]) -> list[float]:
        raise AssertionError("the relevance judge asks yes_probability only")  # completes ScoringLLM


PASSAGES = [
    Passage(str(i), text, dense=d)
    for i, (text, d) in enumerate(
        [
            ("The Eiffel Tower is 330 metres tall.", 0.9),
            ("Bananas are rich in potassium.", 0.7),
            ("Paris is the capital of France.", 0.8),
        ]
    )
]
Q = Query.of("How tall is the Eiffel Tower?")


def judge(llm: LLM, mode: str) -> LLMJudgeEvaluator:
    return LLMJudgeEvaluator(llm, HeuristicEvaluator(), mode=mode)  # type: ignore[arg-type]


# -- parser ------------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("0.7", 0.7),
        ("Score: 0.7 Reason: it states the height.", 0.7),
        ("score=0.35", 0.35),
        ("分数：0.7 理由：文档直接给出了高度", 0.7),
        ("分数：[0.8] 理由：[相关]", 0.8),
        ("分数为０．６", 0.6),
        ("分数：０.９", 0.9),
        ("得分: 85%", 0.85),
        ("Confidence: 70 percent", 0.7),
        ("Score: 7/10", 0.7),
        ("Score: 8", 0.8),
        ("Rating: 4 out of 5", 0.8),
        ("The score is 0.65.", 0.65),
        ("Relevance score (0-1): 0.4", 0.4),
        ('{"score": 0.3, "reason": "partly"}', 0.3),
        ('```json\n{"score": 0.9, "reason": "exact answer"}\n```', 0.9),
        ('Here you go: {"score": "0.2", "reason": "off"} hope this helps', 0.2),
        ('{"分数": 0.55, "理由": "部分相关"}', 0.55),
        ("0.8<|im_end|>", 0.8),
        ("Yes.", 1.0),
        ("yes", 1.0),
        ("YES", 1.0),
        ("Yes, the passage gives the height.", 1.0),
        ("是", 1.0),
        ("是的，包含答案。", 1.0),
        ("No.", 0.0),
        ("no", 0.0),
        ("不是", 0.0),
        ("不相关", 0.0),
        ("", None),
        ("I cannot tell.", None),
        ("Nope, maybe", None),
        ("Score: high", None),
        ("Score: 250", None),
        ("-0.3", None),
        ("分数：很高", None),
        ("<|im_end|>", None),
    ],
)
def test_parse_score_table(reply: str, score: float | None) -> None:
    assert parse_score(reply) == (pytest.approx(score) if score is not None else None)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("Yes.", True),
        ("yes", True),
        ("YES", True),
        ("**Yes**", True),
        ("是", True),
        ("No.", False),
        ("NO", False),
        ("否", False),
        ("不是。", False),
        ("Nobody knows", None),
        ("Yesterday", None),
        ("maybe", None),
        ("", None),
    ],
)
def test_parse_yes_no_table(reply: str, answer: bool | None) -> None:
    assert parse_yes_no(reply) is answer


@pytest.mark.unit
def test_parse_reason_and_judgement() -> None:
    assert parse_reason("Score: 0.7 Reason: gives the height.\nextra") == "gives the height."
    assert parse_reason("分数：0.7 理由：[直接回答]") == "直接回答"
    assert parse_reason('{"score": 1, "reason": "  two\\n lines "}') == "two lines"
    assert parse_judgement("garbage") is None
    j = parse_judgement("分数：0.4\n理由：只提到了主题")
    assert j is not None and j.score == pytest.approx(0.4) and j.reason == "只提到了主题"


@pytest.mark.unit
def test_parse_batch_shapes() -> None:
    full = json.dumps(
        {
            "documents": [{"id": 2, "score": 0.1, "reason": "b"}, {"id": 1, "score": 0.9, "reason": "a"}],
            "score": 0.8,
            "reason": "one good",
        }
    )
    got = parse_batch(f"```json\n{full}\n```trailing", 2)
    assert got is not None
    assert got.documents[0].score == 0.9 and got.documents[1].reason == "b"
    assert got.score == 0.8 and got.reason == "one good"
    # no ids: placed by position only when the count matches
    assert set(parse_batch('[{"score": 0.2}, {"score": 0.4}]', 2).documents) == {0, 1}  # type: ignore[union-attr]
    assert parse_batch('[{"score": 0.2}]', 2) is None  # one item for two docs: unplaceable
    # out-of-range ids are ignored
    stray = parse_batch('{"documents": [{"id": 7, "score": 0.5}, {"id": 1, "score": 0.5}]}', 2)
    assert stray is not None and set(stray.documents) == {0}
    text = parse_batch("文档1：分数：0.9 理由：好\n[2] Score: 3/10 Reason: weak\n总体分数：0.7", 2)
    assert text is not None and text.documents[1].score == pytest.approx(0.3) and text.score == 0.7
    assert parse_batch("I don't know", 3) is None


# -- prompts and calibration -------------------------------------------------------------
@pytest.mark.unit
def test_prompts_follow_question_language_and_truncate() -> None:
    long = "长" * 5000
    zh = yes_no_messages(Query.of("埃菲尔铁塔有多高？"), long)
    assert "问题" in zh[-1]["content"] and "yes" in zh[-1]["content"]
    assert len(zh[-1]["content"]) < 1400
    en = yes_no_messages(Q, "x " * 3000)
    assert en[-1]["content"].endswith("Answer yes or no.")
    batch = batch_messages(Query.of("埃菲尔铁塔有多高？"), [long] * 5)
    assert "相关性" in batch[0]["content"] and "覆盖度" in batch[0]["content"]
    assert len(batch[-1]["content"]) < 4600  # five passages share the batch budget


@pytest.mark.unit
def test_calibrate_is_monotone_and_identity_at_1_0() -> None:
    assert calibrate(0.3, 1.0, 0.0) == pytest.approx(0.3)
    a, b = DEFAULT_CALIBRATION
    xs = [calibrate(p, a, b) for p in (0.0, 0.2, 0.5, 0.9, 0.99, 1.0)]
    assert xs == sorted(xs) and all(0.0 <= x <= 1.0 for x in xs) and xs[1] < xs[2] < xs[3]


# -- control flow with fakes -------------------------------------------------------------
@pytest.mark.unit
def test_batch_mode_one_call_with_schema() -> None:
    reply = {
        "documents": [
            {"id": 1, "score": 0.95, "reason": "states the height"},
            {"id": 2, "score": 0.0, "reason": "about bananas"},
            {"id": 3, "score": 0.3, "reason": "same city only"},
        ],
        "score": 0.9,
        "reason": "document 1 answers it",
    }
    llm = ScriptedLLM([json.dumps(reply)])
    j = judge(llm, "batch")
    ev = j.grade(Q, PASSAGES)
    assert [g.score for g in ev.grades] == [0.95, 0.0, 0.3]
    assert ev.grades[1].reason == "about bananas"
    assert ev.confidence == 0.9 and ev.reason == "document 1 answers it"
    assert ev.degraded == "" and ev.evaluator == "llm"
    assert j.calls == 1 and j.parse_failures == 0
    assert llm.schemas[0] is not None and llm.schemas[0]["properties"]["documents"]["minItems"] == 3
    assert "Relevance" in llm.prompts[0][0]["content"]


@pytest.mark.unit
def test_batch_unparseable_reply_falls_back_loudly() -> None:
    j = judge(ScriptedLLM(["I think they are all quite good!"]), "batch")
    ev = j.grade(Q, PASSAGES)
    heur = HeuristicEvaluator().grade(Q, PASSAGES)
    assert [g.score for g in ev.grades] == [g.score for g in heur.grades]
    assert all(g.reason.startswith("heuristic fallback") for g in ev.grades)
    assert ev.degraded == "llm judge reply unparseable; used heuristic"
    assert j.parse_failures == 1 and j.parse_failure_rate == 1.0
    assert 0.5 not in [g.score for g in ev.grades] or ev.degraded  # never a silent neutral score


@pytest.mark.unit
def test_batch_wrong_count_falls_back_for_missing_docs_only() -> None:
    j = judge(ScriptedLLM(['{"documents": [{"id": 1, "score": 0.9, "reason": "ok"}], "score": 0.9}']), "batch")
    ev = j.grade(Q, PASSAGES)
    assert ev.grades[0].score == 0.9
    assert ev.grades[1].reason.startswith("heuristic fallback")
    assert ev.degraded == "llm judge reply unparseable for 2 of 3 passages; used heuristic"
    # the LLM's set score covered a set it did not fully grade: recomputed from the grades
    assert ev.confidence != 0.9
    assert j.parse_failures == 1


@pytest.mark.unit
def test_per_doc_mode_mixed_replies() -> None:
    llm = ScriptedLLM(["Score: 0.9 Reason: gives 330 m", "分数：0.1 理由：无关", "¯\\_(ツ)_/¯"])
    j = judge(llm, "per-doc")
    ev = j.grade(Q, PASSAGES)
    assert [g.score for g in ev.grades[:2]] == [0.9, 0.1]
    assert ev.grades[0].reason == "gives 330 m"
    assert ev.grades[2].reason.startswith("heuristic fallback")
    assert "1 of 3" in ev.degraded
    assert j.calls == 3 and j.parse_failures == 1
    assert all(s is not None for s in llm.schemas)


@pytest.mark.unit
def test_llm_error_degrades_to_fallback() -> None:
    j = judge(ScriptedLLM([LLMError("server down", backend_id="openai", step="complete")]), "batch")
    ev = j.grade(Q, PASSAGES)
    assert ev.degraded.startswith("llm judge failed (server down)") and ev.degraded.endswith("used heuristic")
    assert len(ev.grades) == 3


@pytest.mark.unit
def test_no_fallback_is_a_config_error() -> None:
    j = LLMJudgeEvaluator(ScriptedLLM(["nonsense"]), None, mode="per-doc")
    with pytest.raises(ConfigError, match="fallback"):
        j.grade(Q, PASSAGES[:1])


@pytest.mark.unit
def test_logprob_mode_calibrates_p_yes() -> None:
    llm = YesNoLLM(lambda prompt: 0.95 if "330" in prompt else 0.4)
    j = LLMJudgeEvaluator(llm, HeuristicEvaluator(), mode="logprob", calibration=(2.0, -1.0))
    ev = j.grade(Q, PASSAGES)
    assert ev.grades[0].score == pytest.approx(calibrate(0.95, 2.0, -1.0), abs=1e-4)
    assert ev.grades[0].signals["p_yes"] == 0.95
    assert ev.grades[0].score > ev.grades[1].score
    assert j.calls == 3 and j.parse_failures == 0 and ev.degraded == ""
    assert "Answer yes or no" in llm.prompts[0][-1]["content"]


@pytest.mark.unit
def test_logprob_without_yes_probability_uses_per_doc() -> None:
    llm = ScriptedLLM(["0.9", "0.1", "0.2"])  # e.g. an OpenAI-compatible server
    ev = judge(llm, "logprob").grade(Q, PASSAGES)
    assert [g.score for g in ev.grades] == [0.9, 0.1, 0.2]
    assert "per-doc" in ev.reason


@pytest.mark.unit
def test_constructor_is_lazy_and_validates() -> None:
    made: list[int] = []

    def factory() -> LLM:
        made.append(1)
        return ScriptedLLM(["0.5"])

    j = LLMJudgeEvaluator(factory, HeuristicEvaluator(), mode="per-doc")
    assert made == [] and isinstance(j, Evaluator)
    assert j.grade(Q, []).confidence == 0.0 and made == []
    j.grade(Q, PASSAGES[:1])
    assert made == [1]
    with pytest.raises(ValueError, match="mode"):
        LLMJudgeEvaluator(factory, mode="vibes")  # type: ignore[arg-type]


@pytest.mark.unit
def test_registry_factory_builds_fallback_and_mode() -> None:
    import crag.grade.llm_judge  # noqa: F401  (registers "llm" until crag.backends lists it)

    s = CragSettings(evaluator={"backend": "llm", "llm_mode": "per-doc", "llm_calibration": [1.5, 0.2]})
    ev = EVALUATORS.create("llm", s, BackendDeps(embedder=None, llm_factory=lambda: ScriptedLLM(["0.3"])))
    assert isinstance(ev, LLMJudgeEvaluator)
    assert ev.mode == "per-doc" and ev.calibration == (1.5, 0.2)
    assert isinstance(ev.fallback, HeuristicEvaluator)
    assert ev.grade(Q, PASSAGES[:1]).grades[0].score == 0.3
    bad = CragSettings(evaluator={"fallback": "llm"})
    with pytest.raises(ConfigError, match="fallback"):
        EVALUATORS.create("llm", bad, BackendDeps(embedder=None, llm_factory=lambda: ScriptedLLM([])))


# -- the real model ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_llm() -> Iterator[LLM]:
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (crag[local])")
    from crag.llm.llama_cpp import LlamaCppLLM
    from llm_fixtures import small_gguf

    model = LlamaCppLLM(str(small_gguf()), n_ctx=2048)
    model.warm_up()
    yield model


@pytest.mark.integration
@pytest.mark.slow
def test_logprob_ranks_relevant_passages_first_with_real_model(small_llm: LLM) -> None:
    j = LLMJudgeEvaluator(small_llm, HeuristicEvaluator(), mode="logprob")
    cases = [
        (
            "庆大霉素常见的商品名是什么？",
            "庆大霉素是一种氨基糖苷类抗生素，常见的商品名为Garamycin，主要用于治疗革兰氏阴性菌感染。",
            "松鸦是一种鸦科鸟类，羽毛呈粉褐色，常在树林中活动。",
        ),
        (
            "When was the Lumen Bridge in Varda opened?",
            "The Lumen Bridge in Varda was opened in 1987 and is 412 metres long.",
            "Bananas are a good source of potassium and vitamin B6.",
        ),
    ]
    for question, relevant, irrelevant in cases:
        ev = j.grade(Query.of(question), [Passage("bad", irrelevant), Passage("good", relevant)])
        good, bad = ev.grades[1], ev.grades[0]
        assert good.score > bad.score, (question, good, bad)
        assert good.signals["p_yes"] > bad.signals["p_yes"]
        assert ev.degraded == ""
    assert j.calls == 4 and j.parse_failures == 0
