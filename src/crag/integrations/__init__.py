"""Adapters that let LangChain and LlamaIndex use a CRAG engine as a retriever or chain.

Each adapter lives in its own module and imports its framework only when used, so
``import crag`` never pulls in LangChain or LlamaIndex, and framework types never cross
crag's own API (style guide §10): they exist only on the adapter side.

* ``crag.integrations.langchain`` (``pip install 'crag[langchain]'``): ``CragRetriever``
  (a ``BaseRetriever`` of the corrected context) and ``crag_runnable`` (question → answer dict).
* ``crag.integrations.llamaindex`` (``pip install 'crag[llamaindex]'``): ``CragRetriever``
  (``NodeWithScore`` list) and ``CragQueryEngine`` (``Response`` with ``source_nodes``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from crag.errors import ConfigError

__all__ = ["require"]


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`ConfigError` naming the extra that provides it.

    >>> require("json", "none").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"this integration needs {module.split('.')[0]}: pip install 'crag[{extra}]' ({exc})"
        ) from exc
