"""TavilySearch against recorded-style responses served by httpx.MockTransport (no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag.config import CragSettings
from crag.errors import MissingAPIKeyError, SearchError
from crag.registry import SEARCHES, BackendDeps
from crag.search.tavily import TavilySearch
from crag.testing.net import Recorder
from crag.types import WebResult

pytestmark = pytest.mark.unit

CASSETTES = Path(__file__).resolve().parents[1] / "cassettes"
KEY = "tvly-SECRET-test-key-123"


def cassette(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CASSETTES / f"tavily_{name}.json").read_text(encoding="utf-8"))
    return data


def make(recorder: Recorder, **kw: Any) -> TavilySearch:
    kw.setdefault("retries", 1)
    client = httpx.Client(transport=httpx.MockTransport(recorder))
    return TavilySearch(api_key=KEY, base_url="https://tavily.test", client=client, **kw)


def replay(name: str) -> Recorder:
    c = cassette(name)
    return Recorder(httpx.Response(c["response"]["status"], json=c["response"]["body"]))


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    # request_json sleeps between retries; the tests only care that it retries.
    monkeypatch.setattr("crag.http.time.sleep", lambda s: None)


def test_request_shape_and_normalised_results() -> None:
    c = cassette("en")
    rec = replay("en")
    results = make(rec).search(c["request"]["body"]["query"], k=3)

    (req,) = rec.requests
    assert req.method == "POST" and req.url == "https://tavily.test/search"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(req.content)
    assert body == c["request"]["body"]
    assert "api_key" not in body  # the key travels in the header only

    # the third hit has empty content and is dropped
    assert [r.url for r in results] == [
        "https://en.wikipedia.org/wiki/Eiffel_Tower",
        "https://www.toureiffel.paris/en/the-monument/history",
    ]
    first = results[0]
    assert isinstance(first, WebResult)
    assert first.title == "Eiffel Tower - Wikipedia"
    assert first.provider == "tavily"
    assert first.score == pytest.approx(0.91302)
    assert first.published == ""
    assert "31 March 1889" in first.content
    assert first.snippet == first.content[:300] and len(first.snippet) == 300


def test_chinese_query_round_trips_and_keeps_dates() -> None:
    c = cassette("zh")
    rec = replay("zh")
    results = make(rec).search("中国的首都是哪里", k=5)

    assert json.loads(rec.requests[0].content)["query"] == "中国的首都是哪里"
    assert len(results) == 3
    assert results[0].title.startswith("北京")
    assert "首都" in results[0].content
    assert results[0].published == "2024-05-18T08:30:00Z"
    assert results[1].published == ""  # null date
    # untitled hit falls back to its URL; surrounding whitespace is trimmed
    assert results[2].title == c["response"]["body"]["results"][2]["url"]
    assert results[2].content == "北京有三千多年建城史和八百六十多年建都史。"


def test_never_more_than_k() -> None:
    assert len(make(replay("zh")).search("中国的首都是哪里", k=2)) == 2


def test_http_500_then_success_is_retried() -> None:
    c = cassette("en")
    rec = Recorder(httpx.Response(500, text="upstream hiccup"), httpx.Response(200, json=c["response"]["body"]))
    results = make(rec, retries=1).search("eiffel", k=3)
    assert len(rec.requests) == 2
    assert len(results) == 2


def test_http_500_always_raises_search_error() -> None:
    rec = Recorder(httpx.Response(500, text="down"))
    with pytest.raises(SearchError) as info:
        make(rec, retries=2).search("eiffel", k=3)
    assert len(rec.requests) == 3
    assert info.value.backend_id == "tavily" and info.value.step == "search"
    assert "\n" not in str(info.value)


def test_timeout_raises_search_error() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    rec = Recorder(slow)
    with pytest.raises(SearchError, match="timed out"):
        make(rec, retries=1, timeout=0.5).search("eiffel", k=3)
    assert len(rec.requests) == 2


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text="<html>captive portal</html>"),  # not JSON
        httpx.Response(200, json={"query": "q"}),  # no results list
        httpx.Response(200, json={"results": {"title": "x"}}),  # results not a list
        httpx.Response(200, json=["results"]),  # not an object
        httpx.Response(200, json={"results": ["just a string"]}),  # result not an object
        httpx.Response(200, json={"results": [{"title": "t", "url": 3, "content": "c"}]}),
        httpx.Response(200, json={"results": [{"title": "t", "url": "u", "content": ["c"]}]}),
    ],
    ids=["not-json", "no-results", "results-dict", "array", "item-str", "url-int", "content-list"],
)
def test_malformed_payload_raises_search_error(response: httpx.Response) -> None:
    with pytest.raises(SearchError, match="malformed"):
        make(Recorder(response)).search("q", k=3)


def test_odd_scores_become_none() -> None:
    body = {
        "results": [
            {"title": "a", "url": "u1", "content": "x", "score": "high"},
            {"title": "b", "url": "u2", "content": "y", "score": True},
            {"title": "c", "url": "u3", "content": "z"},
        ]
    }
    results = make(Recorder(httpx.Response(200, json=body))).search("q", k=3)
    assert [r.score for r in results] == [None, None, None]


def test_unauthorised_key_is_reported_without_the_key() -> None:
    with pytest.raises(SearchError, match="check the API key") as info:
        make(Recorder(httpx.Response(401, json={"detail": {"error": "Unauthorized"}}))).search("q", k=3)
    assert KEY not in str(info.value) and KEY not in repr(info.value)


def test_key_never_in_errors_or_repr() -> None:
    search = make(Recorder(httpx.Response(500, text=f"echo {KEY}")), retries=0)
    assert KEY not in repr(search)
    with pytest.raises(SearchError) as info:
        search.search("q", k=1)
    assert KEY not in str(info.value)


def test_missing_key_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_TAVILY_KEY", raising=False)
    settings = CragSettings(search={"provider": "tavily", "tavily_api_key_env": "MY_TAVILY_KEY"})
    with pytest.raises(MissingAPIKeyError, match="MY_TAVILY_KEY") as info:
        SEARCHES.create("tavily", settings)
    assert "\n" not in str(info.value)


def test_factory_reads_settings_and_injected_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TAVILY_KEY", KEY)
    settings = CragSettings(
        search={"tavily_api_key_env": "MY_TAVILY_KEY", "tavily_url": "http://127.0.0.1:9/", "retries": 0}
    )
    rec = replay("zh")
    search = SEARCHES.create("tavily", settings, BackendDeps(client=httpx.Client(transport=httpx.MockTransport(rec))))
    assert search.name == "tavily"
    assert search.search("中国的首都是哪里", k=1)[0].provider == "tavily"
    assert str(rec.requests[0].url) == "http://127.0.0.1:9/search"
    assert rec.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(search)


def test_blank_query_makes_no_call() -> None:
    rec = replay("en")
    assert make(rec).search("   ", k=3) == []
    assert rec.requests == []
