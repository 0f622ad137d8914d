"""Prometheus metrics of the service, one registry per app (so tests can build many apps).

What they answer: how often each CRAG action is taken, where the time goes per
stage, how confident the evaluator is, how often we search and degrade, and which
responses clients get.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from crag.errors import CragError, RequestCancelled
from crag.server.stream import crag_error_status
from crag.types import Answer

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

# Stage latencies span 1 ms (decide) to minutes (generation on a busy CPU).
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
CONFIDENCE_BUCKETS = tuple(round(i / 10, 1) for i in range(1, 11))


class Metrics:
    """Counters and histograms fed by the request handlers.

    >>> m = Metrics()
    >>> m.request("/healthz", 200)
    >>> b"crag_http_requests_total" in m.render()
    True
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "crag_http_requests", "HTTP responses by route and status", ["route", "status"], registry=r
        )
        self.actions = Counter("crag_actions", "Answers by CRAG action taken", ["action"], registry=r)
        self.stage_seconds = Histogram(
            "crag_stage_seconds",
            "Pipeline stage latency from Answer.timings",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.confidence = Histogram(
            "crag_evaluator_confidence",
            "Set-level evaluator confidence",
            buckets=CONFIDENCE_BUCKETS,
            registry=r,
        )
        self.searches = Counter("crag_searches", "External search queries issued", registry=r)
        self.degradations = Counter("crag_degradations", "Degradations recorded in answers", registry=r)
        self.errors = Counter("crag_errors", "Failed questions by error type", ["type"], registry=r)
        self.outcomes = Counter(
            "crag_outcomes",
            "Questions by how they ended: answered, degraded, refused, abstained, failed, cancelled",
            ["status"],
            registry=r,
        )

    def request(self, route: str, status: int) -> None:
        self.requests.labels(route=route, status=str(status)).inc()

    def answer(self, answer: Answer) -> None:
        """Record what one answered question did."""
        self.outcomes.labels(status=answer.status).inc()
        self.actions.labels(action=answer.action.value).inc()
        for stage, seconds in answer.timings.items():
            self.stage_seconds.labels(stage=stage).observe(max(0.0, float(seconds)))
        if answer.confidence is not None:
            self.confidence.observe(answer.confidence)
        if answer.queries:
            self.searches.inc(len(answer.queries))
        if answer.degradations:
            self.degradations.inc(len(answer.degradations))

    def error(self, type_: str) -> None:
        self.errors.labels(type=type_).inc()
        self.outcomes.labels(status="failed").inc()

    def failed(self, exc: CragError) -> None:
        """A question that ended with ``exc``: cancelled when its client left, else failed."""
        if isinstance(exc, RequestCancelled):
            self.cancelled()
        else:
            self.error(crag_error_status(exc)[1])

    def cancelled(self) -> None:
        """A question whose client hung up before its answer was complete (not an error)."""
        self.outcomes.labels(status="cancelled").inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
