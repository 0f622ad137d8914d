"""Connection limits of ``crag serve`` (issue 33): header size (431), header and body timeouts.

Before, 200 MB of request headers were read and answered 200, and idle or slowloris
connections were never closed. Real sockets against uvicorn with crag's guarded protocol
(both parsers uvicorn may use), and one ``crag serve`` process. Socket timeouts here only
keep a broken server from hanging the test; the assertions are on what the server sends.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag.config import CragSettings
from crag.server.app import uvicorn_limits
from crag.testing.net import serve_in_thread
from crag.testing.processes import crag_cli, crag_serve
from crag.testing.stubs import StubLLM

pytestmark = pytest.mark.unit

SETTINGS = CragSettings(server={"max_header_kb": 64, "header_timeout": 1, "idle_timeout": 1})
GUARD = 30.0  # seconds a socket read may take before the test gives up


async def echo_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the whole body, answers with its length."""
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = str(size).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(params=["auto", "h11"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    options = uvicorn_limits(SETTINGS)
    if request.param == "h11":
        from crag.server.connection import ConnectionLimits, guarded_protocol

        options["http"] = guarded_protocol(ConnectionLimits(64 * 1024, 1, 1), parser="h11")
    with serve_in_thread(echo_app, **options) as url:
        host, port = url.removeprefix("http://").split(":")
        yield host, int(port)


def _connect(addr: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(addr, timeout=GUARD)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_1mb_header_is_refused_with_431(server: tuple[str, int]) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
        try:
            for _ in range(16):
                sock.sendall(b"a" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed while we were still sending
        reply = _read_all(sock)
    assert reply.startswith(b"HTTP/1.1 431 ")
    assert b'"type": "headers_too_large"' in reply and b"64 KB" in reply
    # The server is fine afterwards, and headers under the limit pass.
    ok = httpx.get(f"http://{server[0]}:{server[1]}/", headers={"X-Fine": "b" * 60_000}, timeout=GUARD)
    assert ok.status_code == 200


def test_slowloris_headers_get_408_and_an_idle_connection_is_closed(server: tuple[str, int]) -> None:
    with _connect(server) as slow:
        slow.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Drip: 1\r\n")  # and never the blank line
        reply = _read_all(slow)
    assert reply.startswith(b"HTTP/1.1 408 ") and b"request_timeout" in reply
    with _connect(server) as idle:  # connects and sends nothing
        assert _read_all(idle) == b""


def test_a_body_that_stalls_is_cut_off(server: tuple[str, int]) -> None:
    with _connect(server) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"x" * 10)
        assert _read_all(sock) == b""  # closed, no answer: the body never came


def test_keep_alive_pipelining_and_split_heads_still_work(server: tuple[str, int]) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        first = b""
        while first.count(b"HTTP/1.1 200") < 2:
            chunk = sock.recv(65536)
            assert chunk, first
            first += chunk
        for piece in (b"GET / HT", b"TP/1.1\r\nHo", b"st: x\r", b"\n\r", b"\n"):  # a head in five reads
            sock.sendall(piece)
        again = sock.recv(65536)
        assert again.startswith(b"HTTP/1.1 200")
        assert _read_all(sock) == b""  # then the kept-alive connection is closed when idle


@pytest.mark.integration
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups")
def test_crag_serve_refuses_a_1mb_header(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Beijing is the capital of China.", "utf-8")
    with StubLLM() as llm:
        env = {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": llm.url, "CRAG_SEARCH__PROVIDER": "none"}
        assert crag_cli("ingest", str(docs), "--kb", str(tmp_path / "kb"), env=env).returncode == 0
        with crag_serve(tmp_path / "kb", env=env) as url:
            r = httpx.get(f"{url}/healthz", headers={"X-Big": "a" * 1_000_000}, timeout=GUARD)
            assert r.status_code == 431 and r.json()["error"]["type"] == "headers_too_large"
            assert httpx.get(f"{url}/healthz", timeout=GUARD).status_code == 200
