"""LangChain adapters (``pip install 'crag[langchain]'``): a retriever and a runnable.

``CragRetriever`` runs the whole CRAG loop (retrieve → evaluate → correct → generate)
and returns the *corrected* context, internal strips and web strips alike, as
``Document``s; ``crag_runnable`` maps a question to ``Answer.to_dict()``, and its
``stream``/``astream`` yield the answer's text as the model writes it.

>>> from crag import CRAG
>>> from crag.integrations.langchain import CragRetriever, crag_runnable
>>> engine = CRAG.from_config(kb={"path": "kb"})                    # doctest: +SKIP
>>> docs = CragRetriever(engine=engine).invoke("When was the Tianjin Synagogue built?")  # doctest: +SKIP
>>> docs[0].metadata["origin"], docs[0].metadata["source"]           # doctest: +SKIP
('internal', 'docs/tianjin.md')
>>> crag_runnable(engine).invoke("天津犹太会堂是什么时候建成的？")["action"]   # doctest: +SKIP
'correct'
>>> for token in crag_runnable(engine).stream("天津犹太会堂是什么时候建成的？"):  # doctest: +SKIP
...     print(token, end="", flush=True)
天津犹太会堂建成于1940年[1]。

The retriever pays for one generation per query, because CRAG's corrected context is
produced by the same pipeline run that answers; ``Document.metadata["answer"]`` carries
that answer so a chain can reuse it instead of generating again.
LangChain is imported when a class is first used, never by ``import crag``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from crag.integrations import require

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.runnables import Runnable

    from crag.engine import CRAG
    from crag.pipeline.events import StreamEvent
    from crag.types import Answer

# CragRetriever and CragRunnable are built on first access by __getattr__ below (LangChain imported lazily).
__all__ = ["CragRetriever", "CragRunnable", "crag_runnable", "to_documents"]  # noqa: F822

EXTRA = "langchain"


def to_documents(answer: Answer) -> list[Document]:
    """The corrected context of ``answer`` as LangChain documents, in context order."""
    documents = require("langchain_core.documents", EXTRA)
    shared = {
        "trace_id": answer.trace_id,
        "action": answer.action.value,
        "confidence": answer.confidence,
        "answer": answer.answer,
    }
    return [
        documents.Document(
            page_content=strip.text,
            metadata={
                "origin": strip.origin,  # "internal" (knowledge base) or "web" (external source)
                "source": strip.source,
                "score": strip.score,
                "title": strip.title,
                "url": strip.url,
                "citation": n,  # the [n] the answer uses for this strip
                **shared,
            },
        )
        for n, strip in enumerate(answer.context, start=1)
    ]


@functools.cache
def _retriever_class() -> type:
    retrievers = require("langchain_core.retrievers", EXTRA)
    pydantic = require("pydantic", EXTRA)

    class CragRetriever(retrievers.BaseRetriever):  # type: ignore[misc, name-defined]  # base class from an optional package, imported at run time
        """A LangChain retriever whose documents are CRAG's corrected context.

        ``mode="rag"`` skips evaluation and correction (the baseline); ``search`` names
        the external source for this retriever (default: the engine's settings).
        """

        model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
        engine: Any  # a crag.engine.CRAG; typed Any so pydantic does not validate it
        mode: str = "crag"
        search: str | None = None

        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            answer = self.engine.ask(query, mode=self.mode, search=self.search)
            return to_documents(answer)

    return CragRetriever


def crag_runnable(engine: CRAG, *, mode: str = "crag", search: str | None = None) -> Runnable[Any, dict[str, Any]]:
    """A ``Runnable`` from a question (``str`` or ``{"question": str}``) to ``Answer.to_dict()``.

    ``stream``/``astream`` yield the answer's text instead, a ``str`` per verified sentence
    (joined, the saved answer).
    Stopping the iteration early stops the model. ``ainvoke``/``abatch`` run the blocking
    engine in a worker thread.
    """
    runnable: Runnable[Any, dict[str, Any]] = _runnable_class()(engine, mode, search)
    return runnable


def _question(question: Any) -> str:
    text = question.get("question") if isinstance(question, Mapping) else question
    if not isinstance(text, str):
        raise TypeError("crag_runnable takes a question string or {'question': str}")
    return text


@functools.cache
def _runnable_class() -> type:
    runnables = require("langchain_core.runnables", EXTRA)

    class CragRunnable(runnables.Runnable):  # type: ignore[misc, name-defined]  # base class from an optional package
        """Question → ``Answer.to_dict()``; ``stream``/``astream`` yield the answer's tokens."""

        name = "crag"

        def __init__(self, engine: CRAG, mode: str, search: str | None) -> None:
            self.engine = engine
            self.mode = mode
            self.search = search

        def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> dict[str, Any]:
            result: dict[str, Any] = self.engine.ask(_question(input), mode=self.mode, search=self.search).to_dict()
            return result

        def stream(self, input: Any, config: Any = None, **kwargs: Any) -> Iterator[str]:
            from crag.pipeline.reducer import AnswerText

            text = AnswerText()
            with self.engine.ask_stream(_question(input), mode=self.mode, search=self.search) as events:
                for event in events:
                    if piece := text.take(event):
                        yield piece

        async def astream(self, input: Any, config: Any = None, **kwargs: Any) -> AsyncIterator[str]:
            from crag.pipeline.reducer import AnswerText

            text = AnswerText()
            events = await asyncio.to_thread(
                self.engine.ask_stream, _question(input), mode=self.mode, search=self.search
            )
            try:
                while True:
                    kind, event = await asyncio.to_thread(_next_event, events)
                    if kind == "end":
                        return
                    if event is not None and (piece := text.take(event)):
                        yield piece
            finally:
                events.close()  # the caller stopped early: stop the model

    return CragRunnable


def _next_event(events: Any) -> tuple[str, StreamEvent | None]:
    # StopIteration cannot cross into a coroutine (PEP 479); a short wait keeps a
    # cancelled astream from holding a worker thread for long.
    try:
        return "event", events.next_event(0.1)
    except StopIteration:
        return "end", None


def __getattr__(name: str) -> Any:
    # Module attribute access builds the class on first use, so importing this module
    # (e.g. for crag_runnable) does not import LangChain until a class is asked for.
    if name == "CragRetriever":
        return _retriever_class()
    if name == "CragRunnable":
        return _runnable_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
