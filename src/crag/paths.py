"""Where crag keeps caches (assembled models, embedding vectors).

``CRAG_CACHE_DIR`` wins; the Makefile points it at the project's own ``.cache/crag``.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache folder (created on first use)."""
    root = Path(os.environ.get("CRAG_CACHE_DIR") or Path.home() / ".cache" / "crag")
    root.mkdir(parents=True, exist_ok=True)
    return root
