"""Shared test setup. The layout mirrors ``src/crag``: ``tests/<package>/test_*.py`` for each
step or backend package (correct, grade, generate, llm, kb, search, server, trace, eval, cli),
``tests/reliability`` for fault injection, fuzzing and process hygiene, and the top level
for what spans the whole engine (architecture, end to end, pipeline flow, registries).

Fakes live in :mod:`crag.testing.fakes` (control flow only; capabilities are proven with the
real components); tests import them from there, and the fixtures below hand out
fresh ones where several tests share the same setup. ``llm_fixtures`` (the bundled
models and the project cache) is importable from every folder, because pytest puts the
directory of this rootmost conftest on ``sys.path``.
"""

from __future__ import annotations

import pytest

from crag.testing.fakes import MarkerEvaluator


@pytest.fixture
def marker_evaluator() -> MarkerEvaluator:
    """Grades by marker words: "gold" 0.9, "partial" 0.5, anything else 0.1."""
    return MarkerEvaluator()
