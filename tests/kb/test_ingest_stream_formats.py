"""Large PDF, DOCX and HTML files are read piece by piece and chunk exactly like a whole read.

The stream thresholds are shrunk so that files of some hundred KB behave like large ones.
"""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pypdf
import pytest

from crag.errors import UnsupportedFileError
from crag.ingest import formats, sections, stream
from crag.ingest.blocks import exact_blocks
from crag.ingest.chunk import chunk_section, chunk_text, normalize_whitespace
from crag.ingest.load import load_file, strip_controls
from crag.ingest.stream import file_chunks, scan
from crag.kb import KnowledgeBase
from crag.store.manifest import PARTIAL
from crag.testing.corpus import write_mixed_text
from crag.testing.documents import english_pages, mixed_paragraphs, write_docx, write_html, write_pdf
from crag.testing.fakes import CrashingEmbedder, HashEmbedder

pytestmark = pytest.mark.unit

Row = tuple[str, str, str, str]  # chunk id, text, title, source


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Shrunk thresholds; the returned list grows by one for each block a streamed file is cut into."""
    monkeypatch.setattr(stream, "BLOCK_BYTES", 16 * 1024)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 16 * 1024)
    cuts: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Iterator[tuple[str, float]]:
        for block in exact_blocks(*args, **kwargs):
            cuts.append(len(block[0]))
            yield block

    monkeypatch.setattr(sections, "exact_blocks", counted)
    return cuts


def streamed(path: Path, size: int = 400, overlap: int = 60) -> tuple[list[Row], list[int]]:
    got = list(file_chunks(path, scan(path), size=size, overlap=overlap))
    return [(c.id, c.text, c.title, c.source) for c, _ in got], [o for _, o in got]


def read_whole(path: Path, monkeypatch: pytest.MonkeyPatch, size: int = 400, overlap: int = 60) -> list[Row]:
    """The chunks of the file read whole (load_file), as every file below the threshold is."""
    with monkeypatch.context() as m:
        m.setattr(stream, "STREAM_MIN_BYTES", 1 << 40)
        return streamed(path, size, overlap)[0]


def assert_progress(offsets: list[int], path: Path) -> None:
    assert offsets == sorted(offsets) and offsets[-1] == path.stat().st_size
    assert len(set(offsets)) > 5, "progress moved in too few steps: the file was not streamed"


# --- cutting pieces into blocks ------------------------------------------------------------


def pieces_of(text: str, rng: random.Random, cuts: int) -> Iterator[tuple[str, float]]:
    """``text`` in pieces cut at random places (mid-word, mid-"\\r\\n" included)."""
    points = sorted(rng.sample(range(1, len(text)), cuts))
    for a, b in zip([0, *points], [*points, len(text)], strict=True):
        yield text[a:b], b / len(text)


@pytest.mark.parametrize(("size", "overlap"), [(400, 60), (200, 30), (120, 0)])
def test_blocks_chunk_exactly_like_the_whole_text(tmp_path: Path, size: int, overlap: int) -> None:
    rng = random.Random(size)
    text = write_mixed_text(tmp_path / "t.txt", 120_000, seed=size).read_text("utf-8")
    paras = text.split("\n\n")
    # Hard cases among the paragraphs: a sentence longer than a chunk, CRLF, a form feed (a PDF
    # page break), control characters, short one-line paragraphs, a list.
    paras[5] = "word " * 300
    paras[9] = paras[9].replace("\n", "\r\n") + "\r\n\r\n"
    paras[13] = "a\fb\x00c " + paras[13]
    paras[17:17] = [f"Short {i}." for i in range(40)] + ["- one\n- two\n3. three"]
    raw = "\n\n".join(paras)
    whole = chunk_text(normalize_whitespace(strip_controls(raw)), size=size, overlap=overlap)
    blocks = list(exact_blocks(pieces_of(raw, rng, 3000), size=size, overlap=overlap, budget=4000))
    assert len(blocks) > 20
    assert [c for b, _ in blocks for c in chunk_text(b, size=size, overlap=overlap)] == whole
    fractions = [f for _, f in blocks]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_one_endless_paragraph_is_cut_anyway_without_losing_text() -> None:
    rng = random.Random(3)
    raw = " ".join(f"Sentence {i} is about the river bridge." for i in range(5000))  # no paragraph break
    blocks = list(exact_blocks(pieces_of(raw, rng, 500), size=200, overlap=0, budget=2000))
    assert len(blocks) > 10  # held text is bounded (4 budgets) even without a clean cut
    chunks = [c for b, _ in blocks for c in chunk_text(b, size=200, overlap=0)]
    assert "".join(chunks).replace(" ", "") == raw.replace(" ", "")  # nothing lost, nothing twice


# --- PDF -----------------------------------------------------------------------------------


def big_pdf(path: Path, pages: int = 120, *, broken: Sequence[int] = (), title: str = "Big Report") -> Path:
    """A PDF of English pages; the pages numbered in ``broken`` (from 0) have a corrupt content stream."""
    write_pdf(path, english_pages(pages, seed=pages), title=title)
    data = path.read_bytes()
    head = b"BT /F1 10 Tf"
    starts = [i for i in range(len(data)) if data.startswith(head, i)]
    for n in broken:  # an unterminated dictionary, same length: the file opens, that page fails
        data = data[: starts[n]] + b"BT /F1 10 <<" + data[starts[n] + len(head) :]
    path.write_bytes(data)
    return path


def test_pdf_streams_page_by_page_with_the_chunks_of_a_whole_read(
    tmp_path: Path, small_blocks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(formats, "PAGES_PER_READER", 7)  # a fresh pypdf reader every 7 pages
    pdf = big_pdf(tmp_path / "report.pdf")
    reads = []
    extract = pypdf.PageObject.extract_text

    def counted(page: pypdf.PageObject, *args: object, **kwargs: object) -> str:
        reads.append(1)
        return extract(page, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pypdf.PageObject, "extract_text", counted)
    first = next(file_chunks(pdf, scan(pdf), size=400, overlap=60))
    assert len(reads) < 15, "the first chunk came only after most pages were read"
    assert first[1] < pdf.stat().st_size // 4

    small_blocks.clear()
    rows, offsets = streamed(pdf)
    assert len(small_blocks) > 10 and max(small_blocks) < 5 * 16 * 1024  # read in bounded blocks
    assert rows == read_whole(pdf, monkeypatch)
    assert {r[2] for r in rows} == {"Big Report"} and {r[3] for r in rows} == {str(pdf.resolve())}
    assert len(rows) > 1000 and len({r[0] for r in rows}) == len(rows)
    assert_progress(offsets, pdf)


def test_pdf_opened_with_the_empty_password_streams_too(
    tmp_path: Path, small_blocks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(formats, "PAGES_PER_READER", 7)  # each fresh reader is decrypted again
    writer = pypdf.PdfWriter(clone_from=big_pdf(tmp_path / "plain.pdf", pages=60))
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    locked = tmp_path / "no-print.pdf"
    with locked.open("wb") as fh:
        writer.write(fh)
    rows, _ = streamed(locked)
    assert len(small_blocks) > 5 and len(rows) > 500
    assert [r[1] for r in rows] == [r[1] for r in streamed(tmp_path / "plain.pdf")[0]]
    assert rows == read_whole(locked, monkeypatch)


def test_pdf_memory_holds_pages_not_the_document_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "PAGES_PER_READER", 50)
    monkeypatch.setattr(stream, "BLOCK_BYTES", 32 * 1024)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 32 * 1024)
    pdf = big_pdf(tmp_path / "long.pdf", pages=400)
    tracemalloc.start()
    try:
        n = sum(1 for _ in file_chunks(pdf, scan(pdf), size=400, overlap=60))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        whole = len(read_whole(pdf, monkeypatch))
        whole_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Read whole: every page's text, the joined text and its cleaned copies, all chunks, and what
    # pypdf keeps of every page it parsed. Streamed: a block of text, and pypdf's objects of the
    # pages since its reader was last opened afresh.
    assert n == whole > 4000
    assert peak * 3 < whole_peak, f"streamed peak {peak} bytes vs {whole_peak} read whole"


def test_pdf_errors_keep_their_one_line_verdicts(tmp_path: Path, small_blocks: list[int]) -> None:
    broken = big_pdf(tmp_path / "broken.pdf", broken=[100])
    got = []
    with pytest.raises(UnsupportedFileError, match=r"broken\.pdf: corrupt or unreadable PDF \(\w+\); re-export it$"):
        for chunk, _ in file_chunks(broken, scan(broken), size=400, overlap=60):
            got.append(chunk)
    assert len(got) > 500  # the pages before the broken one were chunked as they were read

    writer = pypdf.PdfWriter(clone_from=big_pdf(tmp_path / "plain.pdf"))
    writer.encrypt(user_password="s3cret", owner_password="owner", algorithm="RC4-128")
    locked = tmp_path / "locked.pdf"
    with locked.open("wb") as fh:
        writer.write(fh)
    with pytest.raises(UnsupportedFileError, match=r"locked\.pdf: PDF is (password-protected|encrypted)"):
        next(file_chunks(locked, scan(locked), size=400, overlap=60))

    blank = pypdf.PdfWriter()
    for _ in range(400):
        blank.add_blank_page(width=200, height=200)
    scanned = tmp_path / "scan.pdf"
    with scanned.open("wb") as fh:
        blank.write(fh)
    assert scanned.stat().st_size > stream.STREAM_MIN_BYTES
    with pytest.raises(UnsupportedFileError, match=r"scan\.pdf: no extractable text; scanned pages need OCR first"):
        next(file_chunks(scanned, scan(scanned), size=400, overlap=60))


# --- DOCX and HTML -------------------------------------------------------------------------


def test_docx_streams_paragraphs_and_tables_with_the_chunks_of_a_whole_read(
    tmp_path: Path, small_blocks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    paragraphs = mixed_paragraphs(3000, seed=4)
    path = write_docx(tmp_path / "spec.docx", paragraphs, title="Spec 规格", table_every=25, heading_every=60)
    rows, offsets = streamed(path)
    assert len(small_blocks) > 10 and max(small_blocks) < 5 * 16 * 1024
    assert rows == read_whole(path, monkeypatch)
    assert {r[2] for r in rows} == {"Spec 规格"} and len(rows) > 800
    assert any("row 25 | Value: 175 号 | 备注: Fine. 很好。\n\nrow 26 | Value / 备注: merged" in r[1] for r in rows)
    assert any(r[1].startswith("Part 49 第49部分\n\n") for r in rows) and any(
        "长江" in r[1] or "北京" in r[1] for r in rows
    )
    assert_progress(offsets, path)


@pytest.mark.parametrize(("title", "expected"), [("", "Report 报告"), ("Annual Page", "Annual Page")])
def test_html_streams_its_text_with_the_chunks_of_a_whole_read(
    tmp_path: Path, small_blocks: list[int], monkeypatch: pytest.MonkeyPatch, title: str, expected: str
) -> None:
    path = write_html(tmp_path / "page.html", mixed_paragraphs(4000, seed=5), title=title)
    rows, offsets = streamed(path)
    assert len(small_blocks) > 10 and max(small_blocks) < 5 * 16 * 1024
    assert rows == read_whole(path, monkeypatch)
    assert {r[2] for r in rows} == {expected} and len(rows) > 800
    text = "\n".join(r[1] for r in rows)
    assert "var x" not in text and "Home | About" not in text and "Copyright" not in text
    assert "second line 3" in text and "cell 13" in text and "Part 7\n\n" in text
    assert "cell 6 | Figures 数字Q1: 6 | Figures 数字Q3: 18" in text  # rows under their caption's section
    assert_progress(offsets, path)


def test_small_files_of_every_format_chunk_exactly_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = [
        big_pdf(tmp_path / "a.pdf", pages=40),
        write_docx(tmp_path / "b.docx", mixed_paragraphs(300, seed=1), table_every=20),
        write_html(tmp_path / "c.html", mixed_paragraphs(300, seed=2)),
        write_docx(tmp_path / "d.docx", mixed_paragraphs(300, seed=3), table_every=20, heading_every=30),
    ]
    for path in files:
        assert path.stat().st_size < stream.STREAM_MIN_BYTES
        docs, _ = load_file(path)
        before = [t for doc in docs for t in chunk_section(doc.text, doc.section, size=400, overlap=60)]
        rows, offsets = streamed(path)
        assert [r[1] for r in rows] == list(dict.fromkeys(before)) and offsets[-1] == path.stat().st_size
        # The same file streamed (threshold lowered) gives the same chunks too.
        with monkeypatch.context() as m:
            m.setattr(stream, "STREAM_MIN_BYTES", 1024)
            m.setattr(stream, "BLOCK_BYTES", 16 * 1024)
            assert streamed(path)[0] == rows


# --- through the knowledge base ------------------------------------------------------------


def consistent(kb: KnowledgeBase) -> bool:
    return kb.vectors.all_ids() == kb.manifest.chunk_ids()


def make(kind: str, path: Path) -> Path:
    if kind == "pdf":
        return big_pdf(path.with_suffix(".pdf"), pages=40)
    if kind == "docx":
        return write_docx(path.with_suffix(".docx"), mixed_paragraphs(900, seed=6), table_every=30)
    return write_html(path.with_suffix(".html"), mixed_paragraphs(1200, seed=7))


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["pdf", "docx", "html"])
def test_interrupted_ingest_of_a_large_document_resumes(tmp_path: Path, small_blocks: list[int], kind: str) -> None:
    big = make(kind, tmp_path / "big")
    kb = KnowledgeBase(tmp_path / "kb", CrashingEmbedder(calls=3), commit_chunks=32)
    with pytest.raises(KeyboardInterrupt):
        kb.ingest([big])  # three batches of 32 commit, the fourth embedding dies
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder(), commit_chunks=32)
    assert kb.stats()["chunks"] == 96 and consistent(kb)
    assert kb.manifest.file_sha(str(big.resolve())) == PARTIAL + scan(big).sha256

    again = CrashingEmbedder(calls=10**6)
    report = KnowledgeBase(tmp_path / "kb", again, commit_chunks=32).ingest([big])
    (result,) = report.files
    assert result.status == "added" and result.reason == "resumed an interrupted ingest"
    assert again.texts == result.chunks - 96  # only what the interrupted run had not committed
    clean = KnowledgeBase(tmp_path / "clean", HashEmbedder(), commit_chunks=32)
    clean.ingest([big])
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder(), commit_chunks=32)
    assert kb.manifest.ordered_ids() == clean.manifest.ordered_ids() and consistent(kb)
    assert clean.stats()["chunks"] > 150


@pytest.mark.integration
def test_a_pdf_broken_far_in_keeps_its_committed_batches_consistent(tmp_path: Path, small_blocks: list[int]) -> None:
    # As for a streamed text file that fails mid-read: the batches committed before the broken
    # page stay (searchable, file marked partial), the file is reported skipped with the
    # whole read's verdict, and a repaired file replaces them with exactly its own chunks.
    pdf = big_pdf(tmp_path / "manual.pdf", pages=40, broken=[30])
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder(), commit_chunks=32)
    (result,) = kb.ingest([pdf]).files
    assert result.status == "skipped" and "manual.pdf: corrupt or unreadable PDF" in result.reason
    committed = kb.stats()["chunks"]
    assert committed > 0 and committed % 32 == 0 and consistent(kb)
    assert kb.manifest.file_sha(str(pdf.resolve())) == PARTIAL + scan(pdf).sha256
    assert kb.search("river bridge museum", k=1)

    big_pdf(pdf, pages=40)  # re-exported without the broken page
    (result,) = kb.ingest([pdf]).files
    assert result.status in ("added", "updated")
    clean = KnowledgeBase(tmp_path / "clean", HashEmbedder(), commit_chunks=32)
    clean.ingest([pdf])
    assert kb.manifest.ordered_ids() == clean.manifest.ordered_ids() and consistent(kb)
