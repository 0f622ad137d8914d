"""Step events as a client sees them: each step's value summarised to a small JSON object.

A streamed answer (:meth:`crag.engine.CRAG.ask_stream`, ``POST /v1/ask`` with
``stream=true``, ``crag ask``) shows the run as it happens. The summaries are taken from
the same values the trace recorder writes (:mod:`crag.pipeline.record`), at the same
moment, so what a client saw and what the trace holds agree.

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
from typing import Any

from crag.correct.condense import Condensed
from crag.correct.rounds import RoundsResult
from crag.correct.verify import Verification
from crag.generate import Generation, Replace
from crag.pipeline.correction import Correction, Refinement, Rewrite, Search
from crag.pipeline.steps import Context, Decision, usage
from crag.types import Answer, Evaluation, Query, Retrieval, Strip

__all__ = ["StreamEvent", "summarise"]


@dataclass
class StreamEvent:
    """One event of a streamed answer: its name, a JSON-ready summary, and the value itself.

    ``name`` is the step's (see :mod:`crag.pipeline`), ``token`` for a piece of the answer,
    ``replace`` when what was streamed is not the answer, ``answer`` last (``value`` is the
    :class:`~crag.types.Answer`).
    """

    name: str
    data: dict[str, Any]
    value: Any = field(default=None, repr=False)


def summarise(name: str, value: Any) -> StreamEvent:
    """The event a client gets for step ``name`` with ``value`` (an unknown step: its name only)."""
    summary = _SUMMARIES.get(name)
    data = summary(value) if summary is not None else {}
    notes = getattr(value, "degradations", None)
    if notes and name not in ("correct", "answer"):  # composites repeat their parts' notes
        data["degradations"] = list(notes)
    return StreamEvent(name, data, value)


def _condense(c: Condensed) -> dict[str, Any]:
    return {"asked": c.asked, "question": c.question, "history": c.history, "method": c.method,
            "llm_calls": c.llm_calls}  # fmt: skip


def _query(q: Query) -> dict[str, Any]:
    out: dict[str, Any] = {"question": q.text, "mode": q.mode, "language": q.language}
    if q.mode == "crag":
        out |= {"query_type": q.query_type, "thresholds": q.thresholds()}
    return out


def _retrieve(r: Retrieval) -> dict[str, Any]:
    return {
        "documents": [
            {"id": h.chunk.id, "title": h.chunk.title, "source": h.chunk.source, "url": h.chunk.url,
             "score": h.score, "rank": h.rank}
            for h in r.hits
        ]
    }  # fmt: skip


def _evaluate(e: Evaluation) -> dict[str, Any]:
    return {"evaluator": e.evaluator, "grades": [asdict(g) for g in e.grades], "confidence": e.confidence}


def _decide(d: Decision) -> dict[str, Any]:
    return {"action": d.action.value, "confidence": d.confidence}


def _escalate(d: Decision) -> dict[str, Any]:
    first, check = d.escalated_from, d.unverified
    out = _decide(d) | {"rejected": first.rejected if first else ""}
    if check is not None:
        out |= {"rejected": "not verified", "probability": check.probability, "threshold": check.threshold}
    return out


def _verify(v: Verification) -> dict[str, Any]:
    return {"probability": v.probability, "threshold": v.threshold, "confirmed": v.confirmed, "note": v.note}


def _refine(r: Refinement) -> dict[str, Any]:
    return {"kept": [_strip(s) for s in r.kept], "graded": len(r.graded)}


def _rewrite(r: Rewrite) -> dict[str, Any]:
    return {"queries": r.queries, "subqueries": r.subqueries}


def _search(s: Search) -> dict[str, Any]:
    results = [{"query": q, "title": r.title, "url": r.url, "provider": r.provider} for q, r in s.results]
    return {"results": results, "filtered": s.filtered}


def _rounds(r: RoundsResult) -> dict[str, Any]:
    return {"rounds": r.rounds + 1, "searches": r.searches + 1, "stopped": r.stopped, "history": r.history}


def _correct(c: Correction) -> dict[str, Any]:
    return {"internal": len(c.internal), "external": len(c.external), "graded": len(c.graded), "best": c.best()}


def _context(c: Context) -> dict[str, Any]:
    return {
        "context": [_strip(s) for s in c.strips],
        "duplicates_removed": c.duplicates,
        "conflicts": len(c.conflicts),
        "instruction_like": len(c.suspicious),
    }


def _generation(g: Generation) -> dict[str, Any]:
    return {
        "citations": [asdict(c) for c in g.citations],
        "refused": g.refused,
        "refusal_overridden": g.refusal_overridden,
        "citations_inferred": g.citations_inferred,
        "trimmed": g.trimmed,
        "usage": usage(g),
    }


def _answer(a: Answer) -> dict[str, Any]:
    return a.to_dict()


def _strip(s: Strip) -> dict[str, Any]:
    return {"source": s.source, "title": s.title, "url": s.url, "origin": s.origin, "score": s.score}


_SUMMARIES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "condense": _condense,
    "query": _query,
    "retrieve": _retrieve,
    "evaluate": _evaluate,
    "decide": _decide,
    "escalate": _escalate,
    "verify": _verify,
    "refine": _refine,
    "rewrite": _rewrite,
    "search": _search,
    "refine_external": _refine,
    "rounds": _rounds,
    "correct": _correct,
    "fuse": _context,
    "compress": _context,
    "abstain": _generation,
    "generate": _generation,
    "token": lambda delta: {"delta": delta},
    "replace": lambda r: {"reason": r.reason, "text": r.text} if isinstance(r, Replace) else {},
    "answer": _answer,
}
