"""OpenTelemetry export of finished traces (``crag.trace.otel``).

Checked twice: with the SDK's ``InMemorySpanExporter`` (span tree, GenAI attributes)
and over real OTLP/HTTP to a tiny receiver on 127.0.0.1 that decodes the protobuf.
"""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs the otel extra: pip install 'crag[otel]'")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="needs the otel extra")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from crag.trace import otel
from crag.trace.spans import Tracer

pytestmark = pytest.mark.unit


def sample_trace(*, fail: bool = False) -> dict[str, Any]:
    """A trace shaped like the pipeline's: nested spans, a decision, a generate span."""
    tracer = Tracer()
    tracer.record("question", "天津犹太会堂是什么时候建成的？")
    tracer.record("mode", "crag")
    with tracer.span("retrieve", k=5):
        tracer.record("retrieved", [{"id": "a"}, {"id": "b"}])
    with tracer.span("evaluate", evaluator="heuristic"):
        time.sleep(0.002)
    tracer.record("confidence", 0.42)
    tracer.record("action", "ambiguous")
    with tracer.span("search", provider="corpus", queries=2), tracer.span("fetch", url="https://example.org"):
        pass
    tracer.record("queries", ["天津犹太会堂 建成", "Tianjin synagogue built"])
    try:
        with tracer.span("generate", model="qwen2.5-coder-0.5b", prompt_tokens=321, completion_tokens=17):
            if fail:
                raise RuntimeError("llm went away")
    except RuntimeError as exc:
        tracer.append("errors", str(exc))
    tracer.record("answer", "1940年[1]。")
    tracer.record("citations", [{"id": 1}])
    return tracer.to_dict() | {"settings": {"llm": {"backend": "llama-cpp", "max_tokens": 64, "temperature": 0.0}}}


def test_span_tree_and_genai_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(otel.CAPTURE_CONTENT_ENV, raising=False)
    memory = InMemorySpanExporter()
    trace = sample_trace()
    assert otel.export_trace(trace, exporter=memory) == 6
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert set(spans) == {"crag.ask", "retrieve", "evaluate", "search", "fetch", "chat qwen2.5-coder-0.5b"}

    root = spans["crag.ask"]
    assert root.parent is None
    assert root.attributes["crag.action"] == "ambiguous"
    assert root.attributes["crag.confidence"] == pytest.approx(0.42)
    assert root.attributes["crag.trace_id"] == trace["id"]
    assert list(root.attributes["crag.queries"]) == trace["queries"]
    assert "crag.question" not in root.attributes  # content capture is opt-in

    gen = spans["chat qwen2.5-coder-0.5b"]
    assert gen.kind is SpanKind.CLIENT
    assert gen.attributes["gen_ai.operation.name"] == "chat"
    assert gen.attributes["gen_ai.request.model"] == "qwen2.5-coder-0.5b"
    assert gen.attributes["gen_ai.usage.input_tokens"] == 321
    assert gen.attributes["gen_ai.usage.output_tokens"] == 17
    assert gen.attributes["gen_ai.provider.name"] == "llama-cpp"
    assert gen.attributes["gen_ai.request.max_tokens"] == 64

    # One trace id; nesting follows the recorded depth; children lie inside the root.
    assert {s.context.trace_id for s in spans.values()} == {root.context.trace_id}
    assert spans["fetch"].parent.span_id == spans["search"].context.span_id
    assert spans["retrieve"].parent.span_id == root.context.span_id
    assert spans["retrieve"].attributes["crag.k"] == 5
    for s in spans.values():
        assert root.start_time <= s.start_time <= s.end_time <= root.end_time
    assert spans["evaluate"].end_time - spans["evaluate"].start_time >= 2_000_000


def test_errors_content_capture_and_stable_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(otel.CAPTURE_CONTENT_ENV, "true")
    trace = sample_trace(fail=True)
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    otel.export_trace(trace, exporter=first)
    otel.export_trace(trace, exporter=second)
    spans = {s.name: s for s in first.get_finished_spans()}
    assert spans["crag.ask"].status.status_code is StatusCode.ERROR
    gen = spans["chat qwen2.5-coder-0.5b"]
    assert gen.status.status_code is StatusCode.ERROR and gen.attributes["error.type"] == "RuntimeError"
    assert spans["crag.ask"].attributes["crag.question"] == "天津犹太会堂是什么时候建成的？"
    # The OTel ids derive from the CRAG id, so re-exporting a trace does not fork it.
    assert [s.context.span_id for s in first.get_finished_spans()] == [
        s.context.span_id for s in second.get_finished_spans()
    ]


def test_endpoint_from_environment() -> None:
    assert otel.configured_endpoint({}) is None
    assert otel.configured_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    assert otel.configured_endpoint({"CRAG_OTEL_ENDPOINT": "http://a:1/v1/traces"}) == "http://a:1/v1/traces"
    both = {"CRAG_OTEL_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://b:2"}
    assert otel.configured_endpoint(both) == "http://a:1/v1/traces"
    assert otel.configured_endpoint({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:3/x"}) == "http://t:3/x"


def test_export_is_a_no_op_without_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (otel.ENDPOINT_ENV, otel.STANDARD_ENDPOINT_ENV, otel.TRACES_ENDPOINT_ENV):
        monkeypatch.delenv(name, raising=False)
    assert otel.export_trace(sample_trace()) == 0


# -- a real OTLP/HTTP receiver on loopback --------------------------------------------------
class Receiver(http.server.BaseHTTPRequestHandler):
    posts: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.posts.append({"path": self.path, "type": self.headers.get("Content-Type"), "body": body})
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    posts: list[dict[str, Any]] = []
    handler = type("Handler", (Receiver,), {"posts": posts})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", posts
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.integration
def test_otlp_http_to_a_local_receiver(
    receiver: tuple[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, posts = receiver
    monkeypatch.setenv(otel.ENDPOINT_ENV, url)
    try:
        assert otel.export_trace(sample_trace()) == 6
        otel.export_trace(sample_trace())
    finally:
        otel.shutdown()  # flushes the background batch; bounded by the exporter timeout
    assert posts, "the receiver got no POST"
    assert {p["path"] for p in posts} == {"/v1/traces"}
    assert all(p["type"] == "application/x-protobuf" for p in posts)
    assert sum(len(p["body"]) for p in posts) > 500
    spans = []
    for p in posts:
        request = ExportTraceServiceRequest()
        request.ParseFromString(p["body"])
        for rs in request.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"]
            assert service == "crag"
            for ss in rs.scope_spans:
                assert ss.scope.name == "crag"
                spans += list(ss.spans)
    assert len(spans) == 12
    gen = next(s for s in spans if s.name.startswith("chat "))
    attrs = {a.key: a.value for a in gen.attributes}
    assert attrs["gen_ai.usage.input_tokens"].int_value == 321
    assert attrs["gen_ai.request.model"].string_value == "qwen2.5-coder-0.5b"
    root = next(s for s in spans if s.name == "crag.ask")
    assert {a.key: a.value for a in root.attributes}["crag.action"].string_value == "ambiguous"


def test_missing_endpoint_server_does_not_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing listens on this port: the export fails in the background thread, the call returns.
    monkeypatch.setenv(otel.ENDPOINT_ENV, "http://127.0.0.1:9")
    monkeypatch.setattr(otel, "EXPORT_TIMEOUT_S", 1.0)
    start = time.monotonic()
    try:
        assert otel.export_trace(sample_trace()) == 6
        assert time.monotonic() - start < 1.0
    finally:
        otel.shutdown(timeout_s=3)


def test_secrets_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-secret-123456")
    monkeypatch.setenv(otel.CAPTURE_CONTENT_ENV, "true")
    trace = sample_trace() | {"question": "why does tvly-secret-123456 leak?"}
    memory = InMemorySpanExporter()
    otel.export_trace(trace, exporter=memory)
    root = next(s for s in memory.get_finished_spans() if s.name == "crag.ask")
    assert root.attributes["crag.question"] == "why does *** leak?"


def test_env_mode_without_the_extra_logs_and_skips(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys

    monkeypatch.setenv(otel.ENDPOINT_ENV, "http://127.0.0.1:9")
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    otel.shutdown()
    assert otel.export_trace(sample_trace()) == 0  # never raises from the engine's finally
    assert "crag[otel]" in caplog.text


@pytest.mark.integration
def test_a_real_engine_trace(tmp_path: Any) -> None:
    import json

    from crag.config import CragSettings
    from crag.engine import CRAG
    from crag.testing.fakes import ScriptedLLM

    src = tmp_path / "docs.jsonl"
    docs = [
        {"text": "天津犹太会堂建成于1940年，位于天津市和平区。", "title": "天津犹太会堂"},
        {"text": "BM25 is a keyword ranking function used by search engines.", "title": "BM25"},
        {"text": "Chroma stores embedding vectors with their documents.", "title": "Chroma"},
    ]
    src.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in docs) + "\n", encoding="utf-8")
    engine = CRAG(CragSettings(kb={"path": tmp_path / "kb"}, search={"provider": "none"}))
    engine.ingest([src])
    engine._llm = ScriptedLLM(["天津犹太会堂建成于1940年[1]。"])
    answer = engine.ask("天津犹太会堂是什么时候建成的？")
    memory = InMemorySpanExporter()
    otel.export_trace(engine.traces.get(answer.trace_id), exporter=memory)
    spans = {s.name: s for s in memory.get_finished_spans()}
    root = spans["crag.ask"]
    assert root.attributes["crag.action"] == answer.action.value
    assert root.attributes["crag.confidence"] == pytest.approx(answer.confidence)
    assert {"retrieve", "evaluate", "chat scripted"} <= set(spans)
    gen = spans["chat scripted"]
    assert gen.attributes["gen_ai.usage.input_tokens"] == 10 and gen.attributes["gen_ai.usage.output_tokens"] == 5
    assert gen.attributes["gen_ai.provider.name"] == engine.settings.llm.backend
