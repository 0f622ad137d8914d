"""The LLM judge with the default embedded model: its digit distribution ranks answers."""

from __future__ import annotations

import pytest

from crag.eval.judge import LLMJudge
from crag.types import Query

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_logprob_judge_with_the_default_embedded_model_ranks_right_above_wrong() -> None:
    """The default 1.5B model as judge (the 0.5B one cannot tell these apart: 3.52 vs 3.54)."""
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (crag[local])")
    from crag.llm.llama_cpp import LlamaCppLLM

    judge = LLMJudge(LlamaCppLLM("qwen2.5-coder-1.5b", n_ctx=2048), seed=0)
    context = ["The Eiffel Tower was completed in 1889 for the World's Fair in Paris."]
    verdict = judge.judge(
        Query.of("When was the Eiffel Tower completed?"),
        ["1889"],
        {"a": ("The Eiffel Tower was completed in 1889 [1].", context), "b": ("It was completed in 1950.", context)},
    )
    assert judge.mode == "logprob" and verdict.error is None
    assert all(1.0 <= v <= 5.0 for scores in verdict.scores.values() for v in scores.values())
    assert verdict.scores["a"]["accuracy"] > verdict.scores["b"]["accuracy"] + 0.5
    assert verdict.scores["a"]["faithfulness"] > verdict.scores["b"]["faithfulness"]
