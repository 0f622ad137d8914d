"""Sentence-aware chunking for Chinese and English, and content-hash chunk ids."""

from __future__ import annotations

from itertools import pairwise

import pytest

from crag.ingest.chunk import chunk_id, chunk_text, normalize_whitespace
from crag.text import split_sentences

pytestmark = pytest.mark.unit

EN = [f"Sentence number {i} talks about topic {i * 7} in some detail." for i in range(1, 30)]
ZH = [f"第{i}句话介绍了长城的历史和它在中国文化中的重要地位。" for i in range(1, 40)]


def _sentences_whole(chunks: list[str], sentences: list[str]) -> None:
    """Every chunk is made of complete input sentences, and every sentence appears somewhere."""
    known = set(sentences)
    for chunk in chunks:
        assert all(s in known for s in split_sentences(chunk)), chunk
    covered = {s for chunk in chunks for s in split_sentences(chunk)}
    assert covered == known


@pytest.mark.parametrize(("sentences", "sep"), [(EN, " "), (ZH, "")], ids=["en", "zh"])
def test_chunks_respect_size_and_keep_sentences_whole(sentences: list[str], sep: str) -> None:
    chunks = chunk_text(sep.join(sentences), size=200, overlap=60)
    assert len(chunks) > 3
    assert all(0 < len(c) <= 200 for c in chunks)
    _sentences_whole(chunks, sentences)
    # Packing is greedy: a chunk is not cut while the next sentence would still have fitted.
    assert all(len(c) > 200 - len(sentences[0]) - 60 for c in chunks[:-1])


@pytest.mark.parametrize(("sentences", "sep"), [(EN, " "), (ZH, "")], ids=["en", "zh"])
def test_overlap_carries_trailing_whole_sentences(sentences: list[str], sep: str) -> None:
    chunks = chunk_text(sep.join(sentences), size=200, overlap=70)
    for prev, nxt in pairwise(chunks):
        prev_s, next_s = split_sentences(prev), split_sentences(nxt)
        shared = max(k for k in range(len(prev_s)) if prev_s[len(prev_s) - k :] == next_s[:k])
        assert shared >= 1  # at least one whole sentence is carried over ...
        carried = nxt[: nxt.index(next_s[shared - 1]) + len(next_s[shared - 1])]
        assert len(carried) <= 70  # ... within the overlap budget
        assert prev.endswith(carried)
        # ... and no more than fits: one more sentence would exceed the budget.
        assert len(prev) - prev.rindex(prev_s[-shared - 1]) > 70


def test_no_overlap_when_zero() -> None:
    chunks = chunk_text(" ".join(EN), size=200, overlap=0)
    seen = [s for c in chunks for s in split_sentences(c)]
    assert seen == EN


def test_chinese_chunks_keep_no_spaces_and_english_keep_spaces() -> None:
    zh = chunk_text("北京是中国的首都。上海是最大的城市。", size=12, overlap=0)
    assert zh == ["北京是中国的首都。", "上海是最大的城市。"]
    en = chunk_text("Paris is big.   Lyon is smaller.", size=400)
    assert en == ["Paris is big. Lyon is smaller."]


def test_long_sentence_is_hard_split_at_a_clause_boundary() -> None:
    clause = "这是一个很长的从句，"
    text = clause * 30 + "最后结束。"
    chunks = chunk_text(text, size=100, overlap=20)
    assert all(len(c) <= 100 for c in chunks)
    assert all(c.endswith("，") for c in chunks[:-1])
    assert "".join(chunks) == text


def test_long_english_sentence_splits_on_spaces_not_inside_words() -> None:
    text = " ".join(f"word{i}" for i in range(200)) + "."
    chunks = chunk_text(text, size=80, overlap=10)
    assert all(len(c) <= 80 for c in chunks)
    assert " ".join(chunks) == text


def test_unbreakable_run_is_cut_at_size() -> None:
    chunks = chunk_text("x" * 250, size=100, overlap=10)
    assert chunks == ["x" * 100, "x" * 100, "x" * 50]


def test_paragraph_break_starts_new_chunk_when_half_full() -> None:
    para1 = "The first paragraph is about rivers. Rivers flow to the sea."  # 61 chars
    para2 = "The second paragraph is about hills."
    chunks = chunk_text(f"{para1}\n\n{para2}", size=100, overlap=40)
    assert chunks == [para1, para2]  # no overlap carried across a paragraph break
    small = chunk_text(f"Short one.\n\n{para2}", size=100, overlap=40)
    assert small == [f"Short one.\n\n{para2}"]  # below half of size: paragraphs are joined


def test_empty_and_whitespace_give_no_chunks() -> None:
    assert chunk_text("") == []
    assert chunk_text(" \n\n\t ") == []


def test_chunking_is_deterministic_and_never_empty() -> None:
    text = "\n\n".join([" ".join(EN[:8]), "".join(ZH[:6]), "Short.", "x" * 500])
    first = chunk_text(text, size=150, overlap=40)
    assert first == chunk_text(text, size=150, overlap=40)
    assert all(c.strip() and len(c) <= 150 for c in first)


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (100, 100), (100, -1)])
def test_bad_arguments_raise_value_error(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="chunk"):
        chunk_text("text.", size=size, overlap=overlap)


def test_normalize_whitespace() -> None:
    assert normalize_whitespace(" a \u3000 b\u00a0c \r\n\n\n\n d  \n") == "a b c\n\nd"


def test_chunk_ids_are_deterministic_and_distinct() -> None:
    a = chunk_id("/kb/a.md", "北京是中国的首都。")
    assert a == chunk_id("/kb/a.md", "北京是中国的首都。")
    assert len(a) == 32 and all(ch in "0123456789abcdef" for ch in a)
    assert a == chunk_id("/kb/a.md", "  北京是中国的首都。\n")  # whitespace does not change identity
    assert chunk_id("/kb/a.md", "Hello  world.") == chunk_id("/kb/a.md", "Hello\nworld.")
    assert chunk_id("/kb/a.md", "caf\u00e9") == chunk_id("/kb/a.md", "cafe\u0301")  # NFC
    others = {chunk_id("/kb/b.md", "北京是中国的首都。"), chunk_id("/kb/a.md", "上海是中国的城市。")}
    assert a not in others and len(others) == 2
    # The separator keeps (source, text) pairs that concatenate alike apart.
    assert chunk_id("ab", "c") != chunk_id("a", "bc")
