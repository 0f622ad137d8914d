"""The documents of a collection as a resource: list, read and delete them over HTTP.

``GET /v1/documents`` pages through a collection's documents (by name) with their metadata,
chunk count, version and ingest time; ``GET /v1/documents/{id}`` is one document with its
passages (``?chunk=`` one passage, else a page of them); ``DELETE /v1/documents/{id}`` removes
it (a key that may write). Every route is scoped like the others: ``collection`` names the
collection, and a key sees only its own. Ids come from :mod:`crag.store.documents`: a client's
``id`` or an upload's file name, else a hash of the file's path. Citations link here
(:func:`crag.server.public.document_link`).

>>> # curl -H "Authorization: Bearer $KEY" 'http://127.0.0.1:8000/v1/documents?collection=handbook&limit=20'
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Query, Request
from starlette.concurrency import run_in_threadpool

from crag.engine import CRAG
from crag.errors import DocumentNotFoundError
from crag.server.collections import Collection, Collections, collection_for
from crag.server.public import document_link
from crag.server.uploads import discard
from crag.store.documents import DocumentRecord

__all__ = ["install"]

MAX_PAGE = 500
MAX_OFFSET = 2**62  # SQLite's integers are 64-bit: a larger offset is a 422, not a 500


def install(app: FastAPI, collections: Collections) -> None:
    """Add ``GET /v1/documents``, ``GET /v1/documents/{id}`` and ``DELETE /v1/documents/{id}``."""
    _install_list(app, collections)
    _install_get(app, collections)
    _install_delete(app, collections)


def _shown(collections: Collections, col: Collection, doc: DocumentRecord) -> dict[str, Any]:
    """A document as the API shows it: its public fields and the link citations use."""
    several = len(collections.names) > 1 or col.name != collections.default
    return {**doc.public(), "link": document_link(doc.id, col.name if several else None)}


def _install_list(app: FastAPI, collections: Collections) -> None:
    @app.get("/v1/documents")
    async def list_documents(
        request: Request,
        collection: str | None = Query(None, max_length=64),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
        limit: int = Query(50, ge=1, le=MAX_PAGE),
    ) -> dict[str, Any]:
        """A page of the collection's documents, by name."""
        col = collection_for(request, collections, collection)
        docs, total = await run_in_threadpool(_page, col.engine, offset, limit)
        return {
            "documents": [_shown(collections, col, d) for d in docs],
            "total": total,
            "offset": offset,
            "limit": limit,
            "next_offset": offset + len(docs) if offset + len(docs) < total else None,
        }


def _install_get(app: FastAPI, collections: Collections) -> None:
    @app.get("/v1/documents/{doc_id}")
    async def get_document(
        request: Request,
        doc_id: str,
        collection: str | None = Query(None, max_length=64),
        chunk: str | None = Query(None, max_length=64),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
        limit: int = Query(20, ge=1, le=MAX_PAGE),
    ) -> dict[str, Any]:
        """One document and its passages: the one ``chunk`` names, or ``limit`` from ``offset``."""
        col = collection_for(request, collections, collection)
        doc, chunks = await run_in_threadpool(_one, col.engine, doc_id, chunk, offset, limit)
        passages = [{"id": c.id, "title": c.title, "url": c.url, "text": c.text} for c in chunks]
        shown = _shown(collections, col, doc)
        return {**shown, "passages": passages, "passages_offset": offset if chunk is None else None}


def _install_delete(app: FastAPI, collections: Collections) -> None:
    @app.delete("/v1/documents/{doc_id}")
    async def delete_document(
        request: Request, doc_id: str, collection: str | None = Query(None, max_length=64)
    ) -> dict[str, Any]:
        """Remove a document: its passages leave search at once (a key that may write)."""
        col = collection_for(request, collections, collection, write=True, doing="delete documents")
        async with col.ingest_lock:  # one writer per knowledge base in this process
            removed = await run_in_threadpool(_delete, col, doc_id)
        return {"id": doc_id, "deleted": True, "chunks": removed}


def _knowledge_base_exists(engine: CRAG) -> bool:
    return engine.kb_exists()


def _page(engine: CRAG, offset: int, limit: int) -> tuple[list[DocumentRecord], int]:
    if not _knowledge_base_exists(engine):  # nothing ingested yet: no documents, not an error
        return [], 0
    return engine.knowledge_base().documents(offset=offset, limit=limit)


def _one(engine: CRAG, doc_id: str, chunk: str | None, offset: int, limit: int) -> tuple[DocumentRecord, list[Any]]:
    if not _knowledge_base_exists(engine):
        raise DocumentNotFoundError(f"no document {doc_id!r} in this collection")
    kb = engine.knowledge_base()
    doc = kb.document(doc_id)
    if chunk is None:
        return doc, kb.document_chunks(doc_id, offset=offset, limit=limit)
    found = kb.manifest.chunks([chunk]) if kb.manifest.chunk_file(chunk) == doc.file else []
    if not found:
        raise DocumentNotFoundError(f"document {doc_id!r} has no passage {chunk!r}")
    return doc, found


def _delete(col: Collection, doc_id: str) -> int:
    engine = col.engine
    if not _knowledge_base_exists(engine):
        raise DocumentNotFoundError(f"no document {doc_id!r} in this collection")
    kb = engine.knowledge_base()
    doc = kb.document(doc_id)  # 404 for an unknown id
    removed = kb.remove_documents([doc_id])
    discard(col.path / "uploads", doc.file)
    return sum(f.chunks for f in removed)
