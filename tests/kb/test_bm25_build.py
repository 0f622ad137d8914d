"""The streamed BM25 build gives bm25s's own scores (crag.store.bm25_build)."""

from __future__ import annotations

import random
from pathlib import Path

import bm25s
import numpy as np
import pytest

from crag.store.bm25_build import build_bm25
from crag.testing.corpus import write_mixed_text
from crag.text import tokenize

pytestmark = pytest.mark.unit


def test_scores_equal_bm25s_index_zh_en(tmp_path: Path) -> None:
    text = write_mixed_text(tmp_path / "t.txt", 200_000, seed=9).read_text("utf-8")
    docs = [tokenize(p) or ["_empty_"] for p in text.split("\n\n") if p.strip()]
    ours = build_bm25(lambda: iter(docs))
    ref = bm25s.BM25()
    ref.index(list(docs), show_progress=False)
    rng = random.Random(1)
    for _ in range(20):
        query = rng.choice(rng.choice(docs)[:5] or ["_empty_"]), "长江", "university"
        assert np.allclose(ours.get_scores(list(query)), ref.get_scores(list(query)), atol=1e-5)
    # Saved and loaded like any bm25s index.
    ours.save(str(tmp_path / "idx"))
    loaded = bm25s.BM25.load(str(tmp_path / "idx"))
    assert np.allclose(loaded.get_scores(["长江"]), ref.get_scores(["长江"]), atol=1e-5)
