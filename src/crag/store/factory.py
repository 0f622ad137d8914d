"""Pick the vector store backend from one URI setting (``kb.store_uri``).

==============================================  ==========================================
``store_uri``                                   backend
==============================================  ==========================================
unset / ``""`` / ``"chroma"``                   Chroma on disk in ``<kb>/chroma`` (default)
``"milvus.db"``, ``"/data/kb.db"``              Milvus Lite file (relative: under the KB)
``"milvus://host:19530"``                       Milvus server, plain HTTP (gRPC) on 19530
``"milvus+https://host:443"``                   Milvus server over TLS (e.g. Zilliz Cloud)
``"http://host:19530"``, ``"https://..."``      Milvus server as given
==============================================  ==========================================

A ``?collection=NAME`` query suffix picks the Milvus collection (default ``crag_chunks``).

### Usage example
>>> from pathlib import Path
>>> type(make_vector_store(None, Path("kb"))).__name__
'ChromaVectorStore'
>>> s = make_vector_store("milvus://db.internal:19530?collection=kb_prod", Path("kb"))
>>> s.uri, s.collection
('http://db.internal:19530', 'kb_prod')
>>> make_vector_store("milvus.db", Path("kb")).uri
'kb/milvus.db'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from crag.errors import ConfigError
from crag.protocols import VectorStore


def make_vector_store(
    uri: str | None, kb_path: Path, *, ef_search: int = 200, full_text: bool = False
) -> VectorStore:
    """Build (lazily: nothing connects until first use) the store named by ``uri``.

    ``ef_search`` is the HNSW search breadth either engine uses (recall vs latency);
    ``full_text`` asks for server-side BM25 (Milvus only).
    """
    from crag.store.chroma import ChromaVectorStore

    raw = (uri or "").strip()
    if raw in ("", "chroma"):
        if full_text:
            raise ConfigError(
                "kb.keyword_index = 'store' needs a Milvus kb.store_uri (BM25 inside the database); "
                "Chroma has no keyword search: use keyword_index = 'local'"
            )
        return ChromaVectorStore(Path(kb_path) / "chroma", ef_search=ef_search)

    from crag.store.milvus import DEFAULT_COLLECTION, MilvusVectorStore

    base, _, query = raw.partition("?")
    collection = parse_qs(query).get("collection", [DEFAULT_COLLECTION])[0]
    opts: dict[str, Any] = {"collection": collection, "ef": ef_search, "full_text": full_text}
    scheme = urlsplit(base).scheme.lower() if "://" in base else ""
    if scheme == "milvus":
        return MilvusVectorStore("http://" + base.split("://", 1)[1], **opts)
    if scheme == "milvus+https":
        return MilvusVectorStore("https://" + base.split("://", 1)[1], **opts)
    if scheme in ("http", "https"):
        return MilvusVectorStore(base, **opts)
    if scheme in ("", "file") and base.endswith(".db"):
        path = Path(base.removeprefix("file://")).expanduser()
        # A relative file lives inside the KB folder, so the KB stays one movable folder.
        path = path if path.is_absolute() else Path(kb_path) / path
        return MilvusVectorStore(path, **opts)
    raise ConfigError(
        f"invalid setting kb.store_uri: {raw!r} is not a known vector store; use 'chroma', a Milvus Lite "
        "file ending in .db, or milvus://host:19530"
    )
