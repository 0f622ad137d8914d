"""ChromaDB on disk (``PersistentClient``), holding vectors computed by our embedder.

Chroma's default embedding function is never used: it downloads a model and fails
offline. The collection is created with ``embedding_function=None`` and every call
passes vectors explicitly.

A collection small enough to hold in memory (``exact_bytes``, 64 MB: 40,000 chunks of 384
dimensions) is searched exactly, from a copy of its vectors: Chroma's HNSW graph is rebuilt
in another order by each process that opens it, and missed one of the true 20 nearest of 616
chunks in one process of three, so the same question retrieved other passages after a
restart. Larger collections, and filtered searches, go through Chroma's index.

On a full disk Chroma cannot open its folder (it writes to its SQLite file on every open);
the store then opens a copy taken where there is room (:mod:`crag.store.snapshot`) and
refuses writes with a ``DiskFullError`` until it can open its own folder again.

>>> import numpy as np
>>> store = ChromaVectorStore("/tmp/kb-doc/chroma", dim=3)   # doctest: +SKIP
>>> store.upsert(["a"], np.array([[1, 0, 0]], "float32"), [{"source": "x"}])  # doctest: +SKIP
>>> store.query(np.array([1, 0, 0], "float32"), k=1)[0][:2]   # doctest: +SKIP
('a', 1.0)
"""

from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from crag.errors import ConfigError, StoreError
from crag.paths import disk_full_error, is_disk_full
from crag.protocols import StoreSpec
from crag.redact import clip
from crag.registry import BackendDeps, Registries
from crag.store.snapshot import Snapshot, snapshot

COLLECTION = "chunks"
_BATCH = 1000  # Chroma caps the rows of one call; stay well below it
EXACT_BYTES = 64 * 2**20  # the vectors of a collection searched exactly, held in memory


class ChromaVectorStore:
    """Embedded Chroma collection with cosine distance; similarity = 1 - distance."""

    filters_metadata: Literal[True] = True  # a FilteringStore: query(where=...) filters inside the search

    def __init__(
        self, path: str | Path, *, dim: int | None = None, ef_search: int = 200, exact_bytes: int = EXACT_BYTES
    ) -> None:
        self.path = Path(path)
        self.dim = dim
        # Chroma's default (100) measured recall@10 0.95 at 10^6 chunks; 200 gave 0.98 at the same
        # ~1.5 ms per query (benchmarks/vector_store_scale.py).
        self.ef_search = ef_search
        self.exact_bytes = exact_bytes
        self._col: Any = None
        # The vectors for exact search: (ids, vectors, norms), None until loaded, False when the
        # collection is too large. Dropped whenever the collection changes or is reopened.
        self._exact: tuple[list[str], np.ndarray, np.ndarray] | Literal[False] | None = None
        self._snapshot: Snapshot | None = None  # the copy read while the disk is full

    @property
    def read_only(self) -> bool:
        """True while the store reads a copy of its folder because the disk is full."""
        return self._snapshot is not None

    def warm_up(self) -> None:
        if self._col is None:
            self._use(*self._open())

    def refresh(self) -> None:
        """Reopen the collection from disk, to see what other processes wrote since it opened.

        Chroma keeps one engine per folder per process, with the HNSW index in memory; it
        never notices another process's writes (a query then fails with "Error finding id"
        for ids its metadata table already holds). A new engine (``_open``) loads the files and
        replays the write log again. The old engine stays alive until the queries still
        running on it return, so the swap needs no pause.
        Callers hold the knowledge base's write lock (``crag.store.writelock``) meanwhile.
        """
        if self._col is None:
            return
        col, copy = self._open()
        self._call("refresh", col.peek, 1)  # load the index now, while the caller holds the lock
        self._use(col, copy)

    def release(self) -> None:
        """Drop the in-memory engine and its HNSW index (~2 KB per chunk); the next call reopens it.

        The knowledge base calls this before rebuilding a large keyword index, so the two never
        sit in memory together: at the 243,000 chunks of a 100 MB text file, ~500 MB less at the
        peak of an ingest. A query already running on the engine keeps it until it returns.
        """
        if self._col is None:
            return
        self._forget_engine()
        self._use(None, None)
        gc.collect()
        _trim_heap()

    def _use(self, col: Any, copy: Snapshot | None) -> None:
        """Make ``col`` (opened from ``copy`` when the disk is full) the collection; drop the old copy."""
        old = self._snapshot
        self._col, self._snapshot, self._exact = col, copy, None
        if old is not None and old is not copy:
            self._forget_engine(old.path)
            old.drop()

    def _forget_engine(self, path: Path | None = None) -> None:
        """Drop Chroma's per-process cache entry for this folder (the engine lives while used)."""
        from chromadb.api.shared_system_client import SharedSystemClient

        folder = path or (self._snapshot.path if self._snapshot else self.path)
        for cache in (SharedSystemClient._identifier_to_system, SharedSystemClient._identifier_to_refcount):
            cache.pop(str(folder), None)

    def _open(self, *, copy_if_full: bool = True) -> tuple[Any, Snapshot | None]:
        """The collection, from the folder; on a full disk, from a copy of it taken where there is room."""
        try:
            return self._open_at(self.path), None
        except StoreError as exc:
            if not (copy_if_full and is_disk_full(self.path, exc)):
                raise
            copy = snapshot(self.path)
            if copy is None:
                raise
            try:
                return self._open_at(copy.path), copy
            except StoreError:
                copy.drop()
                raise exc from None

    def _writable(self) -> Any:
        """The collection for a write: the folder itself, never a copy (reopened once space is back)."""
        if self._snapshot is not None:
            try:
                col, _ = self._open(copy_if_full=False)
            except StoreError as exc:
                if not is_disk_full(self.path, exc):
                    raise
                raise disk_full_error(
                    self.path,
                    "the vector store is open for reading only",
                    "nothing was changed: free space and run the command again",
                ) from None
            self._use(col, None)
        return self.col

    def _open_at(self, folder: Path) -> Any:
        try:
            import chromadb
            from chromadb.config import Settings

            # Never reuse the engine another store object of this process cached for the folder:
            # it may predate writes by other processes. A new one loads the files as they are now.
            self._forget_engine(folder)

            client = chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False))
            col = client.get_or_create_collection(
                COLLECTION,
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine", "ef_search": self.ef_search}},
            )
            # An existing collection keeps the ef_search it was created with; apply the setting
            # before the first query, which is when Chroma builds its index reader.
            if (col.configuration.get("hnsw") or {}).get("ef_search") != self.ef_search:
                col.modify(configuration={"hnsw": {"ef_search": self.ef_search}})
            # Nor leave it cached: the collection holds the engine, so it (and its open files)
            # goes with the collection instead of living as long as the process.
            self._forget_engine(folder)
            return col
        except Exception as exc:  # chromadb raises many types; one line for the user
            # A full disk fails the open too (Chroma's SQLite cannot create its journal): the
            # vectors are intact then, and re-ingesting would be the wrong advice.
            advice = (
                "the disk is full, the vectors are intact: free space"
                if is_disk_full(self.path, exc)
                else "move the folder aside and re-ingest if it is damaged"
            )
            raise StoreError(
                f"cannot open the vector store at {self.path}: {_one_line(exc)}; {advice}",
                backend_id="chroma",
                step="open",
            ) from None

    def _call(self, step: str, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except Exception as exc:  # chromadb.errors.* and Rust binding errors
            raise StoreError(
                f"chroma {step} failed at {self.path}: {_one_line(exc)}", backend_id="chroma", step=step
            ) from None

    @property
    def col(self) -> Any:
        self.warm_up()
        return self._col

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict[str, Any]]) -> None:
        col = self._writable()
        try:
            for i in range(0, len(ids), _BATCH):
                self._call(
                    "upsert",
                    col.upsert,
                    ids=list(ids[i : i + _BATCH]),
                    embeddings=np.asarray(vectors[i : i + _BATCH], dtype=np.float32),
                    metadatas=[_clean_meta(m) for m in metadatas[i : i + _BATCH]],
                )
        finally:
            # After the write, not before: a query in another thread meanwhile may load the
            # vectors half written, and that copy must not outlive the write.
            self._exact = None

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(ids)
        col = self._writable()
        try:
            for i in range(0, len(ids), _BATCH):
                self._call("delete", col.delete, ids=ids[i : i + _BATCH])
        finally:
            self._exact = None  # after the write (see upsert)

    def all_ids(self) -> set[str]:
        return set(self._call("scan", self.col.get, include=[])["ids"])

    def count(self) -> int:
        return int(self._call("count", self.col.count))

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id (missing ids are absent from the result)."""
        if not ids:
            return {}
        got = self._call("get", self.col.get, ids=list(ids), include=["embeddings"])
        return {i: np.asarray(e, dtype=np.float32) for i, e in zip(got["ids"], got["embeddings"], strict=True)}

    def query(
        self, vector: np.ndarray, k: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float, np.ndarray | None]]:
        """Best ``k`` by cosine similarity; ``where`` keeps rows whose metadata match it.

        ``where`` maps a key to a value (equality) or to a list or tuple of values (any of);
        all keys must match (:mod:`crag.metadata`).
        """
        exact = self._exact_index() if not where else None
        if exact is not None:
            return _nearest(exact, vector, k)
        # No count() first: Chroma caps n_results itself, and COUNT costs ~60 ms at 10^6 rows,
        # more than the HNSW search it would guard.
        res = self._call(
            "query",
            self.col.query,
            query_embeddings=np.asarray(vector, dtype=np.float32)[None, :],
            n_results=k,
            include=["distances", "embeddings"],
            where=_where(where),
        )
        ids, dists, embs = res["ids"][0], res["distances"][0], res["embeddings"][0]
        return [(i, 1.0 - float(d), np.asarray(e, dtype=np.float32)) for i, d, e in zip(ids, dists, embs, strict=True)]

    def _exact_index(self) -> tuple[list[str], np.ndarray, np.ndarray] | None:
        """The collection's ids, vectors and vector norms for exact search (loaded once per
        change), or None when it is larger than ``exact_bytes``."""
        if self._exact is None:
            col = self.col
            rows = self.count()
            dim = self.dim
            if dim is None and rows:
                dim = len(self._call("peek", col.peek, 1)["embeddings"][0])
            if rows * (dim or 0) * 4 > self.exact_bytes:
                self._exact = False
            else:
                ids: list[str] = []
                parts: list[np.ndarray] = []
                for offset in range(0, rows, _BATCH):
                    got = self._call("get", col.get, include=["embeddings"], limit=_BATCH, offset=offset)
                    ids += got["ids"]
                    parts.append(np.asarray(got["embeddings"], dtype=np.float32).reshape(len(got["ids"]), -1))
                matrix = np.concatenate(parts) if parts else np.zeros((0, dim or 0), np.float32)
                self._exact = (ids, matrix, np.linalg.norm(matrix, axis=1))
        return self._exact or None


def _nearest(
    index: tuple[list[str], np.ndarray, np.ndarray], vector: np.ndarray, k: int
) -> list[tuple[str, float, np.ndarray | None]]:
    """The ``k`` rows of ``index`` most similar to ``vector`` (cosine), ties broken by id."""
    ids, matrix, norms = index
    if not ids or k <= 0:
        return []
    q = np.asarray(vector, dtype=np.float32)
    sims = (matrix @ q) / np.maximum(norms * float(np.linalg.norm(q)), 1e-12)
    if k < len(ids):  # every row tied with the k-th best stays in, so the id decides among them
        kth = np.partition(sims, len(ids) - k)[len(ids) - k]
        chosen = np.flatnonzero(sims >= kth)
    else:
        chosen = np.arange(len(ids))
    order = sorted(chosen.tolist(), key=lambda i: (-float(sims[i]), ids[i]))[:k]
    return [(ids[i], float(sims[i]), matrix[i]) for i in order]


def _trim_heap() -> None:
    """Hand freed heap pages back to the OS (glibc keeps them otherwise: RSS would not drop)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # musl and other C libraries have no malloc_trim
            pass


def _where(where: dict[str, Any] | None) -> dict[str, Any] | None:
    """Chroma's ``where``: one condition per dict, several under ``$and``; lists become ``$in``.

    >>> _where({"lang": ("zh",), "team": ["产品", "support"]})
    {'$and': [{'lang': 'zh'}, {'team': {'$in': ['产品', 'support']}}]}
    """
    if not where:
        return None
    conds = [{k: _condition(v)} for k, v in where.items()]
    return conds[0] if len(conds) == 1 else {"$and": conds}


def _condition(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return value[0] if len(value) == 1 else {"$in": list(value)}
    return value


def _clean_meta(meta: dict[str, Any]) -> dict[str, Any]:
    # Chroma accepts only scalar metadata values and rejects empty dicts.
    out = {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) and v != ""}
    return out or {"_": 1}


def _one_line(exc: BaseException) -> str:
    return clip(" ".join(str(exc).split()), 300) or type(exc).__name__


def _make(spec: StoreSpec, deps: BackendDeps) -> ChromaVectorStore:
    if spec.full_text:
        raise ConfigError(
            "kb.keyword_index = 'store' needs a Milvus kb.store_uri (BM25 inside the database); "
            "Chroma has no keyword search: use keyword_index = 'local'"
        )
    return ChromaVectorStore(spec.address or spec.kb_path / "chroma", ef_search=spec.ef_search)


def register(registries: Registries) -> None:
    """Plugin entry point: the ``chroma`` vector store (the default)."""
    registries.stores.register("chroma", _make)
