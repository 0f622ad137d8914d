"""Fetch result pages and extract their main text, safely.

Search APIs return snippets of a few hundred characters; when a snippet is too thin to
ground an answer, :func:`enrich` fetches the page. Fetching arbitrary URLs from a server is
an SSRF risk, so :func:`fetch_page`:

* resolves each host and refuses private, loopback, link-local, reserved, multicast and
  unspecified addresses (unless ``allow_private=True``), at every redirect hop, following
  at most ``MAX_REDIRECTS`` redirects by hand;
* streams the body and stops reading at ``max_bytes`` — the page is **truncated**, not
  refused, since the main text is usually near the top and HTML parsers accept a cut tail;
* bounds the whole fetch by one deadline (a server trickling a byte a second cannot hold
  it open), besides httpx's per-read timeout;
* decodes with the declared charset, then a ``<meta>`` charset, then detection (GB2312 is
  read as its superset GB18030, which is what such pages really use).

Known limit: the address is checked before httpx connects and httpx resolves again, so a
DNS server that answers differently within that window (DNS rebinding) is not stopped;
run the engine behind an egress firewall when it serves untrusted users.

Main text comes from ``trafilatura`` (``pip install 'crag[web]'``), or BeautifulSoup's
visible text when it is not installed.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import NamedTuple

import httpx

from crag.errors import SearchError
from crag.redact import clip
from crag.types import WebResult

MAX_REDIRECTS = 5
DEFAULT_MAX_BYTES = 2_000_000
TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain", "application/xml", "text/xml")
USER_AGENT = "crag/0.1 (+https://github.com/crag; page fetch for question answering)"
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
# Labels pages declare that Python's codec names a narrower table than browsers use.
_CHARSET_ALIASES = {
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "iso-8859-1": "cp1252",
    "latin-1": "cp1252",
    "latin1": "cp1252",
    "ascii": "cp1252",
    "us-ascii": "cp1252",
}

Resolver = Callable[[str], list[str]]


def _error(message: str) -> SearchError:
    return SearchError(message, backend_id="fetch", step="fetch")


def resolve_host(host: str) -> list[str]:
    """All addresses ``host`` resolves to (IP literals are returned as they are)."""
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise _error(f"fetch: cannot resolve {host} ({exc}); check the URL") from None
    return sorted({str(info[4][0]) for info in infos})


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052 well-known prefix: the last 32 bits are IPv4
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215 local-use: a private network's NAT64
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # deprecated ::a.b.c.d


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries and routes to (mapped, 6to4, Teredo, NAT64).

    >>> embedded_ipv4(ipaddress.IPv6Address("2002:7f00:1::1"))
    [IPv4Address('127.0.0.1')]
    """
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)  # (server, client); the client is de-obfuscated by ipaddress
    if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []


def is_public_address(address: str) -> bool:
    """False for private, loopback, link-local, reserved, multicast and unspecified addresses.

    IPv6 addresses that embed an IPv4 address (``::ffff:10.0.0.1``, 6to4 ``2002::/16``, Teredo
    ``2001::/32``, NAT64 ``64:ff9b::/96``) are judged by the IPv4 addresses inside them, which
    is where a relay or translator delivers the request; local-use NAT64 is never public.

    >>> is_public_address("93.184.216.34"), is_public_address("169.254.169.254"), is_public_address("::1")
    (True, False, False)
    >>> is_public_address("2002:a9fe:a9fe::1")   # 6to4 wrapping 169.254.169.254
    False
    """
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _NAT64_LOCAL:
            return False
        inner = embedded_ipv4(ip)
        if inner:
            return all(is_public_address(str(v4)) for v4 in inner)
    return ip.is_global and not (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_multicast or ip.is_unspecified
    )


def check_url(url: str, *, allow_private: bool = False, resolve: Resolver = resolve_host) -> httpx.URL:
    """Parse ``url`` and refuse what ``fetch_page`` must not fetch; return the parsed URL."""
    try:
        u = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise _error(f"fetch: invalid URL {clip(url, 200)!r}") from None
    if u.scheme not in ("http", "https") or not u.host:
        raise _error(f"fetch: refused {clip(url, 200)!r}: only http(s) URLs with a host are fetched")
    if allow_private:
        return u
    for address in resolve(u.host):
        if not is_public_address(address):
            raise _error(
                f"fetch: refused {u.host}: it resolves to non-public address {address} "
                "(set search.allow_private_fetch to fetch from your own network)"
            )
    return u


def fetch_page(
    url: str,
    *,
    client: httpx.Client,
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout: float = 10.0,
    allow_private: bool = False,
    resolve: Resolver = resolve_host,
) -> str:
    """Fetch ``url`` and return its main text (may be ``""`` for an empty page).

    Bodies longer than ``max_bytes`` are truncated; the whole call, redirects included,
    finishes within about ``timeout`` seconds or raises ``SearchError``. Raises
    ``SearchError`` (``backend_id="fetch"``) for refused addresses, too many redirects,
    HTTP errors and non-text content types.

    >>> fetch_page("http://169.254.169.254/latest/meta-data", client=httpx.Client())
    Traceback (most recent call last):
    crag.errors.SearchError: fetch: refused 169.254.169.254: it resolves to non-public address ...
    """
    if max_bytes < 1:
        raise ValueError("max_bytes must be >= 1")
    deadline = time.monotonic() + timeout
    current = url
    for _hop in range(MAX_REDIRECTS + 1):
        target = check_url(current, allow_private=allow_private, resolve=resolve)
        response = _send(client, target, _remaining(deadline, url, timeout), url=url, timeout=timeout)
        try:
            redirect = _redirect_target(response, target, current)
            if redirect is not None:
                current = redirect
                continue
            ctype = _page_type(response, current)
            body = _read_capped(response, max_bytes, deadline, url, timeout)
        finally:
            response.close()
        text = decode(body, response.headers.get("content-type", ""))
        return text.strip() if ctype == "text/plain" else extract_text(text, url=current)
    raise _error(f"fetch: {_short(url)} redirected more than {MAX_REDIRECTS} times")


def _send(client: httpx.Client, target: httpx.URL, left: float, *, url: str, timeout: float) -> httpx.Response:
    """GET ``target`` within ``left`` seconds, redirects not followed (each hop is checked);
    a transport failure is a ``SearchError`` naming the page asked for."""
    request = client.build_request(
        "GET",
        target,
        headers={
            "User-Agent": USER_AGENT,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9",
            # Only what _decompress can undo while keeping the byte cap.
            "Accept-Encoding": "gzip, deflate",
        },
        timeout=httpx.Timeout(left),
    )
    try:
        return client.send(request, stream=True, follow_redirects=False)
    except httpx.TimeoutException:
        raise _error(f"fetch: {_short(url)} timed out after {timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise _error(f"fetch: cannot fetch {_short(url)} ({type(exc).__name__})") from None


def _redirect_target(response: httpx.Response, target: httpx.URL, current: str) -> str | None:
    """Where a redirect points (resolved against ``target``), or None when it is not one."""
    if not response.is_redirect:
        return None
    location = response.headers.get("location", "")
    if not location:
        raise _error(f"fetch: {_short(current)} redirected without a Location")
    return str(target.join(location))


def _page_type(response: httpx.Response, current: str) -> str:
    """The response's content type, once it is known to be a page of text (not an error)."""
    if response.status_code >= 400:
        raise _error(f"fetch: HTTP {response.status_code} from {_short(current)}")
    ctype: str = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype and ctype not in TEXT_TYPES:
        raise _error(f"fetch: {_short(current)} is {ctype}, not a web page; skipped")
    return ctype


def _remaining(deadline: float, url: str, timeout: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise _error(f"fetch: {_short(url)} timed out after {timeout:g}s")
    return left


def _read_capped(response: httpx.Response, max_bytes: int, deadline: float, url: str, timeout: float) -> bytes:
    if response.is_stream_consumed:
        # Already in memory (a transport that reads eagerly, e.g. MockTransport): only cap it.
        return response.content[:max_bytes]
    buf = bytearray()
    try:
        for chunk in response.iter_raw():
            buf += chunk
            if len(buf) >= max_bytes:
                del buf[max_bytes:]
                break  # truncated: close() drops the rest of the connection
            _remaining(deadline, url, timeout)
    except httpx.TimeoutException:
        raise _error(f"fetch: {_short(url)} timed out after {timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise _error(f"fetch: reading {_short(url)} failed ({type(exc).__name__})") from None
    encoding = response.headers.get("content-encoding", "").lower()
    if encoding in ("gzip", "deflate", "br", "zstd"):
        # iter_raw keeps the cap on wire bytes (a zip bomb cannot expand past it while
        # streaming); decode afterwards, again capped.
        buf = bytearray(_decompress(bytes(buf), encoding, max_bytes))
    return bytes(buf)


def _decompress(data: bytes, encoding: str, max_bytes: int) -> bytes:
    import zlib

    if encoding == "gzip":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        d = zlib.decompressobj()
    else:  # br/zstd need optional packages; refuse rather than guess
        raise _error(f"fetch: unsupported content-encoding {encoding}")
    try:
        return d.decompress(data, max_bytes)
    except zlib.error:
        raise _error("fetch: corrupt compressed body") from None


def decode(body: bytes, content_type: str = "") -> str:
    """Decode a page: BOM, then the header charset, then ``<meta charset>``, then detection.

    >>> decode("北京是中国的首都".encode("gbk"), "text/html; charset=gb2312")
    '北京是中国的首都'
    """
    for bom, codec in ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16")):
        if body.startswith(bom):
            return body.decode(codec, errors="replace").lstrip("\ufeff")
    candidates: list[str] = []
    m = re.search(r"charset\s*=\s*[\"']?([\w.:-]+)", content_type, re.IGNORECASE)
    if m:
        candidates.append(m.group(1))
    m2 = _META_CHARSET.search(body[:4096])
    if m2:
        candidates.append(m2.group(1).decode("ascii", errors="ignore"))
    for label in candidates:
        codec = _CHARSET_ALIASES.get(label.lower(), label.lower())
        try:
            return body.decode(codec)
        except LookupError:
            continue  # unknown label: try the next source
        except UnicodeDecodeError:
            # Declared wrong (common); fall through to utf-8/detection rather than mojibake.
            break
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    detected = _detect(body)
    if detected:
        codec = _CHARSET_ALIASES.get(detected.lower(), detected)
        try:
            return body.decode(codec, errors="replace")
        except LookupError:
            pass
    return body.decode("utf-8", errors="replace")


def _detect(body: bytes) -> str | None:
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - a dependency of trafilatura
        return None
    best = from_bytes(body[:65536]).best()
    return best.encoding if best is not None else None


def extract_text(page: str, *, url: str = "") -> str:
    """The main text of an HTML page: trafilatura when installed, else visible text."""
    try:
        import trafilatura
    except ImportError:  # optional: crag[web]
        return _visible_text(page)
    text = trafilatura.extract(
        page,
        url=url or None,
        include_comments=False,
        include_tables=True,
        favor_precision=True,
        deduplicate=True,
    )
    # trafilatura gives up on short or oddly built pages; visible text beats nothing.
    return text.strip() if text and text.strip() else _visible_text(page)


def _visible_text(page: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form"]):
        tag.decompose()
    lines = (" ".join(line.split()) for line in soup.get_text("\n").splitlines())
    return "\n".join(line for line in lines if line)


class Enriched(NamedTuple):
    """The results with fetched page text where it was thin, and the pages that could not be fetched."""

    results: list[WebResult]
    degradations: list[str]


def enrich(
    results: Sequence[WebResult],
    *,
    client: httpx.Client,
    min_chars: int = 400,
    max_pages: int = 5,
    deadline: float = 8.0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_chars: int = 6000,
    allow_private: bool = False,
    workers: int = 4,
    resolve: Resolver = resolve_host,
) -> Enriched:
    """Replace thin contents (< ``min_chars``) with the fetched page's main text.

    At most ``max_pages`` pages are fetched in parallel, all within ``deadline`` seconds;
    a page that fails, times out or yields less text than the snippet keeps its snippet,
    and the failure is said in ``degradations``. Order and length of ``results`` are
    preserved; inputs are not modified.
    """
    out = list(results)
    todo = [i for i, r in enumerate(out) if len(r.content) < min_chars and r.url][:max_pages]
    degradations: list[str] = []
    if not todo:
        return Enriched(out, degradations)
    end = time.monotonic() + deadline
    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(todo))), thread_name_prefix="crag-fetch")
    try:
        futures = {
            pool.submit(
                fetch_page,
                out[i].url,
                client=client,
                max_bytes=max_bytes,
                timeout=deadline,
                allow_private=allow_private,
                resolve=resolve,
            ): i
            for i in todo
        }
        pending = _gather(futures, out, end, max_chars, degradations)
        for fut in pending:
            fut.cancel()
            degradations.append(
                f"fetch: {_short(out[futures[fut]].url)} not fetched within {deadline:g}s; kept the search snippet"
            )
    finally:
        # Do not wait for stragglers: each is bounded by its own timeout and its result is dropped.
        pool.shutdown(wait=False, cancel_futures=True)
    return Enriched(out, degradations)


def _gather(
    futures: dict[Future[str], int], out: list[WebResult], end: float, max_chars: int, degradations: list[str]
) -> set[Future[str]]:
    """Use each page as it arrives until ``end``; return the fetches still running then."""
    pending = set(futures)
    while pending:
        left = end - time.monotonic()
        if left <= 0:
            break
        done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
        for fut in done:
            _use_page(fut, futures[fut], out, max_chars, degradations)
    return pending


def _use_page(fut: Future[str], i: int, out: list[WebResult], max_chars: int, degradations: list[str]) -> None:
    """Put a fetched page's text in place of result ``i``'s snippet when it says more;
    a failed fetch keeps the snippet and is said in ``degradations``."""
    try:
        text = fut.result()
    except SearchError as exc:
        degradations.append(f"{exc}; kept the search snippet")
        return
    except Exception as exc:  # a parser bug must not sink the answer
        degradations.append(f"fetch: {_short(out[i].url)} failed ({type(exc).__name__}); kept the search snippet")
        return
    if len(text) > len(out[i].content):
        out[i] = replace(out[i], content=clip(text, max_chars))


def _short(url: str) -> str:
    return url if len(url) <= 120 else clip(url, 117) + "..."
