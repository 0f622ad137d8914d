"""The HTTP service: ``/v1/ask``, OpenAI-compatible chat, ingest, traces, metrics and the UI.

The engine is blocking (embeddings, SQLite, a local LLM that serialises calls with a
lock), so every engine call runs in the threadpool and the event loop stays free for
health checks, trace browsing and streaming keep-alives.

>>> from crag.engine import CRAG
>>> from crag.server.app import create_app
>>> app = create_app(CRAG.from_config(kb={"path": "kb"}), api_keys=["s3cret-key"])   # doctest: +SKIP
>>> # uvicorn.run(app, host="127.0.0.1", port=8000)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from crag._version import __version__
from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import ApiError, ConfigError, CragError
from crag.procs import die_with_parent
from crag.redact import install_log_redaction, redact_text
from crag.server import answers, docs, documents, feedback, job_worker, jobs, replicas, traces, ui, uploads
from crag.server import collections as collections_routes
from crag.server.auth import (
    ApiKey,
    Authenticator,
    BodyLimitMiddleware,
    GuardMiddleware,
    RateLimiter,
    all_keys,
    check_origins,
    is_loopback,
)
from crag.server.body import describe_errors, document_bodies
from crag.server.collections import Collections, kb_ready
from crag.server.connection import ConnectionLimits, guarded_protocol
from crag.server.hangup import HangUpLogMiddleware
from crag.server.metrics import CONTENT_TYPE_LATEST, Metrics
from crag.server.public import Publisher, PublishMiddleware
from crag.server.schemas import AskRequest, ChatRequest, IngestRequest, RedactedJSONResponse, error_response
from crag.server.stream import crag_error_status

__all__ = ["crag_error_status", "create_app", "serve"]

log = logging.getLogger("crag.server")

SETTINGS_ENV = "CRAG_SERVER_SETTINGS_JSON"  # hands settings to uvicorn worker processes


def create_app(
    engine: CRAG | Collections,
    *,
    api_keys: Sequence[str | ApiKey] | None = None,
    max_body_bytes: int = 1_000_000,
    cors_origins: Sequence[str] = (),
    rate_limit_per_minute: int | None = None,
    worker: jobs.WorkerOptions | None = None,
) -> FastAPI:
    """Build the ASGI app around one engine, or several collections (:mod:`crag.server.collections`).

    ``api_keys`` defaults to ``CRAG_API_KEYS`` (every collection, read and write) plus the
    scoped ``[[server.keys]]`` of the settings; with no keys only loopback clients are
    served. ``max_body_bytes`` caps every request body (413), ``rate_limit_per_minute``
    caps each key (429 with ``Retry-After``). ``cors_origins`` lists the web origins whose pages may
    call the API from a browser (``crag serve --cors-origin``). ``worker`` also runs an ingest
    worker for the collections' queued jobs while the app runs (``crag serve --worker``).
    """
    collections = engine if isinstance(engine, Collections) else Collections.single(engine)
    settings = next(iter(collections)).engine.settings
    keys = list(api_keys) if api_keys is not None else all_keys(settings)
    origins = check_origins(cors_origins)
    auth = Authenticator(keys)  # checks every key fits a Bearer header, and registers it for redaction
    install_log_redaction()
    metrics = Metrics()
    app = _new_app(collections, metrics)
    limiter = RateLimiter(rate_limit_per_minute) if rate_limit_per_minute else None
    _add_middleware(app, Publisher(collections, collections.default), auth, limiter, max_body_bytes, origins)
    _install_error_handlers(app, metrics)
    _install_routes(app, collections, metrics)
    jobs.install(app, collections)
    if worker is not None:
        job_worker.run_worker_with(app, collections, worker)
    return app


def _new_app(collections: Collections, metrics: Metrics) -> FastAPI:
    """The bare app, holding the collections and the metrics its routes share.

    FastAPI's own /docs loads Swagger UI from a CDN; ours serves it from a package
    (crag.server.docs), as the service must work offline. Every JSON body leaves through
    RedactedJSONResponse (crag.redact, the one redaction point).
    """
    app = FastAPI(
        title="crag",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        default_response_class=RedactedJSONResponse,
    )
    app.state.collections = collections
    app.state.metrics = metrics
    return app


def _install_routes(app: FastAPI, collections: Collections, metrics: Metrics) -> None:
    """Every route, each module installing its own: the UI and docs, then the API."""
    ui.install(app)
    docs.install(app)
    feedback.install(app, collections)
    collections_routes.install(app, collections)
    document_bodies(
        app,
        {
            ("/v1/ask", "post"): AskRequest,
            ("/v1/chat/completions", "post"): ChatRequest,
            ("/v1/ingest", "post"): IngestRequest,
        },
    )
    _install_probes(app, collections, metrics)
    answers.install(app, collections, metrics)
    replicas.install(app, collections)  # /readyz: the shared state database and Milvus answer
    uploads.install(app, collections)
    documents.install(app, collections)
    traces.install(app, collections, metrics)


def _install_probes(app: FastAPI, collections: Collections, metrics: Metrics) -> None:
    """``/healthz`` (is every knowledge base there) and ``/metrics`` (Prometheus)."""

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        ready = all([await run_in_threadpool(kb_ready, c) for c in collections])
        return {"status": "ok", "version": __version__, "kb_ready": ready}

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)


def _add_middleware(
    app: FastAPI,
    publisher: Publisher,
    auth: Authenticator,
    limiter: RateLimiter | None,
    max_body_bytes: int,
    origins: list[str],
) -> None:
    # Outermost last: metrics see every status, CORS headers reach error responses too,
    # and the guards answer before any body is parsed. Innermost: every body the routes and
    # their error handlers send names documents, not server paths (crag.server.public).
    app.add_middleware(PublishMiddleware, publisher=publisher)
    app.add_middleware(_HeadMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    app.add_middleware(GuardMiddleware, auth=auth, limiter=limiter)
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "HEAD", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["X-Trace-Id", "Retry-After"],
        )
    app.add_middleware(_MetricsMiddleware, metrics=app.state.metrics)
    app.add_middleware(HangUpLogMiddleware)  # outermost: sees the server's own receive and send


def _install_error_handlers(app: FastAPI, metrics: Metrics) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> Response:
        return error_response(exc.status, exc.type, str(exc), param=exc.param, code=exc.code)

    @app.exception_handler(CragError)
    async def crag_error(_: Request, exc: CragError) -> Response:
        status, type_ = crag_error_status(exc)
        if status >= 500:
            log.warning("%s: %s", type(exc).__name__, redact_text(str(exc)))
        return error_response(status, type_, str(exc))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> Response:
        return error_response(422, "validation_error", describe_errors(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        names = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        # Keep the exception's headers: a 405 must say which methods the path takes (Allow).
        headers = dict(exc.headers) if exc.headers else None
        return error_response(exc.status_code, names.get(exc.status_code, "http_error"), message, headers=headers)

    @app.exception_handler(Exception)
    async def internal_error(_: Request, exc: Exception) -> Response:
        log.error("unhandled %s", type(exc).__name__, exc_info=exc)
        metrics.error("internal_error")
        return error_response(500, "internal_error", "internal error; see the server log")


class _HeadMiddleware:
    """Answers ``HEAD`` as ``GET`` without the body (RFC 9110 9.3.2): uptime checks and
    ``curl -I`` use it, and FastAPI routes declared ``GET`` would otherwise answer 405."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Any) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}  # Content-Length still says what GET would send
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


class _MetricsMiddleware:
    """Counts every response by route template and status (bounded label values)."""

    ROUTES = (
        "/healthz",
        "/readyz",
        "/metrics",
        "/v1/ask",
        "/v1/chat/completions",
        "/v1/ingest",
        "/v1/documents",
        "/v1/traces",
        "/v1/feedback",
        "/v1/models",
        "/v1/collections",
        "/ui",
    )

    def __init__(self, app: Any, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def capture(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            self.metrics.request(self.route(scope.get("path", "")), status)

    @classmethod
    def route(cls, path: str) -> str:
        if path in cls.ROUTES:
            return path
        if path.startswith("/v1/traces/"):
            return "/v1/traces/{id}/replay" if path.endswith("/replay") else "/v1/traces/{id}"
        if path.startswith("/v1/feedback/"):
            return "/v1/feedback/{id}"
        if path.startswith("/v1/models/"):
            return "/v1/models/{id}"
        if path.startswith("/v1/jobs/"):
            return "/v1/jobs/{id}"
        if path.startswith("/v1/documents/"):
            return "/v1/documents/{id}"
        if path.startswith("/ui/trace/"):
            return "/ui/trace/{id}"
        if path.startswith("/ui/"):
            return "/ui/static"
        return "other"


# -- running the server -------------------------------------------------------------------
def serve(
    settings: CragSettings,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    *,
    rate_limit_per_minute: int | None = None,
    max_body_bytes: int = 1_000_000,
    cors_origins: Sequence[str] = (),
    worker: jobs.WorkerOptions | None = None,
) -> None:
    """Run the service with uvicorn; refuses a non-loopback ``host`` without API keys.

    The server holds ``settings.server.collections`` (or ``kb.path`` alone). With
    ``workers > 1`` every worker process loads its own models and keeps its own
    rate-limit counters. ``server.shared`` (one of several replicas) refuses state that
    would stay in this machine's folder (:func:`crag.server.replicas.check_shareable`).
    """
    import uvicorn

    keys = _checked_keys(settings, host)
    if workers > 1:
        _check_shareable_store(settings, workers)
    if settings.server.shared:
        replicas.check_shareable(settings)
    options: dict[str, Any] = {
        "rate_limit_per_minute": rate_limit_per_minute,
        "max_body_bytes": max_body_bytes,
        "cors_origins": check_origins(cors_origins),
    }
    if worker is not None:
        options["worker"] = _checked_worker(settings, worker)
    limits = uvicorn_limits(settings)
    if workers > 1:
        # Worker processes import the app by name, so settings travel through the environment.
        portable = {**options, "worker": dataclasses.asdict(worker) if worker else None}
        payload = {"settings": settings.model_dump(mode="json"), "options": portable, "parent": os.getpid()}
        os.environ[SETTINGS_ENV] = json.dumps(payload)
        uvicorn.run("crag.server.app:app_from_env", factory=True, host=host, port=port, workers=workers, **limits)
        return
    app = create_app(Collections.from_settings(settings), api_keys=keys, **options)
    uvicorn.run(app, host=host, port=port, **limits)


def _checked_keys(settings: CragSettings, host: str) -> list[str | ApiKey]:
    """The server's keys; none is refused off loopback, and a key no client could send is an error now."""
    keys = all_keys(settings)
    Authenticator(keys)  # a key no client could send is an error now, not a 401 later
    if not keys and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host} without API keys; set CRAG_API_KEYS=key1,key2 (or [[server.keys]]) "
            "or use --host 127.0.0.1"
        )
    return keys


def _checked_worker(settings: CragSettings, worker: jobs.WorkerOptions) -> jobs.WorkerOptions:
    """``--worker`` takes queued jobs, which exist only with a shared state database."""
    if not settings.kb.state_uri:
        raise ConfigError(
            "crag serve --worker takes queued ingest jobs, which need kb.state_uri = postgresql://...; "
            "without it an upload is ingested at once"
        )
    return worker


def uvicorn_limits(settings: CragSettings) -> dict[str, Any]:
    """uvicorn options for ``[server]``: header size (431), header and idle timeouts (crag.server.connection)."""
    s = settings.server
    limits = ConnectionLimits(s.max_header_kb * 1024, s.header_timeout, s.idle_timeout)
    return {
        "http": guarded_protocol(limits),
        "timeout_keep_alive": s.idle_timeout,  # idle kept-alive connections
        "h11_max_incomplete_event_size": 2 * limits.max_header_bytes,  # ours answers 431 first
    }


def _check_shareable_store(settings: CragSettings, workers: int) -> None:
    from crag.store.factory import make_vector_store

    paths = list(settings.server.collections.values()) or [Path(settings.kb.path)]
    stores = [make_vector_store(settings.kb.store_uri, Path(p)) for p in paths]  # lazy: connects to nothing
    if any(getattr(store, "is_lite", False) for store in stores):
        raise ConfigError(
            f"--workers {workers} cannot share the Milvus Lite file {settings.kb.store_uri} (one process per "
            "file): use --workers 1, or a Milvus server (kb.store_uri = milvus://host:19530)"
        )


def app_from_env() -> FastAPI:
    """App factory for uvicorn worker processes started by :func:`serve`.

    A worker dies with the ``crag serve`` process that started it (``kill -9`` included), so
    no worker is left serving on the port (:func:`crag.procs.die_with_parent`).
    """
    payload = json.loads(os.environ[SETTINGS_ENV])
    if payload.get("parent"):
        die_with_parent(int(payload["parent"]))  # uvicorn starts workers from its main thread
    settings = CragSettings(**payload["settings"])
    options = dict(payload["options"])
    if options.get("worker"):
        options["worker"] = jobs.WorkerOptions(**options["worker"])
    return create_app(Collections.from_settings(settings), **options)
