"""The bundled model reads a claim two neighbouring sentences hold only side by side.

Read as the question ("does the window state the answer?"), the insurer's window passes for the
company's nature (P 0.73 zh, 0.80 en); read as the claim itself it does not, while a window whose
two sentences together do state the claim (a pronoun, a page's subject) still holds it.
"""

from __future__ import annotations

import pytest

from crag.generate.relation import ENTAILS, RelationCheck, judge_threshold, model_judge
from crag.protocols import LLM
from crag.types import Strip

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CASES = [
    (
        "zh",
        "鑫诺卫星通信有限公司是什么性质的公司？",
        "鑫诺卫星通信有限公司是保险公司。",
        "保险公司表示，保险额度属于保密条款，不能对外公布。针对鑫诺二号通信卫星出现的故障问题，"
        "鑫诺卫星通信有限公司表示将发射中星九号作为其备份卫星。",
        False,
    ),
    (
        "en",
        "What kind of company is Sinosat Communications?",
        "Sinosat Communications is an insurance company.",
        "The insurance company said the sum insured was confidential. Sinosat Communications said it would launch "
        "a backup satellite.",
        False,
    ),
    ("zh", "红隼实验室的总部在哪里？", "红隼实验室的总部在成都。", "红隼实验室成立于2014年。总部设在成都。", True),
    (
        "en",
        "Where is Kestrel Labs headquartered?",
        "Kestrel Labs is headquartered in Chengdu.",
        "Kestrel Labs was founded in 2014. It is headquartered in Chengdu.",
        True,
    ),
]


@pytest.fixture(scope="module")
def llm() -> LLM:
    """The bundled model, loaded once for the module."""
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (crag[local])")
    from crag.llm.llama_cpp import LlamaCppLLM

    return LlamaCppLLM("qwen2.5-coder-1.5b", n_ctx=2048)


@pytest.mark.parametrize(("lang", "question", "sentence", "text", "stated"), CASES, ids=["zh-no", "en-no", "zh", "en"])
def test_the_model_reads_the_claim_not_only_the_question(
    llm: LLM, lang: str, question: str, sentence: str, text: str, stated: bool
) -> None:
    judge = model_judge(llm, lang)
    assert judge is not None
    check = RelationCheck(question, threshold=judge_threshold("qwen2.5-coder-1.5b", None) or 0.6)
    verdict = check.settle(sentence, Strip(text, "a.md", "internal", "About"), judge=judge, answers=True)
    assert verdict.how == "judge" and verdict.held is stated, verdict
    if not stated:
        assert verdict.probability is not None and verdict.probability < ENTAILS
