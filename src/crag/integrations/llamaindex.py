"""LlamaIndex adapters (``pip install 'crag[llamaindex]'``): a retriever and a query engine.

``CragRetriever`` returns CRAG's corrected context as ``NodeWithScore``s;
``CragQueryEngine`` returns CRAG's answer as a ``Response`` whose ``source_nodes`` are
that context, with the decision (action, confidence, trace id) in ``metadata``.

>>> from crag import CRAG
>>> from crag.integrations.llamaindex import CragQueryEngine, CragRetriever
>>> engine = CRAG.from_config(kb={"path": "kb"})                      # doctest: +SKIP
>>> nodes = CragRetriever(engine).retrieve("What does CRAG grade?")  # doctest: +SKIP
>>> response = CragQueryEngine(engine=engine).query("What does CRAG grade?")  # doctest: +SKIP
>>> response.metadata["action"], len(response.source_nodes)           # doctest: +SKIP
('correct', 2)

LlamaIndex is imported when a class is first used, never by ``import crag``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from crag.integrations import require

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

    from crag.engine import CRAG
    from crag.types import Answer

# The classes are built on first access by __getattr__ below (LlamaIndex imported lazily).
__all__ = ["CragQueryEngine", "CragRetriever", "to_nodes"]  # noqa: F822

EXTRA = "llamaindex"


def to_nodes(answer: Answer) -> list[NodeWithScore]:
    """The corrected context of ``answer`` as scored LlamaIndex text nodes."""
    schema = require("llama_index.core.schema", EXTRA)
    out = []
    for n, strip in enumerate(answer.context, start=1):
        node = schema.TextNode(
            text=strip.text,
            metadata={
                "origin": strip.origin,
                "source": strip.source,
                "title": strip.title,
                "url": strip.url,
                "citation": n,
                "trace_id": answer.trace_id,
                "action": answer.action.value,
            },
            # Only text reaches an LLM that LlamaIndex may call downstream: provenance
            # stays in metadata for the caller, not in the prompt.
            excluded_llm_metadata_keys=["origin", "source", "url", "citation", "trace_id", "action"],
            excluded_embed_metadata_keys=["origin", "source", "url", "citation", "trace_id", "action"],
        )
        out.append(schema.NodeWithScore(node=node, score=float(strip.score)))
    return out


def _metadata(answer: Answer) -> dict[str, Any]:
    return {
        "action": answer.action.value,
        "confidence": answer.confidence,
        "trace_id": answer.trace_id,
        "mode": answer.mode,
        "citations": [{"id": c.id, "source": c.source, "title": c.title, "url": c.url} for c in answer.citations],
        "degradations": list(answer.degradations),
        "queries": list(answer.queries),
    }


@functools.cache
def _retriever_class() -> type:
    base = require("llama_index.core.retrievers", EXTRA)

    class CragRetriever(base.BaseRetriever):  # type: ignore[misc, name-defined]  # base class from an optional package, imported at run time
        """A LlamaIndex retriever over a CRAG engine: ``CragRetriever(engine).retrieve(q)``.

        Each retrieval runs the full CRAG loop, generation included (the corrected
        context comes from that run); the answer is on ``last_answer`` for reuse.
        """

        def __init__(self, engine: CRAG, *, mode: str = "crag", search: str | None = None, **kw: Any) -> None:
            self._engine, self._mode, self._search = engine, mode, search
            self.last_answer: Answer | None = None
            super().__init__(**kw)

        def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
            answer = self._engine.ask(query_bundle.query_str, mode=self._mode, search=self._search)
            self.last_answer = answer
            return to_nodes(answer)

    return CragRetriever


@functools.cache
def _query_engine_class() -> type:
    query_engine = require("llama_index.core.query_engine", EXTRA)
    response_schema = require("llama_index.core.base.response.schema", EXTRA)
    pydantic = require("pydantic", EXTRA)

    class CragQueryEngine(query_engine.CustomQueryEngine):  # type: ignore[misc, name-defined]  # base class from an optional package, imported at run time
        """A LlamaIndex query engine answering with CRAG: ``CragQueryEngine(engine=e).query(q)``."""

        model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
        engine: Any  # a crag.engine.CRAG; Any so pydantic does not try to validate it
        mode: str = "crag"
        search: str | None = None

        def custom_query(self, query_str: str) -> Any:
            answer = self.engine.ask(query_str, mode=self.mode, search=self.search)
            return response_schema.Response(
                response=answer.answer, source_nodes=to_nodes(answer), metadata=_metadata(answer)
            )

    return CragQueryEngine


def __getattr__(name: str) -> Any:
    # Classes are built on first access so importing this module does not import LlamaIndex.
    if name == "CragRetriever":
        return _retriever_class()
    if name == "CragQueryEngine":
        return _query_engine_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
