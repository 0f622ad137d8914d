"""The trace routes: list (with filters), one trace, and replay of a trace's question."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import FastAPI, Query, Request
from starlette.concurrency import run_in_threadpool

from crag.engine import CRAG
from crag.errors import ApiError, CragError
from crag.request import Request as CragRequest
from crag.server.answers import answer_question
from crag.server.collections import Collection, Collections, collection_for
from crag.server.metrics import Metrics
from crag.trace.store import STATUSES

__all__ = ["install"]


def install(app: FastAPI, collections: Collections, metrics: Metrics) -> None:
    """Add ``GET /v1/traces``, ``GET /v1/traces/{id}`` and ``POST /v1/traces/{id}/replay`` to ``app``."""

    def readable(request: Request, name: str | None) -> CRAG:
        return collection_for(request, collections, name).engine

    @app.get("/v1/traces")
    async def list_traces(
        request: Request,
        collection: str | None = Query(None, max_length=64),
        limit: int = Query(50, ge=1, le=500),
        action: str | None = Query(None, pattern="^(correct|ambiguous|incorrect|rag)$"),
        status: str | None = Query(None, pattern=f"^({'|'.join(STATUSES)})$"),
        min_confidence: float | None = Query(None, ge=0, le=1),
        max_confidence: float | None = Query(None, ge=0, le=1),
        min_latency_ms: float | None = Query(None, ge=0),
        max_latency_ms: float | None = Query(None, ge=0),
    ) -> dict[str, Any]:
        engine = readable(request, collection)
        latency = min_latency_ms is not None or max_latency_ms is not None
        # TraceStore filters by confidence in SQL; latency is filtered here on a wider page.
        rows = await run_in_threadpool(
            engine.traces.list,
            limit=min(limit * 10, 2000) if latency else limit,
            action=action,
            min_confidence=min_confidence,
            max_confidence=max_confidence,
            status=status,
        )
        if latency:
            rows = _within_latency(rows, min_latency_ms, max_latency_ms)[:limit]
        return {"traces": rows}

    @app.get("/v1/traces/{trace_id}")
    async def get_trace(
        request: Request, trace_id: str, collection: str | None = Query(None, max_length=64)
    ) -> dict[str, Any]:
        trace: dict[str, Any] = await run_in_threadpool(readable(request, collection).traces.get, trace_id)
        return _shown(trace) or trace

    @app.post("/v1/traces/{trace_id}/replay")
    async def replay(
        request: Request, trace_id: str, collection: str | None = Query(None, max_length=64)
    ) -> dict[str, Any]:
        col = collection_for(request, collections, collection)
        original: dict[str, Any] = await run_in_threadpool(col.engine.traces.get, trace_id)
        ask = _replay_request(col, original, trace_id)
        answer = await answer_question(col, ask, metrics, receive=request.receive)
        replayed = await run_in_threadpool(_trace_or_none, col.engine, answer.trace_id)
        return {"original": _shown(original), "replay": _shown(replayed), "answer": answer.to_dict()}


def _within_latency(
    rows: list[dict[str, Any]], min_latency_ms: float | None, max_latency_ms: float | None
) -> list[dict[str, Any]]:
    """The traces whose latency is known and within the bounds (either may be open)."""
    lo, hi = min_latency_ms or 0.0, max_latency_ms if max_latency_ms is not None else float("inf")
    return [r for r in rows if r.get("latency_ms") is not None and lo <= r["latency_ms"] <= hi]


def _replay_request(col: Collection, original: dict[str, Any], trace_id: str) -> CragRequest:
    """The request a trace recorded, to ask again the same way, answered anew (no cache).

    The server takes no file paths from its clients, so a trace's corpus and cassette paths
    (a request of the CLI or Python) are not followed: the search is the provider by name."""
    question = original.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ApiError(409, "invalid_trace", f"trace {trace_id} has no question to replay")
    asked = CragRequest.from_trace(original)
    return dataclasses.replace(
        asked,
        search_corpus=None,
        search_record=None,
        search_replay=None,
        collection=col.name,
        no_cache=True,  # a replay runs the pipeline again, by definition
        via="http",
        replay_of=str(original.get("id")),
    )


def _shown(trace: dict[str, Any] | None) -> dict[str, Any] | None:
    """A trace for a client: without the server's own settings, which traces recorded before
    they were left out (every collection's name and path, the keys' scopes)."""
    if trace is None or not isinstance(trace.get("settings"), dict) or "server" not in trace["settings"]:
        return trace
    return {**trace, "settings": {k: v for k, v in trace["settings"].items() if k != "server"}}


def _trace_or_none(engine: CRAG, trace_id: str) -> dict[str, Any] | None:
    if not engine.settings.trace.enabled:
        return None
    try:
        return engine.traces.get(trace_id)
    except CragError:
        return None
