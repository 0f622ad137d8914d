"""Shared helpers for the LLM backend tests (imported by test_llm_*.py, not a conftest).

The bundled 0.5B model is assembled once into ``$CRAG_CACHE_DIR/models`` (default: the
project's own ``.cache/crag``) and reused across runs; it is never assembled per test.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from crag.llm.models import resolve_gguf

ROOT = Path(__file__).resolve().parents[1]
SMALL_MODEL = "qwen2.5-coder-0.5b"


def project_cache_dir() -> Path:
    """``CRAG_CACHE_DIR`` if set, else the project's ``.cache/crag`` (shared across runs)."""
    return Path(os.environ.get("CRAG_CACHE_DIR") or ROOT / ".cache" / "crag")


def small_gguf() -> Path:
    """Path of the assembled 0.5B GGUF (assembles it on the very first run only)."""
    return resolve_gguf(SMALL_MODEL, models_dir=project_cache_dir() / "models")


def default_llm():  # type: ignore[no-untyped-def]
    """The default embedded model as users get it (1.5B), loaded once per process."""
    from crag.config import CragSettings
    from crag.llm.llama_cpp import LlamaCppLLM

    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    model = LlamaCppLLM(CragSettings().llm.model, n_ctx=2048)
    model.warm_up()
    return model


def assert_streamed(arrivals: list[float], end: float, *, min_pieces: int = 5) -> None:
    """Pieces (arrival times, seconds from the request) came as they were written, not in one burst.

    Load on a shared machine moves how long the prompt takes, so no share of the total is
    asserted: the first piece must come before the end, and the pieces at several moments.
    """
    assert len(arrivals) >= min_pieces, f"{len(arrivals)} pieces"
    assert arrivals[0] < end - 0.05, f"first piece at {arrivals[0]:.3f}s of {end:.3f}s: a burst at the end"
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert sum(g > 0.002 for g in gaps) >= min_pieces - 2, f"pieces arrived together: gaps {gaps}"
