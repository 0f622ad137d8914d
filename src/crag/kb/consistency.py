"""The consistency part of a knowledge base: its manifest, vector store and write lock, in step.

Layout of the folder this part keeps consistent::

    kb/
      manifest.sqlite   files, chunk texts, generation counter  (the commit point)
      write.lock        one writer at a time, across processes
      chroma/           vectors from our embedder (or a Milvus file, or a server)

With ``kb.state_uri`` set, the manifest is in the shared database instead
(:class:`~crag.store.manifest_db.ManifestDB`, no ``manifest.sqlite``) and writers queue on an
advisory lock there (:class:`~crag.store.writelock_db.AdvisoryWriteLock`, no ``write.lock``),
so replicas on several machines with a shared vector store (a Milvus server) stay in step.

**Crash consistency.** A writer marks the manifest dirty (:data:`DIRTY`) before it writes
vectors, commits the manifest per file, and clears the mark when done, so a Ctrl-C or
``kill -9`` at any moment leaves either the old or the new version of a file. Vectors the
manifest does not know are orphans: the next writer deletes them (:meth:`Consistency.warm_up`,
:meth:`Consistency.writing`). Listing every id costs seconds at a million chunks, so that
scan runs only when the mark is set or the counts disagree.

**Several processes.** Writes hold the write lock one at a time, and each commit bumps the
manifest's generation. A reader remembers the generation its vector store view reflects; when
the manifest is ahead it reopens the store (a :class:`~crag.protocols.RefreshableStore`)
before searching, taking the lock only briefly and without waiting (docs/concurrency.md).

>>> manifest = open_manifest(Path("kb"), embedder.model_id)            # doctest: +SKIP
>>> state = Consistency(Path("kb"), manifest, vectors)                  # doctest: +SKIP
>>> state.warm_up()                      # clean up after an interrupted write  # doctest: +SKIP
>>> with state.writing("ingest"):        # waits for another process's write    # doctest: +SKIP
...     state.mark_dirty(); write_vectors_then_commit(); state.mark_clean()
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from crag.errors import ConfigError, DiskFullError, KnowledgeBaseError, StoreError
from crag.paths import is_disk_full, make_folder
from crag.protocols import FilteringStore, RefreshableStore, ReleasableStore, VectorStore
from crag.store.backfill import METADATA_IN_STORE, backfill_metadata
from crag.store.documents import DOCUMENTS_IN_MANIFEST
from crag.store.manifest import Manifest
from crag.store.manifest_api import ManifestStore
from crag.store.writelock import KBWriteLock, WriteLock, check_writable

if TYPE_CHECKING:
    from crag.state.db import StateDB

__all__ = ["DIRTY", "Consistency", "open_manifest", "write_lock"]

DIRTY = "dirty"  # manifest meta key: "1" while vectors may disagree with the manifest


def open_manifest(path: Path, model_id: str, *, state: StateDB | None = None) -> ManifestStore:
    """The manifest of the knowledge base folder ``path`` (created if new), for embedder ``model_id``:
    ``manifest.sqlite`` there, or with ``state`` (the ``manifest`` group of a shared ``kb.state_uri``)
    the rows of its knowledge base name in that database.

    Refuses, in one line each, a folder that cannot be created or written and a knowledge base
    built with another embedder (its vectors would not be comparable).
    """
    make_folder(path, "knowledge base")
    check_writable(path)
    manifest: ManifestStore
    where = str(path)
    if state is not None:
        from crag.store.manifest_db import ManifestDB
        from crag.store.manifest_import import import_sqlite

        shared = ManifestDB(state)
        import_sqlite(path, shared, write_lock(path, state))  # a folder built before kb.state_uri was set
        manifest, where = shared, f"{state.scope!r} in {state.display}"
    else:
        manifest = Manifest(path / "manifest.sqlite")
    stored = manifest.get_meta("embedder")
    if stored is None:
        manifest.set_meta("embedder", model_id)
    elif stored != model_id:
        raise KnowledgeBaseError(
            f"knowledge base {where} was built with embedder {stored!r}, not {model_id!r}; "
            "use the same embedder or ingest into a new --kb folder"
        )
    return manifest


def write_lock(path: Path, state: StateDB | None = None) -> KBWriteLock:
    """The lock writers of this knowledge base queue on: ``<path>/write.lock``, or with ``state``
    (a shared ``kb.state_uri``) an advisory lock on its name in that database."""
    if state is None:
        return WriteLock(path / "write.lock")
    from crag.store.writelock_db import AdvisoryWriteLock

    return AdvisoryWriteLock(state)


class Consistency:
    """Keeps a knowledge base's vector store in step with its manifest, across processes.

    ``text_in_store``: the store keeps each chunk's text (its own keyword search), so the
    metadata upgrade re-sends it.

    ### Usage example
    >>> import tempfile
    >>> from crag.store.factory import make_vector_store
    >>> kb = Path(tempfile.mkdtemp()) / "kb"
    >>> state = Consistency(kb, open_manifest(kb, "hash-embedder"), make_vector_store(None, kb))
    >>> state.warm_up()
    >>> with state.writing("ingest"):
    ...     state.mark_dirty()
    ...     state.mark_clean()
    >>> state.manifest.get_meta(DIRTY), state.view == state.manifest.generation
    ('0', True)
    """

    def __init__(
        self,
        path: Path,
        manifest: ManifestStore,
        vectors: VectorStore,
        *,
        text_in_store: bool = False,
        lock: KBWriteLock | None = None,
    ) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self.vectors = vectors
        self.text_in_store = text_in_store
        self.lock = lock if lock is not None else write_lock(self.path)
        # The manifest generation our vector store view reflects (taken before the store opens,
        # so a write in between only costs one needless refresh, never a missed one).
        self.view = manifest.generation
        self._view_lock = threading.Lock()
        self._released = False  # the store's in-memory index was dropped (see release_vectors)

    @property
    def released(self) -> bool:
        """True while the vector store's in-memory index is dropped (the next search reloads it)."""
        return self._released

    def warm_up(self) -> None:
        """Delete orphan vectors of an interrupted write and bring old knowledge bases up to date,
        when no other process is writing (a busy writer cleans up after itself; never under its feet)
        and the disk has room (a manifest opened read-only on a full disk is left as it is)."""
        held = self.lock.try_hold() if not self.manifest.read_only else None
        if held is not None:
            with held:
                try:
                    self._reconcile()
                    self._upgrade()
                except (DiskFullError, StoreError) as exc:
                    # No room to clean up or upgrade: leave it for the next writer. Questions go
                    # on (orphan vectors are filtered by the manifest; a store that cannot open
                    # even read-only leaves keyword search), and every write is refused anyway.
                    if not is_disk_full(self.path, exc):
                        raise

    # -- writes ------------------------------------------------------------------------
    @contextmanager
    def writing(self, what: str) -> Iterator[None]:
        """Hold the write lock (waiting for another process's write, up to
        ``crag.store.writelock.WRITE_TIMEOUT``), having seen every committed write first."""
        with self.lock.hold(what=what):
            self._catch_up()
            yield
            self.view = self.manifest.generation

    def mark_dirty(self) -> None:
        """Before writing vectors: they may disagree with the manifest until :meth:`mark_clean`."""
        self.manifest.set_meta(DIRTY, "1")

    def mark_clean(self) -> None:
        """After the manifest commit: every vector the store holds is committed."""
        self.manifest.set_meta(DIRTY, "0")

    def release_vectors(self) -> None:
        """Under the write lock: drop the store's in-memory index (a :class:`ReleasableStore`);
        the next search reloads it (:meth:`follow_writes`). Other stores keep theirs."""
        if isinstance(self.vectors, ReleasableStore):
            self.vectors.release()
            self._released = True

    def _catch_up(self) -> None:
        """Under the write lock: see every committed write, then drop orphan vectors."""
        if self.manifest.generation != self.view or self.manifest.get_meta(DIRTY) == "1":
            # Another process wrote (or died writing): our store view may lack its vectors.
            self._refresh_store()
        self._reconcile()
        self._upgrade()
        self.view = self.manifest.generation

    def _reconcile(self) -> None:
        # The "dirty" mark is set before vectors are written and cleared after the manifest
        # commit; a count mismatch catches stores written by older versions.
        if self.manifest.get_meta(DIRTY) != "1" and self.vectors.count() == self.manifest.counts()[1]:
            return
        orphans = self.vectors.all_ids() - self.manifest.chunk_ids()
        if orphans:
            self.vectors.delete(sorted(orphans))
        self.mark_clean()

    def _upgrade(self) -> None:
        """Under the write lock: give the vector store the metadata of chunks ingested before
        crag stored it there (once per knowledge base; see :mod:`crag.store.backfill`), and
        each file ingested before documents its documents row (:mod:`crag.store.documents`)."""
        if self.manifest.get_meta(METADATA_IN_STORE) != "1":
            backfill_metadata(self.manifest, self.vectors, text_in_store=self.text_in_store)
        if self.manifest.get_meta(DOCUMENTS_IN_MANIFEST) != "1":
            self.manifest.upgrade_documents()  # files ingested before documents had rows

    def _refresh_store(self) -> None:
        if isinstance(self.vectors, RefreshableStore):
            self.vectors.refresh()

    # -- reads -------------------------------------------------------------------------
    def follow_writes(self) -> None:
        """Before a search: if another process committed since our view, reopen the store.

        Cheap when nothing changed (one SQLite read). The reopen waits for no one: while a
        writer holds the lock we keep the old view (its ids the manifest no longer knows are
        filtered, and chunks it lacks are found by keyword) and try again next search.
        """
        gen = self.manifest.generation
        if (gen == self.view and not self._released) or not self._view_lock.acquire(blocking=False):
            return
        try:
            held = self.lock.try_hold()
            if held is None:
                return
            with held:
                if self._released and isinstance(self.vectors, ReleasableStore):
                    self.vectors.warm_up()  # here, where no writer can be persisting the index
                self._released = False
                gen = self.manifest.generation
                if gen != self.view:
                    self._refresh_store()
                    self.view = gen
        finally:
            self._view_lock.release()

    def reopen(self) -> bool:
        """Reopen the vector store now (after a failed query), unless a writer holds the lock.

        Returns whether it was reopened; a failing reopen raises the store's ``StoreError``.
        """
        held = self.lock.try_hold()
        if held is None:
            return False
        with held:
            self._refresh_store()
            self.view = self.manifest.generation
        return True

    def require_chunks(self) -> None:
        """Raise the "empty knowledge base" error, with the command that fixes it."""
        if not self.manifest.has_chunks():
            raise KnowledgeBaseError(
                f"knowledge base {self.path} is empty; add documents with `crag ingest PATH --kb {self.path}`"
            )

    def filtering_store(self) -> FilteringStore:
        """The vector store, if it can filter by metadata and holds every chunk's metadata."""
        if not isinstance(self.vectors, FilteringStore):
            raise ConfigError(
                f"the vector store {type(self.vectors).__name__} cannot filter by metadata "
                "(it is not a crag.protocols.FilteringStore)"
            )
        if self.manifest.get_meta(METADATA_IN_STORE) != "1":
            raise KnowledgeBaseError(
                f"knowledge base {self.path} is being upgraded for metadata filters by another process; "
                "ask again in a moment"
            )
        return self.vectors
