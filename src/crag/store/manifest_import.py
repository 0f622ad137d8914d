"""An existing knowledge base moves its manifest into the shared database the first time it opens
with ``kb.state_uri`` set.

A knowledge base built without ``kb.state_uri`` has its documents in ``<kb>/manifest.sqlite``
(:mod:`crag.store.manifest`). When the same folder is opened with a ``postgresql://``
``kb.state_uri`` and the database holds no knowledge base of its name yet, every row of that
file (meta with the generation and embedder, files, chunks, documents) is copied into the
database in one transaction, under the knowledge base's advisory write lock, so two replicas
starting together copy it once. Chunk ids do not change, so the vector store and keyword index
stay valid. The file itself is left as it was: without ``kb.state_uri`` the folder opens as
before (without the writes made since through the database).

>>> import_sqlite(Path("kb"), ManifestDB(state), lock)   # doctest: +SKIP
12
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

from crag.errors import KnowledgeBaseError
from crag.state.schema import kb_chunks, kb_documents, kb_files, kb_meta
from crag.store.manifest_db import ManifestDB
from crag.store.writelock import KBWriteLock

__all__ = ["import_sqlite"]

log = logging.getLogger(__name__)
_BATCH = 1000


def import_sqlite(folder: Path, manifest: ManifestDB, lock: KBWriteLock) -> int:
    """Copy ``folder/manifest.sqlite`` into ``manifest`` unless its knowledge base already exists
    there (or the file does not); return the number of chunks copied."""
    legacy = folder / "manifest.sqlite"
    if not legacy.is_file() or manifest.get_meta("embedder") is not None:
        return 0
    with lock.hold(what="move the manifest into the state database"):
        if manifest.get_meta("embedder") is not None:  # another replica copied it meanwhile
            return 0
        try:
            src = sqlite3.connect(f"{legacy.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        except sqlite3.Error as exc:
            raise KnowledgeBaseError(f"cannot read {legacy} to move it into the state database: {exc}") from None
        try:
            copied = _copy(src, manifest)
        except sqlite3.Error as exc:
            raise KnowledgeBaseError(f"cannot read {legacy} to move it into the state database: {exc}") from None
        finally:
            src.close()
    log.info("moved %s into the state database %s as %r (%d chunks)", legacy, manifest.db.display, manifest.kb, copied)
    return copied


def _copy(src: sqlite3.Connection, manifest: ManifestDB) -> int:
    kb, db = manifest.kb, manifest.db
    tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    copied = 0
    with db.connect(write=True) as conn:

        def put(table: Any, rows: list[dict[str, Any]]) -> None:
            if rows:
                conn.execute(db.insert(table).on_conflict_do_nothing(), rows)

        meta = [{"kb": kb, "key": k, "value": v} for k, v in src.execute("SELECT key, value FROM meta")]
        conn.execute(kb_meta.delete().where(kb_meta.c.kb == kb, kb_meta.c.key == "created"))  # the file's is older
        put(kb_meta, meta)
        put(kb_files, _files(src, kb))
        rows = src.execute("SELECT id, file, seq, source, title, url, text, metadata FROM chunks")
        while batch := rows.fetchmany(_BATCH):
            put(kb_chunks, [_chunk(kb, row) for row in batch])
            copied += len(batch)
        if "documents" in tables:
            put(kb_documents, _documents(src, kb))
    return copied


def _files(src: sqlite3.Connection, kb: str) -> list[dict[str, Any]]:
    return [
        {"kb": kb, "path": p, "sha256": s, "n_chunks": n, "ingested_at": t}
        for p, s, n, t in src.execute("SELECT path, sha256, n_chunks, ingested_at FROM files")
    ]


def _chunk(kb: str, row: tuple[Any, ...]) -> dict[str, Any]:
    i, f, q, s, t, u, x, m = row
    return {
        "kb": kb,
        "id": i,
        "file": f,
        "seq": q,
        "source": s,
        "title": t,
        "url": u,
        "text": x,
        "metadata": json.loads(m or "{}"),
    }


def _documents(src: sqlite3.Connection, kb: str) -> list[dict[str, Any]]:
    query = "SELECT file, id, name, metadata, content, version, title, url FROM documents"
    return [
        {
            "kb": kb,
            "file": f,
            "id": i,
            "name": n,
            "metadata": json.loads(m or "{}"),
            "content": c,
            "version": v,
            "title": t,
            "url": u,
        }
        for f, i, n, m, c, v, t, u in src.execute(query)
    ]
