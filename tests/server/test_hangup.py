"""Control flow of a hang-up before the response starts, with a slow scripted model on uvicorn.

The chat stream holds its reply until the first verified sentence, a JSON answer until the
end: the server must notice a client that leaves meanwhile, stop the model at its next piece,
save the trace as ``cancelled`` and count the request (499) and the outcome. The real model,
the real ``crag serve`` process and its access log are proven in test_hangup_real.py. The chat
page's "New conversation" stops the answer it drops (Chromium, when installed).
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag.config import CragSettings
from crag.engine import CRAG
from crag.registry import LLMS
from crag.server.app import create_app
from crag.testing.fakes import ScriptedLLM
from crag.testing.net import serve_in_thread

pytest.importorskip("uvicorn", reason="needs crag[server]")
pytestmark = pytest.mark.integration

# One sentence of 200 words at 0.05 s a word: 10 s before anything could be sent back.
SLOW = ScriptedLLM(["Zebras have black and white stripes " + "and stripes " * 200 + "[1]."], token_delay=0.05)
LLMS.register("test-hangup-slow", lambda settings, deps: SLOW)
QUESTION = "Do zebras have stripes?"
CHAT = {"model": "crag", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("hangup")
    (root / "zebra.txt").write_text("Zebras have black and white stripes.", "utf-8")
    engine = CRAG(
        CragSettings(kb={"path": root / "kb"}, llm={"backend": "test-hangup-slow"}, search={"provider": "none"})
    )
    engine.ingest([root / "zebra.txt"])
    with serve_in_thread(create_app(engine)) as url:
        yield url


def metric(client: httpx.Client, pattern: str) -> float:
    found = re.search(pattern + r" ([0-9.e+]+)", client.get("/metrics").text)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize(
    ("path", "body"),
    [
        pytest.param("/v1/chat/completions", CHAT, id="chat-stream"),
        pytest.param("/v1/ask", {"question": QUESTION}, id="ask-json"),
    ],
)
def test_a_client_that_leaves_before_the_response_stops_the_model(
    base_url: str, path: str, body: dict[str, Any]
) -> None:
    port = int(base_url.rsplit(":", 1)[1])
    client = httpx.Client(base_url=base_url, timeout=30)
    route = rf'crag_http_requests_total\{{route="{re.escape(path)}",status="499"\}}'
    counted = metric(client, route), metric(client, r'crag_outcomes_total\{status="cancelled"\}')
    stopped = SLOW.stopped
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
                     + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)  # fmt: skip
        while not SLOW.lock.locked():  # the model is writing the first sentence
            time.sleep(0.01)
        time.sleep(0.3)
    hung_up = time.monotonic()
    while SLOW.lock.locked() and time.monotonic() - hung_up < 5:
        time.sleep(0.01)
    assert time.monotonic() - hung_up < 1.0, "the model kept writing for a client that had gone"
    assert SLOW.stopped == stopped + 1
    deadline = time.monotonic() + 10
    while metric(client, route) == counted[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert metric(client, route) == counted[0] + 1
    assert metric(client, r'crag_outcomes_total\{status="cancelled"\}') == counted[1] + 1
    trace = client.get("/v1/traces", params={"limit": 1}).json()["traces"][0]
    assert trace["status"] == "cancelled" and trace["question"] == QUESTION
    client.close()


def test_hang_up_log_line_is_uvicorns(caplog: pytest.LogCaptureFixture) -> None:
    """The 499 line has uvicorn's access-log arguments, so its formatter (and redaction) read it."""
    import asyncio
    import logging

    from crag.server.hangup import HangUpLogMiddleware

    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "http.disconnect"  # the client left before an answer
        await send({"type": "http.response.start", "status": 499, "headers": []})

    async def gone() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def dropped(message: Any) -> None:
        pass

    scope = {"type": "http", "method": "POST", "path": "/v1/ask", "raw_path": b"/v1/ask", "query_string": b"a=1",
             "http_version": "1.1", "client": ("127.0.0.1", 50412)}  # fmt: skip
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        asyncio.run(HangUpLogMiddleware(app)(scope, gone, dropped))
    [record] = [r for r in caplog.records if r.name == "uvicorn.access"]
    assert record.args == ("127.0.0.1:50412", "POST", "/v1/ask?a=1", "1.1", 499)
    assert record.getMessage() == '127.0.0.1:50412 - "POST /v1/ask?a=1 HTTP/1.1" 499'


def test_a_new_conversation_on_the_chat_page_stops_the_answer_being_written(base_url: str) -> None:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium; run scripts/ci_system_deps.sh")
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package")
    stopped = SLOW.stopped
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(f"{base_url}/ui/chat")
            page.wait_for_selector("#model option", state="attached")
            page.locator("#chat-form textarea").fill(QUESTION)
            page.locator("#chat-form textarea").press("Enter")
            while not SLOW.lock.locked():  # the model is writing the first sentence
                time.sleep(0.01)
            page.locator("#new-chat").click()
            left = time.monotonic()
            while SLOW.lock.locked() and time.monotonic() - left < 5:
                time.sleep(0.01)
            assert time.monotonic() - left < 1.0, "the model kept writing an answer the page dropped"
            assert SLOW.stopped == stopped + 1
            sync_api.expect(page.locator("#turns li")).to_have_count(0)
            assert page.locator("#chat-form button").is_enabled()
        finally:
            browser.close()
