"""The tracer as an observer of step events: each step's value, written under the trace keys.

The trace viewer, ``crag trace show``, the eval harness and the tests read these keys;
they are written here and nowhere else, from the values the steps return (see the event
list in :mod:`crag.pipeline`). Degradations are appended from the step that degraded; the
composite values (``correct``, ``answer``) repeat their parts' and are not appended again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from crag.correct.rounds import RoundsResult
from crag.correct.verify import Verification
from crag.generate import Generation
from crag.pipeline.correction import Correction, Rewrite, Search
from crag.pipeline.steps import Context, Decision
from crag.trace.spans import Tracer
from crag.types import Answer, Evaluation, Hit, Query, Retrieval, Strip

_COMPOSITE = frozenset({"correct", "answer"})


class TraceRecorder:
    """Records step events on ``tracer`` (``Steps`` makes one per request).

    >>> t = Tracer()
    >>> TraceRecorder(t)("query", Query("Who?", "en", upper=0.6, lower=0.35))
    >>> t.events["question"], t.events["thresholds"]["upper"]
    ('Who?', 0.6)
    """

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def __call__(self, name: str, value: Any) -> None:
        record = _RECORDERS.get(name)
        if record is not None:
            record(self.tracer, value)
        if name not in _COMPOSITE:
            for note in getattr(value, "degradations", None) or []:
                self.tracer.append("degradations", note)


def _query(t: Tracer, q: Query) -> None:
    t.record("question", q.text)
    t.record("mode", q.mode)
    t.record("language", q.language)
    if q.filters:
        t.record("filters", {k: list(v) for k, v in q.filters.items()})
    if q.mode == "crag":
        if q.query_type:
            t.record("query_type", q.query_type)
        t.record("thresholds", q.thresholds())


def _retrieve(t: Tracer, r: Retrieval) -> None:
    t.record("retrieved", [_hit_record(h) for h in r.hits])


def _evaluate(t: Tracer, e: Evaluation) -> None:
    t.record("evaluator", e.evaluator)
    t.record("grades", [asdict(g) for g in e.grades])
    t.record("confidence", e.confidence)
    t.record("evaluation_reason", e.reason)


def _decide(t: Tracer, d: Decision) -> None:
    t.record("action", d.action.value)


def _verify(t: Tracer, v: Verification) -> None:
    t.record("verification", {
        "probability": v.probability, "threshold": v.threshold, "confirmed": v.confirmed, "note": v.note
    })  # fmt: skip


def _escalate(t: Tracer, d: Decision) -> None:
    """The first action and why it was left: the refused reply, or the failed verification.
    The later events overwrite ``strips``, ``context`` and the reply keys with the escalated run's."""
    first, check = d.escalated_from, d.unverified
    record: dict[str, object] = {
        "from": t.events.get("action"),
        "reply": first.completions[0].text if first and first.completions else "",
        "rejected": first.rejected if first else "",
        "llm_calls": len(first.completions) if first else 0,
    }
    if check is not None:  # before generation: the model did not read the answer in the strips
        record |= {"rejected": "not verified", "probability": check.probability, "threshold": check.threshold}
    t.record("escalated", record)
    t.record("action", d.action.value)


def _rewrite(t: Tracer, r: Rewrite) -> None:
    if r.subqueries:
        t.record("subqueries", r.subqueries)
    t.record("queries", r.queries)


def _search(t: Tracer, s: Search) -> None:
    if s.filtered:
        t.record("filtered_results", s.filtered)
    t.record("external", [asdict(r) | {"query": q} for q, r in s.results])


def _rounds(t: Tracer, r: RoundsResult) -> None:
    t.record(
        "rounds",
        {
            "rounds": r.rounds + 1,
            "searches": r.searches + 1,
            "stopped": r.stopped,
            "history": r.history,
            "queries": r.queries,
        },
    )


def _correct(t: Tracer, c: Correction) -> None:
    kept = c.internal + c.external
    t.record("strips", [_strip_record(s, s in kept) for s in c.graded])


def _fuse(t: Tracer, c: Context) -> None:
    if c.suspicious:
        t.record("instruction_like_strips", c.suspicious)
    t.record("duplicates_removed", c.duplicates)
    t.record("support", c.support)
    t.record("conflicts", [x._asdict() for x in c.conflicts])
    if c.instruction:
        t.record("generator_instruction", c.instruction)


def _abstain(t: Tracer, g: Generation) -> None:
    t.record("abstained", True)
    t.record("context", [_context_record(s) for s in g.sources])


def _generate(t: Tracer, g: Generation) -> None:
    t.record("context", [_context_record(s) for s in g.sources])
    if g.citations_inferred:
        t.record("citations_inferred", True)  # the model gave none; matched by overlap
    if g.refusal_overridden:
        t.record("refusal_overridden", True)
    if len(g.completions) > 1 or g.unsupported or g.rejected or g.trimmed:
        t.record("first_reply", g.completions[0].text)
    if g.rejected:  # what the model said is in first_reply; why it is not the answer, here
        t.record("reply_rejected", g.rejected)
    if g.trimmed:  # later sentences of the reply the sources do not support: cut from the answer
        t.record("answer_trimmed", g.trimmed)
    if g.unsupported:  # the reply's new words that no source contains: not shown as an answer
        t.record("unsupported_terms", g.unsupported)


def _answer(t: Tracer, a: Answer) -> None:
    t.record("answer", a.answer)
    t.record("refused", a.refused)
    t.record("citations", [asdict(c) for c in a.citations])


def _hit_record(h: Hit) -> dict[str, object]:
    c = h.chunk
    return {
        "id": c.id, "source": c.source, "title": c.title, "text": c.text, "url": c.url,
        "score": h.score, "dense": h.dense, "keyword": h.keyword, "rank": h.rank,
    } | ({"metadata": c.metadata} if c.metadata else {})  # fmt: skip


def _strip_record(s: Strip, kept: bool) -> dict[str, object]:
    return {"text": s.text, "source": s.source, "origin": s.origin, "score": s.score, "kept": kept}


def _context_record(s: Strip) -> dict[str, object]:
    return {"text": s.text, "source": s.source, "origin": s.origin, "title": s.title}


_RECORDERS: dict[str, Callable[[Tracer, Any], None]] = {
    "query": _query,
    "retrieve": _retrieve,
    "evaluate": _evaluate,
    "decide": _decide,
    "escalate": _escalate,
    "verify": _verify,
    "rewrite": _rewrite,
    "search": _search,
    "rounds": _rounds,
    "correct": _correct,
    "fuse": _fuse,
    "abstain": _abstain,
    "generate": _generate,
    "answer": _answer,
}
