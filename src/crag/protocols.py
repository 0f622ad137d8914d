"""Backend interfaces. Each has one essential method; everything else is built on it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from crag.types import Evaluation, Passage, WebResult

EmbedKind = Literal["query", "passage"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors (rows of a float32 matrix)."""

    model_id: str

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray: ...


@runtime_checkable
class VectorStore(Protocol):
    """Holds chunk vectors; ``query`` returns ``(id, cosine similarity, vector)`` best first."""

    def upsert(
        self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict[str, Any]]
    ) -> None: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def all_ids(self) -> set[str]: ...

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float, np.ndarray | None]]: ...


@runtime_checkable
class Evaluator(Protocol):
    """Grades passages for a query and gives a set-level confidence in [0, 1]."""

    name: str

    def grade(self, query: str, passages: Sequence[Passage]) -> Evaluation: ...


@dataclass
class Completion:
    """What an LLM returned, with token counts for budgets and traces."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""


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
class WebSearch(Protocol):
    """An external knowledge source: the article's web search or a larger corpus."""

    name: str

    def search(self, query: str, *, k: int) -> list[WebResult]: ...
