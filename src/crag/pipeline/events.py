"""The step events, one typed contract: each event's name, its client summary and its trace record.

``run_crag`` hands every step's value to its observers as the step finishes (see the table
in :mod:`crag.pipeline`). Two observers read every value, and this module is the one place
that says what each takes from it:

* the **trace** (:class:`TraceRecorder`): the keys the viewer, ``crag trace show`` and the
  eval harness read;
* a **client** (:func:`summarise`): a small JSON object per event, for streams
  (:meth:`crag.engine.CRAG.ask_stream`, ``POST /v1/ask`` with ``stream=true``, ``crag ask``).

Both are written side by side in :data:`EVENTS`, from the same value at the same moment,
so what a client saw and what the trace holds agree. Adding a step means adding its name to
:data:`EventName` and one :class:`Event` entry here.

>>> from crag.types import Query
>>> event = summarise("query", Query("Who?", "en", upper=0.6, lower=0.35))
>>> event.name, event.data["thresholds"]["upper"]
('query', 0.6)
>>> summarise("token", "Par").data
{'delta': 'Par'}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from crag.correct.bearers import Bearers
from crag.correct.condense import Condensed
from crag.correct.rounds import RoundsResult
from crag.correct.verify import Verification
from crag.generate import Generation, Replace
from crag.pipeline.answer_cache import CacheHit
from crag.pipeline.correction import Correction, Refinement, Rewrite, Search
from crag.pipeline.steps import Context, CorrectedContext, Decision, usage
from crag.trace.spans import Tracer
from crag.types import REJECTED_SHARED_NAME, REJECTED_UNVERIFIED, Answer, Evaluation, Hit, Query, Retrieval, Strip

__all__ = ["EVENTS", "Event", "EventName", "StreamEvent", "TraceRecorder", "summarise"]

EventName = Literal[
    "condense",
    "query",
    "cache",
    "retrieve",
    "evaluate",
    "decide",
    "verify",
    "escalate",
    "refine",
    "rewrite",
    "search",
    "refine_external",
    "rounds",
    "correct",
    "fuse",
    "compress",
    "bearers",
    "abstain",
    "token",
    "replace",
    "generate",
    "answer",
    "context",
]
"""Every event a run sends, in the order they can come (see :mod:`crag.pipeline`); ``context``
ends a run that stops before generation (:func:`crag.pipeline.run_crag_context`)."""

EVENT_NAMES: tuple[str, ...] = get_args(EventName)


@dataclass
class StreamEvent:
    """One event of a streamed answer: its name, a JSON-ready summary, and the value itself.

    ``token`` carries a piece of the *verified* answer (``data["delta"]``): the pieces joined
    are the answer's text. ``answer`` comes last; its ``value`` is the :class:`~crag.types.Answer`.
    """

    name: EventName
    data: dict[str, Any]
    value: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class Event:
    """What one event gives each observer: ``summary`` for a client, ``record`` for the trace."""

    summary: Callable[[Any], dict[str, Any]]
    record: Callable[[Tracer, Any], None] | None = None
    composite: bool = False  # repeats its parts' degradations: they are not recorded again


def summarise(name: EventName, value: Any) -> StreamEvent:
    """The event a client gets for step ``name`` with ``value``."""
    event = EVENTS[name]
    data = event.summary(value)
    notes = getattr(value, "degradations", None)
    if notes and not event.composite:
        data["degradations"] = list(notes)
    return StreamEvent(name, data, value)


class TraceRecorder:
    """Records step events on ``tracer`` (``Steps`` makes one per request).

    >>> t = Tracer()
    >>> TraceRecorder(t)("query", Query("Who?", "en", upper=0.6, lower=0.35))
    >>> t.events["question"], t.events["thresholds"]["upper"]
    ('Who?', 0.6)
    """

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def __call__(self, name: EventName, value: Any) -> None:
        event = EVENTS[name]
        if event.record is not None:
            event.record(self.tracer, value)
        if not event.composite:
            for note in getattr(value, "degradations", None) or []:
                self.tracer.append("degradations", note)


# -- each event: its client summary, then its trace record ---------------------------------
def _condense(c: Condensed) -> dict[str, Any]:
    return {"asked": c.asked, "question": c.question, "history": c.history, "method": c.method,
            "llm_calls": c.llm_calls}  # fmt: skip


def _record_condense(t: Tracer, c: Condensed) -> None:
    """The conversation turn: the message as asked; ``question`` (from ``query``) is the condensed one."""
    record: dict[str, Any] = {"asked": c.asked, "condensed": c.question, "history": c.history, "method": c.method,
                              "llm_calls": c.llm_calls}  # fmt: skip
    if c.rewrite and c.method == "fallback":
        record["rejected_rewrite"] = c.rewrite  # what the model wrote instead
    t.record("conversation", record)


def _query(q: Query) -> dict[str, Any]:
    out: dict[str, Any] = {"question": q.text, "mode": q.mode, "language": q.language}
    if q.filters:
        out["filters"] = {k: list(v) for k, v in q.filters.items()}
    if q.mode == "crag":
        out |= {"query_type": q.query_type, "thresholds": q.thresholds()}
    return out


def _record_query(t: Tracer, q: Query) -> None:
    t.record("question", q.text)
    t.record("mode", q.mode)
    t.record("language", q.language)
    if q.filters:
        t.record("filters", {k: list(v) for k, v in q.filters.items()})
    if q.mode == "crag":
        if q.query_type:
            t.record("query_type", q.query_type)
        t.record("thresholds", q.thresholds())


def _cache(h: CacheHit) -> dict[str, Any]:
    return h.record() | {"action": h.answer.action.value, "confidence": h.answer.confidence}


def _record_cache(t: Tracer, h: CacheHit) -> None:
    a = h.answer
    t.record("cache", h.record())
    t.record("action", a.action.value)
    t.record("confidence", a.confidence)
    t.record("context", [_context_record(s) for s in a.context])
    if a.queries:
        t.record("queries", a.queries)
    if a.abstained:
        t.record("abstained", True)


def _retrieve(r: Retrieval) -> dict[str, Any]:
    keys = ("id", "title", "source", "url", "score", "rank", "metadata")
    return {"documents": [{k: v for k, v in _hit(h).items() if k in keys} for h in r.hits]}


def _record_retrieve(t: Tracer, r: Retrieval) -> None:
    t.record("retrieved", [_hit(h) for h in r.hits])


def _evaluate(e: Evaluation) -> dict[str, Any]:
    return {"evaluator": e.evaluator, "grades": [asdict(g) for g in e.grades], "confidence": e.confidence}


def _record_evaluate(t: Tracer, e: Evaluation) -> None:
    for key, value in _evaluate(e).items():
        t.record(key, value)
    t.record("evaluation_reason", e.reason)


def _decide(d: Decision) -> dict[str, Any]:
    return {"action": d.action.value, "confidence": d.confidence}


def _record_decide(t: Tracer, d: Decision) -> None:
    t.record("action", d.action.value)


def _verify(v: Verification) -> dict[str, Any]:
    return {"probability": v.probability, "threshold": v.threshold, "confirmed": v.confirmed, "note": v.note}


def _record_verify(t: Tracer, v: Verification) -> None:
    t.record("verification", _verify(v))


def _escalate(d: Decision) -> dict[str, Any]:
    first, check = d.escalated_from, d.unverified
    out = _decide(d) | {"rejected": first.rejected if first else ""}
    if check is not None:
        out |= {"rejected": REJECTED_UNVERIFIED, "probability": check.probability, "threshold": check.threshold}
    if d.shared is not None:
        out |= {"rejected": REJECTED_SHARED_NAME, "name": d.shared.name, "bearers": len(d.shared.bearers)}
    return out


def _record_escalate(t: Tracer, d: Decision) -> None:
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
        record |= {"rejected": REJECTED_UNVERIFIED, "probability": check.probability, "threshold": check.threshold}
    if d.shared is not None:  # before generation: several people of the asked name, the question says not which
        record |= {"rejected": REJECTED_SHARED_NAME, "name": d.shared.name, "bearers": len(d.shared.bearers)}
    t.record("escalated", record)
    t.record("action", d.action.value)


def _refine(r: Refinement) -> dict[str, Any]:
    return {"kept": [_strip(s) for s in r.kept], "graded": len(r.graded)}


def _rewrite(r: Rewrite) -> dict[str, Any]:
    return {"queries": r.queries, "subqueries": r.subqueries}


def _record_rewrite(t: Tracer, r: Rewrite) -> None:
    if r.subqueries:
        t.record("subqueries", r.subqueries)
    t.record("queries", r.queries)


def _search(s: Search) -> dict[str, Any]:
    results = [{"query": q, "title": r.title, "url": r.url, "provider": r.provider} for q, r in s.results]
    return {"results": results, "filtered": s.filtered}


def _record_search(t: Tracer, s: Search) -> None:
    if s.filtered:
        t.record("filtered_results", s.filtered)
    t.record("external", [asdict(r) | {"query": q} for q, r in s.results])


def _rounds(r: RoundsResult) -> dict[str, Any]:
    return {"rounds": r.rounds + 1, "searches": r.searches + 1, "stopped": r.stopped, "history": r.history}


def _record_rounds(t: Tracer, r: RoundsResult) -> None:
    t.record("rounds", _rounds(r) | {"queries": r.queries})


def _correct(c: Correction) -> dict[str, Any]:
    return {"internal": len(c.internal), "external": len(c.external), "graded": len(c.graded), "best": c.best()}


def _record_correct(t: Tracer, c: Correction) -> None:
    kept = c.internal + c.external
    t.record("strips", [{**_strip(s, text=True), "kept": s in kept} for s in c.graded])


def _context(c: Context) -> dict[str, Any]:
    return {
        "context": [_strip(s) for s in c.strips],
        "duplicates_removed": c.duplicates,
        "conflicts": len(c.conflicts),
        "instruction_like": len(c.suspicious),
    }


def _record_fuse(t: Tracer, c: Context) -> None:
    if c.suspicious:
        t.record("instruction_like_strips", c.suspicious)
    t.record("duplicates_removed", c.duplicates)
    t.record("support", c.support)
    t.record("conflicts", [x._asdict() for x in c.conflicts])
    if c.instruction:
        t.record("generator_instruction", c.instruction)


def _bearers(b: Bearers) -> dict[str, Any]:
    """Who the sources describe under the question's name: listed when several, ``chosen`` when
    the question's own qualifier (``asked``) names one of them."""
    return {
        "name": b.name,
        "bearers": [asdict(x) for x in b.bearers],
        "several": b.several,
        "asks_who": b.asks_who,
        "asked": b.asked,
        "chosen": b.bearers.index(b.chosen) if b.chosen is not None else None,
    }


def _record_bearers(t: Tracer, b: Bearers) -> None:
    if len(b.bearers) >= 2:  # a name the sources share: the trace says who, and what the answer did
        t.record("bearers", _bearers(b))


def _generation(g: Generation) -> dict[str, Any]:
    return {
        "citations": [asdict(c) for c in g.citations],
        "refused": g.refused,
        "refusal_overridden": g.refusal_overridden,
        "citations_inferred": g.citations_inferred,
        "trimmed": g.trimmed,
        "usage": usage(g),
        "bearers": [asdict(b) for b in g.bearers],
    }


def _record_abstain(t: Tracer, g: Generation) -> None:
    t.record("abstained", True)
    t.record("context", [_context_record(s) for s in g.sources])


def _record_generate(t: Tracer, g: Generation) -> None:
    t.record("context", [_context_record(s) for s in g.sources])
    if g.claims:  # each sentence shown, where it is, what it cites and how that was settled
        t.record("claims", [asdict(c) for c in g.claims])
    if g.citations_inferred:
        t.record("citations_inferred", True)  # a marker was added or moved to the source that holds it
    if g.refusal_overridden:
        t.record("refusal_overridden", True)
    if len(g.completions) > 1 or g.unsupported or g.rejected or g.trimmed:
        t.record("first_reply", g.completions[0].text if g.completions else "")
    if g.rejected:  # what the model said is in first_reply; why it is not the answer, here
        t.record("reply_rejected", g.rejected)
    if g.trimmed:  # sentences of the reply the sources do not support: never shown
        t.record("answer_trimmed", g.trimmed)
    if g.unsupported:  # the reply's new words that no source contains: not shown as an answer
        t.record("unsupported_terms", g.unsupported)
    if g.checks:  # claims read by the model, and claims their sources talk around without stating
        t.record("claim_checks", g.checks)


def _replace(r: Replace) -> dict[str, Any]:
    return {"reason": r.reason, "text": r.text}


def _record_answer(t: Tracer, a: Answer) -> None:
    t.record("answer", a.answer)
    t.record("refused", a.refused)
    t.record("citations", [asdict(c) for c in a.citations])


def _corrected(c: CorrectedContext) -> dict[str, Any]:
    return _decide(c.decision) | {"context": [_strip(s) for s in c.strips], "queries": c.queries}


def _record_corrected(t: Tracer, c: CorrectedContext) -> None:
    t.record("context", [_context_record(s) for s in c.strips])
    t.record("context_only", True)  # stopped before generation on purpose: no answer is not a failure


def _hit(h: Hit) -> dict[str, Any]:
    c = h.chunk
    return {
        "id": c.id, "source": c.source, "title": c.title, "text": c.text, "url": c.url,
        "score": h.score, "dense": h.dense, "keyword": h.keyword, "rank": h.rank,
    } | ({"metadata": c.metadata} if c.metadata else {})  # fmt: skip


def _strip(s: Strip, *, text: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"source": s.source, "title": s.title, "url": s.url, "origin": s.origin, "score": s.score}
    return {"text": s.text, **out} if text else out


def _context_record(s: Strip) -> dict[str, object]:
    return {"text": s.text, "source": s.source, "origin": s.origin, "title": s.title}


EVENTS: dict[str, Event] = {
    "condense": Event(_condense, _record_condense),
    "query": Event(_query, _record_query),
    "cache": Event(_cache, _record_cache),
    "retrieve": Event(_retrieve, _record_retrieve),
    "evaluate": Event(_evaluate, _record_evaluate),
    "decide": Event(_decide, _record_decide),
    "verify": Event(_verify, _record_verify),
    "escalate": Event(_escalate, _record_escalate),
    "refine": Event(_refine),
    "rewrite": Event(_rewrite, _record_rewrite),
    "search": Event(_search, _record_search),
    "refine_external": Event(_refine),
    "rounds": Event(_rounds, _record_rounds),
    "correct": Event(_correct, _record_correct, composite=True),
    "fuse": Event(_context, _record_fuse),
    "compress": Event(_context),
    "bearers": Event(_bearers, _record_bearers),
    "abstain": Event(_generation, _record_abstain),
    "token": Event(lambda delta: {"delta": delta}),
    "replace": Event(_replace),
    "generate": Event(_generation, _record_generate),
    "answer": Event(lambda a: a.to_dict(), _record_answer, composite=True),
    "context": Event(_corrected, _record_corrected, composite=True),
}
assert set(EVENTS) == set(EVENT_NAMES), "every event name has one entry"
