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
from urllib.parse import parse_qs, urlsplit

from crag.errors import ConfigError
from crag.protocols import StoreSpec, VectorStore
from crag.registry import STORES

__all__ = ["make_vector_store", "parse_store_uri"]


def parse_store_uri(
    uri: str | None, kb_path: Path, *, ef_search: int = 200, full_text: bool = False
) -> tuple[str, StoreSpec]:
    """The registered store name and its spec for a ``kb.store_uri`` (table above).

    A scheme that names a registered store (a plugin's ``qdrant://...``) goes to that store
    with the whole URI as its address.
    """
    raw = (uri or "").strip()
    spec = StoreSpec(Path(kb_path), ef_search=ef_search, full_text=full_text)
    if raw in ("", "chroma"):
        return "chroma", spec
    base, _, query = raw.partition("?")
    collection = parse_qs(query).get("collection", [""])[0]
    scheme = urlsplit(base).scheme.lower() if "://" in base else ""
    address: str | Path
    if scheme == "milvus":
        address = "http://" + base.split("://", 1)[1]
    elif scheme == "milvus+https":
        address = "https://" + base.split("://", 1)[1]
    elif scheme in ("http", "https"):
        address = base
    elif scheme in ("", "file") and base.endswith(".db"):
        path = Path(base.removeprefix("file://")).expanduser()
        # A relative file lives inside the KB folder, so the KB stays one movable folder.
        address = path if path.is_absolute() else Path(kb_path) / path
    elif scheme and scheme != "chroma" and scheme in STORES:
        return scheme, StoreSpec(Path(kb_path), raw, collection, ef_search, full_text)
    else:
        raise ConfigError(
            f"invalid setting kb.store_uri: {raw!r} is not a known vector store; use 'chroma', a Milvus Lite "
            "file ending in .db, or milvus://host:19530"
        )
    return "milvus", StoreSpec(Path(kb_path), address, collection, ef_search, full_text)


def make_vector_store(uri: str | None, kb_path: Path, *, ef_search: int = 200, full_text: bool = False) -> VectorStore:
    """Build (lazily: nothing connects until first use) the store named by ``uri``.

    ``ef_search`` is the HNSW search breadth either engine uses (recall vs latency);
    ``full_text`` asks for server-side BM25 (Milvus only).
    """
    name, spec = parse_store_uri(uri, kb_path, ef_search=ef_search, full_text=full_text)
    return STORES.create(name, spec)
