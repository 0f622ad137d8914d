"""``POST /v1/feedback`` and ``GET /v1/feedback/{trace_id}``: users rate answers (👍/👎).

Ratings are stored beside the traces (:meth:`crag.trace.store.TraceStore.rate`) and
become evaluator training pairs with ``crag feedback export`` (:mod:`crag.grade.feedback`).
The routes sit behind the same API-key guard as every ``/v1`` route.

>>> from crag.server.feedback import FeedbackRequest
>>> FeedbackRequest.model_validate({"trace_id": "20261130031205-3fa2c1", "rating": "down"}).rating
'down'
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI, Query, Request
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from starlette.concurrency import run_in_threadpool

from crag.engine import CRAG
from crag.errors import ConfigError
from crag.grade.feedback import context_grades, feedback_pairs, likely_grader_miss
from crag.server.body import document_bodies, parse_body
from crag.server.collections import Collections, collection_for

__all__ = ["FeedbackRequest", "install"]

MAX_COMMENT_CHARS = 2000


class FeedbackRequest(BaseModel):
    """Body of ``POST /v1/feedback``: a rating of the answer a trace recorded."""

    model_config = ConfigDict(extra="forbid")
    trace_id: StrictStr = Field(min_length=6, max_length=128)
    rating: Literal["up", "down"]
    comment: StrictStr | None = Field(None, max_length=MAX_COMMENT_CHARS)
    collection: StrictStr | None = Field(None, max_length=64)  # whose traces hold trace_id


def install(app: FastAPI, collections: Collections) -> None:
    """Add the feedback routes to ``app`` (and their request schema to ``/openapi.json``)."""

    def engine_for(request: Request, name: str | None) -> CRAG:
        return collection_for(request, collections, name).engine  # rating is part of reading: read keys may

    @app.post("/v1/feedback")
    async def post_feedback(request: Request) -> dict[str, Any]:
        req = await parse_body(request, FeedbackRequest)
        return await run_in_threadpool(_rate, engine_for(request, req.collection), req)

    @app.get("/v1/feedback/{trace_id}")
    async def get_feedback(
        request: Request, trace_id: str, collection: str | None = Query(None, max_length=64)
    ) -> dict[str, Any]:
        return await run_in_threadpool(_status, engine_for(request, collection), trace_id)

    document_bodies(app, {("/v1/feedback", "post"): FeedbackRequest})


def _rate(engine: CRAG, req: FeedbackRequest) -> dict[str, Any]:
    _need_traces(engine)
    comment = (req.comment or "").strip() or None
    row = engine.traces.rate(req.trace_id, req.rating, comment)
    return _status(engine, row["trace_id"])


def _status(engine: CRAG, trace_id: str) -> dict[str, Any]:
    """A trace's rating (None when unrated), the context grades and the grader-miss flag."""
    _need_traces(engine)
    trace = engine.traces.get(trace_id)  # 404 for an unknown id
    full_id = str(trace["id"])
    rows = engine.traces.feedback(full_id)
    fb = rows[0] if rows else {}
    pairs = feedback_pairs(trace, fb["rating"], fb.get("comment")) if fb.get("rating") else []
    return {
        "trace_id": full_id,
        "rating": fb.get("rating"),
        "comment": fb.get("comment"),
        "rated_at": fb.get("created_at"),
        "context_grades": context_grades(trace),
        "likely_grader_miss": likely_grader_miss(trace, fb.get("rating")),
        # what `crag feedback export` will write for this rating, and what it holds for review
        "pairs": [_pair(p) for p in pairs if not p["review"]],
        "review": [_pair(p) for p in pairs if p["review"]],
    }


def _pair(p: dict[str, Any]) -> dict[str, Any]:
    return {k: p[k] for k in ("passage", "label", "source", "grade", "why", "review")}


def _need_traces(engine: CRAG) -> None:
    if not engine.settings.trace.enabled:
        raise ConfigError("tracing is off (trace.enabled = false): there is no trace to rate")
