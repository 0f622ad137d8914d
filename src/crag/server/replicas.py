"""What a replica needs from shared services: ``/readyz``, and a start refused in one line.

Several ``crag serve`` processes (on one machine or many) serve the same knowledge bases when
each holds nothing the others need: state in a shared database (``kb.state_uri =
"postgresql://..."``), vectors and keywords in a Milvus server (``kb.store_uri =
"milvus://..."``, ``kb.keyword_index = "store"``). ``crag serve --shared`` (``[server] shared``)
says a server is one of them; :func:`check_shareable` then refuses, before anything starts,
what lives in the working folder of one machine: SQLite state, Chroma, a Milvus Lite file, a
local BM25 index.

``GET /readyz`` answers 200 while the shared services answer, and 503 with one line saying
which does not (each check bounded by its timeout: a load balancer's probe never hangs). It
recovers by itself when they are back. ``/healthz`` stays the liveness check: the process
is up.

>>> from crag.config import CragSettings
>>> try:
...     check_shareable(CragSettings(server={"shared": True}))
... except ConfigError as exc:
...     print(str(exc)[:78])
crag serve --shared: these cannot be shared between replicas: documents, trace
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from crag.config import CragSettings
from crag.errors import ConfigError, CragError, StoreError
from crag.server.collections import Collections
from crag.server.schemas import RedactedJSONResponse, error_response
from crag.store.factory import parse_store_uri

__all__ = ["Readiness", "check_shareable", "install"]

PROBE_TIMEOUT = 3.0  # seconds a readiness check of Milvus may take


def check_shareable(settings: CragSettings) -> None:
    """Raise a one-line ``ConfigError`` naming every piece of state that cannot be shared."""
    kb = settings.kb
    problems: list[str] = []
    if not kb.state_uri:
        problems.append(
            "documents, traces, feedback, budgets and caches are SQLite files in the knowledge base folder "
            "(set kb.state_uri = postgresql://user@host:5432/db)"
        )
    paths = list(settings.server.collections.values()) or [Path(kb.path)]
    name, spec = parse_store_uri(kb.store_uri, Path(paths[0]))
    if name == "chroma":
        problems.append("vectors are in Chroma in the folder (set kb.store_uri = milvus://host:19530)")
    elif name == "milvus" and isinstance(spec.address, Path):
        problems.append(f"vectors are in the Milvus Lite file {kb.store_uri} (set kb.store_uri = milvus://host:19530)")
    if kb.keyword_index == "local":
        problems.append('the BM25 index is in the folder (set kb.keyword_index = "store": BM25 inside Milvus)')
    if problems:
        raise ConfigError("crag serve --shared: these cannot be shared between replicas: " + "; ".join(problems))


class Readiness:
    """The checks of ``/readyz``: each distinct state database and Milvus server, once.

    ### Usage example
    >>> ready = Readiness(Collections.single(engine))   # doctest: +SKIP
    >>> ready.problems()                                # doctest: +SKIP
    []
    """

    def __init__(self, collections: Collections) -> None:
        self.collections = collections
        self._probes: dict[tuple[str, str], Any] = {}  # one Milvus client per server and collection, kept

    def problems(self) -> list[str]:
        """One line per shared service that does not answer now (empty: ready)."""
        found: list[str] = []
        seen: set[str] = set()
        for col in self.collections:
            settings = col.engine.settings
            if settings.kb.state_uri and settings.kb.state_uri not in seen:
                seen.add(settings.kb.state_uri)
                try:
                    col.engine.check_state()
                except CragError as exc:
                    found.append(str(exc))
            probe = self._milvus(settings, col.path)
            if probe is not None and probe.uri not in seen:
                seen.add(probe.uri)
                try:
                    probe.ping(PROBE_TIMEOUT)
                except StoreError as exc:
                    found.append(str(exc))
        return found

    def _milvus(self, settings: CragSettings, path: Path) -> Any:
        name, spec = parse_store_uri(settings.kb.store_uri, path)
        if name != "milvus" or not isinstance(spec.address, str):
            return None  # embedded stores live in this process: nothing to reach
        key = (str(spec.address), spec.collection)
        if key not in self._probes:
            from crag.store.milvus import DEFAULT_COLLECTION, MilvusVectorStore

            self._probes[key] = MilvusVectorStore(
                spec.address, collection=spec.collection or DEFAULT_COLLECTION, timeout=PROBE_TIMEOUT
            )
        return self._probes[key]


def install(app: FastAPI, collections: Collections) -> None:
    """Add ``GET /readyz`` to ``app``."""
    readiness = Readiness(collections)

    @app.get("/readyz")
    async def readyz() -> Response:
        problems = await run_in_threadpool(readiness.problems)
        if problems:
            return error_response(503, "not_ready", "; ".join(problems))
        return RedactedJSONResponse({"status": "ready"})
