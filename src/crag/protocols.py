"""Backend interfaces. Each has one essential method; everything else is built on it.

Optional capabilities are protocols of their own: :class:`YesNoLLM` (P(yes) of a first
answer token, for the Correct-path check), :class:`ScoringLLM` (also the probabilities of
given choices, for the LLM judge and ``crag eval``'s judge), :class:`StreamingLLM` (token
deltas as the model writes them; :func:`stream_completion` falls back to one delta from
``complete`` for other LLMs) and :class:`LLMEvaluator` (an evaluator that asks an LLM, handed
each request's guarded model). Ask :func:`offers` whether an LLM has one: a request's
:class:`Guard` (``crag.llm.guard.GuardedLLM``) implements every method and answers for the
model it guards.

An embedder that can also run in worker processes is a :class:`ParallelEmbedder`, and a
vector store declares what it can do beyond :class:`VectorStore` the same way:
:class:`FilteringStore` (metadata filters inside its search), :class:`FullTextStore` (its own
keyword ranking), :class:`RefreshableStore` (reopens to see other processes' writes) and
:class:`ReleasableStore` (drops its in-memory index until the next call). The knowledge base
asks ``isinstance(store, FilteringStore)``, never ``getattr``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

import numpy as np

from crag.metadata import Filters
from crag.types import Evaluation, Hit, Passage, Query, WebResult

EmbedKind = Literal["query", "passage"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors (rows of a float32 matrix)."""

    model_id: str

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray: ...


@runtime_checkable
class ParallelEmbedder(Embedder, Protocol):
    """An embedder that can also run in spawned worker processes (``crag ingest --workers N``).

    ``worker()`` returns a picklable callable that builds an equal embedder inside a worker
    process, or ``None`` when this one cannot (a wrapper answers for the embedder it wraps).
    """

    def worker(self) -> Callable[[], Embedder] | None: ...


@runtime_checkable
class VectorStore(Protocol):
    """Holds chunk vectors; ``query`` returns ``(id, cosine similarity, vector)`` best first."""

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict[str, Any]]) -> None: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def all_ids(self) -> set[str]: ...

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float, np.ndarray | None]]: ...

    def count(self) -> int: ...

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]: ...


@runtime_checkable
class FilteringStore(VectorStore, Protocol):
    """A vector store that applies metadata filters inside its search (:mod:`crag.metadata`).

    ``where`` maps a key to the values it may have (any of them); every key must match. A
    store declares the capability with ``filters_metadata = True``: a parameter is invisible to
    a runtime check, an attribute is not.
    """

    filters_metadata: Literal[True]

    def query(
        self, vector: np.ndarray, k: int, *, where: Filters | None = None
    ) -> list[tuple[str, float, np.ndarray | None]]: ...


@runtime_checkable
class FullTextStore(VectorStore, Protocol):
    """A vector store that also ranks by keywords (``kb.keyword_index = "store"``, e.g. Milvus BM25).

    ``where`` is given only to a store that is also a :class:`FilteringStore`.
    """

    def query_text(self, text: str, k: int, *, where: Filters | None = None) -> list[tuple[str, float]]: ...


@runtime_checkable
class RefreshableStore(VectorStore, Protocol):
    """A vector store whose process-local view can go stale: ``refresh()`` reopens it to see
    what other processes wrote (Chroma's embedded engine, Milvus' session consistency)."""

    def refresh(self) -> None: ...


@runtime_checkable
class ReleasableStore(VectorStore, Protocol):
    """A vector store that can drop its in-memory index (``release``) and load it again
    (``warm_up``), so a large keyword rebuild does not sit on top of it."""

    def release(self) -> None: ...

    def warm_up(self) -> None: ...


@dataclass(frozen=True)
class StoreSpec:
    """What a vector store factory is built from (parsed from ``kb.store_uri``).

    ``address`` is the backend's own (a server URL, a file path), ``None`` for the default
    place inside the knowledge base folder ``kb_path``.
    """

    kb_path: Path
    address: str | Path | None = None
    collection: str = ""
    ef_search: int = 200  # HNSW search breadth: recall against latency
    full_text: bool = False  # BM25 inside the store (kb.keyword_index = 'store')


@runtime_checkable
class Retriever(Protocol):
    """Searches a knowledge base: the best ``k`` hits for a query, best first."""

    def search(self, query: str, *, k: int) -> list[Hit]: ...


Progress = Callable[[int, int, str], None]  # (bytes done, bytes total, current file) of an ingest
# Builds, or brings up to date, the index of a local corpus (a folder or a .jsonl file).
CorpusIndexer = Callable[[Path, Progress | None], Retriever]


@runtime_checkable
class Evaluator(Protocol):
    """Grades passages for a query and gives a set-level confidence in [0, 1].

    ``query`` carries the question's text and language (``Query.of(text)`` makes one for
    a text that arrives alone).
    """

    name: str

    def grade(self, query: Query, passages: Sequence[Passage]) -> Evaluation: ...


@runtime_checkable
class LLMEvaluator(Evaluator, Protocol):
    """An evaluator that asks an LLM (the LLM judge, an ensemble holding one).

    The pipeline grades each request with ``with_llm(guarded)``: the same evaluator bound
    to the request's guarded model, so grading counts against the request's token budget
    and stops at its deadline like every other LLM call.
    """

    def with_llm(self, llm: LLM) -> Evaluator: ...


@dataclass
class Completion:
    """What an LLM returned, with token counts for budgets and traces."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""


Messages = Sequence[dict[str, str]]  # chat messages: {"role": ..., "content": ...}


class CompletionOptions(TypedDict, total=False):
    """The keyword options of :meth:`LLM.complete`, typed for wrappers that pass them on.

    A wrapper (budget, timeout, call counter) declares ``**options: Unpack[CompletionOptions]``
    and hands them to the model it wraps unchanged.
    """

    max_tokens: int
    temperature: float
    json_schema: dict[str, Any] | None


@runtime_checkable
class LLM(Protocol):
    """A chat model. ``json_schema`` asks the backend for JSON output where it supports it."""

    model_id: str

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion: ...


@runtime_checkable
class YesNoLLM(LLM, Protocol):
    """An LLM that reports P("yes") for its first answer token (no text generated).

    The Correct-path verification asks it when ``offers(llm, YesNoLLM)``; an
    OpenAI-compatible server reads it from ``logprobs``.
    """

    def yes_probability(self, messages: Sequence[dict[str, str]]) -> float: ...


@runtime_checkable
class ScoringLLM(YesNoLLM, Protocol):
    """An LLM that also reports the probabilities of given choices for its first answer token.

    The LLM judge's ``logprob`` mode (P(yes)) and ``crag eval``'s judge (P of each digit)
    use them when ``offers(llm, ScoringLLM)``; other LLMs are asked for text.
    """

    def choice_probabilities(self, messages: Sequence[dict[str, str]], choices: Sequence[str]) -> list[float]: ...


@runtime_checkable
class Guard(Protocol):
    """A wrapper that implements every LLM method for one request (``crag.llm.guard.GuardedLLM``)
    and says which of them the model it guards really has."""

    def offers(self, capability: type[Any]) -> bool: ...


def offers(llm: LLM, capability: type[Any]) -> bool:
    """Whether ``llm`` has an optional capability (:class:`YesNoLLM`, :class:`ScoringLLM`,
    :class:`StreamingLLM`); a :class:`Guard` answers for the model it guards.

    >>> class Plain:
    ...     model_id = "plain"
    ...     def complete(self, messages, **kw): return Completion("Hi.")
    >>> offers(Plain(), YesNoLLM), offers(Plain(), LLM)
    (False, True)
    """
    if isinstance(llm, Guard):
        return llm.offers(capability)
    return isinstance(llm, capability)


TokenStream = Generator[str, None, Completion]
"""Text deltas as the model writes them; the generator's return value is the whole
:class:`Completion` (text and token counts), so ``done = yield from llm.stream(...)``.
An empty delta says the model is still reading its prompt: a reader that stops there (closes
the generator) frees the model without waiting for the whole prompt."""


@runtime_checkable
class SessionLLM(LLM, Protocol):
    """An LLM with one cache per context, that can open a second one: a short call (a yes/no
    check of a sentence) runs there while a stream of the first is still open. Servers need no
    such thing (each request is its own); the embedded llama.cpp model does."""

    def session(self) -> LLM: ...


@runtime_checkable
class StreamingLLM(LLM, Protocol):
    """An LLM that can hand over its reply token by token.

    ``stream`` yields text deltas and *returns* the :class:`Completion`; closing the
    generator early stops generation (the model is freed for the next call). Text-only:
    JSON-constrained calls go through ``complete``.
    """

    def stream(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int = 512, temperature: float = 0.0
    ) -> TokenStream: ...


def stream_completion(
    llm: LLM, messages: Sequence[dict[str, str]], *, max_tokens: int = 512, temperature: float = 0.0
) -> TokenStream:
    """``llm.stream(...)`` when the LLM streams, else ``complete`` as a single delta.

    >>> class Plain:  # an LLM without ``stream``
    ...     model_id = "plain"
    ...     def complete(self, messages, **kw): return Completion("Hi there.", 3, 2)
    >>> list(stream_completion(Plain(), [{"role": "user", "content": "Hi"}]))
    ['Hi there.']
    """
    if isinstance(llm, StreamingLLM):
        return (yield from llm.stream(messages, max_tokens=max_tokens, temperature=temperature))
    done = llm.complete(messages, max_tokens=max_tokens, temperature=temperature)
    if done.text:
        yield done.text
    return done


def read_out(reply: TokenStream, between: Callable[[], None] | None = None) -> Completion:
    """Read ``reply`` to its end and return its :class:`Completion`; ``between`` runs after each
    piece (a guard's heartbeat: what it raises stops the reading, the caller closes ``reply``).

    >>> def reply():
    ...     yield "Hi "
    ...     return Completion("Hi there.", 3, 2)
    >>> read_out(reply()).text
    'Hi there.'
    """
    while True:
        try:
            next(reply)
        except StopIteration as end:
            done: Completion = end.value
            return done
        if between is not None:
            between()


@runtime_checkable
class WebSearch(Protocol):
    """An external knowledge source: the article's web search or a larger corpus."""

    name: str

    def search(self, query: str, *, k: int) -> list[WebResult]: ...
