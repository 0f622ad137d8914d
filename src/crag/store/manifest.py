"""The knowledge base manifest: SQLite holding files, their documents, chunk texts and a generation counter.

The manifest is the commit point of ingestion. Vectors are written to the vector store
first and the manifest rows commit after; anything in the vector store that the
manifest does not list is an orphan from an interrupted run and is deleted on open.
A large file commits in batches (``write_chunks``); until its last batch its ``files`` row
says ``partial:<sha256>``, its committed chunks are searchable, and the next ingest of the
same content skips what is already there and finishes it.

This is the manifest of a knowledge base without ``kb.state_uri``; with one, the same methods
read and write the shared database instead (:mod:`crag.store.manifest_db`, the protocol both
follow in :mod:`crag.store.manifest_api`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crag._sqlite import set_wal
from crag.errors import DiskFullError, KnowledgeBaseError
from crag.metadata import CHUNK_FIELDS, Filters, is_key
from crag.paths import disk_full_error, is_disk_full
from crag.store import documents as docs
from crag.store.documents import DocumentRecord
from crag.types import Chunk

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, sha256 TEXT NOT NULL, n_chunks INTEGER NOT NULL, ingested_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY, file TEXT NOT NULL, seq INTEGER NOT NULL, source TEXT NOT NULL,
    title TEXT NOT NULL, url TEXT NOT NULL, text TEXT NOT NULL, metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks(file);
"""


PARTIAL = "partial:"  # files.sha256 prefix of a large file whose ingest has not finished


class Manifest:
    """Thread-safe access to ``manifest.sqlite`` in a knowledge base folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        self.read_only = False  # opened for reading only: the disk is full (see _open_read_only)
        self._tried_writable = 0.0  # when a read-only manifest last tried to open for writing
        try:
            self._db = self._connect_writable()
        except sqlite3.DatabaseError as exc:
            # WAL mode creates its -wal and -shm files on open: on a full disk that fails with
            # "disk I/O error", and the manifest is not damaged at all.
            if not is_disk_full(path.parent, exc):
                raise KnowledgeBaseError(
                    f"knowledge base manifest {path} is unreadable ({exc}); move it aside and re-ingest"
                ) from None
            self._open_read_only(exc)
        if not self.read_only and self.get_meta("created") is None:  # when the KB began (/v1/models' "created")
            with contextlib.suppress(DiskFullError), self.transaction() as db:  # a full disk: noted later
                db.execute("INSERT OR IGNORE INTO meta VALUES ('created', CAST(strftime('%s', 'now') AS TEXT))")

    def _connect_writable(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        try:
            set_wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA + docs.SCHEMA)
        except BaseException:
            db.close()
            raise
        return db

    def _try_writable(self, *, every: float = 0.0) -> None:
        """A manifest opened read-only on a full disk: open it for writing once space is back
        (at most once per ``every`` seconds), so a long-running server sees new commits and can
        write again without a restart."""
        now = time.monotonic()
        if not self.read_only or now - self._tried_writable < every:
            return
        self._tried_writable = now
        try:
            db = self._connect_writable()
        except sqlite3.DatabaseError:
            return  # still full: stay read-only
        with self._lock:
            old, self._db, self.read_only = self._db, db, False
        old.close()

    def _open_read_only(self, cause: BaseException) -> None:
        """Open for reading without writing a byte (SQLite's ``immutable``), or raise ``DiskFullError``.

        Safe only when no write-ahead log holds commits the database file lacks.
        """
        wal = self.path.with_name(self.path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise disk_full_error(
                self.path.parent, "cannot open the knowledge base", "it is intact: free space and try again"
            ) from cause
        try:
            self._db = sqlite3.connect(
                f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False
            )
        except sqlite3.DatabaseError:
            raise disk_full_error(
                self.path.parent, "cannot open the knowledge base", "it is intact: free space and try again"
            ) from cause
        self.read_only = True

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Any:
        self._try_writable()
        if self.read_only:
            raise disk_full_error(
                self.path.parent,
                "the knowledge base is open for reading only",
                "nothing was changed and what was committed is intact: free space and run the command again",
            )
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                self._raise_if_full(exc)
                raise
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already
                    self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    self._raise_if_full(exc)
                raise

    def _raise_if_full(self, exc: sqlite3.Error) -> None:
        if is_disk_full(self.path.parent, exc):
            raise disk_full_error(
                self.path.parent,
                "a knowledge base write was rolled back",
                "what was committed before is intact: free space and run the command again",
            ) from exc

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @property
    def generation(self) -> int:
        self._try_writable(every=5.0)  # read before every search: how a reader notices space is back
        return int(self.get_meta("generation") or 0)

    def file_sha(self, path: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT sha256 FROM files WHERE path=?", (path,)).fetchone()
        return row[0] if row else None

    def files(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT path FROM files ORDER BY path")]

    def chunk_ids(self, file: str | None = None) -> set[str]:
        with self._lock:
            if file is None:
                rows = self._db.execute("SELECT id FROM chunks")
            else:
                rows = self._db.execute("SELECT id FROM chunks WHERE file=?", (file,))
            return {r[0] for r in rows}

    def known(self, ids: Iterable[str]) -> set[str]:
        """The subset of ``ids`` the manifest holds (a query's candidates, not the whole KB)."""
        return {r[0] for r in self._select_in("id", list(ids))}

    def ordered_ids(self) -> list[str]:
        """Every chunk id in stable (file, position) order."""
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT id FROM chunks ORDER BY file, seq")]

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """Chunk texts by id (unknown ids are absent)."""
        return dict(self._select_in("id, text", ids))

    def has_chunks(self) -> bool:
        # COUNT(*) scans the table; at a million chunks that alone costs tens of ms per query.
        with self._lock:
            return self._db.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is not None

    def replace_file(
        self, file: str, sha: str, chunks: Sequence[Chunk], when: str, *, document: DocumentRecord | None = None
    ) -> set[str]:
        """Atomically make ``chunks`` the chunks of ``file``; return the ids that were dropped."""
        return self.write_chunks(
            file, sha, list(enumerate(chunks)), when, final=True, keep={c.id for c in chunks}, document=document
        )

    def write_chunks(
        self,
        file: str,
        sha: str,
        chunks: Sequence[tuple[int, Chunk]],
        when: str,
        *,
        final: bool,
        keep: set[str] | None = None,
        document: DocumentRecord | None = None,
    ) -> set[str]:
        """Commit one batch of a file's ``(position, chunk)`` rows; return the ids dropped.

        A batch that is not ``final`` marks the file ``partial:<sha>`` (so a later run with the
        same content resumes instead of calling it unchanged) and keeps every older row of the
        file. The ``final`` batch records ``sha`` and drops the file's rows whose ids are not in
        ``keep`` (every id of the new version), all in one transaction; with ``document`` it
        writes the file's documents row there too, dropping another file that held its id
        (:func:`crag.store.documents.write_row`).
        """
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO chunks VALUES (?,?,?,?,?,?,?,?)",
                [
                    (c.id, file, n, c.source, c.title, c.url, c.text, json.dumps(c.metadata, ensure_ascii=False))
                    for n, c in chunks
                ],
            )
            dropped: set[str] = set()
            if final:
                old = {r[0] for r in db.execute("SELECT id FROM chunks WHERE file=?", (file,))}
                dropped = old - (keep if keep is not None else old)
                db.executemany("DELETE FROM chunks WHERE id=?", [(i,) for i in dropped])
            marked = sha if final else PARTIAL + sha
            count = db.execute("SELECT COUNT(*) FROM chunks WHERE file=?", (file,)).fetchone()[0]
            db.execute("INSERT OR REPLACE INTO files VALUES (?,?,?,?)", (file, marked, count, when))
            if final and document is not None:
                dropped |= docs.write_row(db, document)
            self._bump(db)
        return dropped

    def remove_files(self, files: Iterable[str]) -> set[str]:
        """Forget files; return the chunk ids that were removed."""
        dropped: set[str] = set()
        with self.transaction() as db:
            for f in files:
                dropped |= docs.delete_rows(db, f)
            self._bump(db)
        return dropped

    # -- documents (crag.store.documents) ------------------------------------------------
    def document(self, file: str) -> DocumentRecord | None:
        """The document of ``file`` (None for a file not ingested, or not yet complete)."""
        with self._lock:
            found = docs.read_rows(self._db, "d.file=?", (file,))
        return found[0] if found else None

    def document_by_id(self, doc_id: str) -> DocumentRecord | None:
        with self._lock:
            found = docs.read_rows(self._db, "d.id=?", (doc_id,))
        return found[0] if found else None

    def documents(self, offset: int = 0, limit: int = 50) -> list[DocumentRecord]:
        """A page of the documents, by name (then id)."""
        with self._lock:
            return docs.read_rows(self._db, tail="ORDER BY d.name, d.id LIMIT ? OFFSET ?", args=(limit, offset))

    def all_documents(self) -> list[DocumentRecord]:
        with self._lock:
            return docs.read_rows(self._db)

    def count_documents(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM documents").fetchone()[0])

    def stored_metadata(self, file: str) -> dict[str, str]:
        """A file's metadata given on purpose: its document's, else what all its chunks share."""
        doc = self.document(file)
        if doc is not None:
            return dict(doc.metadata)
        with self._lock:
            return docs.common_metadata(self._db, file)

    def upgrade_documents(self) -> int:
        """Give every complete file a documents row (once per knowledge base); return how many."""
        with self.transaction() as db:
            made = docs.upgrade(db)
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, '1')", (docs.DOCUMENTS_IN_MANIFEST,))
        return made

    def _bump(self, db: sqlite3.Connection) -> None:
        row = db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
        db.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (str(int(row[0]) + 1 if row else 1),))

    def chunks(self, ids: Sequence[str] | None = None) -> list[Chunk]:
        """Chunks by id (input order; unknown ids skipped) or all chunks (stable order)."""
        cols = "id, source, title, url, text, metadata"
        if ids is None:
            with self._lock:
                rows = self._db.execute(f"SELECT {cols} FROM chunks ORDER BY file, seq").fetchall()
        else:
            rows = self._select_in(cols, ids)
            order = {cid: n for n, cid in enumerate(ids)}
            rows.sort(key=lambda r: order[r[0]])
        return [Chunk(id=r[0], source=r[1], title=r[2], url=r[3], text=r[4], metadata=json.loads(r[5])) for r in rows]

    def chunk_file(self, chunk_id: str) -> str | None:
        """The file a chunk belongs to (None for an unknown id)."""
        with self._lock:
            row = self._db.execute("SELECT file FROM chunks WHERE id=?", (chunk_id,)).fetchone()
        return str(row[0]) if row else None

    def chunks_of(self, file: str, offset: int = 0, limit: int = 100) -> list[Chunk]:
        """A file's chunks in file order, ``limit`` of them from ``offset``."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, source, title, url, text, metadata FROM chunks WHERE file=? ORDER BY seq LIMIT ? OFFSET ?",
                (file, limit, offset),
            ).fetchall()
        return [Chunk(id=r[0], source=r[1], title=r[2], url=r[3], text=r[4], metadata=json.loads(r[5])) for r in rows]

    def _select_in(self, columns: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """``SELECT columns FROM chunks WHERE id IN ids``, in batches under SQLite's variable limit."""
        rows: list[tuple[Any, ...]] = []
        with self._lock:
            for i in range(0, len(ids), 500):
                part = list(ids[i : i + 500])
                marks = ",".join("?" * len(part))
                rows += self._db.execute(f"SELECT {columns} FROM chunks WHERE id IN ({marks})", part).fetchall()
        return rows

    # -- metadata filters ---------------------------------------------------------------
    def filtered_ids(self, filters: Filters) -> set[str]:
        """Ids of the chunks whose fields match ``filters`` (:mod:`crag.metadata`).

        ``source``/``title``/``url`` are the chunk's columns; other keys are read from its
        metadata JSON. One scan of the chunks table; the knowledge base caches the result per
        generation. Each key is one condition whose values come in as one JSON array
        (``IN (SELECT value FROM json_each(?))``), so the statement's expression tree stays a
        few levels deep whatever the number of values.
        """
        conds: list[str] = []
        args: list[str] = []
        for key, values in filters.items():
            if not is_key(key):
                raise ValueError(f"filter key {key!r} is not a metadata key")
            field = key if key in CHUNK_FIELDS else "json_extract(metadata, ?)"
            if key not in CHUNK_FIELDS:
                args.append(f'$."{key}"')  # quoted: dotted keys are one key, not a path
            conds.append(f"{field} IN (SELECT value FROM json_each(?))")
            args.append(json.dumps(list(values), ensure_ascii=False))
        where = " AND ".join(conds) or "1"
        with self._lock:
            return {r[0] for r in self._db.execute(f"SELECT id FROM chunks WHERE {where}", args)}

    def metadata_keys(self) -> set[str]:
        """Every metadata key some chunk carries (what a filter may name besides the chunk fields).

        Documents share their metadata across their chunks, so the distinct metadata objects are
        few: one scan of the chunks table, then a small ``json_each``.
        """
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT j.key FROM (SELECT DISTINCT metadata FROM chunks) AS m, json_each(m.metadata) AS j"
                " WHERE json_valid(m.metadata) AND json_type(m.metadata) = 'object'"
            ).fetchall()
        return {r[0] for r in rows if isinstance(r[0], str)}

    def metadata_values(self, key: str, limit: int) -> list[str]:
        """Up to ``limit`` distinct values of metadata ``key``, sorted (for a message that lists them)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT CAST(json_extract(metadata, ?) AS TEXT) AS v FROM chunks"
                " WHERE json_valid(metadata) AND v IS NOT NULL ORDER BY v LIMIT ?",
                (f'$."{key}"', limit),
            ).fetchall()
        return [r[0] for r in rows]

    def metadata_rows(self, after: str, limit: int) -> list[Chunk]:
        """Chunks with metadata, in id order after ``after`` (a batch of a metadata upgrade)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, source, title, url, text, metadata FROM chunks "
                "WHERE id > ? AND metadata NOT IN ('{}', '') ORDER BY id LIMIT ?",
                (after, limit),
            ).fetchall()
        return [Chunk(id=r[0], source=r[1], title=r[2], url=r[3], text=r[4], metadata=json.loads(r[5])) for r in rows]

    def set_metadata(self, chunks: Sequence[Chunk]) -> None:
        """Rewrite the metadata of ``chunks`` (same ids), in one transaction."""
        with self.transaction() as db:
            db.executemany(
                "UPDATE chunks SET metadata=? WHERE id=?",
                [(json.dumps(c.metadata, ensure_ascii=False), c.id) for c in chunks],
            )

    def counts(self) -> tuple[int, int]:
        with self._lock:
            f = self._db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            c = self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return int(f), int(c)
