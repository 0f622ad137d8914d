"""Page fetching: SSRF refusals, redirects, size cap, deadline, charsets, main-text extraction.

A real HTTP server on 127.0.0.1 serves the pages (reached with ``allow_private=True``);
refusals are proven both against it and through MockTransport with a fake resolver, so
no test resolves or reaches a public host.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from crag.errors import SearchError
from crag.search.fetch import check_url, decode, enrich, extract_text, fetch_page, is_public_address, resolve_host
from crag.types import WebResult

ARTICLE = (
    "<html><head><title>Eiffel Tower</title></head><body>"
    "<nav><a href='/'>Home</a> | <a href='/about'>About</a></nav>"
    "<article><h1>The Eiffel Tower</h1>"
    "<p>The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. It was designed "
    "and built by the company of Gustave Eiffel between 1887 and 1889.</p>"
    "<p>It was completed on 31 March 1889 as the centrepiece of the 1889 World's Fair and is 330 metres "
    "tall, which made it the tallest man-made structure in the world for 41 years.</p>"
    "</article><footer>Copyright footer text</footer>"
    "<script>var tracking = 'do not extract me';</script></body></html>"
)
GBK_ARTICLE = (
    "<html><head><meta http-equiv='Content-Type' content='text/html; charset=gb2312'>"
    "<title>北京</title></head><body><article><h1>北京市</h1>"
    "<p>北京市是中华人民共和国的首都，是全国的政治中心、文化中心、国际交往中心和科技创新中心。"
    "北京有三千多年建城史和八百六十多年建都史，是世界上拥有世界文化遗产数最多的城市。</p>"
    "<p>北京位于华北平原北部，背靠燕山，毗邻天津市和河北省，总面积一万六千多平方千米。</p>"
    "</article></body></html>"
)


class _Pages(BaseHTTPRequestHandler):
    release = threading.Event()
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        route = getattr(self, "r_" + path.strip("/").replace("-", "_"), None)
        if route is None:
            self._send(404, b"not found", "text/plain")
        else:
            route()

    def _send(self, status: int, body: bytes, ctype: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def r_article(self) -> None:
        self._send(200, ARTICLE.encode(), "text/html; charset=utf-8")

    def r_plain(self) -> None:
        self._send(200, "  plain text, 纯文本  ".encode(), "text/plain; charset=utf-8")

    def r_gbk_meta(self) -> None:  # charset only in <meta>
        self._send(200, GBK_ARTICLE.encode("gbk"), "text/html")

    def r_gbk_header(self) -> None:
        self._send(200, GBK_ARTICLE.encode("gbk"), "text/html; charset=GBK")

    def r_gbk_mislabeled(self) -> None:  # says utf-8, is GBK, and no <meta> to help
        body = GBK_ARTICLE.replace("<meta http-equiv='Content-Type' content='text/html; charset=gb2312'>", "")
        self._send(200, body.encode("gbk"), "text/html; charset=utf-8")

    def r_gzip(self) -> None:
        self._send(200, gzip.compress(ARTICLE.encode()), "text/html; charset=utf-8", Content_Encoding="gzip")

    def r_redirect(self) -> None:
        self._redirect("/article")

    def r_loop(self) -> None:
        self._redirect("/loop")

    def r_to_metadata(self) -> None:
        self._redirect("http://169.254.169.254/latest/meta-data/")

    def r_to_loopback(self) -> None:
        self._redirect(f"http://127.0.0.1:{self.server.server_address[1]}/article")  # type: ignore[index]

    def r_pdf(self) -> None:
        self._send(200, b"%PDF-1.7", "application/pdf")

    def r_error(self) -> None:
        self._send(500, b"boom", "text/plain")

    def r_huge(self) -> None:  # 20 MB announced and streamed; the client must stop early
        chunk = b"<p>" + b"x" * (64 * 1024 - 7) + b"</p>\n"
        total = 20 * 1024 * 1024
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(total))
        self.end_headers()
        sent = 0
        try:
            while sent < total:
                self.wfile.write(chunk[: total - sent])
                sent += len(chunk)
        except OSError:
            pass  # the client hung up after its cap: expected

    def r_hang(self) -> None:  # accepts, never answers (bounded so the server can shut down)
        self.release.wait(5)

    def r_trickle(self) -> None:  # headers at once, then a byte now and then
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", "1000")
        self.end_headers()
        try:
            for _ in range(50):
                if self.release.wait(0.1):
                    return
                self.wfile.write(b"x")
                self.wfile.flush()
        except OSError:
            pass

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients here hang up on purpose (size cap, deadline, keep-alive close): not news.
        import sys

        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        _Pages.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client() as c:
        yield c


# ---------------------------------------------------------------- against the local server


@pytest.mark.integration
def test_happy_path_extracts_main_text(base: str, client: httpx.Client) -> None:
    text = fetch_page(f"{base}/article", client=client, allow_private=True, timeout=5)
    assert "completed on 31 March 1889" in text
    assert "do not extract me" not in text and "Copyright footer" not in text


@pytest.mark.integration
def test_plain_text_and_gzip(base: str, client: httpx.Client) -> None:
    assert fetch_page(f"{base}/plain", client=client, allow_private=True) == "plain text, 纯文本"
    assert "330 metres" in fetch_page(f"{base}/gzip", client=client, allow_private=True)


@pytest.mark.integration
@pytest.mark.parametrize("route", ["gbk-meta", "gbk-header", "gbk-mislabeled"])
def test_gbk_pages_decode(base: str, client: httpx.Client, route: str) -> None:
    text = fetch_page(f"{base}/{route}", client=client, allow_private=True)
    assert "北京市是中华人民共和国的首都" in text
    assert "\ufffd" not in text


@pytest.mark.integration
def test_loopback_is_refused_without_allow_private(base: str, client: httpx.Client) -> None:
    with pytest.raises(SearchError, match=r"refused 127\.0\.0\.1: .*non-public address 127\.0\.0\.1") as info:
        fetch_page(f"{base}/article", client=client)
    assert info.value.backend_id == "fetch" and "\n" not in str(info.value)
    with pytest.raises(SearchError, match="refused localhost"):
        fetch_page(base.replace("127.0.0.1", "localhost") + "/article", client=client)


@pytest.mark.integration
def test_redirects_followed_and_bounded(base: str, client: httpx.Client) -> None:
    assert "1889" in fetch_page(f"{base}/redirect", client=client, allow_private=True)
    with pytest.raises(SearchError, match="redirected more than 5 times"):
        fetch_page(f"{base}/loop", client=client, allow_private=True)


@pytest.mark.integration
class _ToLocal(httpx.BaseTransport):
    """Sends every request to the local server, whatever host the URL names.

    With a resolver that calls ``public.test`` public, this lets a real server play a
    public site whose redirects point into the private network.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.inner = httpx.HTTPTransport()
        self.hosts: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.hosts.append(request.url.host)
        request.url = request.url.copy_with(host="127.0.0.1", port=self.port)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.integration
@pytest.mark.parametrize("route", ["to-metadata", "to-loopback"])
def test_real_redirect_into_private_network_is_refused(base: str, route: str) -> None:
    port = int(base.rsplit(":", 1)[1])
    transport = _ToLocal(port)
    resolve = fake_resolver({"public.test": ["93.184.216.34"]})
    with httpx.Client(transport=transport) as c:
        assert "1889" in fetch_page(f"http://public.test:{port}/redirect", client=c, resolve=resolve)
        transport.hosts.clear()
        with pytest.raises(SearchError, match="refused"):
            fetch_page(f"http://public.test:{port}/{route}", client=c, resolve=resolve)
    assert transport.hosts == ["public.test"]  # the private hop was never requested


@pytest.mark.integration
def test_twenty_megabytes_truncated_quickly(base: str, client: httpx.Client) -> None:
    t0 = time.monotonic()
    text = fetch_page(f"{base}/huge", client=client, allow_private=True, timeout=5)  # default 2 MB cap
    assert time.monotonic() - t0 < 3
    assert 0 < len(text) <= 2_000_000


@pytest.mark.integration
def test_hanging_server_times_out_within_deadline(base: str, client: httpx.Client) -> None:
    t0 = time.monotonic()
    with pytest.raises(SearchError, match=r"timed out after 0\.5s"):
        fetch_page(f"{base}/hang", client=client, allow_private=True, timeout=0.5)
    assert time.monotonic() - t0 < 1.5


@pytest.mark.integration
def test_trickling_server_hits_the_overall_deadline(base: str, client: httpx.Client) -> None:
    t0 = time.monotonic()
    with pytest.raises(SearchError, match=r"timed out after 0\.6s"):
        fetch_page(f"{base}/trickle", client=client, allow_private=True, timeout=0.6)
    assert time.monotonic() - t0 < 1.5


@pytest.mark.integration
@pytest.mark.parametrize(("route", "match"), [("pdf", "application/pdf, not a web page"), ("error", "HTTP 500")])
def test_non_pages_and_errors(base: str, client: httpx.Client, route: str, match: str) -> None:
    with pytest.raises(SearchError, match=match):
        fetch_page(f"{base}/{route}", client=client, allow_private=True)


@pytest.mark.integration
def test_enrich_fills_thin_results_and_records_failures(base: str, client: httpx.Client) -> None:
    results = [
        WebResult("Eiffel", f"{base}/article", "Eiffel Tower snippet.", provider="searxng"),
        WebResult("Long", f"{base}/pdf", "x" * 500),  # long enough: not fetched
        WebResult("Broken", f"{base}/error", "short"),
        WebResult("Hangs", f"{base}/hang", "short too"),
    ]
    t0 = time.monotonic()
    out, degradations = enrich(results, client=client, allow_private=True, deadline=1.0, min_chars=100)
    assert time.monotonic() - t0 < 2.5
    assert [r.url for r in out] == [r.url for r in results]
    assert "completed on 31 March 1889" in out[0].content and out[0].provider == "searxng"
    assert out[1].content == "x" * 500
    assert out[2].content == "short" and out[3].content == "short too"
    assert results[0].content == "Eiffel Tower snippet."  # inputs untouched
    assert len(degradations) == 2
    assert any("HTTP 500" in d for d in degradations)
    assert any("/hang" in d and ("timed out" in d or "not fetched" in d) for d in degradations)


@pytest.mark.integration
def test_enrich_refuses_private_by_default(base: str, client: httpx.Client) -> None:
    out, degradations = enrich([WebResult("t", f"{base}/article", "thin")], client=client)
    assert out[0].content == "thin"
    assert "refused" in degradations[0]


# ---------------------------------------------------------------- SSRF through MockTransport


def fake_resolver(table: dict[str, list[str]]) -> Any:
    def resolve(host: str) -> list[str]:
        return table.get(host) or resolve_host(host)  # otherwise IP literals only (no DNS)

    return resolve


@pytest.mark.unit
@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1:8080/admin",
        "http://internal.corp/secret",  # resolves to 10.0.0.7
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0/",
    ],
)
def test_redirect_to_private_address_is_refused(location: str) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(302, headers={"Location": location})

    resolve = fake_resolver({"news.example": ["93.184.216.34"], "internal.corp": ["10.0.0.7"]})
    with (
        httpx.Client(transport=httpx.MockTransport(handler)) as c,
        pytest.raises(SearchError, match="refused"),
    ):
        fetch_page("http://news.example/story", client=c, resolve=resolve)
    assert seen == ["http://news.example/story"]  # the private hop was never requested


@pytest.mark.unit
def test_public_redirect_chain_is_followed() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/old":
            return httpx.Response(301, headers={"Location": "https://cdn.example/new"})
        return httpx.Response(200, html=ARTICLE)

    resolve = fake_resolver({"news.example": ["93.184.216.34"], "cdn.example": ["2606:2800:220:1::1"]})
    with httpx.Client(transport=httpx.MockTransport(handler)) as c:
        assert "1889" in fetch_page("http://news.example/old", client=c, resolve=resolve)


@pytest.mark.unit
def test_host_with_any_private_address_is_refused() -> None:
    resolve = fake_resolver({"rebind.example": ["93.184.216.34", "192.168.1.1"]})
    with httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200))) as c:
        with pytest.raises(SearchError, match=r"192\.168\.1\.1"):
            fetch_page("http://rebind.example/", client=c, resolve=resolve)


@pytest.mark.unit
@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/x", "gopher://x/", "http:///nohost"])
def test_non_http_urls_are_refused(url: str) -> None:
    with httpx.Client() as c, pytest.raises(SearchError, match=r"refused|invalid URL"):
        fetch_page(url, client=c)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2606:4700::1111", True),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.0.1", False),
        ("127.0.0.53", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),  # carrier-grade NAT
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("240.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("::ffff:10.0.0.1", False),
        # IPv6 that carries an IPv4 address is judged by the IPv4 inside (issue 12: the 6to4 gap).
        ("2002:7f00:1::1", False),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::1", False),  # 6to4 of 169.254.169.254 (cloud metadata)
        ("2002:c0a8:1::1", False),  # 6to4 of 192.168.0.1
        ("2002:808:808::1", True),  # 6to4 of 8.8.8.8
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", False),  # Teredo, client 10.0.0.1
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of 169.254.169.254
        ("64:ff9b::808:808", True),  # NAT64 of 8.8.8.8
        ("64:ff9b:1::808:808", False),  # local-use NAT64 (RFC 8215) is never public
        ("::ffff:169.254.169.254", False),
        ("::127.0.0.1", False),  # IPv4-compatible (deprecated)
    ],
)
def test_is_public_address(address: str, public: bool) -> None:
    assert is_public_address(address) is public


@pytest.mark.unit
def test_truncation_cap_through_mock_transport() -> None:
    body = b"<html><body><p>" + b"word " * 400_000 + b"</p></body></html>"  # 2 MB
    with httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, content=body))) as c:
        text = fetch_page("http://93.184.216.34/", client=c, max_bytes=10_000)
    assert 0 < len(text) <= 10_000


# ---------------------------------------------------------------- decoding and extraction


@pytest.mark.unit
@pytest.mark.parametrize(
    ("body", "ctype"),
    [
        ("北京是首都".encode("gbk"), "text/html; charset=gb2312"),
        ("北京是首都".encode("gb18030"), "text/html; charset=GB18030"),
        ("<meta charset='gbk'>北京是首都".encode("gbk"), "text/html"),
        ("\ufeff北京是首都".encode(), "text/html"),
        ("北京是首都".encode("utf-16"), "text/html"),
        ("北京是首都".encode(), "text/html; charset=no-such-codec"),
    ],
    ids=["gb2312-label", "gb18030", "meta", "utf8-bom", "utf16-bom", "unknown-label"],
)
def test_decode(body: bytes, ctype: str) -> None:
    assert decode(body, ctype).endswith("北京是首都")


@pytest.mark.unit
def test_decode_detects_undeclared_gbk() -> None:
    text = "北京市是中华人民共和国的首都，是全国的政治中心、文化中心。北京有三千多年建城史。"
    assert decode(text.encode("gbk"), "text/html") == text
    assert decode(text.encode("gbk"), "text/html; charset=utf-8") == text  # wrong label


@pytest.mark.unit
def test_extract_falls_back_to_beautifulsoup(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "trafilatura", None)
    text = extract_text(ARTICLE)
    assert "completed on 31 March 1889" in text
    assert "do not extract me" not in text and "Copyright footer" not in text


@pytest.mark.unit
@pytest.mark.parametrize(
    "url", ["http://[2002:7f00:1::1]:8080/", "http://[64:ff9b::a9fe:a9fe]/latest/meta-data", "http://[::ffff:7f00:1]/"]
)
def test_ipv4_embedding_literals_are_refused(url: str) -> None:
    with pytest.raises(SearchError, match="non-public address"):
        check_url(url)
