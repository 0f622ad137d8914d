"""The crag HTTP service (``pip install crag[server]``): see :mod:`crag.server.app`.

>>> from crag.server import create_app, serve     # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app", "serve"]


def __getattr__(name: str) -> Any:
    # Lazy, so ``import crag.server`` works (and names the extra) without FastAPI loaded.
    if name in __all__:
        try:
            from crag.server import app
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(f"{exc}; install the server extra: pip install 'crag[server]'") from exc
        return getattr(app, name)
    raise AttributeError(name)
