"""A knowledge base that goes away closes its files: a long-lived server opens many over its life."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

from crag.kb import KnowledgeBase
from crag.testing.fakes import HashEmbedder


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/fd")
def test_dropped_knowledge_bases_leave_no_open_files(tmp_path: Path) -> None:
    doc = tmp_path / "a.txt"
    doc.write_text("Paris is the capital of France. 北京是中国的首都。\n" * 10, "utf-8")

    def one_round(i: int) -> None:
        kb = KnowledgeBase(tmp_path / f"kb{i}", HashEmbedder())
        kb.ingest([doc])
        again = KnowledgeBase(tmp_path / f"kb{i}", HashEmbedder())
        assert again.search("Paris", k=1)
        kb.manifest.close()
        again.manifest.close()

    one_round(0)  # the first round loads libraries that keep their own files
    gc.collect()
    before = open_files()
    for i in range(1, 5):
        one_round(i)
    gc.collect()
    # each round used to keep ~11 files (Chroma's per-folder engine cache): 44 after four
    assert open_files() - before <= 4
