"""DuckDuckGo (monkeypatched DDGS), SearXNG (real local server + MockTransport) and Brave
(MockTransport) search providers. Nothing here touches the internet."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from crag.config import CragSettings
from crag.errors import MissingAPIKeyError, SearchError
from crag.registry import SEARCHES, BackendDeps
from crag.search.brave import BraveSearch
from crag.search.duckduckgo import DuckDuckGoSearch
from crag.search.searxng import SearxngSearch
from crag.testing.net import Recorder
from crag.types import WebResult

CASSETTES = Path(__file__).resolve().parents[1] / "cassettes"
BRAVE_KEY = "BSA-SECRET-test-key-456"


def cassette(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CASSETTES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def mock(rec: Recorder) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(rec))


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("crag.http.time.sleep", lambda s: None)


MALFORMED = [
    httpx.Response(200, text="<html>captive portal</html>"),
    httpx.Response(200, json=["results"]),
    httpx.Response(200, json={"results": {"title": "x"}}),
    httpx.Response(200, json={"results": ["just a string"]}),
    httpx.Response(200, json={"results": [{"title": "t", "url": 3, "content": "c"}]}),
]
MALFORMED_IDS = ["not-json", "array", "results-dict", "item-str", "url-int"]


# ---------------------------------------------------------------- duckduckgo


class FakeDDGS:
    """Stands in for ddgs.DDGS: same constructor and ``text`` signature, scripted output."""

    output: Any = None
    error: BaseException | None = None
    delay: float = 0.0
    calls: list[dict[str, Any]] = []  # noqa: RUF012 - reset per test by the fixture

    def __init__(self, timeout: int | None = 5, **kw: Any) -> None:
        FakeDDGS.calls.append({"timeout": timeout, **kw})

    def text(self, query: str, **kwargs: Any) -> Any:
        FakeDDGS.calls.append({"query": query, **kwargs})
        if FakeDDGS.delay:
            # not time.sleep: _no_backoff turns that into a no-op for the whole time module
            threading.Event().wait(FakeDDGS.delay)
        if FakeDDGS.error is not None:
            raise FakeDDGS.error
        return FakeDDGS.output


@pytest.fixture
def ddgs(monkeypatch: pytest.MonkeyPatch) -> type[FakeDDGS]:
    import ddgs as ddgs_module

    FakeDDGS.output, FakeDDGS.error, FakeDDGS.delay, FakeDDGS.calls = None, None, 0.0, []
    monkeypatch.setattr(ddgs_module, "DDGS", FakeDDGS)
    return FakeDDGS


@pytest.mark.unit
def test_duckduckgo_normalises_results(ddgs: type[FakeDDGS]) -> None:
    ddgs.output = cassette("duckduckgo_en")["response"]
    results = DuckDuckGoSearch(timeout=3, region="us-en").search("When was the Eiffel Tower completed?", k=3)

    assert ddgs.calls[0] == {"timeout": 3}
    assert ddgs.calls[1]["max_results"] == 3 and ddgs.calls[1]["region"] == "us-en"
    assert [r.url for r in results] == [  # the body-less hit is dropped
        "https://en.wikipedia.org/wiki/Eiffel_Tower",
        "https://www.toureiffel.paris/en/the-monument/history",
    ]
    assert results[0].content == "The Eiffel Tower was completed on 31 March 1889 & opened to the public."
    assert results[0].provider == "duckduckgo" and results[0].score is None
    assert results[1].title == results[1].url  # untitled falls back to the URL
    assert results[1].content == "The tower was built between 1887 and 1889."
    assert all(isinstance(r, WebResult) and r.snippet == r.content[:300] for r in results)


@pytest.mark.unit
def test_duckduckgo_empty_and_k(ddgs: type[FakeDDGS]) -> None:
    ddgs.output = []
    assert DuckDuckGoSearch().search("nothing matches this", k=3) == []
    ddgs.output = cassette("duckduckgo_en")["response"]
    assert len(DuckDuckGoSearch().search("eiffel", k=1)) == 1
    n = len(ddgs.calls)
    assert DuckDuckGoSearch().search("   ", k=3) == []
    assert len(ddgs.calls) == n  # blank query: no call


@pytest.mark.unit
@pytest.mark.parametrize(
    ("error", "match"),
    [
        (RuntimeError("No results found.\nline two"), "RuntimeError: No results found. line two"),
        (type("RatelimitException", (Exception,), {})("202 Ratelimit"), "rate limited"),
        (type("TimeoutException", (Exception,), {})("engine timed out"), "TimeoutException"),
    ],
    ids=["generic", "ratelimit", "library-timeout"],
)
def test_duckduckgo_errors_become_one_line_search_errors(
    ddgs: type[FakeDDGS], error: BaseException, match: str
) -> None:
    ddgs.error = error
    with pytest.raises(SearchError, match=match) as info:
        DuckDuckGoSearch().search("q", k=3)
    assert info.value.backend_id == "duckduckgo" and info.value.step == "search"
    assert "\n" not in str(info.value)


@pytest.mark.unit
@pytest.mark.parametrize("output", ["not a list", [1, 2], [{"href": 5, "body": "x"}]], ids=["str", "ints", "href"])
def test_duckduckgo_malformed_output(ddgs: type[FakeDDGS], output: Any) -> None:
    ddgs.output = output
    with pytest.raises(SearchError, match="malformed"):
        DuckDuckGoSearch().search("q", k=3)


@pytest.mark.unit
def test_duckduckgo_hang_times_out_within_deadline(ddgs: type[FakeDDGS]) -> None:
    ddgs.delay, ddgs.output = 3.0, []
    t0 = time.monotonic()
    with pytest.raises(SearchError, match=r"timed out after 0.3s"):
        DuckDuckGoSearch(timeout=0.3).search("q", k=3)
    assert time.monotonic() - t0 < 1.5


@pytest.mark.unit
def test_duckduckgo_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ddgs", None)  # makes `import ddgs` raise ImportError
    with pytest.raises(SearchError, match=r"crag\[web\]"):
        DuckDuckGoSearch().search("q", k=3)


@pytest.mark.unit
def test_duckduckgo_registered_keyless(ddgs: type[FakeDDGS]) -> None:
    ddgs.output = cassette("duckduckgo_en")["response"]
    search = SEARCHES.create("duckduckgo", CragSettings(search={"provider": "duckduckgo", "timeout": 4}))
    assert search.name == "duckduckgo" and search.timeout == 4
    assert search.search("eiffel", k=2)[0].provider == "duckduckgo"
    assert SEARCHES.create("ddg", CragSettings()).name == "duckduckgo"


# ---------------------------------------------------------------- searxng


@pytest.mark.unit
def test_searxng_request_and_normalised_results() -> None:
    c = cassette("searxng_zh")
    rec = Recorder(httpx.Response(200, json=c["response"]["body"]))
    search = SearxngSearch(base_url="http://searx.test/", client=mock(rec))
    results = search.search("中国的首都是哪里", k=5)

    (req,) = rec.requests
    assert req.method == "GET" and req.url.path == "/search"
    assert dict(req.url.params) == c["request"]["params"]
    assert [r.url for r in results] == [
        "https://zh.wikipedia.org/wiki/%E5%8C%97%E4%BA%AC%E5%B8%82",
        "https://www.gov.cn/guoqing/2024-01/10/content_beijing.htm",
        "https://baike.example.cn/item/北京",
    ]  # the content-less hit is dropped
    first = results[0]
    assert first.provider == "searxng" and first.score == pytest.approx(4.5)
    assert first.published == "2024-05-18T08:30:00"
    assert "<b>" not in first.content and "中华人民共和国的首都" in first.content
    assert results[1].content == "北京是中华人民共和国首都 & 全国政治中心。" and results[1].published == ""
    assert results[2].title == results[2].url and results[2].score is None
    assert results[2].content == "北京有三千多年建城史和八百六十多年建都史。"


@pytest.mark.unit
def test_searxng_empty_results_are_not_an_error() -> None:
    rec = Recorder(httpx.Response(200, json={"query": "q", "results": []}))
    assert SearxngSearch(client=mock(rec)).search("q", k=3) == []


@pytest.mark.unit
@pytest.mark.parametrize("response", MALFORMED, ids=MALFORMED_IDS)
def test_searxng_malformed(response: httpx.Response) -> None:
    with pytest.raises(SearchError, match="malformed"):
        SearxngSearch(client=mock(Recorder(response))).search("q", k=3)


@pytest.mark.unit
def test_searxng_http_500_and_403() -> None:
    rec = Recorder(httpx.Response(500, text="boom"))
    with pytest.raises(SearchError, match="HTTP 500") as info:
        SearxngSearch(retries=1, client=mock(rec)).search("q", k=3)
    assert len(rec.requests) == 2 and "\n" not in str(info.value)
    with pytest.raises(SearchError, match="enable the JSON format"):
        SearxngSearch(client=mock(Recorder(httpx.Response(403, text="Forbidden")))).search("q", k=3)


@pytest.mark.unit
def test_searxng_registered() -> None:
    settings = CragSettings(search={"provider": "searxng", "searxng_url": "http://10.0.0.5:8080/", "retries": 0})
    c = cassette("searxng_zh")
    rec = Recorder(httpx.Response(200, json=c["response"]["body"]))
    search = SEARCHES.create("searxng", settings, BackendDeps(client=mock(rec)))
    assert search.name == "searxng"
    assert len(search.search("北京", k=2)) == 2
    assert str(rec.requests[0].url).startswith("http://10.0.0.5:8080/search?")


class _Searx(BaseHTTPRequestHandler):
    """A tiny SearXNG: /search?format=json serves the cassette; /slow hangs; /bad is not JSON."""

    release = threading.Event()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/slow/search":
            self.release.wait(5)  # bounded: the test client gives up long before
            return
        if url.path == "/bad/search":
            body, ctype = b"<html>Too Many Requests</html>", "text/html"
        elif url.path == "/search" and query.get("format") == ["json"]:
            payload = cassette("searxng_zh")["response"]["body"]
            if query.get("q") == ["nothing"]:
                payload = {"query": "nothing", "results": []}
            body, ctype = json.dumps(payload, ensure_ascii=False).encode(), "application/json"
        else:
            self.send_error(403)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def searx_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Searx)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        _Searx.release.set()
        server.shutdown()
        server.server_close()


@pytest.mark.integration
def test_searxng_against_a_local_server(searx_url: str) -> None:
    with httpx.Client() as client:
        search = SearxngSearch(base_url=searx_url, retries=0, timeout=5, client=client)
        results = search.search("中国的首都是哪里", k=2)
        assert [r.title for r in results] == ["北京市 - 维基百科，自由的百科全书", "首都北京_中国政府网"]
        assert search.search("nothing", k=3) == []


@pytest.mark.integration
def test_searxng_local_server_errors(searx_url: str) -> None:
    with httpx.Client() as client:
        with pytest.raises(SearchError, match="malformed JSON"):
            SearxngSearch(base_url=f"{searx_url}/bad", retries=0, client=client).search("q", k=3)
        t0 = time.monotonic()
        with pytest.raises(SearchError, match=r"timed out after 0\.3s"):
            SearxngSearch(base_url=f"{searx_url}/slow", retries=0, timeout=0.3, client=client).search("q", k=3)
        assert time.monotonic() - t0 < 2.0


@pytest.mark.integration
def test_searxng_nothing_listening_is_a_search_error() -> None:
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with httpx.Client() as client, pytest.raises(SearchError, match="cannot connect"):
        SearxngSearch(base_url=f"http://127.0.0.1:{port}", retries=0, timeout=2, client=client).search("q", k=3)


# ---------------------------------------------------------------- brave


def brave(rec: Recorder, **kw: Any) -> BraveSearch:
    kw.setdefault("retries", 1)
    return BraveSearch(api_key=BRAVE_KEY, base_url="https://brave.test", client=mock(rec), **kw)


@pytest.mark.unit
def test_brave_request_shape_and_normalised_results() -> None:
    c = cassette("brave_en")
    rec = Recorder(httpx.Response(200, json=c["response"]["body"]))
    results = brave(rec).search(c["request"]["params"]["q"], k=3)

    (req,) = rec.requests
    assert req.url.path == "/res/v1/web/search" and dict(req.url.params) == c["request"]["params"]
    assert req.headers["x-subscription-token"] == BRAVE_KEY
    assert BRAVE_KEY not in str(req.url)
    assert [r.url for r in results] == [
        "https://en.wikipedia.org/wiki/Eiffel_Tower",
        "https://www.toureiffel.paris/en/the-monument/history",
    ]
    first = results[0]
    assert first.content.startswith("The Eiffel Tower was completed on 31 March 1889")
    assert "World's Fair" in first.content and "Construction began in January 1887." in first.content
    assert first.published == "2024-03-05T10:12:00"  # page_age preferred over age
    assert results[1].published == "2 days ago"
    assert results[1].content == "Gustave Eiffel's company built the tower in 2 years, 2 months and 5 days."
    assert all(r.provider == "brave" and r.score is None for r in results)


@pytest.mark.unit
def test_brave_caps_count_and_passes_freshness() -> None:
    rec = Recorder(httpx.Response(200, json={"type": "search", "web": {"results": []}}))
    assert brave(rec, freshness="py").search("q", k=50) == []
    assert rec.requests[0].url.params["count"] == "20"
    assert rec.requests[0].url.params["freshness"] == "py"


@pytest.mark.unit
def test_brave_no_web_section_is_empty() -> None:
    rec = Recorder(httpx.Response(200, json={"type": "search", "query": {"original": "zzzz"}}))
    assert brave(rec).search("zzzz", k=3) == []


@pytest.mark.unit
@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text="<html>captive portal</html>"),
        httpx.Response(200, json={"unexpected": True}),
        httpx.Response(200, json={"web": {"results": {"title": "x"}}}),
        httpx.Response(200, json={"web": {"results": ["x"]}}),
        httpx.Response(200, json={"web": {"results": [{"url": "u", "description": 7}]}}),
    ],
    ids=["not-json", "no-web", "results-dict", "item-str", "description-int"],
)
def test_brave_malformed(response: httpx.Response) -> None:
    with pytest.raises(SearchError, match="malformed"):
        brave(Recorder(response)).search("q", k=3)


@pytest.mark.unit
def test_brave_errors_never_leak_the_key() -> None:
    rec = Recorder(httpx.Response(500, text=f"echo {BRAVE_KEY}"))
    search = brave(rec, retries=1)
    with pytest.raises(SearchError, match="HTTP 500") as info:
        search.search("q", k=3)
    assert len(rec.requests) == 2
    assert BRAVE_KEY not in str(info.value) and BRAVE_KEY not in repr(search)
    with pytest.raises(SearchError, match="check the API key"):
        brave(Recorder(httpx.Response(401, json={"error": "bad token"}))).search("q", k=3)


@pytest.mark.unit
def test_brave_timeout() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(SearchError, match=r"timed out after 0\.5s"):
        brave(Recorder(slow), retries=0, timeout=0.5).search("q", k=3)


@pytest.mark.unit
def test_brave_missing_key_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_BRAVE_KEY", raising=False)
    settings = CragSettings(search={"provider": "brave", "brave_api_key_env": "MY_BRAVE_KEY"})
    with pytest.raises(MissingAPIKeyError, match="MY_BRAVE_KEY"):
        SEARCHES.create("brave", settings)


@pytest.mark.unit
def test_brave_factory_reads_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_BRAVE_KEY", BRAVE_KEY)
    settings = CragSettings(
        search={"brave_api_key_env": "MY_BRAVE_KEY", "brave_url": "http://127.0.0.1:9/", "retries": 0}
    )
    c = cassette("brave_en")
    rec = Recorder(httpx.Response(200, json=c["response"]["body"]))
    search = SEARCHES.create("brave", settings, BackendDeps(client=mock(rec)))
    assert search.search("eiffel", k=1)[0].provider == "brave"
    assert str(rec.requests[0].url).startswith("http://127.0.0.1:9/res/v1/web/search?")
    assert rec.requests[0].headers["x-subscription-token"] == BRAVE_KEY
