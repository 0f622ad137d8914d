"""Embed and commit files in bounded batches: the write half of ``KnowledgeBase.ingest``.

Files are read as a stream of chunks (``crag.ingest.stream``) and cut into *segments* of at
most ``commit_chunks`` chunks. Each segment's new chunks are embedded, their vectors written,
and then the segment is committed to the manifest in one transaction, so memory holds one
segment (or, with embedding workers, one window of segments) however large the file is.

- A file that fits in one segment commits all at once, as before: old or new version, never
  a mix.
- A larger file commits segment by segment. Its committed chunks are searchable at once;
  until its last segment the manifest marks it ``partial:<sha>``, and the next ingest of the
  same content finds the committed chunks by id, embeds only the rest and finishes the file.
  While a file that was already ingested is being updated, its old chunks stay searchable
  beside the new ones until the last segment drops them.

Progress is reported in bytes of input (``done, total, file``), from the byte offset each
chunk came from, so a 100 MB file shows steady progress.

>>> report = IngestReport()
>>> report.files.append(FileResult("/data/a.txt", "added", 3))
>>> report.count("added"), report.chunks_written
(1, 3)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crag.errors import CragError
from crag.ingest.limits import DEFAULT_LIMITS, InputLimits
from crag.ingest.load import printable_path
from crag.ingest.parallel import EmbedPool
from crag.ingest.stream import FileScan, file_chunks, scan
from crag.metadata import chunk_fields, fingerprint
from crag.protocols import Embedder, Progress, VectorStore
from crag.store.manifest import PARTIAL, Manifest
from crag.types import Chunk

__all__ = ["COMMIT_CHUNKS", "EMBED_BATCH", "FileResult", "IngestReport", "plan_files", "write_files"]

COMMIT_CHUNKS = 256  # a large file is embedded and committed this many chunks at a time
EMBED_BATCH = 32  # texts per embedder call
PARALLEL_WINDOW = 2048  # new chunks embedded together when several workers embed


@dataclass
class FileResult:
    path: str
    status: str  # added | updated | unchanged | skipped | removed
    chunks: int = 0
    reason: str = ""


@dataclass
class IngestReport:
    """What an ingest run did, file by file."""

    files: list[FileResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def chunks_written(self) -> int:
        return sum(f.chunks for f in self.files if f.status in ("added", "updated"))

    @property
    def skipped(self) -> list[FileResult]:
        return [f for f in self.files if f.status == "skipped"]


@dataclass
class FileJob:
    """A file to (re-)ingest: its manifest key, scan, and what the manifest held before."""

    key: str
    path: Path
    info: FileScan
    previous: str | None  # manifest sha before this run: None, a sha, or "partial:<sha>"
    base: int = 0  # bytes of the run's earlier files, for progress
    ids: set[str] = field(default_factory=set)  # every chunk id of the new version, filled as read
    meta: Mapping[str, str] = field(default_factory=dict)  # the ingest's metadata (--meta) for its documents


@dataclass
class Segment:
    """Consecutive chunks of one file: ``(position, chunk, run byte offset)`` each."""

    job: FileJob
    items: list[tuple[int, Chunk, int]]
    first: bool
    last: bool


def plan_files(
    files: Sequence[Path], manifest: Manifest, report: IngestReport, meta: Mapping[str, str] | None = None
) -> list[FileJob]:
    """Hash each file (streamed); unchanged ones are reported and left out, unreadable skipped.

    With ``meta`` a file's version is its content *and* that metadata: ingesting it again with
    other metadata rewrites it (its chunks get the new metadata), the same metadata skips it.
    """
    jobs: list[FileJob] = []
    base = 0
    meta = dict(meta or {})
    for f in files:
        key = str(Path(f).resolve())
        try:
            info = scan(Path(f))
        except CragError as exc:  # no longer a regular file (swapped for a FIFO since it was listed)
            report.files.append(FileResult(key, "skipped", reason=str(exc)))
            continue
        except OSError as exc:
            report.files.append(FileResult(key, "skipped", reason=f"cannot read {printable_path(f)}: {exc.strerror}"))
            continue
        if meta:
            tagged = hashlib.sha256(f"{info.sha256}\0{fingerprint(meta)}".encode()).hexdigest()
            info = dataclasses.replace(info, sha256=tagged)
        previous = manifest.file_sha(key)
        if previous == info.sha256:
            report.files.append(FileResult(key, "unchanged", len(manifest.chunk_ids(key))))
            continue
        jobs.append(FileJob(key, Path(f), info, previous, base, meta=meta))
        base += info.size
    return jobs


def _segments(
    jobs: Iterable[FileJob], *, size: int, overlap: int, batch: int, report: IngestReport, limits: InputLimits
) -> Iterator[Segment]:
    """Each file's chunks in segments of at most ``batch``; unreadable files are reported skipped."""
    for job in jobs:
        buf: list[tuple[int, Chunk, int]] = []
        first, seq = True, 0
        try:
            chunks = file_chunks(
                job.path,
                job.info,
                size=size,
                overlap=overlap,
                warnings=report.warnings,
                metadata=job.meta,
                limits=limits,
            )
            for chunk, offset in chunks:
                job.ids.add(chunk.id)
                buf.append((seq, chunk, job.base + offset))
                seq += 1
                if len(buf) > batch:  # one chunk of look-ahead: this segment is not the file's last
                    yield Segment(job, buf[:batch], first, last=False)
                    buf, first = buf[batch:], False
        except CragError as exc:
            report.files.append(FileResult(job.key, "skipped", reason=str(exc)))
            continue
        except OSError as exc:
            reason = f"cannot read {printable_path(job.path)}: {exc.strerror}; run the ingest again"
            report.files.append(FileResult(job.key, "skipped", reason=reason))
            continue
        if buf:
            yield Segment(job, buf, first, last=True)
        elif first:
            report.files.append(FileResult(job.key, "skipped", reason=f"{printable_path(job.path)}: no text to index"))


def _windows(segments: Iterator[Segment], size: int) -> Iterator[list[Segment]]:
    """Consecutive segments holding about ``size`` chunks each (one segment each when size is 0)."""
    group: list[Segment] = []
    n = 0
    for seg in segments:
        group.append(seg)
        n += len(seg.items)
        if n >= size:
            yield group
            group, n = [], 0
    if group:
        yield group


def write_files(
    jobs: Sequence[FileJob],
    *,
    manifest: Manifest,
    vectors: VectorStore,
    embedder: Embedder,
    pool: EmbedPool | None,
    report: IngestReport,
    size: int,
    overlap: int,
    commit_chunks: int,
    text_in_store: bool = False,
    progress: Progress | None = None,
    limits: InputLimits = DEFAULT_LIMITS,
) -> None:
    """Embed and commit ``jobs`` segment by segment (see the module docstring)."""
    total = sum(j.info.size for j in jobs)
    reached = 0

    def advance(offset: int, key: str) -> None:
        nonlocal reached
        if progress and offset > reached:  # never backwards: a window's files commit after it embeds
            reached = offset
            progress(offset, total, key)

    if progress:
        progress(0, total, "")
    segments = _segments(jobs, size=size, overlap=overlap, batch=commit_chunks, report=report, limits=limits)
    for group in _windows(segments, PARALLEL_WINDOW if pool else 0):
        # Chunks committed before (an interrupted run, an unchanged passage) keep their vectors.
        known = manifest.known([c.id for s in group for _, c, _ in s.items])
        new: dict[str, tuple[Chunk, int, str]] = {}
        for s in group:
            for _, c, offset in s.items:
                if c.id not in known:
                    new.setdefault(c.id, (c, offset, s.job.key))
        todo = list(new.values())

        def report_progress(done: int, _total: int, todo: list[tuple[Chunk, int, str]] = todo) -> None:
            if done:
                advance(todo[done - 1][1], todo[done - 1][2])

        if pool is not None:
            vecs = pool.embed([c.text for c, _, _ in todo], report_progress)
            for i in range(0, len(todo), EMBED_BATCH):
                part = [c for c, _, _ in todo[i : i + EMBED_BATCH]]
                _upsert(vectors, part, vecs[i : i + EMBED_BATCH], text_in_store)
        else:
            for i in range(0, len(todo), EMBED_BATCH):
                part = [c for c, _, _ in todo[i : i + EMBED_BATCH]]
                vec = embedder.embed([c.text for c in part], kind="passage")
                _upsert(vectors, part, vec, text_in_store)
                report_progress(i + len(part), len(todo))
        for s in group:
            _commit(s, manifest, vectors, report)
            advance(s.items[-1][2], s.job.key)


def _upsert(vectors: VectorStore, chunks: list[Chunk], vecs: np.ndarray, text_in_store: bool) -> None:
    metas = [chunk_fields(c, with_text=text_in_store) for c in chunks]
    vectors.upsert([c.id for c in chunks], vecs, metas)


def _commit(seg: Segment, manifest: Manifest, vectors: VectorStore, report: IngestReport) -> None:
    job = seg.job
    if seg.first and seg.last:
        dropped = manifest.replace_file(job.key, job.info.sha256, [c for _, c, _ in seg.items], _now())
    else:
        items = [(n, c) for n, c, _ in seg.items]
        keep = job.ids if seg.last else None
        dropped = manifest.write_chunks(job.key, job.info.sha256, items, _now(), final=seg.last, keep=keep)
    # Chunk ids are content hashes: one shared by another file must stay in the vector store.
    if dropped:
        gone = dropped - manifest.known(sorted(dropped))
        vectors.delete(sorted(gone))
    if seg.last:
        resumed = job.previous == PARTIAL + job.info.sha256
        existed = job.previous is not None and not resumed
        reason = "resumed an interrupted ingest" if resumed else ""
        report.files.append(FileResult(job.key, "updated" if existed else "added", seg.items[-1][0] + 1, reason))
        job.ids = set()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
