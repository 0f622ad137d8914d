"""Folders: where crag keeps caches (assembled models, embedding vectors), and creating them.

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


def make_folder(path: Path, what: str) -> None:
    """Create ``path`` (and parents) or raise a one-line ``KnowledgeBaseError`` saying why not.

    >>> make_folder(Path("/dev/null"), "knowledge base")
    Traceback (most recent call last):
    crag.errors.KnowledgeBaseError: knowledge base path /dev/null is a file, not a folder; ...
    """
    from crag.errors import KnowledgeBaseError

    if path.exists() and not path.is_dir():
        raise KnowledgeBaseError(f"{what} path {path} is a file, not a folder; pass a folder (new or existing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KnowledgeBaseError(
            f"cannot create {what} folder {path}: {exc.strerror or type(exc).__name__}; pass a folder you can write to"
        ) from None
