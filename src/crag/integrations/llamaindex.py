"""LlamaIndex adapters (``pip install 'crag[llamaindex]'``): a retriever and a query engine.

``CragRetriever`` retrieves, grades and corrects without generating
(:meth:`crag.engine.CRAG.retrieve_context`) and returns the corrected context as
``NodeWithScore``s (the score is the strip's grade). ``CragQueryEngine`` answers with CRAG:
a ``Response`` whose ``source_nodes`` are the answer's sources, with the decision and the
citations (quotes, urls) in ``metadata``; with ``streaming=True`` a ``StreamingResponse``
whose ``response_gen`` yields the verified answer a sentence at a time (joined, the saved
answer), its ``source_nodes`` and ``metadata`` filled once the generator is done.

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
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from crag.integrations import answer_metadata, require, strip_records
from crag.pipeline.events import AnswerEvent, render
from crag.pipeline.reducer import AnswerText
from crag.request import Request

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

    from crag.engine import CRAG
    from crag.pipeline import CorrectedContext
    from crag.pipeline.live import AnswerStream
    from crag.types import Answer

# The classes are built on first access by __getattr__ below (LlamaIndex imported lazily).
__all__ = ["CragQueryEngine", "CragRetriever", "to_nodes"]  # noqa: F822

EXTRA = "llamaindex"
# Provenance stays in metadata for the caller: only the text reaches an LLM or an embedder
# that LlamaIndex may call downstream.
_HIDDEN = ["origin", "source", "url", "score", "citation", "trace_id", "action", "confidence"]


def to_nodes(result: Answer | CorrectedContext) -> list[NodeWithScore]:
    """The strips of a corrected context, or an answer's sources, as scored text nodes."""
    schema = require("llama_index.core.schema", EXTRA)
    return [
        schema.NodeWithScore(
            node=schema.TextNode(
                text=text, metadata=meta, excluded_llm_metadata_keys=_HIDDEN, excluded_embed_metadata_keys=_HIDDEN
            ),
            score=score,
        )
        for text, score, meta in strip_records(result)
    ]


@functools.cache
def _retriever_class() -> type:
    base = require("llama_index.core.retrievers", EXTRA)

    class CragRetriever(base.BaseRetriever):  # type: ignore[misc, name-defined]  # base class from an optional package, imported at run time
        """A LlamaIndex retriever over a CRAG engine, without generating an answer.

        Each retrieval retrieves, grades, decides and corrects (searching the external
        source on Ambiguous and Incorrect); the result is on ``last_context``. ``filters``
        scope retrieval by metadata (:meth:`crag.engine.CRAG.ask`).

        ### Usage example
        >>> nodes = CragRetriever(engine).retrieve("What does CRAG grade?")  # doctest: +SKIP
        >>> nodes[0].score, nodes[0].node.metadata["action"]                # doctest: +SKIP
        (0.91, 'correct')
        """

        def __init__(
            self, engine: CRAG, *, search: str | None = None, filters: dict[str, Any] | None = None, **kw: Any
        ) -> None:
            self._engine, self._search, self._filters = engine, search, filters
            self.last_context: CorrectedContext | None = None
            super().__init__(**kw)

        def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
            asked = Request.of(query_bundle.query_str, search=self._search, filters=self._filters, via="llamaindex")
            got = self._engine.retrieve_context(asked)
            self.last_context = got
            return to_nodes(got)

    return CragRetriever


@functools.cache
def _query_engine_class() -> type:
    query_engine = require("llama_index.core.query_engine", EXTRA)
    response_schema = require("llama_index.core.base.response.schema", EXTRA)
    pydantic = require("pydantic", EXTRA)

    class CragQueryEngine(query_engine.CustomQueryEngine):  # type: ignore[misc, name-defined]  # base class from an optional package, imported at run time
        """A LlamaIndex query engine answering with CRAG.

        ### Usage example
        >>> qe = CragQueryEngine(engine=engine, streaming=True)   # doctest: +SKIP
        >>> qe.query("What does CRAG grade?").print_response_stream()  # doctest: +SKIP
        """

        model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
        engine: Any  # a crag.engine.CRAG; Any so pydantic does not try to validate it
        mode: str = "crag"
        search: str | None = None
        filters: dict[str, Any] | None = None
        streaming: bool = False

        def custom_query(self, query_str: str) -> Any:
            asked = Request.of(query_str, mode=self.mode, search=self.search, filters=self.filters, via="llamaindex")
            if self.streaming:
                events = self.engine.ask_stream(asked)
                response = response_schema.StreamingResponse(response_gen=iter(()))
                response.response_gen = _verified_text(events, response)
                return response
            answer = self.engine.ask(asked)
            text = render(AnswerEvent(answer), AnswerText()).text  # the text a stream would have shown
            return response_schema.Response(
                response=text, source_nodes=to_nodes(answer), metadata=answer_metadata(answer)
            )

    return CragQueryEngine


def _verified_text(events: AnswerStream, response: Any) -> Iterator[str]:
    """The answer's verified pieces, through the one reducer; the response's sources and
    metadata are set when the answer arrives. Leaving the generator early stops the model."""
    text = AnswerText()
    with events:
        for event in events:
            if piece := render(event, text).text:
                yield piece
            if isinstance(event, AnswerEvent):
                response.source_nodes = to_nodes(event.value)
                response.metadata = answer_metadata(event.value)
                response.response_txt = text.shown  # get_response() after the caller read response_gen


def __getattr__(name: str) -> Any:
    # Classes are built on first access so importing this module does not import LlamaIndex.
    if name == "CragRetriever":
        return _retriever_class()
    if name == "CragQueryEngine":
        return _query_engine_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
