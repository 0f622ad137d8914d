"""Files crag writes for people to read get the permissions any new file gets (the umask's)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crag.atomic import write_atomic

pytestmark = pytest.mark.unit


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_written_file_is_as_readable_as_one_open_creates(tmp_path: Path) -> None:
    # mkstemp's 0600 made `crag feedback export` and `crag grade -o` output unreadable to a teammate
    out = write_atomic(tmp_path / "export.jsonl", "{}\n")
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert out.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_an_explicit_mode_wins(tmp_path: Path) -> None:
    assert write_atomic(tmp_path / "private", b"k", mode=0o600).stat().st_mode & 0o777 == 0o600
