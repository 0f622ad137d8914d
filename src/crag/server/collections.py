"""The knowledge bases one server holds, by name, and which of them a request may use.

A request names its collection: ``model`` in the OpenAI chat endpoint, ``collection`` in
``/v1/ask``, ``/v1/ingest``, the trace and feedback routes. A server started with a bare
``--kb PATH`` holds one collection, ``crag``, which every request gets without naming it.
Every collection shares the server's models (:meth:`crag.engine.CRAG.for_kb`) and keeps its
own traces beside its knowledge base.

``GET /v1/models`` lists the collections a key may read as OpenAI model objects;
``GET /v1/collections`` is the same list for the viewer, with the default and the access.

>>> from crag.config import CragSettings
>>> cols = Collections.from_settings(CragSettings(server={"collections": {"handbook": "kb/h", "手册": "kb/z"}}))
>>> cols.names, cols.default
(['handbook', '手册'], None)
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from crag.collection_names import SINGLE_COLLECTION
from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import ApiError, CragError
from crag.server.auth import ApiKey

__all__ = ["Collection", "Collections", "authorize", "chat_model", "collection_for", "install"]


@dataclass
class Collection:
    """One knowledge base a server holds: its name, engine and when it was first served."""

    name: str
    engine: CRAG
    created: int = 0  # Unix time: the knowledge base's creation (else the server's start)
    ingest_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one ingest at a time per KB

    @property
    def path(self) -> Path:
        return Path(self.engine.settings.kb.path)


class Collections:
    """The server's collections by name, with the one a request gets when it names none.

    ### Usage example
    >>> cols = Collections.single(CRAG.from_config(kb={"path": "kb"}))   # doctest: +SKIP
    >>> cols.resolve(None).name                                          # doctest: +SKIP
    'crag'
    """

    def __init__(self, engines: dict[str, CRAG], default: str | None = None) -> None:
        if not engines:
            raise ValueError("a server needs at least one collection")
        started = int(time.time())
        self._by_name = {n: Collection(n, e, _created(e) or started) for n, e in engines.items()}
        self.default = default if default is not None else (next(iter(engines)) if len(engines) == 1 else None)

    @classmethod
    def single(cls, engine: CRAG) -> Collections:
        """One engine as the server's only collection, ``crag`` (a bare ``--kb PATH``)."""
        return cls({SINGLE_COLLECTION: engine})

    @classmethod
    def from_settings(cls, settings: CragSettings, engine: CRAG | None = None) -> Collections:
        """``server.collections`` (sharing one engine's models), or ``kb.path`` alone as ``crag``."""
        root = engine or CRAG(settings)
        named = settings.server.collections
        if not named:
            return cls.single(root)
        engines = {
            name: root if Path(path) == Path(settings.kb.path) else root.for_kb(path) for name, path in named.items()
        }
        return cls(engines, settings.server.default_collection or None)

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def __iter__(self) -> Iterator[Collection]:
        return iter(self._by_name.values())

    def resolve(self, name: str | None, key: ApiKey | None = None) -> Collection:
        """The collection called ``name`` (the default for ``None``); a 404 or 400 saying which exist.

        With a ``key`` scoped to some collections, the others do not exist for it: naming one
        is the same 404 as naming none, and messages list only the key's own.
        """
        if name is None or name == "":
            if self.default is None or not _may(key, self.default):
                raise ApiError(
                    400,
                    "collection_required",
                    f"this server holds several collections ({self._listing(key)}); name one with collection",
                )
            name = self.default
        found = self._by_name.get(name)
        if found is None or not _may(key, name):
            raise ApiError(404, "collection_not_found", f"no collection {name!r}; {self._holds(key)}")
        return found

    def for_model(self, model: str, key: ApiKey | None = None) -> tuple[Collection, str]:
        """The collection and mode an OpenAI ``model`` asks for: a collection's name (CRAG),
        or ``rag`` for the plain baseline over the default collection."""
        if model == "rag" and self.default is not None and _may(key, self.default):
            return self._by_name[self.default], "rag"
        found = self._by_name.get(model)
        if found is None or not _may(key, model):
            raise ApiError(404, "model_not_found", f"the model {model!r} does not exist; models: {self._listing(key)}")
        return found, "crag"

    def visible(self, key: ApiKey | None) -> list[Collection]:
        """The collections ``key`` may read (all without keys)."""
        return [c for c in self if _may(key, c.name)]

    def _holds(self, key: ApiKey | None) -> str:
        scoped = key is not None and key.collections is not None
        return f"{'this key may use' if scoped else 'this server holds'} {self._listing(key)}"

    def _listing(self, key: ApiKey | None = None) -> str:
        names = [c.name for c in self.visible(key)]
        if not names:
            return "none"
        return ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")


def _may(key: ApiKey | None, name: str) -> bool:
    return key is None or key.may(name)


def chat_model(collections: Collections, model: str, request: Request | None = None) -> tuple[Collection, str]:
    """The collection an OpenAI ``model`` names; an unknown one (or one the request's key may
    not read) is OpenAI's 404 ``model_not_found``."""
    try:
        return collections.for_model(model, _key(request))
    except ApiError as exc:
        raise ApiError(404, "invalid_request_error", str(exc), param="model", code="model_not_found") from None


def collection_for(
    request: Request, collections: Collections, name: str | None, *, write: bool = False, doing: str = "ingest"
) -> Collection:
    """The collection a request names, if its key may use it (404 otherwise, as for no such
    collection) and, with ``write``, write to it (403 for a read-only key)."""
    col = collections.resolve(name, _key(request))
    authorize(request, col, write=write, doing=doing)
    return col


def _key(request: Request | None) -> ApiKey | None:
    return getattr(request.state, "api_key", None) if request is not None else None


def _created(engine: CRAG) -> int:
    """When the knowledge base was created (its manifest's ``created`` mark), 0 when unknown."""
    state = engine.manifest_state()
    if state is not None:  # in the shared database; not yet created, or not answering: unknown
        from crag.store.manifest_db import ManifestDB

        try:
            value = ManifestDB.reader(state).get_meta("created")
        except CragError:
            return 0
        return int(value) if value and value.isdigit() else 0
    db = Path(engine.settings.kb.path) / "manifest.sqlite"
    if not db.is_file():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key='created'").fetchone()
    except sqlite3.Error:
        return 0
    return int(row[0]) if row and str(row[0]).isdigit() else 0


def kb_ready(c: Collection) -> bool:
    """The collection's knowledge base has been created (in its folder, or in the shared state
    database); False also while that database does not answer (``/readyz`` says why)."""
    try:
        return c.engine.kb_exists()
    except CragError:
        return False


def authorize(request: Request, collection: Collection | str, *, write: bool = False, doing: str = "ingest") -> None:
    """403, in one line, when the request's API key may not use ``collection`` this way
    (``doing`` names the write a read-only key was refused).

    A server without keys serves only loopback clients (:mod:`crag.server.auth`), with full access.
    """
    key: ApiKey | None = getattr(request.state, "api_key", None)
    name = collection if isinstance(collection, str) else collection.name
    if key is None or key.may(name, write=write):
        return
    if key.may(name):
        raise ApiError(403, "forbidden", f"API key {key.label} is read-only on collection {name!r}; it cannot {doing}")
    raise ApiError(403, "forbidden", f"API key {key.label} may not use collection {name!r}")


def _visible(request: Request, collections: Collections) -> list[Collection]:
    return collections.visible(_key(request))


def _model(c: Collection) -> dict[str, Any]:
    return {"id": c.name, "object": "model", "created": c.created, "owned_by": "crag"}


def install(app: FastAPI, collections: Collections) -> None:
    """Add ``/v1/models``, ``/v1/models/{id}`` and ``/v1/collections`` to ``app``."""

    @app.get("/v1/models")
    async def list_models(request: Request) -> dict[str, Any]:
        """The collections this key may read, as OpenAI model objects."""
        return {"object": "list", "data": [_model(c) for c in _visible(request, collections)]}

    @app.get("/v1/models/{model_id}")
    async def get_model(request: Request, model_id: str) -> dict[str, Any]:
        """One model, as the chat endpoint resolves it (an unknown one: OpenAI's ``model_not_found``)."""
        c, _ = chat_model(collections, model_id, request)
        return {**_model(c), "id": model_id}

    @app.get("/v1/collections")
    async def list_collections(request: Request) -> dict[str, Any]:
        """The collections this key may read, for the viewer: name, default, access, ready."""
        key: ApiKey | None = getattr(request.state, "api_key", None)
        rows = []
        for c in _visible(request, collections):
            ready = await run_in_threadpool(kb_ready, c)
            write = key is None or key.may(c.name, write=True)
            rows.append(
                {
                    "name": c.name,
                    "default": c.name == collections.default,
                    "access": "write" if write else "read",
                    "ready": ready,
                }
            )
        default = (
            collections.default if any(c.name == collections.default for c in _visible(request, collections)) else None
        )
        return {"collections": rows, "default": default}
