"""The knowledge base manifest in the shared state database (``kb.state_uri = postgresql://…``).

The same commit point as ``manifest.sqlite`` (:mod:`crag.store.manifest`), with the same public
methods, over the ``manifest`` group of :mod:`crag.state.schema`: meta key/values (the
generation counter among them), files, chunk texts and documents, every row keyed by the
knowledge base's name (``kb.name``, default its folder's name). Replicas on other machines that
open the same name see the same documents, versions, metadata and chunk texts; their folders
need no ``manifest.sqlite``.

Writes are one transaction each, like SQLite's, and every commit bumps the generation in the
same transaction (``value + 1`` in the database, never read-then-write), so a reader on any
machine notices a write by reading one row. Writers coordinate by an advisory lock per
knowledge base name (:mod:`crag.store.writelock_db`), not by a file.

Metadata is ``jsonb``: a filter is one flat ``WHERE`` of one condition per key, each of the
form ``metadata ->> 'key' = ANY(:values)`` (the values one array parameter), whatever the
number of values; :func:`crag.metadata.check_filters` bounds keys and values as for SQLite.

### Usage example
>>> from crag.state import MANIFEST, StateDB                               # doctest: +SKIP
>>> manifest = ManifestDB(StateDB("postgresql://crag@db/crag", MANIFEST, scope="handbook"))  # doctest: +SKIP
>>> manifest.generation, manifest.counts()                                 # doctest: +SKIP
(0, (0, 0))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import Any

import sqlalchemy as sa

from crag.metadata import CHUNK_FIELDS, Filters, is_key
from crag.state.db import StateDB
from crag.state.schema import kb_chunks, kb_documents, kb_files, kb_meta
from crag.store.documents import DOCUMENTS_IN_MANIFEST, DocumentRecord, path_id
from crag.store.manifest import PARTIAL
from crag.types import Chunk

__all__ = ["ManifestDB"]

_C = "C"  # byte order, as SQLite's: listings page the same way on every replica
_CHUNK_COLS = (kb_chunks.c.id, kb_chunks.c.source, kb_chunks.c.title, kb_chunks.c.url, kb_chunks.c.text)
_IDS = sa.ARRAY(sa.Text)


def _chunk(row: Sequence[Any]) -> Chunk:
    meta = row[5]
    return Chunk(id=row[0], source=row[1], title=row[2], url=row[3], text=row[4], metadata=dict(meta or {}))


class ManifestDB:
    """The manifest of knowledge base ``db.scope`` in the shared database ``db`` (the ``manifest`` group).

    ``path`` is the folder shown in messages; nothing is written there.
    """

    read_only = False  # a full disk is the database server's concern: writes fail with its error

    def __init__(self, db: StateDB, *, create: bool = True) -> None:
        if not db.shared:
            raise ValueError("ManifestDB needs a shared state database; without kb.state_uri use Manifest")
        self.db = db
        self.kb = db.scope
        self.path = db.display
        if not create:
            return
        with db.connect(write=True) as conn:  # when the knowledge base began (/v1/models' "created")
            created = sa.cast(sa.cast(sa.func.extract("epoch", sa.func.now()), sa.BigInteger), sa.Text)
            conn.execute(db.insert(kb_meta).values(kb=self.kb, key="created", value=created).on_conflict_do_nothing())

    @staticmethod
    def exists(db: StateDB) -> bool:
        """True once a knowledge base named ``db.scope`` was created in the database (it has an embedder)."""
        with db.connect() as conn:
            row = conn.execute(
                sa.select(kb_meta.c.value).where(kb_meta.c.kb == db.scope, kb_meta.c.key == "embedder")
            ).first()
        return row is not None

    @classmethod
    def reader(cls, db: StateDB) -> ManifestDB:
        """The manifest for reading only: nothing is written (a knowledge base not created stays so)."""
        return cls(db, create=False)

    def file_documents(self) -> list[tuple[str, str | None, str | None]]:
        """Every file with its document's id and name (None for a file without a document)."""
        d, f = kb_documents.c, kb_files.c
        joined = kb_files.outerjoin(kb_documents, sa.and_(d.kb == f.kb, d.file == f.path))
        with self.db.connect() as conn:
            rows = conn.execute(sa.select(f.path, d.id, d.name).select_from(joined).where(f.kb == self.kb))
            return [(str(r[0]), r[1], r[2]) for r in rows]

    def close(self) -> None:
        """Nothing to close: connections belong to the process's pool (:class:`StateDB`)."""

    # -- meta ------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self.db.connect() as conn:
            row = conn.execute(sa.select(kb_meta.c.value).where(kb_meta.c.kb == self.kb, kb_meta.c.key == key)).first()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.db.connect(write=True) as conn:
            self._put_meta(conn, key, value)

    def _put_meta(self, conn: sa.Connection, key: str, value: str) -> None:
        stmt = self.db.insert(kb_meta).values(kb=self.kb, key=key, value=value)
        conn.execute(stmt.on_conflict_do_update(index_elements=["kb", "key"], set_={"value": value}))

    @property
    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    def _bump(self, conn: sa.Connection) -> None:
        stmt = self.db.insert(kb_meta).values(kb=self.kb, key="generation", value="1")
        more = sa.cast(sa.cast(kb_meta.c.value, sa.BigInteger) + 1, sa.Text)
        conn.execute(stmt.on_conflict_do_update(index_elements=["kb", "key"], set_={"value": more}))

    # -- files and chunk ids -----------------------------------------------------------------
    def file_sha(self, path: str) -> str | None:
        with self.db.connect() as conn:
            row = conn.execute(
                sa.select(kb_files.c.sha256).where(kb_files.c.kb == self.kb, kb_files.c.path == path)
            ).first()
        return None if row is None else str(row[0])

    def files(self) -> list[str]:
        with self.db.connect() as conn:
            q = sa.select(kb_files.c.path).where(kb_files.c.kb == self.kb).order_by(kb_files.c.path.collate(_C))
            return list(conn.execute(q).scalars())

    def chunk_ids(self, file: str | None = None) -> set[str]:
        q = sa.select(kb_chunks.c.id).where(kb_chunks.c.kb == self.kb)
        if file is not None:
            q = q.where(kb_chunks.c.file == file)
        with self.db.connect() as conn:
            return set(conn.execute(q).scalars())

    def known(self, ids: Iterable[str]) -> set[str]:
        """The subset of ``ids`` the manifest holds (a query's candidates, not the whole KB)."""
        return {r[0] for r in self._select_in([kb_chunks.c.id], list(ids))}

    def ordered_ids(self) -> list[str]:
        """Every chunk id in stable (file, position) order."""
        with self.db.connect() as conn:
            return list(conn.execute(self._ordered(sa.select(kb_chunks.c.id))).scalars())

    def _ordered(self, q: sa.Select[Any]) -> sa.Select[Any]:
        return q.where(kb_chunks.c.kb == self.kb).order_by(kb_chunks.c.file.collate(_C), kb_chunks.c.seq)

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """Chunk texts by id (unknown ids are absent)."""
        return {r[0]: r[1] for r in self._select_in([kb_chunks.c.id, kb_chunks.c.text], ids)}

    def has_chunks(self) -> bool:
        with self.db.connect() as conn:
            return conn.execute(sa.select(kb_chunks.c.id).where(kb_chunks.c.kb == self.kb).limit(1)).first() is not None

    def counts(self) -> tuple[int, int]:
        with self.db.connect() as conn:
            f = conn.execute(sa.select(sa.func.count()).select_from(kb_files).where(kb_files.c.kb == self.kb))
            c = conn.execute(sa.select(sa.func.count()).select_from(kb_chunks).where(kb_chunks.c.kb == self.kb))
            return int(f.scalar_one()), int(c.scalar_one())

    def _select_in(self, columns: Sequence[sa.ColumnElement[Any]], ids: Sequence[str]) -> list[Sequence[Any]]:
        """``SELECT columns FROM kb_chunks WHERE id = ANY(ids)``: the ids are one array parameter."""
        if not ids:
            return []
        q = sa.select(*columns).where(kb_chunks.c.kb == self.kb, kb_chunks.c.id == sa.any_(sa.literal(list(ids), _IDS)))
        with self.db.connect() as conn:
            return [tuple(r) for r in conn.execute(q)]

    # -- writes -------------------------------------------------------------------------------
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
        """Commit one batch of a file's ``(position, chunk)`` rows; return the ids dropped
        (:meth:`crag.store.manifest.Manifest.write_chunks`, in one transaction here too)."""
        with self.db.connect(write=True) as conn:
            if chunks:
                rows = [
                    {
                        "kb": self.kb,
                        "id": c.id,
                        "file": file,
                        "seq": n,
                        "source": c.source,
                        "title": c.title,
                        "url": c.url,
                        "text": c.text,
                        "metadata": dict(c.metadata),
                    }
                    for n, c in chunks
                ]
                stmt = self.db.insert(kb_chunks)
                new = {k: stmt.excluded[k] for k in ("file", "seq", "source", "title", "url", "text", "metadata")}
                conn.execute(stmt.on_conflict_do_update(index_elements=["kb", "id"], set_=new), rows)
            of_file = (kb_chunks.c.kb == self.kb, kb_chunks.c.file == file)
            dropped: set[str] = set()
            if final:
                old = set(conn.execute(sa.select(kb_chunks.c.id).where(*of_file)).scalars())
                dropped = old - (keep if keep is not None else old)
                if dropped:
                    gone = kb_chunks.c.id == sa.any_(sa.literal(sorted(dropped), _IDS))
                    conn.execute(sa.delete(kb_chunks).where(kb_chunks.c.kb == self.kb, gone))
            count = conn.execute(sa.select(sa.func.count()).select_from(kb_chunks).where(*of_file)).scalar_one()
            marked = sha if final else PARTIAL + sha
            row = {"kb": self.kb, "path": file, "sha256": marked, "n_chunks": int(count), "ingested_at": when}
            stmt = self.db.insert(kb_files).values(**row)
            conn.execute(stmt.on_conflict_do_update(index_elements=["kb", "path"], set_=row))
            if final and document is not None:
                dropped |= self._write_document(conn, document)
            self._bump(conn)
        return dropped

    def remove_files(self, files: Iterable[str]) -> set[str]:
        """Forget files; return the chunk ids that were removed."""
        dropped: set[str] = set()
        with self.db.connect(write=True) as conn:
            for f in files:
                dropped |= self._delete_file(conn, f)
            self._bump(conn)
        return dropped

    def _delete_file(self, conn: sa.Connection, file: str) -> set[str]:
        """Forget a file: its chunks, its files row and its document; return its chunk ids."""
        gone = conn.execute(
            sa.delete(kb_chunks).where(kb_chunks.c.kb == self.kb, kb_chunks.c.file == file).returning(kb_chunks.c.id)
        )
        ids = set(gone.scalars())
        conn.execute(sa.delete(kb_files).where(kb_files.c.kb == self.kb, kb_files.c.path == file))
        conn.execute(sa.delete(kb_documents).where(kb_documents.c.kb == self.kb, kb_documents.c.file == file))
        return ids

    def _write_document(self, conn: sa.Connection, doc: DocumentRecord) -> set[str]:
        """:func:`crag.store.documents.write_row`: another file holding the id is the previous version."""
        dropped: set[str] = set()
        others = sa.select(kb_documents.c.file).where(
            kb_documents.c.kb == self.kb, kb_documents.c.id == doc.id, kb_documents.c.file != doc.file
        )
        for other in list(conn.execute(others).scalars()):
            dropped |= self._delete_file(conn, other)
        row = {
            "kb": self.kb,
            "file": doc.file,
            "id": doc.id,
            "name": doc.name,
            "metadata": dict(doc.metadata),
            "content": doc.content,
            "version": doc.version,
            "title": doc.title,
            "url": doc.url,
        }
        stmt = self.db.insert(kb_documents).values(**row)
        conn.execute(stmt.on_conflict_do_update(index_elements=["kb", "file"], set_=row))
        return dropped

    def set_metadata(self, chunks: Sequence[Chunk]) -> None:
        """Rewrite the metadata of ``chunks`` (same ids), in one transaction."""
        if not chunks:
            return
        stmt = (
            sa.update(kb_chunks)
            .where(kb_chunks.c.kb == self.kb, kb_chunks.c.id == sa.bindparam("cid"))
            .values(metadata=sa.bindparam("meta", type_=kb_chunks.c.metadata.type))
        )
        with self.db.connect(write=True) as conn:
            conn.execute(stmt, [{"cid": c.id, "meta": dict(c.metadata)} for c in chunks])

    # -- chunks -------------------------------------------------------------------------------
    def chunks(self, ids: Sequence[str] | None = None) -> list[Chunk]:
        """Chunks by id (input order; unknown ids skipped) or all chunks (stable order)."""
        cols = [*_CHUNK_COLS, kb_chunks.c.metadata]
        if ids is None:
            with self.db.connect() as conn:
                return [_chunk(r) for r in conn.execute(self._ordered(sa.select(*cols)))]
        rows = self._select_in(cols, ids)
        order = {cid: n for n, cid in enumerate(ids)}
        rows.sort(key=lambda r: order[r[0]])
        return [_chunk(r) for r in rows]

    def chunk_file(self, chunk_id: str) -> str | None:
        """The file a chunk belongs to (None for an unknown id)."""
        with self.db.connect() as conn:
            row = conn.execute(
                sa.select(kb_chunks.c.file).where(kb_chunks.c.kb == self.kb, kb_chunks.c.id == chunk_id)
            ).first()
        return None if row is None else str(row[0])

    def chunks_of(self, file: str, offset: int = 0, limit: int = 100) -> list[Chunk]:
        """A file's chunks in file order, ``limit`` of them from ``offset``."""
        q = (
            sa.select(*_CHUNK_COLS, kb_chunks.c.metadata)
            .where(kb_chunks.c.kb == self.kb, kb_chunks.c.file == file)
            .order_by(kb_chunks.c.seq)
            .limit(limit)
            .offset(offset)
        )
        with self.db.connect() as conn:
            return [_chunk(r) for r in conn.execute(q)]

    def metadata_rows(self, after: str, limit: int) -> list[Chunk]:
        """Chunks with metadata, in id order after ``after`` (a batch of a metadata upgrade)."""
        q = (
            sa.select(*_CHUNK_COLS, kb_chunks.c.metadata)
            .where(kb_chunks.c.kb == self.kb, kb_chunks.c.id.collate(_C) > after)
            .where(sa.text("kb_chunks.metadata <> '{}'::jsonb"))
            .order_by(kb_chunks.c.id.collate(_C))
            .limit(limit)
        )
        with self.db.connect() as conn:
            return [_chunk(r) for r in conn.execute(q)]

    # -- documents ----------------------------------------------------------------------------
    def _documents(self, *where: sa.ColumnElement[bool]) -> sa.Select[Any]:
        d, f = kb_documents.c, kb_files.c
        joined = kb_documents.join(kb_files, sa.and_(f.kb == d.kb, f.path == d.file))
        cols = (d.id, d.file, d.name, d.metadata, d.content, d.version, d.title, d.url, f.n_chunks, f.ingested_at)
        return sa.select(*cols, f.sha256).select_from(joined).where(d.kb == self.kb, *where)

    def _read_documents(self, q: sa.Select[Any]) -> list[DocumentRecord]:
        with self.db.connect() as conn:
            rows = conn.execute(q).all()
        return [
            DocumentRecord(
                id=r[0],
                file=r[1],
                name=r[2],
                metadata={str(k): str(v) for k, v in dict(r[3] or {}).items()},
                content=r[4],
                version=int(r[5]),
                title=r[6],
                url=r[7],
                chunks=int(r[8]),
                ingested_at=r[9],
                partial=str(r[10]).startswith(PARTIAL),
            )
            for r in rows
        ]

    def document(self, file: str) -> DocumentRecord | None:
        """The document of ``file`` (None for a file not ingested, or not yet complete)."""
        found = self._read_documents(self._documents(kb_documents.c.file == file))
        return found[0] if found else None

    def document_by_id(self, doc_id: str) -> DocumentRecord | None:
        found = self._read_documents(self._documents(kb_documents.c.id == doc_id))
        return found[0] if found else None

    def documents(self, offset: int = 0, limit: int = 50) -> list[DocumentRecord]:
        """A page of the documents, by name (then id)."""
        d = kb_documents.c
        q = self._documents().order_by(d.name.collate(_C), d.id.collate(_C)).limit(limit).offset(offset)
        return self._read_documents(q)

    def all_documents(self) -> list[DocumentRecord]:
        return self._read_documents(self._documents())

    def count_documents(self) -> int:
        with self.db.connect() as conn:
            q = sa.select(sa.func.count()).select_from(kb_documents).where(kb_documents.c.kb == self.kb)
            return int(conn.execute(q).scalar_one())

    def stored_metadata(self, file: str) -> dict[str, str]:
        """A file's metadata given on purpose: its document's, else what all its chunks share."""
        doc = self.document(file)
        if doc is not None:
            return dict(doc.metadata)
        with self.db.connect() as conn:
            return self._common_metadata(conn, file)

    def _common_metadata(self, conn: sa.Connection, file: str) -> dict[str, str]:
        q = sa.select(kb_chunks.c.metadata).where(kb_chunks.c.kb == self.kb, kb_chunks.c.file == file)
        common: dict[str, str] | None = None
        for meta in conn.execute(q).scalars():
            if not isinstance(meta, Mapping):
                return {}
            pairs = {str(k): str(v) for k, v in meta.items()}
            common = pairs if common is None else {k: v for k, v in common.items() if pairs.get(k) == v}
            if not common:
                return {}
        return common or {}

    def upgrade_documents(self) -> int:
        """Give every complete file without a documents row one; return how many.

        Every commit here writes its document with its chunks, so this finds nothing unless a
        file was committed without one; it marks the knowledge base done either way.
        """
        d, f = kb_documents.c, kb_files.c
        missing_q = (
            sa.select(f.path)
            .select_from(kb_files.outerjoin(kb_documents, sa.and_(d.kb == f.kb, d.file == f.path)))
            .where(f.kb == self.kb, d.file.is_(None), sa.not_(f.sha256.startswith(PARTIAL, autoescape=True)))
        )
        with self.db.connect(write=True) as conn:
            missing = list(conn.execute(missing_q).scalars())
            for file in missing:
                first = conn.execute(
                    sa.select(kb_chunks.c.title, kb_chunks.c.url)
                    .where(kb_chunks.c.kb == self.kb, kb_chunks.c.file == file)
                    .order_by(kb_chunks.c.seq)
                    .limit(1)
                ).first()
                title, url = (first[0], first[1]) if first else ("", "")
                meta = self._common_metadata(conn, file)
                doc = DocumentRecord(path_id(file), file, PurePath(file).name, meta, "", 1, title, url)
                self._write_document(conn, doc)
            self._put_meta(conn, DOCUMENTS_IN_MANIFEST, "1")
        return len(missing)

    # -- metadata filters -----------------------------------------------------------------------
    def filtered_ids(self, filters: Filters) -> set[str]:
        """Ids of the chunks whose fields match ``filters`` (:mod:`crag.metadata`): one flat query,
        one ``= ANY(array)`` condition per key (``source``/``title``/``url`` are columns; other
        keys are read from the ``jsonb`` metadata with ``->>``, so a dotted key is one key)."""
        conds: list[sa.ColumnElement[bool]] = [kb_chunks.c.kb == self.kb]
        for key, values in filters.items():
            if not is_key(key):
                raise ValueError(f"filter key {key!r} is not a metadata key")
            field = kb_chunks.c[key] if key in CHUNK_FIELDS else kb_chunks.c.metadata[key].as_string()
            conds.append(field == sa.any_(sa.literal([str(v) for v in values], _IDS)))
        with self.db.connect() as conn:
            return set(conn.execute(sa.select(kb_chunks.c.id).where(*conds)).scalars())

    def metadata_keys(self) -> set[str]:
        """Every metadata key some chunk carries (the distinct metadata objects are few: documents share theirs)."""
        q = sa.text(
            "SELECT DISTINCT jsonb_object_keys(m.metadata) FROM "
            "(SELECT DISTINCT metadata FROM kb_chunks WHERE kb = :kb AND jsonb_typeof(metadata) = 'object') AS m"
        )
        with self.db.connect() as conn:
            return {r[0] for r in conn.execute(q, {"kb": self.kb}) if isinstance(r[0], str)}

    def metadata_values(self, key: str, limit: int) -> list[str]:
        """Up to ``limit`` distinct values of metadata ``key``, sorted (for a message that lists them)."""
        q = sa.text(
            'SELECT DISTINCT v FROM (SELECT (metadata ->> :key) COLLATE "C" AS v FROM kb_chunks WHERE kb = :kb) AS m '
            "WHERE v IS NOT NULL ORDER BY v LIMIT :n"
        )
        with self.db.connect() as conn:
            return [str(r[0]) for r in conn.execute(q, {"key": key, "kb": self.kb, "n": limit})]
