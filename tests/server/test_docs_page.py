"""``/docs`` works offline and ``/`` leads to ``/ui``: over HTTP, then in a real headless Chromium.

The browser may reach only the server under test: every other request is aborted and
counted, so a page that still loads Swagger UI from a CDN fails here. A screenshot of
the rendered page goes to ``.cache/artifacts/ui/docs.png``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs crag[server]")
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.server.app import create_app
from crag.server.docs import swagger_assets

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("CRAG_SCREENSHOT_DIR") or ROOT / ".cache" / "artifacts" / "ui")
KEY = "docs-test-key-5151"
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    kb = tmp_path_factory.mktemp("docs") / "kb"
    return create_app(CRAG(CragSettings(kb={"path": kb}, search={"provider": "none"})), api_keys=[KEY])


@pytest.mark.unit
def test_root_redirects_to_the_ui_without_a_key(app: Any) -> None:
    with TestClient(app) as client:
        r = client.get("/", follow_redirects=False)
        assert r.status_code in (302, 307) and r.headers["location"] == "/ui"
        assert client.get("/").status_code == 200  # the UI shell itself


@pytest.mark.unit
def test_docs_page_and_its_files_come_from_this_server(app: Any) -> None:
    assert swagger_assets() is not None, "fastapi-offline (the server extra) is not installed"
    with TestClient(app) as client:
        page = client.get("/docs")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "/docs/static/swagger-ui-bundle.js" in page.text and "/docs/static/swagger-ui.css" in page.text
        assert "cdn" not in page.text.lower() and "https://" not in page.text.split("<body>")[-1]
        js = client.get("/docs/static/swagger-ui-bundle.js")
        assert js.status_code == 200 and "SwaggerUIBundle" in js.text
        assert client.get("/docs/static/swagger-ui.css").status_code == 200
        spec = client.get("/openapi.json").json()  # open, like the page that reads it
        assert "/v1/chat/completions" in spec["paths"] and "/v1/ask" in spec["paths"]
        # The data is not open: the API still wants its key.
        assert client.get("/v1/traces").status_code == 401


@pytest.fixture(scope="module")
def served(app: Any) -> Iterator[str]:
    pytest.importorskip("uvicorn", reason="needs crag[server]")
    from crag.testing.net import serve_in_thread

    with serve_in_thread(app) as url:
        yield url


@pytest.mark.integration
def test_docs_page_renders_offline_in_chromium(served: str) -> None:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium; run scripts/ci_system_deps.sh")
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package")
    outside: list[str] = []

    def only_this_server(route: Any) -> None:
        if route.request.url.startswith(served):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"]  # fmt: skip
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=args, timeout=60_000)
        try:
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.route("**/*", only_this_server)
            page.goto(f"{served}/docs")
            # Swagger UI lists every operation once it has read /openapi.json.
            sync_api.expect(page.locator(".opblock-summary-path", has_text="/v1/chat/completions")).to_be_visible(
                timeout=30_000
            )
            assert page.locator(".opblock").count() >= 5
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "docs.png"))
            page.goto(served)
            assert page.url.endswith("/ui")
        finally:
            browser.close()
    assert outside == [], f"the page reached beyond the server: {outside}"
