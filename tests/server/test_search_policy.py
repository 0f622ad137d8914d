"""The operator decides what clients may choose (issue 33): a request's search provider.

With ``[search] provider = "none"`` a client asked ``{"search": "searxng"}`` and the server
queried 127.0.0.1:8888; ``tavily`` and ``duckduckgo`` attempted outbound calls and ``brave`` or
``corpus`` answered 503. Now a request may pick only ``[search] client_choices`` (default: the
configured provider) or ``none``; anything else is a 403 in one line, and the loopback stub
that stands in for every provider sees no request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.server.app import create_app
from crag.testing.stubs import StubLLM, StubSearch

pytestmark = pytest.mark.integration

QUESTION = "Who designed the Zorblax Bridge? 佐布拉克斯大桥是谁设计的？"
CHOICES = ["searxng", "duckduckgo", "tavily", "brave", "corpus", "no-such-provider", "../../etc/passwd", "Tavily"]


@pytest.fixture(scope="module")
def stubs() -> Iterator[tuple[StubLLM, StubSearch]]:
    with StubLLM() as llm, StubSearch() as web:
        yield llm, web


def _engine(root: Path, llm: StubLLM, web: StubSearch, **search: object) -> CRAG:
    corpus = root / "corpus"
    corpus.mkdir(exist_ok=True)
    (corpus / "c.txt").write_text("A corpus the operator never meant to serve.", "utf-8")
    settings = CragSettings(
        kb={"path": root / "kb"},
        llm={"backend": "openai", "base_url": llm.url, "retries": 0},
        evaluator={"backend": "heuristic"},
        correction={"verify_correct": False, "search_cache_ttl": 0},
        search={
            "searxng_url": web.url,
            "tavily_url": web.url,
            "brave_url": web.url,
            "corpus_path": corpus,
            "retries": 0,
            **search,
        },
    )
    engine = CRAG(settings)
    docs = root / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "a.txt").write_text("Beijing is the capital of China. 北京是中国的首都。", "utf-8")
    engine.ingest([docs])
    return engine


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory, stubs: tuple[StubLLM, StubSearch]) -> CRAG:
    return _engine(tmp_path_factory.mktemp("locked"), *stubs, provider="none")


def test_a_client_cannot_pick_a_provider_the_operator_did_not_enable(
    locked: CRAG, stubs: tuple[StubLLM, StubSearch], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-0123456789abcdef")
    monkeypatch.setenv("BRAVE_API_KEY", "brave-test-0123456789")
    _, web = stubs
    before = len(web.requests)
    with TestClient(create_app(locked), client=("127.0.0.1", 50000)) as client:
        for name in CHOICES:
            for stream in (False, True):
                r = client.post("/v1/ask", json={"question": QUESTION, "search": name, "stream": stream})
                assert r.status_code == 403, (name, stream, r.text)
                err = r.json()["error"]
                assert err["type"] == "search_not_allowed"
                assert "\n" not in err["message"] and "[search] client_choices" in err["message"]
        # "none" calls nothing and is always allowed; so is the server's own default.
        assert client.post("/v1/ask", json={"question": QUESTION, "search": "none"}).status_code == 200
        assert client.post("/v1/ask", json={"question": QUESTION}).status_code == 200
    assert len(web.requests) == before  # no outbound call was attempted


def test_the_allow_list_lets_a_client_pick_an_enabled_provider(
    tmp_path: Path, stubs: tuple[StubLLM, StubSearch], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-0123456789abcdef")
    llm, web = stubs
    engine = _engine(tmp_path, llm, web, provider="none", client_choices=["tavily"])
    with TestClient(create_app(engine), client=("127.0.0.1", 50000)) as client:
        before = len(web.requests)
        ok = client.post("/v1/ask", json={"question": "Who designed the Zorblax Bridge?", "search": "tavily"})
        assert ok.status_code == 200, ok.text
        assert len(web.requests) > before  # the enabled provider was really asked
        assert client.post("/v1/ask", json={"question": QUESTION, "search": "searxng"}).status_code == 403
