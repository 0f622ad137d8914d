"""The trace viewer: static HTML/CSS/JS served from this package, no build step, no CDN.

The pages are shells: the browser fetches ``/v1/traces`` (the chat page:
``/v1/chat/completions`` and ``/v1/models``) with the user's API key (kept in
``sessionStorage``) and builds the DOM with ``textContent`` only, so user text is never
parsed as HTML. A strict Content-Security-Policy backs that up.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["STATIC_DIR", "install", "router"]

STATIC_DIR = Path(__file__).with_name("static")

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter()


class _StaticFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def _page(name: str) -> FileResponse:
    return FileResponse(STATIC_DIR / name, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)


@router.get("/ui", include_in_schema=False)
async def ui_index() -> Response:
    """Recent requests, filterable by action, confidence and latency."""
    return _page("index.html")


@router.get("/ui/", include_in_schema=False)
async def ui_index_slash() -> Response:
    return RedirectResponse("/ui")


@router.get("/ui/chat", include_in_schema=False)
async def ui_chat() -> Response:
    """A conversation over ``/v1/chat/completions``: answers stream in, citations show their quotes."""
    return _page("chat.html")


@router.get("/ui/trace/{trace_id}", include_in_schema=False)
async def ui_trace(trace_id: str) -> Response:
    """One trace as a pipeline timeline; the page reads the id from its own URL."""
    return _page("trace.html")


def install(app: FastAPI) -> None:
    """Add the UI pages and their static files to ``app``."""
    app.include_router(router)
    app.mount("/ui/static", _StaticFiles(directory=STATIC_DIR), name="ui-static")
