"""Large text files are read as a stream of paragraph-aligned blocks (crag.ingest.stream)."""

from __future__ import annotations

import re
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from crag.errors import UnsupportedFileError
from crag.ingest import stream
from crag.ingest.chunk import chunk_text
from crag.ingest.load import load_file
from crag.ingest.stream import file_chunks, scan
from crag.testing.corpus import write_mixed_text

pytestmark = pytest.mark.unit


def whole_file_chunks(path: Path) -> list[str]:
    docs, _ = load_file(path)
    return [t for d in docs for t in chunk_text(d.text, size=400, overlap=60)]


def test_scan_hashes_and_tells_utf8_from_other_bytes(tmp_path: Path) -> None:
    import hashlib

    good = tmp_path / "a.txt"
    good.write_bytes("\ufeff北京是首都。".encode() * 1000)
    info = scan(good, block=7)  # blocks cut through multi-byte characters
    assert info.utf8 and info.size == good.stat().st_size
    assert info.sha256 == hashlib.sha256(good.read_bytes()).hexdigest()
    gbk = tmp_path / "b.txt"
    gbk.write_bytes("北京是中国的首都。".encode("gb18030"))
    nul = tmp_path / "c.txt"
    nul.write_bytes(b"text\x00more")
    cut = tmp_path / "d.txt"
    cut.write_bytes("北京".encode()[:-1])
    assert not scan(gbk).utf8 and not scan(nul).utf8 and not scan(cut).utf8


def test_streamed_chunks_match_whole_file_chunking_zh_en(tmp_path: Path) -> None:
    big = write_mixed_text(tmp_path / "big.txt", 3 * stream.BLOCK_BYTES + 12345, seed=5)
    info = scan(big)
    got = list(file_chunks(big, info, size=400, overlap=60))
    texts = [c.text for c, _ in got]
    whole = whole_file_chunks(big)
    # Blocks end at paragraph breaks, where chunking starts afresh anyway; only a short last
    # chunk of a block may differ from the whole-text result.
    assert len(set(texts) ^ set(whole)) <= 2 * 4
    assert all(0 < len(t) <= 400 for t in texts)
    assert any("北京" in t or "上海" in t for t in texts) and any("university" in t for t in texts)
    offsets = [o for _, o in got]
    assert offsets == sorted(offsets) and offsets[-1] == info.size
    assert {c.source for c, _ in got} == {str(big.resolve())} and {c.title for c, _ in got} == {"big"}
    assert len({c.id for c, _ in got}) == len(got)


def test_small_files_chunk_exactly_as_before(tmp_path: Path) -> None:
    small = write_mixed_text(tmp_path / "small.txt", 200_000, seed=2)
    assert [c.text for c, _ in file_chunks(small, scan(small), size=400, overlap=60)] == whole_file_chunks(small)


def test_memory_holds_a_block_not_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "BLOCK_BYTES", 64 * 1024)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 64 * 1024)
    big = write_mixed_text(tmp_path / "big.txt", 4_000_000, seed=7)
    info = scan(big)
    tracemalloc.start()
    try:
        n = sum(1 for _ in file_chunks(big, info, size=400, overlap=60))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Read whole, this file peaks at ~40 MB (text, sentences, chunks); streamed, at a few blocks
    # plus the file's chunk ids (kept to skip repeated passages, ~100 bytes each): ~2.2 MB.
    assert n > 9000
    assert peak < 5_000_000, f"peak {peak} bytes while streaming a {info.size} byte file"


def test_markdown_title_crlf_and_one_long_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 4096)
    md = tmp_path / "notes.md"
    body = "\r\n\r\n".join(f"Paragraph {i} talks about the river bridge.\r\nIt has a second line." for i in range(400))
    md.write_text("---\r\ntitle: River Notes\r\n---\r\n" + body, "utf-8", newline="")
    chunks = [c for c, _ in file_chunks(md, scan(md), size=200, overlap=30)]
    assert {c.title for c in chunks} == {"River Notes"}
    assert not any("\r" in c.text or "title:" in c.text for c in chunks)
    assert any("Paragraph 399" in c.text for c in chunks) and any("Paragraph 0 " in c.text for c in chunks)
    # Chinese with no line breaks at all: blocks cut after a sentence end.
    zh = tmp_path / "zh.txt"
    zh.write_text("".join(f"长江大桥第{i}号建于一九五七年。" for i in range(3000)), "utf-8")
    texts = [c.text for c, _ in file_chunks(zh, scan(zh), size=100, overlap=0)]
    assert all(t.endswith("。") for t in texts) and sum(t.count("号") for t in texts) == 3000


def test_front_matter_and_ingest_metadata_reach_every_chunk_streamed_or_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "\n\n".join(f"第{i}段：长江大桥建于一九五七年。The bridge carries road and rail." for i in range(300))
    md = tmp_path / "bridge.md"
    md.write_text("---\ntitle: 大桥\nteam: 工程\n---\n" + body, "utf-8")
    cli_meta = {"team": "ignored: the document's own field wins", "source_kind": "wiki"}
    whole = [c for c, _ in file_chunks(md, scan(md), size=200, overlap=30, metadata=cli_meta)]
    monkeypatch.setattr(stream, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 4096)
    streamed = [c for c, _ in file_chunks(md, scan(md), size=200, overlap=30, metadata=cli_meta)]
    for chunks in (whole, streamed):
        assert len(chunks) > 50
        assert all(c.metadata == {"team": "工程", "source_kind": "wiki"} and c.title == "大桥" for c in chunks)
    # Metadata is part of a chunk's identity: other metadata, other ids (so stores get rewritten).
    plain = [c for c, _ in file_chunks(md, scan(md), size=200, overlap=30)]
    assert [c.text for c in plain] == [c.text for c in streamed]
    assert not {c.id for c in plain} & {c.id for c in streamed}


def test_whitespace_only_large_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 1024)
    blank = tmp_path / "blank.txt"
    blank.write_text(" \n\t\n" * 1000, "utf-8")
    with pytest.raises(UnsupportedFileError, match="no extractable text"):
        list(file_chunks(blank, scan(blank), size=400, overlap=60))


def _jsonl(path: Path, rows: int) -> Path:
    import json

    lines = []
    for i in range(rows):
        if i % 97 == 5:
            lines.append("{not json")  # a bad line: warned about, skipped
            continue
        text = f"第{i}号文件说明长江大桥建于一九五七年。" if i % 2 else f"Record {i}: the river bridge opened in 1957."
        # A raw U+2028 inside a JSON string is text, not a line end.
        lines.append(json.dumps({"id": i, "text": text + "\u2028end", "metadata": {"n": i}}, ensure_ascii=False))
    path.write_text("\ufeff" + "\r\n".join(lines) + "\r\n", "utf-8", newline="")
    return path


def test_jsonl_streams_line_by_line_with_the_chunks_of_a_whole_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 4096)
    path = _jsonl(tmp_path / "rows.jsonl", 3000)
    info = scan(path)
    warns: list[str] = []
    got = list(file_chunks(path, info, size=400, overlap=60, warnings=warns))
    whole, whole_warns = load_file(path)
    assert [(c.source, c.text) for c, _ in got] == [(d.source, d.text) for d in whole]
    assert warns == whole_warns and len(warns) == 31 and "line 6: invalid JSON" in warns[0]
    assert got[0][0].source.endswith("rows.jsonl#0") and got[0][0].metadata == {"n": "0"}
    offsets = [o for _, o in got]
    assert offsets == sorted(offsets) and offsets[-1] == info.size


def test_jsonl_memory_holds_a_line_not_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 4096)
    rows = 60_000
    path = _jsonl(tmp_path / "rows.jsonl", rows)
    info = scan(path)

    def peak_of(read: Callable[[], object]) -> int:
        tracemalloc.start()
        try:
            read()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    streamed = peak_of(lambda: sum(1 for _ in file_chunks(path, info, size=400, overlap=60)))
    whole = peak_of(lambda: load_file(path))
    # Streamed, memory holds one line plus, per row, its id and a 64-bit chunk key (to skip
    # duplicates): ~160 bytes a row, not the file's text, documents and metadata at once.
    assert streamed < 200 * rows + 1_000_000, f"streamed peak {streamed} bytes for {rows} rows"
    assert streamed * 3 < whole, f"streamed peak {streamed} vs {whole} bytes read whole"


def test_jsonl_without_one_valid_line_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 1024)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "no text"}\n' * 200, "utf-8")
    problem = r'no valid JSONL line.*first problem: .*line 1: missing or empty "text"'
    with pytest.raises(UnsupportedFileError, match=problem):
        list(file_chunks(bad, scan(bad), size=400, overlap=60))


@pytest.mark.parametrize("codec", ["gb18030", "utf-16"])
def test_other_encodings_stream_with_the_codec_of_their_first_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    monkeypatch.setattr(stream, "BLOCK_BYTES", 64 * 1024)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 64 * 1024)
    utf8 = write_mixed_text(tmp_path / "u.txt", 1_500_000, seed=3)
    path = tmp_path / f"{codec}.txt"
    path.write_bytes(utf8.read_text("utf-8").encode(codec))  # utf-16 writes a BOM
    info = scan(path, block=64 * 1024)
    assert not info.utf8 and info.encoding == codec
    tracemalloc.start()
    try:
        sum(1 for _ in file_chunks(path, info, size=400, overlap=60))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        whole_file_chunks(path)
        whole_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    got = list(file_chunks(path, info, size=400, overlap=60))
    texts = [c.text for c, _ in got]
    whole = whole_file_chunks(path)
    # Only chunks at the ~20 block cuts differ from a whole read (UTF-8 here: 1.5 %; these: ~3.5 %),
    # and no sentence is lost.
    assert len(texts) > 3000 and len(set(texts) ^ set(whole)) <= 0.05 * len(whole)
    blob = "\n".join(texts)
    assert all(s.strip() in blob for s in re.split(r"(?<=[。！？.])\s*", utf8.read_text("utf-8")) if s.strip())
    assert any("北京" in t or "上海" in t for t in texts) and any("university" in t for t in texts)
    offsets = [o for _, o in got]
    assert offsets == sorted(offsets) and offsets[-1] == info.size
    assert peak * 3 < whole_peak, f"peak {peak} bytes streamed vs {whole_peak} read whole ({codec})"


def test_a_file_that_leaves_its_first_blocks_encoding_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 4096)
    path = tmp_path / "mixed.txt"
    # GB18030 Chinese, then a byte GB18030 cannot decode: the file does not stream, and the
    # whole read gives its one-line verdict.
    path.write_bytes("长江大桥建于一九五七年，是第一座跨越长江的大桥。\n".encode("gb18030") * 400 + b"\x80\xff")
    info = scan(path, block=4096)
    assert not info.utf8 and info.encoding == ""
    with pytest.raises(UnsupportedFileError, match="encoding is unclear"):
        list(file_chunks(path, info, size=400, overlap=60))
