"""Caches for the correction step: search results and query rewrites.

The article's second challenge: "对常见查询的纠正结果进行缓存". A repeated question (or a
repeated sub-query) is answered from the cache instead of a paid, slow provider call.
Entries live in the state database (:mod:`crag.state`: ``search_cache.sqlite`` beside the
knowledge base, or the shared ``kb.state_uri``, so every replica reuses them) and expire
after ``ttl_seconds``; ``ttl_seconds=0`` turns caching off. Failed searches and empty
result lists are never cached, so an outage is not remembered; a cache that cannot be read
or written (a full disk, an unreachable database) is a miss, never a failure.

>>> import tempfile, pathlib
>>> from crag.testing.fakes import StaticWebSearch
>>> inner = StaticWebSearch([WebResult("Paris", "https://example.org/paris", "Paris is the capital.")])
>>> cached = CachedSearch(inner, pathlib.Path(tempfile.mkdtemp()) / "cache.sqlite", ttl_seconds=3600)
>>> [r.title for r in cached.search("capital of France", k=3)]
['Paris']
>>> [r.title for r in cached.search("capital of France", k=3)], inner.queries  # second call: no provider call
(['Paris'], ['capital of France'])
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, TypeVar, cast

import sqlalchemy as sa

from crag.errors import CragError
from crag.redact import redact
from crag.state import CACHE, StateDB
from crag.state.schema import cache as cache_table
from crag.types import WebResult

T = TypeVar("T")
log = logging.getLogger("crag.search")
_FIELDS = frozenset(f.name for f in fields(WebResult))


class _Store:
    """JSON values keyed by ``(namespace, key)`` with a creation time, in the ``cache`` group."""

    def __init__(self, db: StateDB | str | Path, ttl_seconds: float, clock: Callable[[], float]) -> None:
        if ttl_seconds < 0:
            raise ValueError("ttl_seconds must be >= 0 (0 disables the cache)")
        self.db = db if isinstance(db, StateDB) else StateDB.sqlite(db, CACHE)
        self.ttl = ttl_seconds
        self._clock = clock

    @property
    def enabled(self) -> bool:
        return self.ttl > 0

    def get(self, namespace: str, key: str) -> Any | None:
        found = self.get_dated(namespace, key)
        return None if found is None else found[0]

    def get_dated(self, namespace: str, key: str) -> tuple[Any, float] | None:
        """The fresh value and when it was stored (Unix time), or ``None``."""
        if not self.enabled:
            return None
        c = cache_table.c
        query = sa.select(c.value, c.created).where(c.kb == self.db.scope, c.namespace == namespace, c.key == key)
        try:
            with self.db.connect() as conn:
                row = conn.execute(query).first()
        except (CragError, OSError) as exc:  # cannot open it (a full disk, the database down): a miss
            log.warning("search cache %s not read: %s", self.db.display, exc)
            return None
        if row is None or self._clock() - row.created > self.ttl:
            return None
        return json.loads(row.value), float(row.created)

    def put(self, namespace: str, key: str, value: Any) -> None:
        if not self.enabled:
            return
        data = json.dumps(redact(value), ensure_ascii=False)  # a key a provider echoed is never stored
        row = {"kb": self.db.scope, "namespace": namespace, "key": key, "value": data, "created": self._clock()}
        stmt = self.db.insert(cache_table).values(row)
        stmt = stmt.on_conflict_do_update(
            index_elements=["kb", "namespace", "key"],
            set_={"value": stmt.excluded.value, "created": stmt.excluded.created},
        )
        try:
            with self.db.connect(write=True) as conn:
                conn.execute(stmt)
        except (CragError, OSError) as exc:  # a full disk: the result is used, just not kept
            log.warning("search cache %s not written: %s", self.db.display, exc)

    def purge(self) -> int:
        """Delete expired entries; returns how many went."""
        if not self.db.exists():
            return 0
        c = cache_table.c
        old = c.created < self._clock() - self.ttl
        mine = c.namespace.notlike("answer:%")  # answers keep their own ttl (crag.pipeline.answer_cache)
        with self.db.connect(write=True) as conn:
            done = conn.execute(sa.delete(cache_table).where(c.kb == self.db.scope, old, mine))
            return int(done.rowcount)

    def close(self) -> None:
        """Nothing to close: connections are taken per use (kept for callers that close their caches)."""


class CachedSearch:
    """A ``WebSearch`` answering repeated ``(provider, query, k)`` lookups from the cache.

    ### Usage example
    >>> import tempfile, pathlib
    >>> from crag.testing.fakes import StaticWebSearch
    >>> search = CachedSearch(StaticWebSearch(), pathlib.Path(tempfile.mkdtemp()) / "c.sqlite", ttl_seconds=0)
    >>> search.name, search.search("anything", k=2)   # ttl 0: a plain pass-through
    ('static', [])
    """

    def __init__(
        self,
        inner: Any,
        db: StateDB | str | Path,
        ttl_seconds: float = 86400,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.inner = inner
        self.name: str = getattr(inner, "name", "search")
        self._store = _Store(db, ttl_seconds, clock)
        self.hits = 0
        self.misses = 0
        self.ttl = ttl_seconds
        # When the oldest result this object served was fetched from the provider (Unix time):
        # an answer written from them is good until then + ttl (crag.pipeline.answer_cache).
        self.fetched: float | None = None

    def search(self, query: str, *, k: int) -> list[WebResult]:
        """Cached results when fresh, else ``inner.search`` (errors propagate, uncached)."""
        key = json.dumps([" ".join(query.split()), k], ensure_ascii=False)
        cached = self._store.get_dated(f"search:{self.name}", key)
        if cached is not None:
            self.hits += 1
            self._fetched(cached[1])
            return [WebResult(**{f: v for f, v in item.items() if f in _FIELDS}) for item in cached[0]]
        self.misses += 1
        self._fetched(self._store._clock())
        results: list[WebResult] = self.inner.search(query, k=k)
        if results:
            self._store.put(f"search:{self.name}", key, [asdict(r) for r in results])
        return results

    def _fetched(self, when: float) -> None:
        self.fetched = when if self.fetched is None else min(self.fetched, when)

    def purge(self) -> int:
        """Delete expired entries from the cache."""
        return self._store.purge()

    def close(self) -> None:
        """Close the inner provider if it has ``close`` (the cache takes connections per use)."""
        self._store.close()
        if hasattr(self.inner, "close"):
            self.inner.close()


class RewriteCache:
    """A generic TTL cache for rewrites and other JSON-able correction results.

    Keys are hashed from their parts, so any strings (question, document ids, model id)
    can make a key.

    ### Usage example
    >>> import tempfile, pathlib
    >>> cache = RewriteCache(pathlib.Path(tempfile.mkdtemp()) / "c.sqlite", ttl_seconds=3600)
    >>> calls = []
    >>> def rewrite():
    ...     calls.append(1)
    ...     return ["eiffel tower height"]
    >>> cache.cached("keyword", ("How tall is the Eiffel Tower?",), rewrite)
    ['eiffel tower height']
    >>> cache.cached("keyword", ("How tall is the Eiffel Tower?",), rewrite), len(calls)
    (['eiffel tower height'], 1)
    """

    def __init__(
        self, db: StateDB | str | Path, ttl_seconds: float = 86400, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = _Store(db, ttl_seconds, clock)

    @staticmethod
    def key(parts: tuple[str, ...] | list[str]) -> str:
        """A stable digest of the key parts."""
        return hashlib.sha256(json.dumps(list(parts), ensure_ascii=False).encode()).hexdigest()

    def get(self, kind: str, parts: tuple[str, ...] | list[str]) -> Any | None:
        """The fresh value stored for ``(kind, parts)``, or ``None``."""
        return self._store.get(f"rewrite:{kind}", self.key(parts))

    def put(self, kind: str, parts: tuple[str, ...] | list[str], value: Any) -> None:
        """Store ``value`` (JSON-able) for ``(kind, parts)``."""
        self._store.put(f"rewrite:{kind}", self.key(parts), value)

    def cached(self, kind: str, parts: tuple[str, ...] | list[str], compute: Callable[[], T]) -> T:
        """``get`` or, on a miss, ``compute()`` and store it (exceptions are not cached)."""
        hit = self.get(kind, parts)
        if hit is not None:
            return cast(T, hit)  # what compute() returned, back from JSON
        value = compute()
        if value:  # an empty rewrite is not worth remembering
            self.put(kind, parts, value)
        return value

    def close(self) -> None:
        """Close the cache database."""
        self._store.close()
