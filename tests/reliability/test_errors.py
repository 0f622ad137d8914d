"""The one error tree: every error crag raises is a CragError, drawn in errors.py."""

from __future__ import annotations

import inspect
import logging
from pathlib import Path

import pytest

import crag.errors as errors
from crag.correct.decompose import decompose
from crag.errors import (
    ApiError,
    BackendError,
    BudgetExceeded,
    CragError,
    LLMBudgetExceeded,
    LLMError,
    LLMReplyError,
    SearchBudgetExceeded,
    SearchError,
)
from crag.store.keyword import BM25Index
from crag.testing.fakes import ScriptedLLM
from crag.types import Query

pytestmark = pytest.mark.unit


def test_every_error_class_is_in_the_tree_and_in_the_drawing() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(classes) >= 18
    for cls in classes:
        assert issubclass(cls, CragError), cls
        assert cls.__name__ in errors.__doc__, f"{cls.__name__} missing from the drawn tree"


def test_reply_budget_and_api_errors_have_their_place() -> None:
    assert issubclass(LLMReplyError, LLMError) and not issubclass(LLMReplyError, ValueError)
    assert issubclass(BudgetExceeded, BackendError)
    assert issubclass(LLMBudgetExceeded, BudgetExceeded) and issubclass(LLMBudgetExceeded, LLMError)
    assert issubclass(SearchBudgetExceeded, BudgetExceeded) and issubclass(SearchBudgetExceeded, SearchError)
    e = ApiError(422, "validation_error", "question: Field required")
    assert isinstance(e, CragError) and (e.status, e.type) == (422, "validation_error")


def test_an_unparseable_reply_is_an_llm_reply_error_and_degrades() -> None:
    subs, notes = decompose(Query.of("What fuels a gas stove, and when was it sold?"), ScriptedLLM(["not json at all"]))
    assert subs  # the rules answered instead
    (note,) = notes
    assert "LLM decomposition failed (decomposition reply was not JSON" in note


def test_a_bug_is_not_downgraded_to_a_degradation() -> None:
    class Buggy(ScriptedLLM):
        def complete(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
            raise ValueError("a real bug")

    with pytest.raises(ValueError, match="a real bug"):
        decompose(Query.of("What fuels a gas stove, and when was it sold?"), Buggy([]))


def test_a_damaged_keyword_index_is_logged_with_its_reason(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    idx = BM25Index(tmp_path / "bm25")
    texts = {"a": "Paris is in France", "b": "Berlin is in Germany"}
    idx.rebuild(list(texts), lambda ids: {i: texts[i] for i in ids}, generation=3)
    (tmp_path / "bm25" / "crag_meta.json").write_text("{not json", "utf-8")
    again = BM25Index(tmp_path / "bm25")
    with caplog.at_level(logging.WARNING, logger="crag.store.keyword"):
        again.load()
    assert again.generation == -1 and again.load_error.startswith("JSONDecodeError")
    assert "is damaged (JSONDecodeError" in caplog.text and "rebuilding it from the manifest" in caplog.text
