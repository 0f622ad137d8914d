"""Labelled (query, passage) pairs: read them from JSONL and grade them in batches.

``crag grade``, ``crag calibrate`` and ``crag evaluator train`` read the same file
format; every line is validated before any work starts, so a bad line costs nothing.

>>> from crag.grade.heuristic import HeuristicEvaluator
>>> rows = [{"query": "capital of France", "passage": "Paris is the capital of France."}]
>>> [round(s, 2) > 0 for s, _ in score_pairs(HeuristicEvaluator(), rows)]
[True]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crag.errors import InputError
from crag.grade.classify import query_for
from crag.protocols import Evaluator
from crag.types import Passage, Query

if TYPE_CHECKING:
    from crag.config import CragSettings

__all__ = ["MAX_PASSAGE_CHARS", "read_jsonl_objects", "read_pairs", "score_pairs"]

MAX_PASSAGE_CHARS = 100_000


def read_jsonl_objects(path: Path, *, what: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line; one-line ``InputError`` naming a bad line.

    ``what`` describes the expected lines in the not-found message.
    """
    if not path.is_file():
        hint = f"; pass a JSONL file of {what} lines" if what else ""
        raise InputError(f"{path} not found{hint}")
    try:
        lines = path.read_text("utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text; re-save it as UTF-8") from None
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise InputError(f"{path} line {n}: not valid JSON") from None
        if not isinstance(row, dict):
            raise InputError(f"{path} line {n}: expected a JSON object")
        rows.append((n, row))
    return rows


def read_pairs(path: Path, *, need_label: bool = False) -> list[dict[str, Any]]:
    """Read ``{"query", "passage"[, "label"]}`` JSONL; one-line InputError naming the bad line."""
    rows = []
    for n, row in read_jsonl_objects(path, what='{"query", "passage"}'):
        for key in ("query", "passage"):
            if not isinstance(row.get(key), str):
                raise InputError(f"{path} line {n}: field {key!r} is missing or not a string")
        if not row["query"].strip():
            raise InputError(f"{path} line {n}: empty query")
        if need_label:
            label = row.get("label")
            if isinstance(label, bool) or label not in (0, 1, 0.0, 1.0):
                raise InputError(f"{path} line {n}: field 'label' must be 0 or 1, got {label!r}")
        rows.append(row)
    if not rows:
        raise InputError(f"{path} has no pairs")
    return rows


def score_pairs(
    evaluator: Evaluator,
    rows: Sequence[dict[str, Any]],
    progress: Callable[[int], None] | None = None,
    settings: CragSettings | None = None,
) -> list[tuple[float, str]]:
    """Grade every pair, batching passages of the same query; ``(score, reason)`` in input order.

    With ``settings`` each question gets its type and thresholds as a request would (an
    ensemble's agreement rule decides with them); without, the defaults of ``Query.of``.
    """
    by_query: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_query.setdefault(r["query"], []).append(i)
    out: list[tuple[float, str]] = [(0.0, "")] * len(rows)
    for query, idx in by_query.items():
        passages = [Passage(str(i), rows[i]["passage"][:MAX_PASSAGE_CHARS]) for i in idx]
        ev = evaluator.grade(query_for(query, settings) if settings else Query.of(query), passages)
        for i, g in zip(idx, ev.grades, strict=True):
            out[i] = (float(g.score), g.reason or ev.degraded)
        if progress:
            progress(len(idx))
    return out
