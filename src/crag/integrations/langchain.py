"""LangChain adapters (``pip install 'crag[langchain]'``): a chat-model-like runnable and a retriever.

``crag_runnable(engine)`` keeps a chat model's contract: ``invoke`` returns an ``AIMessage``
and ``stream`` yields ``AIMessageChunk``s, so ``crag_runnable(engine) | StrOutputParser()``
gives the answer's text both ways. The content is the verified answer (the pieces streamed
are whole sentences that passed the sentence gate; joined, they are the saved answer). The
last chunk carries what a reader checks it with, in ``response_metadata``: ``action``,
``confidence``, ``trace_id``, ``refused``, and ``citations`` (each with its ``quote``,
``url``, ``source``, ``spans``); ``usage_metadata`` counts every LLM call of the question.
Summed, the chunks equal the message ``invoke`` returns (content and metadata).

Messages rather than strings because that is what LangChain's output parsers, message
histories and callbacks expect of something that answers, and the citations travel with
the text instead of being lost by a string.

``crag_answer_runnable(engine)`` returns the whole ``Answer.to_dict()`` (context, timings,
degradations) for a chain that needs more than the message.

``CragRetriever`` retrieves, grades and corrects without generating
(:meth:`crag.engine.CRAG.retrieve_context`): its documents are the strips an answer would
be written from, each with its grade (``score``), origin and the ``action``.

>>> from crag import CRAG
>>> from langchain_core.output_parsers import StrOutputParser
>>> from crag.integrations.langchain import CragRetriever, crag_runnable
>>> engine = CRAG.from_config(kb={"path": "kb"})                                # doctest: +SKIP
>>> chain = crag_runnable(engine) | StrOutputParser()                           # doctest: +SKIP
>>> chain.invoke("天津犹太会堂是什么时候建成的？")                                 # doctest: +SKIP
'天津犹太会堂建成于1940年[1]。'
>>> docs = CragRetriever(engine=engine).invoke("When was the Tianjin Synagogue built?")  # doctest: +SKIP
>>> docs[0].metadata["action"], docs[0].metadata["score"]                       # doctest: +SKIP
('correct', 0.93)

LangChain is imported when a class is first used, never by ``import crag``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from crag.integrations import answer_metadata, require, strip_records
from crag.pipeline.events import AnswerEvent, render
from crag.pipeline.reducer import AnswerText
from crag.request import Request, RequestOptions

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, AIMessageChunk
    from langchain_core.runnables import Runnable

    from crag.engine import CRAG
    from crag.pipeline import CorrectedContext
    from crag.pipeline.events import StepEvent
    from crag.types import Answer

# The classes are built on first access by __getattr__ below (LangChain imported lazily).
__all__ = [  # noqa: F822
    "CragAnswerRunnable",
    "CragRetriever",
    "CragRunnable",
    "crag_answer_runnable",
    "crag_runnable",
    "to_documents",
    "to_message",
]

EXTRA = "langchain"


def to_documents(context: CorrectedContext) -> list[Document]:
    """The corrected context (:meth:`CRAG.retrieve_context`) as LangChain documents, best first.

    ``metadata``: ``origin`` (``internal``/``web``), ``source``, ``title``, ``url``, ``score``
    (the strip's grade), ``citation`` (its number in the context), ``action``,
    ``confidence`` and ``trace_id``.
    """
    documents = require("langchain_core.documents", EXTRA)
    return [documents.Document(page_content=text, metadata=meta) for text, _, meta in strip_records(context)]


def to_message(answer: Answer) -> AIMessage:
    """``answer`` as the message ``crag_runnable`` returns (content through the one reducer)."""
    messages = require("langchain_core.messages", EXTRA)
    content = render(AnswerEvent(answer), AnswerText()).text
    message: AIMessage = messages.AIMessage(content=content, id=answer.trace_id, **_metadata(answer))
    return message


def _metadata(answer: Answer) -> dict[str, Any]:
    """``response_metadata`` and ``usage_metadata`` of the message for ``answer``."""
    u = answer.usage
    return {
        "response_metadata": {"model_name": "crag", "finish_reason": "stop", **answer_metadata(answer)},
        "usage_metadata": {
            "input_tokens": u.prompt_tokens,
            "output_tokens": u.completion_tokens,
            "total_tokens": u.total_tokens,
        },
    }


def crag_runnable(
    engine: CRAG, *, mode: str = "crag", search: str | None = None, filters: dict[str, Any] | None = None
) -> Runnable[Any, AIMessage]:
    """A ``Runnable`` from a question (``str`` or ``{"question": str}``) to an ``AIMessage``.

    ``stream``/``astream`` yield ``AIMessageChunk``s: one per verified sentence, then a last
    one with no text and the metadata. Stopping the iteration early stops the model.
    ``ainvoke``/``abatch`` run the blocking engine in a worker thread. ``mode``, ``search``
    and ``filters`` (metadata, e.g. ``{"lang": "zh"}``) are :meth:`CRAG.ask`'s.
    """
    runnable: Runnable[Any, AIMessage] = _runnable_class()(engine, _options(mode, search, filters))
    return runnable


def crag_answer_runnable(
    engine: CRAG, *, mode: str = "crag", search: str | None = None, filters: dict[str, Any] | None = None
) -> Runnable[Any, dict[str, Any]]:
    """A ``Runnable`` from a question to the whole ``Answer.to_dict()`` (``crag ask --json``'s shape)."""
    runnable: Runnable[Any, dict[str, Any]] = _answer_runnable_class()(engine, _options(mode, search, filters))
    return runnable


def _options(mode: str, search: str | None, filters: dict[str, Any] | None) -> RequestOptions:
    """How the runnables ask: the options of every :class:`~crag.request.Request` they build."""
    return {"mode": mode, "search": search, "filters": filters, "via": "langchain"}


_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "system": "system"}


def _request(value: Any, options: RequestOptions) -> Request:
    """The request an input asks: a string, ``{"question", "history"?}``, or a conversation
    (LangChain messages or ``{"role", "content"}`` dicts), whose last user message is the
    question and whose earlier turns are the history the engine condenses it with."""
    question, history = _question(value)
    asked: RequestOptions = {**options, "history": history}
    return Request.of(question, **asked)


def _question(value: Any) -> tuple[str, list[dict[str, str]] | None]:
    if isinstance(value, str):
        return value, None
    if isinstance(value, Mapping) and isinstance(value.get("question"), str):
        history = value.get("history")
        return value["question"], (_turns(history) if history else None)
    if isinstance(value, (list, tuple)) and value:
        turns = _turns(value)
        if turns and turns[-1]["role"] == "user":
            return turns[-1]["content"], turns[:-1]
    raise TypeError("a crag runnable takes a question string, {'question': str, 'history'?: [...]} or chat messages")


def _turns(messages: Any) -> list[dict[str, str]]:
    out = []
    for m in messages:
        role = m.get("role") if isinstance(m, Mapping) else getattr(m, "type", None)
        content = m.get("content") if isinstance(m, Mapping) else getattr(m, "content", None)
        if role in _ROLES and isinstance(content, str):
            out.append({"role": _ROLES[role], "content": content})
    return out


@functools.cache
def _runnable_class() -> type:
    runnables = require("langchain_core.runnables", EXTRA)

    class CragRunnable(runnables.Runnable):  # type: ignore[misc, name-defined]  # base class from an optional package
        """Question → ``AIMessage``; ``stream`` yields ``AIMessageChunk``s that sum to it.

        ### Usage example
        >>> chain = crag_runnable(engine) | StrOutputParser()   # doctest: +SKIP
        >>> "".join(chain.stream("What is CRAG?"))              # doctest: +SKIP
        """

        name = "crag"

        def __init__(self, engine: CRAG, options: RequestOptions) -> None:
            self.engine = engine
            self.options = options

        def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> AIMessage:
            result: AIMessage = self._call_with_config(self._invoke, input, config)
            return result

        def _invoke(self, input: Any) -> AIMessage:
            return to_message(self.engine.ask(_request(input, self.options)))

        def stream(self, input: Any, config: Any = None, **kwargs: Any) -> Iterator[AIMessageChunk]:
            yield from self._transform_stream_with_config(iter([input]), self._chunks, config)

        def _chunks(self, inputs: Iterator[Any]) -> Iterator[AIMessageChunk]:
            yield from _stream_chunks(self.engine, self.options, _last(inputs))

        async def astream(self, input: Any, config: Any = None, **kwargs: Any) -> AsyncIterator[AIMessageChunk]:
            async for chunk in self._atransform_stream_with_config(_once(input), self._achunks, config):
                yield chunk

        def _achunks(self, inputs: AsyncIterator[Any]) -> AsyncIterator[AIMessageChunk]:
            # Returned, not iterated here: closing the stream then closes the generator that
            # holds the engine's events, at once.
            return _astream_chunks(self.engine, self.options, inputs)

    return CragRunnable


def _stream_chunks(engine: CRAG, options: RequestOptions, input: Any) -> Iterator[AIMessageChunk]:
    """The answer to ``input`` as it streams, as message chunks."""
    with engine.ask_stream(_request(input, options)) as events:
        text = AnswerText()
        for event in events:
            yield from _event_chunks(text, event, events.trace_id)


async def _astream_chunks(
    engine: CRAG, options: RequestOptions, inputs: AsyncIterator[Any]
) -> AsyncIterator[AIMessageChunk]:
    """:func:`_stream_chunks` for an event loop (the last input is the question): the engine's
    stream is awaited (``async for``; its worker wakes the loop), as the server reads it."""
    asked = _request([i async for i in inputs][-1], options)
    events = await asyncio.to_thread(engine.ask_stream, asked)  # starting may read the KB
    text = AnswerText()
    try:
        async for event in events:
            for chunk in _event_chunks(text, event, events.trace_id):
                yield chunk
    finally:
        events.close()  # the caller stopped early: stop the model


def _event_chunks(text: AnswerText, event: StepEvent[Any], trace_id: str) -> Iterator[AIMessageChunk]:
    """The chunks for one event: its verified text, and the metadata with the answer."""
    messages = require("langchain_core.messages", EXTRA)
    if piece := render(event, text).text:
        yield messages.AIMessageChunk(content=piece, id=trace_id)
    if isinstance(event, AnswerEvent):
        yield messages.AIMessageChunk(content="", id=trace_id, **_metadata(event.value))


@functools.cache
def _answer_runnable_class() -> type:
    runnables = require("langchain_core.runnables", EXTRA)

    class CragAnswerRunnable(runnables.Runnable):  # type: ignore[misc, name-defined]  # base class from an optional package
        """Question → ``Answer.to_dict()``: the answer, decision, citations, context and timings."""

        name = "crag_answer"

        def __init__(self, engine: CRAG, options: RequestOptions) -> None:
            self.engine = engine
            self.options = options

        def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> dict[str, Any]:
            result: dict[str, Any] = self._call_with_config(self._invoke, input, config)
            return result

        def _invoke(self, input: Any) -> dict[str, Any]:
            result: dict[str, Any] = self.engine.ask(_request(input, self.options)).to_dict()
            return result

    return CragAnswerRunnable


def _last(inputs: Iterator[Any]) -> Any:
    """The question from a transform's input stream (a question arrives whole, once)."""
    return list(inputs)[-1]


async def _once(value: Any) -> AsyncIterator[Any]:
    yield value


@functools.cache
def _retriever_class() -> type:
    retrievers = require("langchain_core.retrievers", EXTRA)
    pydantic = require("pydantic", EXTRA)

    class CragRetriever(retrievers.BaseRetriever):  # type: ignore[misc, name-defined]  # base class from an optional package, imported at run time
        """A LangChain retriever whose documents are CRAG's corrected context, without an answer.

        Retrieves, grades, decides and corrects (searching the external source on
        Ambiguous and Incorrect) and stops before generation; ``search`` names the external
        source (default: the engine's settings), ``filters`` scope retrieval by metadata.

        ### Usage example
        >>> docs = CragRetriever(engine=engine).invoke("What does CRAG grade?")  # doctest: +SKIP
        >>> docs[0].metadata["action"], docs[0].metadata["score"]                # doctest: +SKIP
        ('correct', 0.91)
        """

        model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
        engine: Any  # a crag.engine.CRAG; typed Any so pydantic does not validate it
        search: str | None = None
        filters: dict[str, Any] | None = None

        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            asked = Request.of(query, search=self.search, filters=self.filters, via="langchain")
            return to_documents(self.engine.retrieve_context(asked))

    return CragRetriever


def __getattr__(name: str) -> Any:
    # Module attribute access builds the class on first use, so importing this module
    # (e.g. for crag_runnable) does not import LangChain until a class is asked for.
    classes = {
        "CragRetriever": _retriever_class,
        "CragRunnable": _runnable_class,
        "CragAnswerRunnable": _answer_runnable_class,
    }
    if name in classes:
        return classes[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
