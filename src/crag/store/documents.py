"""The documents of a knowledge base: one row per ingested file, beside its chunks in the manifest.

A document is what a user adds, replaces and removes: a file given to ``crag ingest`` or an
upload to ``/v1/ingest``. Its row holds what belongs to the document rather than to its text:

- ``id`` — stable across versions: a client's id or an upload's file name, else a hash of
  the file's path (:func:`path_id`);
- ``name`` — how it is shown to clients, never a server path (``docs/hr/leave.md``,
  ``cafeteria.md``);
- ``metadata`` — the metadata given on purpose (``--meta``, an upload's ``metadata``). It is
  kept by every later ingest of the document until one gives other metadata or clears it;
  a document's own fields (front matter, JSONL) are part of its content, not of this map;
- ``content`` — the sha256 of its bytes, to tell a content update from a metadata change;
- ``version`` — 1, then one more for every committed change of content or metadata;
- ``title`` and ``url`` — those of its first chunk, for listings.

The row is written in the same transaction as the file's last chunks
(:meth:`crag.store.manifest.Manifest.write_chunks`), so a document and its chunks never
disagree. A knowledge base from before documents gets its rows once (:func:`upgrade`), with
the metadata every chunk of a file shares as the file's metadata.

>>> path_id("/srv/docs/a.md") == path_id("/srv/docs/a.md"), len(path_id("/srv/docs/a.md"))
(True, 16)
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

__all__ = [
    "DOCUMENTS_IN_MANIFEST",
    "SCHEMA",
    "DocumentRecord",
    "common_metadata",
    "delete_rows",
    "path_id",
    "read_rows",
    "upgrade",
    "write_row",
]

SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    file TEXT PRIMARY KEY, id TEXT NOT NULL UNIQUE, name TEXT NOT NULL, metadata TEXT NOT NULL,
    content TEXT NOT NULL, version INTEGER NOT NULL, title TEXT NOT NULL, url TEXT NOT NULL
);
"""
DOCUMENTS_IN_MANIFEST = "documents"  # manifest meta key: "1" once every file has its documents row

_COLUMNS = "d.id, d.file, d.name, d.metadata, d.content, d.version, d.title, d.url, f.n_chunks, f.ingested_at, f.sha256"


@dataclass(frozen=True)
class DocumentRecord:
    """One document of a knowledge base (see the module docstring).

    ### Usage example
    >>> doc = DocumentRecord("cafeteria.md", "/srv/kb/uploads/3f/cafeteria.md", "cafeteria.md", {"team": "hr"})
    >>> doc.public()["metadata"], "file" in doc.public()
    ({'team': 'hr'}, False)
    """

    id: str
    file: str  # the manifest's key: the file's absolute path on this machine (never shown to clients)
    name: str
    metadata: dict[str, str] = field(default_factory=dict)
    content: str = ""  # sha256 of the bytes ("" when unknown: a row made by the upgrade)
    version: int = 1
    title: str = ""
    url: str = ""
    chunks: int = 0
    ingested_at: str = ""
    partial: bool = False  # a large file whose new version is still being committed

    def public(self) -> dict[str, Any]:
        """The record as clients see it: no server path."""
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title,
            "url": self.url,
            "metadata": dict(self.metadata),
            "chunks": self.chunks,
            "version": self.version,
            "ingested_at": self.ingested_at,
        }


def path_id(file: str) -> str:
    """The id of a document known only by its path: 16 hex characters of the path's sha256."""
    return hashlib.sha256(file.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def read_rows(
    db: sqlite3.Connection, where: str = "1", args: tuple[Any, ...] = (), tail: str = ""
) -> list[DocumentRecord]:
    """Documents joined with their files' chunk counts and times (``where`` on ``d``/``f``)."""
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM documents d JOIN files f ON f.path = d.file WHERE {where} {tail}", args
    ).fetchall()
    return [
        DocumentRecord(
            id=r[0],
            file=r[1],
            name=r[2],
            metadata=json.loads(r[3]),
            content=r[4],
            version=int(r[5]),
            title=r[6],
            url=r[7],
            chunks=int(r[8]),
            ingested_at=r[9],
            partial=str(r[10]).startswith("partial:"),
        )
        for r in rows
    ]


def write_row(db: sqlite3.Connection, doc: DocumentRecord) -> set[str]:
    """Make ``doc`` the document of its file, inside the caller's transaction.

    Another file that held the same id (an upload of ``report.md`` now sent as ``report.pdf``)
    is the document's previous version: its chunks, file and row go in the same transaction,
    and their chunk ids are returned so the caller drops their vectors.
    """
    dropped: set[str] = set()
    for (other,) in db.execute("SELECT file FROM documents WHERE id=? AND file<>?", (doc.id, doc.file)).fetchall():
        dropped |= delete_rows(db, other)
    db.execute(
        "INSERT OR REPLACE INTO documents VALUES (?,?,?,?,?,?,?,?)",
        (
            doc.file,
            doc.id,
            doc.name,
            json.dumps(dict(doc.metadata), ensure_ascii=False, sort_keys=True),
            doc.content,
            doc.version,
            doc.title,
            doc.url,
        ),
    )
    return dropped


def delete_rows(db: sqlite3.Connection, file: str) -> set[str]:
    """Forget a file: its chunks, its files row and its document; return its chunk ids."""
    ids = {r[0] for r in db.execute("SELECT id FROM chunks WHERE file=?", (file,))}
    db.execute("DELETE FROM chunks WHERE file=?", (file,))
    db.execute("DELETE FROM files WHERE path=?", (file,))
    db.execute("DELETE FROM documents WHERE file=?", (file,))
    return ids


def common_metadata(db: sqlite3.Connection, file: str) -> dict[str, str]:
    """The metadata every chunk of ``file`` shares: a file's ``--meta`` before documents had rows."""
    common: dict[str, str] | None = None
    for (raw,) in db.execute("SELECT metadata FROM chunks WHERE file=?", (file,)):
        meta = json.loads(raw)
        if not isinstance(meta, Mapping):
            return {}
        pairs = {str(k): str(v) for k, v in meta.items()}
        common = pairs if common is None else {k: v for k, v in common.items() if pairs.get(k) == v}
        if not common:
            return {}
    return common or {}


def upgrade(db: sqlite3.Connection) -> int:
    """Give every complete file without a documents row one (inside the caller's transaction)."""
    missing = db.execute(
        "SELECT f.path FROM files f LEFT JOIN documents d ON d.file = f.path "
        "WHERE d.file IS NULL AND f.sha256 NOT LIKE 'partial:%'"
    ).fetchall()
    for (file,) in missing:
        first = db.execute("SELECT title, url FROM chunks WHERE file=? ORDER BY seq LIMIT 1", (file,)).fetchone()
        title, url = first if first else ("", "")
        doc = DocumentRecord(path_id(file), file, PurePath(file).name, common_metadata(db, file), "", 1, title, url)
        write_row(db, doc)
    return len(missing)
