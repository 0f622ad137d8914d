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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crag.errors import CragError
from crag.ingest.chunk import chunk_id
from crag.ingest.limits import DEFAULT_LIMITS, InputLimits
from crag.ingest.load import printable_path
from crag.ingest.parallel import EmbedPool
from crag.ingest.stream import FileScan, file_chunks, scan
from crag.metadata import chunk_fields, fingerprint
from crag.protocols import Embedder, Progress, VectorStore
from crag.store.documents import DocumentRecord, path_id
from crag.store.manifest import PARTIAL
from crag.store.manifest_api import ManifestStore
from crag.types import Chunk

__all__ = [
    "COMMIT_CHUNKS",
    "EMBED_BATCH",
    "METADATA_ONLY",
    "DocName",
    "FileResult",
    "IngestReport",
    "plan_files",
    "write_files",
]

COMMIT_CHUNKS = 256  # a large file is embedded and committed this many chunks at a time
EMBED_BATCH = 32  # texts per embedder call
PARALLEL_WINDOW = 2048  # new chunks embedded together when several workers embed
METADATA_ONLY = "metadata changed, content unchanged"  # the reason of such an update (its vectors are reused)


@dataclass
class FileResult:
    """What one ingest or removal did to one file. ``document`` is its document's id;
    ``metadata_changed`` says the document's metadata changed (set, replaced or cleared)."""

    path: str
    status: str  # added | updated | unchanged | skipped | removed
    chunks: int = 0
    reason: str = ""
    document: str = ""
    metadata_changed: bool = False


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
    def metadata_changed(self) -> int:
        """Documents whose metadata this run changed (set, replaced or cleared)."""
        return sum(1 for f in self.files if f.metadata_changed)

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
    meta: Mapping[str, str] = field(default_factory=dict)  # the document's metadata (--meta, kept or cleared)
    document: DocumentRecord | None = None  # its documents row, committed with its last chunks
    reuse: Mapping[str, str] | None = None  # the old metadata when only metadata changed: vectors are reused
    metadata_changed: bool = False
    replaces: bool = False  # the next version of a document another file held
    first: Chunk | None = None  # the first chunk read (the document's title and url)


@dataclass(frozen=True)
class DocName:
    """How a file's document is known: its id and the name clients see (an upload names both)."""

    id: str
    name: str


@dataclass
class Segment:
    """Consecutive chunks of one file: ``(position, chunk, run byte offset)`` each."""

    job: FileJob
    items: list[tuple[int, Chunk, int]]
    first: bool
    last: bool


def plan_files(
    files: Sequence[Path],
    manifest: ManifestStore,
    report: IngestReport,
    meta: Mapping[str, str] | None = None,
    *,
    clear: bool = False,
    names: Mapping[str, DocName] | None = None,
    display: Callable[[Path], str] = lambda p: p.name,
) -> list[FileJob]:
    """Hash each file (streamed); unchanged ones are reported and left out, unreadable skipped.

    A document's metadata is ``meta`` when given, nothing with ``clear``, and otherwise what
    it had (:mod:`crag.store.documents`): a plain re-ingest keeps it. A file's version is
    its content *and* that metadata, so new metadata rewrites it (its chunks get the new
    metadata, their vectors reused), the same metadata skips it. ``names`` gives a file's
    document id and name (uploads); otherwise a new document is ``display(path)``, with an
    id from its path, and a known one keeps its own.
    """
    jobs: list[FileJob] = []
    base = 0
    given = dict(meta) if meta is not None else None
    for f in files:
        key = str(Path(f).resolve())
        info = _scan_or_skip(Path(f), key, report)
        if info is None:
            continue
        prior = _prior(manifest, key, (names or {}).get(key))
        effective = {} if clear else given if given is not None else prior.stored
        content = info.sha256
        if effective:
            tagged = hashlib.sha256(f"{content}\0{fingerprint(effective)}".encode()).hexdigest()
            info = dataclasses.replace(info, sha256=tagged)
        doc_id = prior.doc.id if prior.doc is not None else path_id(key)
        if prior.sha == info.sha256:
            report.files.append(FileResult(key, "unchanged", len(manifest.chunk_ids(key)), document=doc_id))
            continue
        jobs.append(_job(Path(f), key, info, prior, effective, content, base=base, display=display))
        base += info.size
    return jobs


@dataclass
class _Prior:
    """What the manifest holds for a file about to be ingested, and the name it is given."""

    sha: str | None  # the manifest's sha of the file (None when new)
    doc: DocumentRecord | None  # the document this file is the next version of
    stored: dict[str, str]  # that document's metadata
    replaced: bool  # the document was held by another file
    named: DocName | None


def _scan_or_skip(path: Path, key: str, report: IngestReport) -> FileScan | None:
    """The file's size and hash (streamed), or None with the file reported skipped."""
    try:
        return scan(path)
    except CragError as exc:  # no longer a regular file (swapped for a FIFO since it was listed)
        report.files.append(FileResult(key, "skipped", reason=str(exc)))
    except OSError as exc:
        report.files.append(FileResult(key, "skipped", reason=f"cannot read {printable_path(path)}: {exc.strerror}"))
    return None


def _prior(manifest: ManifestStore, key: str, named: DocName | None) -> _Prior:
    """The file's version in the manifest and the document it continues."""
    previous = manifest.file_sha(key)
    doc = manifest.document(key) if previous is not None else None
    stored = manifest.stored_metadata(key) if previous is not None else {}
    # An upload under a new file name (report.md sent again as report.pdf) is the next
    # version of the document that holds its id: it keeps that document's metadata.
    replaced = manifest.document_by_id(named.id) if named and doc is None else None
    if replaced is not None and replaced.file != key:
        doc, stored = replaced, dict(replaced.metadata)
    return _Prior(previous, doc, stored, replaced is not None, named)


def _job(
    path: Path,
    key: str,
    info: FileScan,
    prior: _Prior,
    effective: dict[str, str],
    content: str,
    *,
    base: int,
    display: Callable[[Path], str],
) -> FileJob:
    """The job that writes the file's new version: its documents row, and whether only its
    metadata changed (then the stored vectors are reused)."""
    doc, named = prior.doc, prior.named
    record = DocumentRecord(
        id=named.id if named else doc.id if doc is not None else path_id(key),
        file=key,
        name=named.name if named else doc.name if doc is not None else display(path),
        metadata=dict(effective),
        content=content,
        version=doc.version + 1 if doc is not None else 1,
    )
    changed = doc is not None and effective != prior.stored
    same_file = doc is not None and doc.file == key and doc.content == content
    reuse = prior.stored if changed and same_file else None
    job = FileJob(key, path, info, prior.sha, base, meta=effective, document=record, reuse=reuse)
    job.metadata_changed, job.replaces = changed, prior.replaced
    return job


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
                if job.first is None:
                    job.first = chunk
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
    manifest: ManifestStore,
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
    advance = _Advance(progress, sum(j.info.size for j in jobs))
    if progress:
        progress(0, advance.total, "")
    segments = _segments(jobs, size=size, overlap=overlap, batch=commit_chunks, report=report, limits=limits)
    for group in _windows(segments, PARALLEL_WINDOW if pool else 0):
        todo = _to_embed(group, manifest, vectors, text_in_store)

        def report_progress(done: int, _total: int, todo: list[tuple[Chunk, int, str]] = todo) -> None:
            if done:
                advance(todo[done - 1][1], todo[done - 1][2])

        _embed_and_store(todo, pool, embedder, vectors, text_in_store, report_progress)
        for s in group:
            _commit(s, manifest, vectors, report)
            advance(s.items[-1][2], s.job.key)


@dataclass
class _Advance:
    """The run's progress in bytes, reported to ``progress``."""

    progress: Progress | None
    total: int
    reached: int = 0

    def __call__(self, offset: int, key: str) -> None:
        if self.progress and offset > self.reached:  # never backwards: a window's files commit after it embeds
            self.reached = offset
            self.progress(offset, self.total, key)


def _to_embed(
    group: list[Segment], manifest: ManifestStore, vectors: VectorStore, text_in_store: bool
) -> list[tuple[Chunk, int, str]]:
    """The window's chunks that need an embedding: ``(chunk, run byte offset, file key)`` each.

    Chunks committed before (an interrupted run, an unchanged passage) keep their vectors, and
    a chunk whose only change is its metadata gets its old vector stored under its new id here.
    """
    known = manifest.known([c.id for s in group for _, c, _ in s.items])
    new: dict[str, tuple[Chunk, int, str]] = {}
    jobs_of: dict[str, FileJob] = {}
    for s in group:
        for _, c, offset in s.items:
            if c.id not in known:
                new.setdefault(c.id, (c, offset, s.job.key))
                jobs_of.setdefault(c.id, s.job)
    reused = _reused([(c, jobs_of[c.id]) for c, _, _ in new.values()], vectors)
    if reused:
        part = [c for c, _, _ in new.values() if c.id in reused]
        _upsert(vectors, part, np.stack([reused[c.id] for c in part]), text_in_store)
    return [t for t in new.values() if t[0].id not in reused]


def _embed_and_store(
    todo: list[tuple[Chunk, int, str]],
    pool: EmbedPool | None,
    embedder: Embedder,
    vectors: VectorStore,
    text_in_store: bool,
    report_progress: Callable[[int, int], None],
) -> None:
    """Embed ``todo`` (on the pool's processes when there is one) and store the vectors in batches."""
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


def _reused(chunks: Sequence[tuple[Chunk, FileJob]], vectors: VectorStore) -> dict[str, np.ndarray]:
    """Stored vectors for chunks of documents whose text is unchanged and metadata changed.

    A chunk id covers its metadata (:func:`crag.ingest.chunk.chunk_id`), so such a chunk is
    new by id; its old id is worked out from the old metadata (a document's own fields are the
    keys whose value is not the new metadata's) and its vector read back. A guess that misses
    only costs an embedding.
    """
    old: dict[str, str] = {}
    for c, job in chunks:
        if job.reuse is not None:
            own = {k: v for k, v in c.metadata.items() if job.meta.get(k) != v}
            old[chunk_id(c.source, c.text, fingerprint({**job.reuse, **own}))] = c.id
    if not old:
        return {}
    found = vectors.vectors(sorted(old))
    return {old[i]: np.asarray(v, dtype=np.float32) for i, v in found.items()}


def _upsert(vectors: VectorStore, chunks: list[Chunk], vecs: np.ndarray, text_in_store: bool) -> None:
    metas = [chunk_fields(c, with_text=text_in_store) for c in chunks]
    vectors.upsert([c.id for c in chunks], vecs, metas)


def _commit(seg: Segment, manifest: ManifestStore, vectors: VectorStore, report: IngestReport) -> None:
    job = seg.job
    doc = job.document
    if doc is not None and job.first is not None:
        doc = dataclasses.replace(doc, title=job.first.title, url=job.first.url)
    if seg.first and seg.last:
        dropped = manifest.replace_file(job.key, job.info.sha256, [c for _, c, _ in seg.items], _now(), document=doc)
    else:
        items = [(n, c) for n, c, _ in seg.items]
        keep = job.ids if seg.last else None
        dropped = manifest.write_chunks(
            job.key, job.info.sha256, items, _now(), final=seg.last, keep=keep, document=doc if seg.last else None
        )
    # Chunk ids are content hashes: one shared by another file must stay in the vector store.
    if dropped:
        gone = dropped - manifest.known(sorted(dropped))
        vectors.delete(sorted(gone))
    if seg.last:
        resumed = job.previous == PARTIAL + job.info.sha256
        existed = (job.previous is not None and not resumed) or job.replaces
        reason = "resumed an interrupted ingest" if resumed else ""
        if job.reuse is not None and not resumed:
            reason = METADATA_ONLY
        status = "updated" if existed else "added"
        doc_id = doc.id if doc is not None else ""
        result = FileResult(job.key, status, seg.items[-1][0] + 1, reason, document=doc_id)
        result.metadata_changed = job.metadata_changed
        report.files.append(result)
        job.ids = set()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
