"""Shared test setup. The layout mirrors ``src/crag``: ``tests/<package>/test_*.py`` for each
step or backend package (correct, grade, generate, llm, kb, search, server, trace, eval, cli),
``tests/reliability`` for fault injection, fuzzing and process hygiene, and the top level
for what spans the whole engine (architecture, end to end, pipeline flow, registries).

Fakes live in :mod:`crag.testing.fakes` (control flow only; capabilities are proven with the
real components); the fixtures below hand out fresh ones. ``llm_fixtures`` (the bundled
models and the project cache) is importable from every folder, because pytest puts the
directory of this rootmost conftest on ``sys.path``.
"""

from __future__ import annotations

import pytest

from crag.testing.fakes import HashEmbedder, MarkerEvaluator, ScriptedLLM, StaticWebSearch


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    """A deterministic embedder: equal texts embed equally, nothing is downloaded."""
    return HashEmbedder()


@pytest.fixture
def marker_evaluator() -> MarkerEvaluator:
    """Grades by marker words: "gold" 0.9, "partial" 0.5, anything else 0.1."""
    return MarkerEvaluator()


@pytest.fixture
def answer_llm() -> ScriptedLLM:
    """An LLM that answers "Paris [1]." to everything and records the prompts."""
    return ScriptedLLM(["Paris [1]."])


@pytest.fixture
def no_results_search() -> StaticWebSearch:
    """An external source that finds nothing (and records the queries it got)."""
    return StaticWebSearch([])
