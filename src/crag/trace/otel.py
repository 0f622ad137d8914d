"""Export finished traces as OpenTelemetry spans over OTLP/HTTP (``pip install 'crag[otel]'``).

CRAG's own trace (``Tracer.to_dict()``) stays the source of truth; this module turns a
*finished* trace into OTel spans after the fact, so the pipeline carries no OTel calls
and costs nothing when export is off. Span shape:

* root ``crag.ask`` (or ``crag.rag``): ``crag.action``, ``crag.confidence``, ``crag.mode``,
  ``crag.trace_id``; status ERROR when the request raised;
* one child per CRAG span (retrieve, evaluate, refine, rewrite, search, fuse, generate),
  nested by the recorded depth; tags become ``crag.<tag>`` attributes;
* ``generate`` follows the GenAI semantic conventions: named ``chat <model>``, kind
  CLIENT, with ``gen_ai.operation.name``, ``gen_ai.request.model``,
  ``gen_ai.usage.input_tokens`` and ``gen_ai.usage.output_tokens``.

Question and answer text are only attached when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (the GenAI convention's
opt-in), because a collector is often shared and prompts may be private.

>>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
>>> from crag.trace.spans import Tracer
>>> tracer = Tracer()
>>> with tracer.span("generate", model="qwen", prompt_tokens=10, completion_tokens=3):
...     tracer.record("action", "correct")
>>> memory = InMemorySpanExporter()
>>> export_trace(tracer.to_dict(), exporter=memory)
2
>>> sorted(s.name for s in memory.get_finished_spans())
['chat qwen', 'crag.ask']
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from crag.errors import ConfigError
from crag.event_names import GENERATE
from crag.redact import clip, redact

if TYPE_CHECKING:  # the SDK is an optional extra; imported lazily at run time
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["configured_endpoint", "export_trace", "shutdown", "to_spans"]

ENDPOINT_ENV = "CRAG_OTEL_ENDPOINT"
STANDARD_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
EXPORT_TIMEOUT_S = 5.0  # per POST; the batch thread absorbs it, requests never wait on it
MAX_QUEUE = 2048  # spans buffered for a slow collector before the oldest are dropped
MAX_TEXT = 4096  # captured question/answer text is clipped: attributes are not documents

log = logging.getLogger("crag.trace.otel")
_warned: set[str] = set()
_lock = threading.Lock()
_processor: SpanProcessor | None = None
_processor_endpoint: str | None = None


def configured_endpoint(env: Mapping[str, str] | None = None) -> str | None:
    """The OTLP/HTTP traces URL from the environment, or None when export is off.

    ``CRAG_OTEL_ENDPOINT`` wins, then ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as
    is, per the OTel spec), then ``OTEL_EXPORTER_OTLP_ENDPOINT``. Base URLs get
    ``/v1/traces`` appended, so ``http://127.0.0.1:4318`` works as users expect.

    >>> configured_endpoint({"CRAG_OTEL_ENDPOINT": "http://127.0.0.1:4318"})
    'http://127.0.0.1:4318/v1/traces'
    >>> configured_endpoint({}) is None
    True
    """
    env = os.environ if env is None else env
    if env.get(TRACES_ENDPOINT_ENV, "").strip() and not env.get(ENDPOINT_ENV, "").strip():
        return env[TRACES_ENDPOINT_ENV].strip()
    for name in (ENDPOINT_ENV, STANDARD_ENDPOINT_ENV):
        value = env.get(name, "").strip()
        if value:
            return value if value.rstrip("/").endswith("/v1/traces") else value.rstrip("/") + "/v1/traces"
    return None


def export_trace(trace: Mapping[str, Any], exporter: SpanExporter | None = None) -> int:
    """Export one finished trace; return how many spans were handed over (0 when off).

    With ``exporter`` the spans are exported synchronously and errors propagate (tests,
    scripts). Without one, the endpoint comes from :func:`configured_endpoint` and spans
    go through a background ``BatchSpanProcessor``, so a slow or dead collector never
    delays an answer; in that mode nothing raises (telemetry must not break a request,
    and the engine calls this from a ``finally``): a missing ``otel`` extra or a bad
    trace is logged once and skipped. Secrets from the environment are redacted first,
    exactly as :class:`~crag.trace.store.TraceStore` does before writing.
    """
    if exporter is not None:
        spans = to_spans(redact(trace))
        exporter.export(spans)
        return len(spans)
    endpoint = configured_endpoint()
    if endpoint is None:
        return 0
    try:
        processor = _env_processor(endpoint)
        spans = to_spans(redact(trace))
    except Exception as exc:  # see docstring: telemetry never fails the request
        _warn_once(f"OpenTelemetry export to {endpoint} skipped: {exc}")
        return 0
    for span in spans:
        processor.on_end(span)
    return len(spans)


def shutdown(timeout_s: float = EXPORT_TIMEOUT_S) -> None:
    """Flush buffered spans and stop the background exporter (also run at exit)."""
    global _processor, _processor_endpoint
    with _lock:
        processor, _processor, _processor_endpoint = _processor, None, None
    if processor is not None:
        processor.force_flush(int(timeout_s * 1000))
        processor.shutdown()


def _root_attributes(trace: Mapping[str, Any], crag_id: str, mode: str) -> dict[str, Any]:
    """The request span's attributes: the decision, its inputs' counts, and (opt-in) the texts."""
    attrs: dict[str, Any] = {"crag.trace_id": crag_id, "crag.mode": mode}
    _put(attrs, "crag.action", trace.get("action"))
    _put(attrs, "crag.confidence", trace.get("confidence"))
    _put(attrs, "crag.evaluator", trace.get("evaluator"))
    _put(attrs, "crag.language", trace.get("language"))
    _put(attrs, "crag.retrieved_count", len(trace.get("retrieved") or []))
    _put(attrs, "crag.citation_count", len(trace.get("citations") or []))
    if trace.get("degradations"):
        attrs["crag.degradations"] = [str(d) for d in trace["degradations"]]
    if trace.get("queries"):
        attrs["crag.queries"] = [str(q) for q in trace["queries"]]
    if _capture_content():
        _put(attrs, "crag.question", _clip(trace.get("question")))
        _put(attrs, "crag.answer", _clip(trace.get("answer")))
    return attrs


def _gen_ai_attributes(attrs: dict[str, Any], tags: Mapping[str, Any], llm_settings: Mapping[str, Any]) -> str:
    """The generate span as an OTel GenAI ``chat`` span: its attributes added, its name returned."""
    model = str(tags.get("model") or llm_settings.get("model") or "unknown")
    attrs["gen_ai.operation.name"] = "chat"
    attrs["gen_ai.request.model"] = model
    _put(attrs, "gen_ai.provider.name", llm_settings.get("backend"))
    _put(attrs, "gen_ai.request.max_tokens", llm_settings.get("max_tokens"))
    _put(attrs, "gen_ai.request.temperature", llm_settings.get("temperature"))
    _put(attrs, "gen_ai.usage.input_tokens", tags.get("prompt_tokens"))
    _put(attrs, "gen_ai.usage.output_tokens", tags.get("completion_tokens"))
    return f"chat {model}"


@dataclass
class _SpanFactory:
    """What every span of one exported trace shares: the SDK, resource, scope and id source.

    Ids are derived from the CRAG id: exporting the same trace twice gives the same OTel
    trace, and the id in the viewer can be pasted into a tracing backend's search.
    """

    sdk: dict[str, Any]
    crag_id: str
    resource: Any = None
    scope: Any = None
    digest: bytes = b""
    otel_trace_id: int = 1
    counter: Iterator[int] = field(default_factory=lambda: iter(range(1, 1 << 30)))

    def __post_init__(self) -> None:
        self.digest = hashlib.sha256(self.crag_id.encode()).digest()
        self.otel_trace_id = int.from_bytes(self.digest[:16], "big") or 1
        service = os.environ.get("OTEL_SERVICE_NAME") or "crag"
        self.resource = self.sdk["Resource"].create({"service.name": service})
        self.scope = self.sdk["InstrumentationScope"]("crag", _version())

    def context(self) -> Any:
        """A fresh span context in this trace, its id derived from the CRAG id and a counter."""
        trace_api = self.sdk["trace_api"]
        seed = self.digest + next(self.counter).to_bytes(4, "big")
        span_id = int.from_bytes(hashlib.sha256(seed).digest()[:8], "big")
        flags = trace_api.TraceFlags(1)
        return trace_api.SpanContext(self.otel_trace_id, span_id or 1, is_remote=False, trace_flags=flags)

    def status(self, error: Any) -> Any:
        """ERROR with the (clipped) message, or UNSET when ``error`` is None."""
        Status, StatusCode = self.sdk["Status"], self.sdk["StatusCode"]
        return Status(StatusCode.UNSET) if error is None else Status(StatusCode.ERROR, clip(error, 500))

    def readable(
        self, name: str, ctx: Any, parent: Any, attrs: Any, kind: Any, status: Any, start: int, end: int
    ) -> Any:
        """One finished SDK span."""
        return self.sdk["ReadableSpan"](
            name=name,
            context=ctx,
            parent=parent,
            resource=self.resource,
            attributes=attrs,
            kind=kind,
            status=status,
            start_time=start,
            end_time=end,
            instrumentation_scope=self.scope,
        )


@dataclass
class _Timeline:
    """Each CRAG span's start and end in epoch ns, and the root's bounds that cover them all."""

    starts: list[int]
    ends: list[int]
    root_start: int
    root_end: int


def _timeline(trace: Mapping[str, Any], spans_in: Sequence[Mapping[str, Any]]) -> _Timeline:
    """Place the spans in time; the root starts at ``created_at`` and lasts ``timings.total``,
    stretched to cover any child that falls outside it."""
    root_start = _epoch_ns(trace.get("created_at"))
    starts = [int(float(s.get("start") or 0) * 1e9) for s in spans_in]
    ends = [st + int(float(s.get("duration_ms") or 0) * 1e6) for st, s in zip(starts, spans_in, strict=True)]
    if root_start is None:
        root_start = min(starts, default=_now_ns())
    total_s = (trace.get("timings") or {}).get("total")
    root_end = root_start + int(float(total_s) * 1e9) if isinstance(total_s, (int, float)) else root_start
    return _Timeline(starts, ends, min([root_start, *starts]), max([root_end, *ends]))


def _child_span(
    make: _SpanFactory, span: Mapping[str, Any], ctx: Any, parent: Any, start: int, end: int, llm: Mapping[str, Any]
) -> Any:
    """One CRAG span as an OTel span: its tags as ``crag.*`` attributes, generate as a GenAI chat."""
    trace_api = make.sdk["trace_api"]
    name = str(span.get("name") or "span")
    tags = _mapping(span.get("tags"))
    attrs: dict[str, Any] = {}
    for key, value in tags.items():
        _put(attrs, f"crag.{key}", value)
    kind = trace_api.SpanKind.INTERNAL
    if name == GENERATE:  # the span of the step that called the model for the answer
        name = _gen_ai_attributes(attrs, tags, llm)
        kind = trace_api.SpanKind.CLIENT
    error = span.get("error")
    if error:
        attrs["error.type"] = str(error).split(":", 1)[0]
    status = make.status(error if error else None)
    return make.readable(name, ctx, parent, attrs, kind, status, start, max(start, end))


def to_spans(trace: Mapping[str, Any]) -> list[ReadableSpan]:
    """The OTel spans of a CRAG trace dict: the root first, then children in start order."""
    crag_id = str(trace.get("id") or "unknown")
    make = _SpanFactory(_sdk(), crag_id)
    trace_api = make.sdk["trace_api"]
    spans_in = [s for s in trace.get("spans") or [] if isinstance(s, Mapping)]
    times = _timeline(trace, spans_in)

    mode = str(trace.get("mode") or "crag")
    errors = [str(e) for e in trace.get("errors") or []]
    request = _mapping(trace.get("request"))
    root_kind = trace_api.SpanKind.SERVER if request.get("via") == "http" else trace_api.SpanKind.INTERNAL
    root_ctx = make.context()
    name = "crag.rag" if mode == "rag" else "crag.ask"
    root_attrs = _root_attributes(trace, crag_id, mode)
    status = make.status(errors[0] if errors else None)
    out = [make.readable(name, root_ctx, None, root_attrs, root_kind, status, times.root_start, times.root_end)]

    llm_settings = _mapping(_mapping(trace.get("settings")).get("llm"))
    # Spans are stored in start order with a depth; the parent of a span at depth d is
    # the latest span seen at depth d-1 (the tracer appends parents before children).
    stack: list[Any] = [root_ctx]
    for s, start, end in zip(spans_in, times.starts, times.ends, strict=True):
        depth = max(0, int(s.get("depth") or 0))
        del stack[depth + 1 :]
        parent = stack[-1] if stack else root_ctx
        ctx = make.context()
        stack.append(ctx)
        out.append(_child_span(make, s, ctx, parent, start, end, llm_settings))
    return out


# -- helpers ------------------------------------------------------------------------------
def _sdk() -> dict[str, Any]:
    try:
        from opentelemetry import trace as trace_api
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import Status, StatusCode
    except ImportError as exc:
        raise ConfigError(
            "OpenTelemetry export needs the otel extra: pip install 'crag[otel]' "
            f"(opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http): {exc}"
        ) from exc
    return {
        "trace_api": trace_api,
        "Resource": Resource,
        "ReadableSpan": ReadableSpan,
        "InstrumentationScope": InstrumentationScope,
        "Status": Status,
        "StatusCode": StatusCode,
    }


def _env_processor(endpoint: str) -> SpanProcessor:
    global _processor, _processor_endpoint
    with _lock:
        if _processor is not None and _processor_endpoint == endpoint:
            return _processor
        old = _processor
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise ConfigError(
                f"{ENDPOINT_ENV}/{STANDARD_ENDPOINT_ENV} is set but the otel extra is missing: "
                f"pip install 'crag[otel]': {exc}"
            ) from exc
        # Headers (e.g. an API key for a hosted collector) come from the standard
        # OTEL_EXPORTER_OTLP_HEADERS, read by the exporter itself.
        _processor = BatchSpanProcessor(
            OTLPSpanExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT_S),
            max_queue_size=MAX_QUEUE,
            schedule_delay_millis=1000,
        )
        _processor_endpoint = endpoint
    if old is not None:  # the endpoint changed (tests, reconfiguration): drain the old one
        old.shutdown()
    return _processor


atexit.register(shutdown)


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _put(attrs: dict[str, Any], key: str, value: Any) -> None:
    """Set an attribute if OTel can carry it (primitives or homogeneous lists of them)."""
    if value is None or isinstance(value, (Mapping, bytes)):
        return
    if isinstance(value, (bool, int, float, str)):
        attrs[key] = value
    elif isinstance(value, Sequence) and value and all(isinstance(v, (str, int, float, bool)) for v in value):
        kinds = {type(v) for v in value}
        attrs[key] = list(value) if len(kinds) == 1 else [str(v) for v in value]


def _epoch_ns(iso: Any) -> int | None:
    if not isinstance(iso, str) or not iso:
        return None
    try:
        return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        return None


def _now_ns() -> int:
    import time

    return time.time_ns()


def _capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


def _clip(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"


def _version() -> str:
    from crag._version import __version__

    return str(__version__)
