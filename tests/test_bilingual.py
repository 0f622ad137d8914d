"""A question's focus looked up across languages (CC-CEDICT, carried by a package)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crag import bilingual
from crag.bilingual import chinese_of, english_of, translated_coverage
from crag.grade.trained import LEX_NAMES, QueryInfo, lexical_features
from crag.types import Query

pytestmark = pytest.mark.unit

SPEC_ZH = "云雀 S5 产品规格：电池容量 5200 毫安时，支持 45 瓦快充。"
WEIGHT_ZH = "云雀 S5 产品规格：重量 198 克，机身厚度 7.9 毫米。"


def test_words_are_found_in_both_directions() -> None:
    assert {"annua", "leave"} <= english_of("年假")
    assert "leave" in english_of("天年假")  # jieba glued a measure word to it: the words inside count
    assert "电池" in chinese_of("battery") and "电池" in chinese_of("Batteries")
    assert not english_of("红隼实验室") & {"capac", "batte"}


@pytest.mark.parametrize(
    ("question", "answering", "near_miss"),
    [
        ("What is the Yunque S5 battery capacity?", SPEC_ZH, WEIGHT_ZH),
        (
            "青岚科技员工每年有几天年假？",
            "Annual leave: full-time employees receive 15 days of paid annual leave per year.",
            "Parental leave: employees receive 16 weeks of paid parental leave.",
        ),
    ],
)
def test_the_passage_that_states_the_focus_in_the_other_language_covers_it(
    question: str, answering: str, near_miss: str
) -> None:
    qi = QueryInfo.of(Query.of(question))
    assert translated_coverage(qi.focus_words, answering) > translated_coverage(qi.focus_words, near_miss)
    at = LEX_NAMES.index("focus_translated") - 1  # cosine comes first in LEX_NAMES, not in the lexical list
    assert lexical_features(qi, answering)[at] > lexical_features(qi, near_miss)[at]


def test_a_passage_in_the_question_s_language_is_not_read_in_translation() -> None:
    qi = QueryInfo.of(Query.of("What is the Yunque S5 battery capacity?"))
    at = LEX_NAMES.index("focus_translated") - 1
    assert lexical_features(qi, "The Yunque S5 has a 5200 mAh battery.")[at] == 0.0
    assert translated_coverage([], "anything") == 1.0


def test_the_tables_are_kept_in_the_cache_folder_and_a_bad_copy_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRAG_CACHE_DIR", str(tmp_path))
    bilingual._tables.cache_clear()
    try:
        built = bilingual._tables()
        (copy,) = (tmp_path / "cedict").glob("tables-*.marshal")
        bilingual._tables.cache_clear()
        assert bilingual._tables() == built  # read back from the copy
        copy.write_bytes(b"\x00 not marshal")
        bilingual._tables.cache_clear()
        assert bilingual._tables() == built and copy.stat().st_size > 1000  # rebuilt and written again
    finally:
        bilingual._tables.cache_clear()
