"""Query classification (zh/en rules, LLM with fallback) and per-type thresholds."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from crag.config import CragSettings
from crag.errors import ConfigError, LLMError
from crag.grade.classify import (
    QUERY_TYPES,
    classify_query,
    classify_with_llm,
    query_thresholds,
    thresholds_for,
)
from crag.testing.fakes import ScriptedLLM

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
# Explicit base thresholds: the expectations must not follow changes of the defaults.
BASE = {"upper": 0.6, "lower": 0.35}


@pytest.mark.parametrize(
    ("question", "qtype"),
    [
        ("什么是光合作用？", "definition"),
        ("光合作用是什么？", "definition"),
        ("请解释一下熵的概念", "definition"),
        ("“内卷”是什么意思？", "definition"),
        ("What is photosynthesis?", "definition"),
        ("Define entropy.", "definition"),
        ("What does RAG mean?", "definition"),
        ("Python 和 Java 有什么区别？", "comparison"),
        ("比较 BM25 与向量检索", "comparison"),
        ("Python和Java哪个更快？", "comparison"),
        ("Postgres vs MySQL for analytics", "comparison"),
        ("What is the difference between TCP and UDP?", "comparison"),
        ("Compare Rust and Go.", "comparison"),
        ("为什么天空是蓝色的？", "reasoning"),
        ("如何安装 Python？", "reasoning"),
        ("怎样提高检索质量", "reasoning"),
        ("Why is the sky blue?", "reasoning"),
        ("How does TCP congestion control work?", "reasoning"),
        ("珠穆朗玛峰的高度是多少？", "factoid"),
        ("谁发明了电话？", "factoid"),
        ("气炉在什么时候才走向商业化？", "factoid"),
        ("北京有几个区？", "factoid"),
        ("庆大霉素常见的商品名是什么？", "factoid"),
        ("钩盲蛇在中国被称为什么？", "factoid"),
        ("When was the Lumen Bridge opened?", "factoid"),
        ("Who wrote Hamlet?", "factoid"),
        ("Where is Varda?", "factoid"),
        ("Which noble helped establish the settlement?", "factoid"),
        ("How many moons does Mars have?", "factoid"),
        ("How much does it cost?", "factoid"),
        ("What is the capital of France?", "factoid"),
        ("谈谈人工智能的未来", "open-ended"),
        ("Tell me about Rome.", "open-ended"),
        ("人工智能", "open-ended"),
        ("large language models in education", "open-ended"),
    ],
)
def test_rule_table(question: str, qtype: str) -> None:
    assert classify_query(question) == qtype


def test_sample_questions_are_mostly_factoid() -> None:
    # every question of the sample set is labelled factoid by its source (CMRC / SQuAD)
    rows = [json.loads(line) for line in (ROOT / "data/sample/questions.jsonl").open(encoding="utf-8")]
    counts = Counter(classify_query(r["question"]) for r in rows)
    assert set(counts) <= set(QUERY_TYPES)
    assert counts["factoid"] / len(rows) >= 0.9


@pytest.mark.parametrize(
    ("reply", "qtype"),
    [
        ("comparison", "comparison"),
        ('"Open-ended".', "open-ended"),
        ("Type: definition", "definition"),
        ("推理型", "reasoning"),
        ("banana", "factoid"),  # unreadable: the rules decide
        (LLMError("down", backend_id="x", step="complete"), "factoid"),
    ],
)
def test_classify_with_llm_falls_back_to_rules(reply: str | Exception, qtype: str) -> None:
    assert classify_with_llm("Who wrote Hamlet?", ScriptedLLM([reply])) == qtype


def test_default_thresholds_per_type() -> None:
    s = CragSettings(evaluator=BASE)
    assert thresholds_for("factoid", s) == (0.65, 0.35)
    assert thresholds_for("definition", s) == (0.6, 0.35)
    assert thresholds_for("open-ended", s) == (0.5, 0.3)
    for qtype in QUERY_TYPES:
        upper, lower = thresholds_for(qtype, s)
        assert 0.0 <= lower < upper <= 1.0


def test_overrides_and_clipping() -> None:
    s = CragSettings(evaluator={"upper": 0.98, "lower": 0.1, "per_type": {"reasoning": {"lower": 0.2}}})
    assert thresholds_for("factoid", s) == (1.0, 0.1)  # shifted, clipped to 1
    assert thresholds_for("reasoning", s) == (0.98, 0.2)  # override of one bound only
    assert thresholds_for("open-ended", s) == (0.88, 0.05)


def test_inverted_thresholds_are_a_config_error() -> None:
    s = CragSettings(evaluator={**BASE, "per_type": {"factoid": {"upper": 0.3, "lower": 0.4}}})
    with pytest.raises(ConfigError, match="factoid"):
        thresholds_for("factoid", s)
    with pytest.raises(ConfigError, match="open-ended"):  # lower override above the shifted upper
        thresholds_for("open-ended", CragSettings(evaluator={**BASE, "per_type": {"open-ended": {"lower": 0.55}}}))
    with pytest.raises(ValueError, match="unknown query type"):
        thresholds_for("poetry", CragSettings())


def test_settings_reject_bad_per_type() -> None:
    with pytest.raises(ValueError):
        CragSettings(evaluator={"per_type": {"poetry": {"upper": 0.7}}})
    with pytest.raises(ValueError):
        CragSettings(evaluator={"per_type": {"factoid": {"upper": 1.7}}})


def test_query_thresholds() -> None:
    off = query_thresholds("谁发明了电话？", CragSettings(evaluator=BASE))
    assert off == ("", 0.6, 0.35)
    on = CragSettings(evaluator={**BASE, "classify": True})
    assert query_thresholds("谁发明了电话？", on) == ("factoid", 0.65, 0.35)
    assert query_thresholds("谈谈人工智能", on, ScriptedLLM(["open-ended"])).query_type == "open-ended"
