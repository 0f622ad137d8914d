"""The OpenAPI page at ``/docs``, served offline, and ``/`` leading to the UI.

FastAPI's own ``/docs`` loads Swagger UI from a CDN; the service must work without the
internet, so the page loads Swagger UI's files from this server instead. They come from
the ``fastapi-offline`` package (in the ``server`` extra), which bundles Swagger UI 5:
the version that renders the OpenAPI 3.1 FastAPI writes. Without that package ``/docs``
is a plain page that lists the routes and links to ``/openapi.json``.

>>> from fastapi import FastAPI
>>> app = FastAPI(docs_url=None, redoc_url=None)
>>> install(app)
>>> sorted(r.path for r in app.routes if r.path in ("/", "/docs"))
['/', '/docs']
"""

from __future__ import annotations

import html
import importlib.util
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.staticfiles import StaticFiles

__all__ = ["DOCS_PATHS", "install", "swagger_assets"]

DOCS_PATHS = ("/", "/docs", "/openapi.json")  # served without an API key: no data, only the API's shape
ASSETS = "/docs/static"


def swagger_assets() -> Path | None:
    """The folder of Swagger UI's bundled files, or ``None`` when ``fastapi-offline`` is missing."""
    spec = importlib.util.find_spec("fastapi_offline")  # its files only: nothing of it is imported
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "static"
    return folder if (folder / "swagger-ui-bundle.js").is_file() else None


def install(app: FastAPI) -> None:
    """Add ``/docs`` (with its files under ``/docs/static``) and the ``/`` redirect to ``app``."""
    assets = swagger_assets()
    if assets is not None:
        app.mount(ASSETS, StaticFiles(directory=assets), name="docs-static")

    @app.get("/", include_in_schema=False)
    async def root() -> Response:
        return RedirectResponse("/ui")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        if assets is None:
            return HTMLResponse(_plain_page(app))
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
        )


def _plain_page(app: FastAPI) -> str:
    """The routes as a list, for a server without Swagger UI's files."""
    rows = []
    for path, item in sorted(app.openapi().get("paths", {}).items()):
        for method, op in item.items():
            summary = html.escape(str(op.get("summary", "")))
            rows.append(f"<li><code>{method.upper()} {html.escape(path)}</code> {summary}</li>")
    return (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(app.title)} API</title>"
        f"<h1>{html.escape(app.title)} API</h1><p>The OpenAPI description: <a href=/openapi.json>/openapi.json</a>. "
        "Install <code>fastapi-offline</code> (the <code>server</code> extra) for the interactive page.</p>"
        f"<ul>{''.join(rows)}</ul>"
    )
