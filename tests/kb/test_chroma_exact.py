"""A small Chroma collection is searched exactly: the same neighbours in every process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crag.store.chroma import ChromaVectorStore

pytestmark = pytest.mark.integration


def rows(n: int, dim: int = 32, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def brute(vectors: np.ndarray, ids: list[str], q: np.ndarray, k: int) -> list[str]:
    sims = vectors @ q / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(q))
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-sims[i], ids[i]))[:k]]


def test_exact_search_finds_the_true_nearest_and_follows_writes(tmp_path: Path) -> None:
    vectors = rows(600)
    ids = [f"c{i:04d}" for i in range(600)]
    store = ChromaVectorStore(tmp_path / "chroma")
    store.upsert(ids, vectors, [{"source": "s"}] * 600)
    queries = rows(20, seed=11)
    for q in queries:
        got = store.query(q, 20)
        assert [i for i, *_ in got] == brute(vectors, ids, q, 20)
        best = vectors[ids.index(got[0][0])]
        assert got[0][1] == pytest.approx(float(best @ q / (np.linalg.norm(best) * np.linalg.norm(q))), abs=1e-5)
    # another store object on the same folder (another process) returns the same lists
    again = ChromaVectorStore(tmp_path / "chroma")
    first = [[i for i, *_ in store.query(q, 20)] for q in queries]
    assert [[i for i, *_ in again.query(q, 20)] for q in queries] == first
    # a write is seen at once: a new nearest, and a deleted one gone
    store.upsert(["new"], queries[:1] * 3.0, [{"source": "s"}])
    assert store.query(queries[0], 1)[0][0] == "new"
    store.delete(["new"])
    assert store.query(queries[0], 1)[0][0] != "new"


def test_equal_vectors_are_ordered_by_id(tmp_path: Path) -> None:
    store = ChromaVectorStore(tmp_path / "chroma")
    same = np.ones((4, 8), np.float32)
    store.upsert(["d", "b", "a", "c"], same, [{"source": "s"}] * 4)
    assert [i for i, *_ in store.query(np.ones(8, np.float32), 3)] == ["a", "b", "c"]


def test_a_large_collection_goes_through_chromas_index(tmp_path: Path) -> None:
    store = ChromaVectorStore(tmp_path / "chroma", exact_bytes=1000)  # 600 x 32 x 4 bytes is more
    vectors = rows(600)
    store.upsert([f"c{i}" for i in range(600)], vectors, [{"source": "s"}] * 600)
    got = store.query(vectors[5], 5)
    assert got[0][0] == "c5" and store._exact is False
