"""Every bad input a person can give the CLI: one line on stderr, a non-zero exit, no traceback.

Real subprocesses (``python -m crag.cli``) with real files: binary text, a corrupt PDF, a
garbage DOCX, an empty file, an all-bad JSONL, missing paths, a file given as ``--kb``, an
uncreatable KB folder, undecodable bytes in a question or a file name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crag import CRAG
from crag.errors import InputError

pytestmark = pytest.mark.integration


def run(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "100", "CRAG_LLM__MODEL": "qwen2.5-coder-0.5b"}
    return subprocess.run([sys.executable, "-m", "crag.cli", *args], cwd=cwd, env=env, capture_output=True, timeout=120)


def assert_one_line(proc: subprocess.CompletedProcess[bytes], *needles: str) -> str:
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode != 0, (proc.stdout, err)
    assert "Traceback" not in err + proc.stdout.decode("utf-8", "replace")
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    (d / "binary.txt").write_bytes(b"\x00\x01\x02\x03 binary \xff\xfe" * 20)
    (d / "corrupt.pdf").write_bytes(b"%PDF-1.7\nthis is not a real pdf")
    (d / "garbage.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (d / "empty.txt").write_bytes(b"")
    (d / "bad.jsonl").write_text('not json\n{"no_text": 1}\n[1, 2]\n' + "[" * 50_000 + "\n", "utf-8")
    (d / "empty_dir").mkdir()
    (d / "a_file").write_text("I am a file, not a folder", "utf-8")
    (d / os.fsdecode(b"name-\xff\xfe.txt")).write_text("The name is not UTF-8.", "utf-8")
    return d


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        ("binary.txt", "binary content"),
        ("corrupt.pdf", "corrupt or unreadable PDF"),
        ("garbage.docx", "corrupt or unreadable DOCX"),
        ("empty.txt", "file is empty"),
        ("bad.jsonl", "no valid JSONL line"),
        ("missing.txt", "not found"),
        ("empty_dir", "no supported files"),
    ],
)
def test_ingest_nothing_ingested_exits_non_zero(bad: Path, target: str, needle: str) -> None:
    proc = run("ingest", target, "--kb", "kb", cwd=bad)
    assert_one_line(proc, "nothing ingested", needle)


def test_ingest_all_skipped_names_the_count(bad: Path) -> None:
    proc = run("ingest", "binary.txt", "corrupt.pdf", "garbage.docx", "missing.txt", "--kb", "kb", cwd=bad)
    assert_one_line(proc, "all 4 files were skipped")


def test_kb_is_a_regular_file(bad: Path) -> None:
    assert_one_line(run("ingest", "binary.txt", "--kb", "a_file", cwd=bad), "is a file, not a folder")
    assert_one_line(run("ask", "What?", "--kb", "a_file", cwd=bad), "a_file")
    assert_one_line(run("trace", "list", "--kb", "a_file", cwd=bad), "is a file, not a folder")


def test_kb_folder_cannot_be_created(bad: Path) -> None:
    # /sys refuses new entries even to root (tests run as root in CI, so chmod cannot stand in).
    target = "/sys/crag-test-kb" if Path("/sys").is_dir() else str(bad / "a_file" / "kb")
    line = assert_one_line(run("ingest", "empty.txt", "--kb", target, cwd=bad), "cannot create knowledge base")
    assert "crag-test-kb" in line or "a_file" in line


def test_file_name_that_is_not_utf8(bad: Path) -> None:
    proc = run("ingest", os.fsencode(bad / os.fsdecode(b"name-\xff\xfe.txt")), "--kb", "kb", cwd=bad)
    assert_one_line(proc, "not valid UTF-8", "rename")


def test_question_with_invalid_utf8(bad: Path, tmp_path: Path) -> None:
    docs = tmp_path / "d.md"
    docs.write_text("# Warsaw\n\nThe Royal University of Warsaw was established in 1816.", "utf-8")
    assert run("ingest", str(docs), "--kb", str(tmp_path / "kb"), cwd=bad).returncode == 0
    proc = run("ask", b"When was \xff\xfe founded?", "--kb", str(tmp_path / "kb"), cwd=bad)
    assert_one_line(proc, "not valid UTF-8")
    proc = run("trace", "show", b"\xff\xfe\xfd\xfc\xfb\xfa", "--kb", str(tmp_path / "kb"), cwd=bad)
    assert_one_line(proc)


@pytest.mark.unit
def test_python_api_scrubs_lone_surrogates(tmp_path: Path) -> None:
    rag = CRAG.from_config(kb={"path": tmp_path / "kb"})
    with pytest.raises(InputError, match="no readable text"):
        rag.ask("\ud800")
    with pytest.raises(InputError, match="no readable text"):
        rag.ask(" \udcff\udcfe ")
