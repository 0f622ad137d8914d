"""Milvus (cluster, standalone or Milvus Lite) as the vector store, through ``pymilvus``.

One class covers every deployment because ``MilvusClient`` speaks the same API to all:

* ``uri="kb/milvus.db"`` — Milvus Lite, an embedded engine in a local file (tests, laptops);
* ``uri="http://milvus.internal:19530"`` — a standalone server or a distributed cluster;
  a token (``user:password`` or an API key) is read from ``$MILVUS_TOKEN`` (``token_env``).

Install with ``pip install 'crag[milvus]'`` (``pymilvus`` + ``milvus-lite``).

Schema: ``id`` (VARCHAR primary key), ``vector`` (FLOAT_VECTOR, cosine, HNSW), and the
scalar fields ``source``/``title``/``url``; any other scalar metadata lands in dynamic
fields. With ``full_text=True`` a ``text`` field feeds Milvus' server-side BM25 function
(Milvus ≥ 2.5 and Milvus Lite ≥ 3) so :meth:`MilvusVectorStore.query_text` works; crag's
own BM25 index (``store/keyword.py``) remains the keyword side of hybrid search for every
backend, so this is optional.

### Usage example
>>> import numpy as np
>>> store = MilvusVectorStore("/tmp/kb-doc/milvus.db", dim=3)          # doctest: +SKIP
>>> store.upsert(["a"], np.array([[1, 0, 0]], "float32"), [{"source": "x"}])  # doctest: +SKIP
>>> store.query(np.array([1, 0, 0], "float32"), k=1)[0][:2]           # doctest: +SKIP
('a', 1.0)
>>> store.query(np.array([1, 0, 0], "float32"), k=1, where={"source": "y"})  # doctest: +SKIP
[]
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from crag.errors import StoreError
from crag.metadata import is_key
from crag.protocols import StoreSpec
from crag.redact import clip, register_env
from crag.registry import BackendDeps, Registries

DEFAULT_COLLECTION = "crag_chunks"
_BATCH = 2000  # rows per insert: 2000 × 384 floats ≈ 3 MB, far below gRPC's 64 MB message cap
_ID_LEN = 512
_META_LEN = 2048
_TEXT_LEN = 65535
_SCALARS = ("source", "title", "url")
_TIMEOUT = 10.0  # seconds to connect / per call, so a dead server fails fast instead of hanging

# pymilvus logs a WARNING on every iterator against Milvus Lite (no server-side timestamp);
# it is harmless and would drown the CLI output.
logging.getLogger("pymilvus").setLevel(logging.ERROR)
# Milvus Lite logs a traceback when its file is locked by another process; we say it in one line.
logging.getLogger("milvus_lite").setLevel(logging.CRITICAL)
STRONG_AFTER_REFRESH = 2.0  # seconds searches read at Strong level after another process wrote


class MilvusVectorStore:
    """A Milvus collection with cosine similarity; same API for Milvus Lite and a cluster.

    ``dim`` may be left ``None``: it is then taken from an existing collection or from the
    first upsert. ``ef`` is the HNSW search breadth (recall vs latency).

    ### Usage example
    >>> store = MilvusVectorStore("http://localhost:19530", collection="kb_prod")  # doctest: +SKIP
    >>> store.count()                                                               # doctest: +SKIP
    0
    """

    filters_metadata: Literal[True] = True  # a FilteringStore: query(where=...) filters inside the search

    def __init__(
        self,
        uri: str | Path,
        *,
        collection: str = DEFAULT_COLLECTION,
        dim: int | None = None,
        token_env: str = "MILVUS_TOKEN",
        full_text: bool = False,
        ef: int = 128,
        timeout: float = _TIMEOUT,
        search_consistency: str = "Session",
    ) -> None:
        self.uri = str(uri)
        self.collection = collection
        self.dim = dim
        self.token_env = token_env
        self.full_text = full_text
        self.ef = ef
        self.timeout = timeout
        # Searches read at "Session" level: this client's own writes are always visible, and
        # nothing waits for the cluster-wide time tick. The collection's "Strong" default made
        # every search wait for that tick (~200 ms on a server, p50 200 ms at 20,000 rows).
        # count() and all_ids() (reconciliation) stay Strong.
        self.search_consistency = search_consistency
        self._client: Any = None
        self._ready = False  # the collection exists and is loaded
        self._strong_until = 0.0  # monotonic time until which searches read at Strong level

    # -- connection -------------------------------------------------------------------
    @property
    def is_lite(self) -> bool:
        """True for a local file (Milvus Lite), False for a server URI."""
        return "://" not in self.uri or self.uri.startswith("file://")

    def warm_up(self) -> None:
        """Connect, and open the collection if it exists (checking its dimension)."""
        if self._client is not None:
            return
        try:
            from pymilvus import MilvusClient
        except ImportError:
            raise StoreError(
                "the Milvus backend needs pymilvus: pip install 'crag[milvus]'", backend_id="milvus", step="open"
            ) from None
        uri = self.uri.removeprefix("file://")
        if self.is_lite:
            Path(uri).expanduser().parent.mkdir(parents=True, exist_ok=True)
        register_env(self.token_env)
        token = os.environ.get(self.token_env, "") if self.token_env else ""
        try:
            self._client = MilvusClient(uri=uri, token=token, timeout=self.timeout)
        except Exception as exc:  # MilvusException, grpc errors, lite start failures
            if self.is_lite and _lite_locked(Path(uri).expanduser()):
                raise StoreError(
                    f"the Milvus Lite file {self.uri} is in use by another process (e.g. `crag serve`); "
                    "Milvus Lite serves one process per file: stop that process first, or use a Milvus "
                    "server (kb.store_uri = milvus://host:19530) to share the knowledge base",
                    backend_id="milvus",
                    step="open",
                ) from None
            raise StoreError(
                f"cannot connect to Milvus at {self.uri} within {self.timeout:g}s: {_one_line(exc)}; "
                "check the URI and that the server is running",
                backend_id="milvus",
                step="open",
            ) from None
        if self._call("open", self._client.has_collection, self.collection):
            self._open_existing()

    def ping(self, timeout: float = 3.0) -> None:
        """Raise :class:`~crag.errors.StoreError` unless the server answers within ``timeout``
        seconds (``/readyz``); a server that comes back is reached again with no restart."""
        self._call("ping", self.client.get_server_version, timeout=timeout)

    def close(self) -> None:
        """Release the connection (Milvus Lite holds a file lock until then)."""
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client, self._ready = None, False

    def refresh(self) -> None:
        """See rows another process wrote: searches read at Strong level for a moment.

        "Session" reads guarantee this client's own writes only; another client's become
        visible after the next time tick. Milvus Lite has a single process, so nothing to do.
        """
        if not self.is_lite:
            self._strong_until = time.monotonic() + STRONG_AFTER_REFRESH

    def _consistency(self) -> str:
        return "Strong" if time.monotonic() < self._strong_until else self.search_consistency

    @property
    def client(self) -> Any:
        self.warm_up()
        return self._client

    def _call(self, step: str, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(
                f"Milvus {step} failed on collection {self.collection} at {self.uri}: {_one_line(exc)}",
                backend_id="milvus",
                step=step,
            ) from None

    def _open_existing(self) -> None:
        desc = self._call("open", self._client.describe_collection, self.collection)
        fields = {f["name"]: f for f in desc["fields"]}
        stored = int(fields["vector"]["params"]["dim"]) if "vector" in fields else None
        if stored is not None and self.dim is not None and stored != self.dim:
            raise _dim_error(self.collection, stored, self.dim)
        self.dim = stored
        self.full_text = "sparse" in fields
        self._call("open", self._client.load_collection, self.collection)
        self._ready = True

    def _ensure_collection(self, dim: int) -> None:
        self.warm_up()
        if self._ready:
            if self.dim != dim:
                raise _dim_error(self.collection, int(self.dim or 0), dim)
            return
        self.dim = dim
        self._call("create", self._create, dim)
        self._ready = True

    def _create(self, dim: int) -> None:
        from pymilvus import DataType, Function, FunctionType, MilvusClient

        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=_ID_LEN)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        for name in _SCALARS:
            schema.add_field(name, DataType.VARCHAR, max_length=_META_LEN)
        index = self._client.prepare_index_params()
        # HNSW on both Lite and clusters: graph search keeps p50 in milliseconds at 10^6 rows
        # where FLAT is a full scan; M=16/efConstruction=200 is the usual recall ≥ 0.95 setting.
        index.add_index("vector", index_type="HNSW", metric_type="COSINE", params={"M": 16, "efConstruction": 200})
        if self.full_text:
            # jieba segments Chinese and splits English on words, so one analyzer serves both.
            schema.add_field(
                "text",
                DataType.VARCHAR,
                max_length=_TEXT_LEN,
                enable_analyzer=True,
                analyzer_params={"tokenizer": "jieba", "filter": ["lowercase"]},
            )
            schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            schema.add_function(
                Function(
                    name="text_bm25",
                    function_type=FunctionType.BM25,
                    input_field_names=["text"],
                    output_field_names=["sparse"],
                )
            )
            index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        # Strong consistency: the KB reconciles ids right after writing; it must see its writes.
        self._client.create_collection(self.collection, schema=schema, index_params=index, consistency_level="Strong")
        self._client.load_collection(self.collection)

    # -- VectorStore protocol ---------------------------------------------------------
    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict[str, Any]]) -> None:
        """Insert or replace rows by id (the new vector and metadata win)."""
        if not len(ids):
            return
        vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or len(vecs) != len(ids) or len(metadatas) != len(ids):
            raise ValueError("upsert needs one 2-d vector row and one metadata dict per id")
        self._ensure_collection(int(vecs.shape[1]))
        for i in range(0, len(ids), _BATCH):
            rows = [
                self._row(cid, vec, meta)
                for cid, vec, meta in zip(
                    ids[i : i + _BATCH], vecs[i : i + _BATCH], metadatas[i : i + _BATCH], strict=True
                )
            ]
            self._call("upsert", self.client.upsert, self.collection, rows, timeout=None)

    def flush(self) -> None:
        """Seal written rows into indexed segments (a cluster also does this on its own).

        Milvus Lite searches unsealed rows by brute force, so call this after a bulk load.
        """
        if self._exists():
            self._call("flush", self.client.flush, self.collection)

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(ids)
        if not ids or not self._exists():
            return
        for i in range(0, len(ids), _BATCH):
            self._call("delete", self.client.delete, self.collection, ids=ids[i : i + _BATCH])

    def all_ids(self) -> set[str]:
        if not self._exists():
            return set()
        # An iterator, not one query: a plain query is capped at 16384 rows by Milvus.
        it = self._call(
            "scan", self.client.query_iterator, self.collection, batch_size=5000, filter="", output_fields=["id"]
        )
        out: set[str] = set()
        try:
            while batch := self._call("scan", it.next):
                out.update(r["id"] for r in batch)
        finally:
            it.close()
        return out

    def count(self) -> int:
        """Number of rows (after deletes)."""
        if not self._exists():
            return 0
        res = self._call("count", self.client.query, self.collection, filter="", output_fields=["count(*)"])
        return int(res[0]["count(*)"])

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id (missing ids are absent from the result)."""
        if not ids or not self._exists():
            return {}
        out: dict[str, np.ndarray] = {}
        ids = list(ids)
        for i in range(0, len(ids), _BATCH):
            got = self._call(
                "get",
                self.client.get,
                self.collection,
                ids=ids[i : i + _BATCH],
                output_fields=["vector"],
                consistency_level=self._consistency(),
            )
            out.update({r["id"]: np.asarray(r["vector"], dtype=np.float32) for r in got})
        return out

    def query(
        self, vector: np.ndarray, k: int, *, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float, np.ndarray | None]]:
        """The ``k`` nearest rows as ``(id, cosine similarity, vector)``, best first.

        ``where`` keeps rows whose metadata equals every given value, e.g. ``{"source": "a.md"}``.
        """
        if k < 1:
            raise ValueError("k must be >= 1")
        if not self._exists():
            return []
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self.dim is not None and vec.shape[0] != self.dim:
            raise _dim_error(self.collection, self.dim, int(vec.shape[0]))
        res = self._call(
            "query",
            self.client.search,
            self.collection,
            data=[vec.tolist()],
            anns_field="vector",
            limit=k,
            filter=_filter(where),
            output_fields=["vector"],
            search_params={"metric_type": "COSINE", "params": {"ef": max(self.ef, k)}},
            consistency_level=self._consistency(),
        )
        return [
            (str(h["id"]), float(h["distance"]), np.asarray(h["entity"]["vector"], dtype=np.float32)) for h in res[0]
        ]

    # -- optional server-side full-text search --------------------------------------------
    def query_text(self, text: str, k: int, *, where: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """Server-side BM25 search over the ``text`` metadata (needs ``full_text=True``).

        ``where`` filters as in :meth:`query`.

        Rows get text only when their metadata carries a ``"text"`` key; crag's KB does not
        pass it today, because its own BM25 index already covers keyword search.
        """
        if not self.full_text:
            raise StoreError(
                f"collection {self.collection} has no full-text field; it was created without server-side "
                "BM25: use a new collection (kb.store_uri ?collection=NAME) with kb.keyword_index = 'store' "
                "and re-ingest",
                backend_id="milvus",
                step="query_text",
            )
        if not self._exists() or not text.strip():
            return []
        res = self._call(
            "query_text",
            self.client.search,
            self.collection,
            data=[text],
            anns_field="sparse",
            limit=k,
            filter=_filter(where),
            output_fields=["id"],
            search_params={"metric_type": "BM25"},
        )
        # BM25 scores are never negative; Milvus Lite 3.x reports them negated, servers do not.
        return [(str(h["id"]), abs(float(h["distance"]))) for h in res[0]]

    # -- helpers ----------------------------------------------------------------------
    def _exists(self) -> bool:
        self.warm_up()
        return self._ready

    def _row(self, cid: str, vec: np.ndarray, meta: dict[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = {"id": cid, "vector": vec.tolist()}
        for name in _SCALARS:
            row[name] = str(meta.get(name) or "")[:_META_LEN]
        for key, value in meta.items():
            # Dynamic fields hold any scalar; nested values would not be filterable anyway.
            if key not in row and key not in ("text", "sparse") and isinstance(value, (str, int, float, bool)):
                row[key] = value
        if self.full_text:
            row["text"] = str(meta.get("text") or "")[:_TEXT_LEN]
        return row

    def __repr__(self) -> str:
        return f"MilvusVectorStore({self.uri!r}, collection={self.collection!r}, dim={self.dim})"


def _filter(where: dict[str, Any] | None) -> str:
    """A Milvus boolean expression: equality per key (a list: ``in`` its values), keys ANDed.

    Values are JSON-quoted, so no injection; a key that is not a plain identifier (a dotted
    key of nested metadata, a Chinese key) is addressed in the dynamic field as ``$meta["key"]``.
    Several values are one ``in`` term, not a chain of ``or``: the expression stays flat.

    >>> _filter({"lang": ("zh",), "a.b": ["x", "y"]})
    'lang == "zh" and $meta["a.b"] in ["x", "y"]'
    """
    if not where:
        return ""
    parts = []
    for key, value in where.items():
        if not is_key(key):
            raise ValueError(f"filter key {key!r} is not a metadata key")
        field = key if key.isidentifier() and key.isascii() else f"$meta[{json.dumps(key, ensure_ascii=False)}]"
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if len(values) == 1:
            parts.append(f"{field} == {json.dumps(values[0], ensure_ascii=False)}")
        else:
            parts.append(f"{field} in {json.dumps(values, ensure_ascii=False)}")
    return " and ".join(parts)


def _dim_error(collection: str, stored: int, given: int) -> StoreError:
    return StoreError(
        f"collection {collection} has dimension {stored} but the embedder produces {given}; "
        "use a new collection or the same embedder",
        backend_id="milvus",
        step="open",
    )


def _lite_locked(path: Path) -> bool:
    """True when another process holds Milvus Lite's lock on ``path`` (a folder with ``LOCK``)."""
    lock = path / "LOCK"
    if not lock.is_file():
        return False
    try:
        import fcntl
    except ImportError:  # Windows: Milvus Lite locks with msvcrt; assume the lock is the cause
        return True
    with lock.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def _one_line(exc: BaseException) -> str:
    return clip(" ".join(str(exc).split()), 300) or type(exc).__name__


def _make(spec: StoreSpec, deps: BackendDeps) -> MilvusVectorStore:
    return MilvusVectorStore(
        spec.address or spec.kb_path / "milvus.db",
        collection=spec.collection or DEFAULT_COLLECTION,
        ef=spec.ef_search,
        full_text=spec.full_text,
    )


def register(registries: Registries) -> None:
    """Plugin entry point: the ``milvus`` vector store (Milvus Lite file or server)."""
    registries.stores.register("milvus", _make)
