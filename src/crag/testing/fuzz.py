"""Fuzz the HTTP API: schemathesis cases from the OpenAPI schema plus hand-written hostile bodies.

Shared by ``tests/reliability/test_fuzz.py`` (a bounded run in the default suite) and
``benchmarks/reliability_input.py`` (≥ 2,000 requests). Both count statuses; a 5xx is a failure,
whatever the input. Needs the ``dev`` extra (schemathesis, hypothesis).

### Usage example
>>> report = fuzz_schema(app, examples=200, headers={"Authorization": "Bearer k"})   # doctest: +SKIP
>>> report.server_errors                                                              # doctest: +SKIP
0
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the dev extra; imported at run time inside the functions
    from hypothesis import settings
    from schemathesis.schemas import BaseSchema

__all__ = ["FuzzReport", "fuzz_random_bodies", "fuzz_schema", "hostile_requests", "send_hostile"]

POST_PATHS = ("/v1/ask", "/v1/chat/completions", "/v1/ingest")


@dataclass
class FuzzReport:
    """Statuses seen, and the requests that got a 5xx (at most 20 kept)."""

    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def server_errors(self) -> int:
        return sum(n for s, n in self.statuses.items() if s >= 500)

    def add(self, status: int, what: str) -> None:
        self.statuses[status] += 1
        if status >= 500 and len(self.failures) < 20:
            self.failures.append(f"{status} {what[:300]}")

    def merge(self, other: FuzzReport) -> FuzzReport:
        self.statuses.update(other.statuses)
        self.failures += other.failures[: max(0, 20 - len(self.failures))]
        return self


def _settings(examples: int, seed: int | None) -> settings:
    from hypothesis import HealthCheck, Phase
    from hypothesis import settings as make_settings

    # Generate only: a 5xx is recorded, not raised, so there is nothing to shrink, and a fixed
    # seed makes the bounded CI run reproducible.
    return make_settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=seed is not None,
    )


def fuzz_schema(
    app: Any,
    *,
    examples: int,
    headers: dict[str, str],
    seed: int | None = 0,
    path: str | None = None,
    negative: bool = True,
) -> FuzzReport:
    """``examples`` schemathesis cases over every operation of ``app``'s schema (or only ``path``).

    Valid cases and, with ``negative``, cases that break the schema on purpose.
    """
    import schemathesis
    from hypothesis import given
    from hypothesis import strategies as st
    from schemathesis.generation.modes import GenerationMode

    schema: BaseSchema = schemathesis.openapi.from_asgi("/openapi.json", app, headers=headers)
    if path is not None:
        schema = schema.include(path=path)
    # schemathesis needs Python 3.11 (enum.StrEnum); checked for 3.10, its modes look like plain str
    modes: list[GenerationMode] = [GenerationMode.POSITIVE, *([GenerationMode.NEGATIVE] if negative else [])]  # type: ignore[list-item]  # see above
    strategy = st.one_of(*(schema.as_strategy(m) for m in modes))
    report = FuzzReport()

    @_settings(examples, seed)
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(headers=headers)
        report.add(response.status_code, f"{case.method} {case.formatted_path} {case.body!r}")

    run()
    return report


_HostileRequest = tuple[str, str, dict[str, str], bytes]  # (method, path, headers, body)


def hostile_requests() -> Iterator[_HostileRequest]:
    """(method, path, headers, body) for bodies a parser can choke on."""
    yield from _hostile_posts()
    yield from _hostile_uploads()
    yield from _hostile_urls()


def _deep_bodies() -> list[bytes]:
    """JSON nested far deeper than any request needs, in each route's fields."""
    return [
        b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"question": ' + b"[" * 100_000,  # deep and unterminated
        b'{"documents": [{"text": "x", "metadata": ' + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"}]}",
        b'{"messages": [{"role": "user", "content": [' + b"{" * 20_000 + b"]}]}",
        b'{"stream_options": ' + b'{"a":' * 30_000 + b"1" + b"}" * 30_000 + b"}",
    ]


def _hostile_bodies() -> list[bytes]:
    """Bodies that are empty, not JSON, not an object, out of range, badly encoded or huge."""
    return [
        *_deep_bodies(),
        b"",
        b"   ",
        b"null",
        b"[]",
        b'"just a string"',
        b"1e999999",
        b'{"question": NaN}',
        b'{"question": Infinity}',
        b'{"question": "\\ud800"}',
        b'{"question": "\xff\xfe"}',
        b"\xef\xbb\xbf{}",  # BOM
        b'{"question": "x", "question": 1}',
        b'{"question": ' + b'"' + b"a" * 900_000 + b'"}',
        b'{"question": "' + b"\\u0000" * 1000 + b'"}',
        b'{"documents": [' + b'{"text": "t"},' * 20_000 + b'{"text": "t"}]}',
        b'{"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
        b'{"messages": "user"}',
        b"{" * 10 + b"}" * 10,
        bytes(range(256)),
        json.dumps({"question": "q" * 5000}).encode(),
    ]


def _hostile_posts() -> Iterator[_HostileRequest]:
    """Every hostile body to every POST route as JSON, and a plain body under each content type."""
    bodies = _hostile_bodies()
    types = ("application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data")
    for path in POST_PATHS:
        for body in bodies:
            yield "POST", path, {"content-type": "application/json"}, body
        for ctype in types:
            yield "POST", path, {"content-type": ctype}, b'{"question": "x"}'


def _hostile_uploads() -> Iterator[_HostileRequest]:
    """Multipart uploads: a path-traversing file name, truncated, without a boundary, empty."""
    boundary = "XyZ"
    multipart = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="../../etc/passwd.txt"\r\n'
        f"Content-Type: text/plain\r\n\r\nhello\r\n--{boundary}--\r\n"
    ).encode()
    mp = {"content-type": f"multipart/form-data; boundary={boundary}"}
    yield "POST", "/v1/ingest", mp, multipart
    yield "POST", "/v1/ingest", mp, multipart[:40]  # truncated
    yield "POST", "/v1/ingest", {"content-type": "multipart/form-data"}, multipart  # no boundary
    yield "POST", "/v1/ingest", mp, b"--XyZ\r\n\r\n--XyZ--\r\n"


def _hostile_urls() -> Iterator[_HostileRequest]:
    """Trace ids and query values no route expects, and a method a route does not take."""
    for path in ("/v1/traces/" + "a" * 5000, "/v1/traces/%00", "/v1/traces/..%2f..%2fetc", "/v1/traces?limit=-1"):
        yield "GET", path, {}, b""
    yield "GET", "/v1/traces?min_confidence=NaN&max_latency_ms=1e999", {}, b""
    yield "POST", "/v1/traces/%ff%fe/replay", {}, b""
    yield "PUT", "/v1/ask", {}, b"{}"


def send_hostile(client: Any, headers: dict[str, str]) -> FuzzReport:
    """Send every :func:`hostile_requests` body through ``client`` (a TestClient or httpx.Client)."""
    report = FuzzReport()
    for method, path, extra, body in hostile_requests():
        response = client.request(method, path, content=body, headers=headers | extra)
        report.add(response.status_code, f"{method} {path} {body[:120]!r}")
    return report


def fuzz_random_bodies(client: Any, headers: dict[str, str], *, examples: int, seed: int | None = 0) -> FuzzReport:
    """Hypothesis-built bodies (random bytes, random JSON, near-valid requests) to every POST route."""
    from hypothesis import given
    from hypothesis import strategies as st

    leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50)
    anyjson = st.recursive(
        leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4)
    )
    near = st.fixed_dictionaries(
        {},
        optional={
            "question": anyjson | st.text(max_size=300),
            "mode": anyjson | st.sampled_from(["crag", "rag"]),
            "search": anyjson | st.sampled_from(["none", "corpus", "tavily", "../../etc"]),
            "stream": anyjson,
            "messages": anyjson | st.lists(st.fixed_dictionaries({"role": st.text(max_size=10), "content": anyjson})),
            "documents": anyjson | st.lists(st.fixed_dictionaries({"text": anyjson, "metadata": anyjson}), max_size=3),
        },
    )
    body = (
        st.binary(max_size=2000)
        | anyjson.map(lambda v: json.dumps(v).encode())
        | near.map(lambda v: json.dumps(v).encode())
    )
    report = FuzzReport()

    @_settings(examples, seed)
    @given(path=st.sampled_from(POST_PATHS), content=body)
    def run(path: str, content: bytes) -> None:
        response = client.post(path, content=content, headers=headers | {"content-type": "application/json"})
        report.add(response.status_code, f"POST {path} {content[:200]!r}")

    run()
    return report
