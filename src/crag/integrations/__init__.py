"""Adapters that let LangChain and LlamaIndex use a CRAG engine, keeping each framework's contracts.

Each adapter lives in its own module and imports its framework only when used, so
``import crag`` never pulls in LangChain or LlamaIndex, and framework types never cross
crag's own API (style guide §10): they exist only on the adapter side. What crosses the
boundary is written once, here: :func:`strip_records` (a strip as a document) and
:func:`answer_metadata` (an answer's decision and citations). ``docs/integrations.md``
shows each adapter with code that the test suite runs.

* ``crag.integrations.langchain`` (``pip install 'crag[langchain]'``): ``crag_runnable``
  (question → ``AIMessage``; ``stream`` gives ``AIMessageChunk``s, so it composes with
  ``StrOutputParser``), ``crag_answer_runnable`` (question → ``Answer.to_dict()``) and
  ``CragRetriever`` (the corrected context as ``Document``s, without generating).
* ``crag.integrations.llamaindex`` (``pip install 'crag[llamaindex]'``): ``CragRetriever``
  (``NodeWithScore`` list, without generating) and ``CragQueryEngine`` (``Response``, or a
  ``StreamingResponse`` with ``streaming=True``).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from crag.errors import ConfigError
from crag.pipeline import CorrectedContext
from crag.redact import redact
from crag.types import Answer

__all__ = ["answer_metadata", "require", "strip_records"]


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


def strip_records(result: Answer | CorrectedContext) -> list[tuple[str, float, dict[str, Any]]]:
    """``(text, grade, metadata)`` for each strip of a corrected context or of an answer's sources.

    The metadata says where the strip came from (``origin``: ``internal`` or ``web``,
    ``source``, ``title``, ``url``), its grade (``score``), its number in the context
    (``citation``: the ``[n]`` an answer uses for it) and the decision it was kept under
    (``action``, ``confidence``, ``trace_id``).

    >>> from crag.types import Action, Strip
    >>> a = Answer("Q", "A [1].", Action.CORRECT, 0.9, [], [Strip("A.", "a.md", "internal", score=0.8)], "t1", {})
    >>> strip_records(a)[0][2]["citation"], strip_records(a)[0][2]["action"]
    (1, 'correct')
    """
    strips = result.strips if isinstance(result, CorrectedContext) else result.context
    shared = {"trace_id": result.trace_id, "action": result.action.value, "confidence": result.confidence}
    out = []
    for n, s in enumerate(strips, start=1):
        meta = {"origin": s.origin, "source": s.source, "title": s.title, "url": s.url, "score": float(s.score)}
        out.append((redact(s.text), float(s.score), redact(meta | {"citation": n} | shared)))
    return out


def answer_metadata(answer: Answer) -> dict[str, Any]:
    """The decision and the citations of ``answer``, JSON-ready and redacted.

    Each citation carries its ``quote`` (the source sentence that supports the claim),
    ``url``/``source``, ``inferred`` (the engine placed the marker) and ``spans`` (where the
    sentences citing it sit in the answer text).
    """
    citations = [
        {
            "id": c.id,
            "title": c.title,
            "url": c.url,
            "source": c.source,
            "quote": c.quote,
            "inferred": c.inferred,
            "spans": [list(span) for span in c.spans],
        }
        for c in answer.citations
    ]
    meta = {
        "trace_id": answer.trace_id,
        "action": answer.action.value,
        "confidence": answer.confidence,
        "mode": answer.mode,
        "refused": answer.refused,
        "abstained": answer.abstained,
        "citations": citations,
        "queries": list(answer.queries),
        "degradations": list(answer.degradations),
    }
    result: dict[str, Any] = redact(meta)
    return result
