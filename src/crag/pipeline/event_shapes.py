"""The JSON each event's value becomes: its client summary, its trace record, its OpenAI pieces.

Pure functions of the step values, one pair per kind of value: ``*_summary`` is the small
object a client gets (a stream's event data), ``*_record`` the keys the trace keeps (what
the viewer, ``crag trace show`` and the eval harness read). :mod:`crag.pipeline.events`
binds them to the events; nothing else calls them.

>>> from crag.types import Query
>>> query_summary(Query("Who?", "en", upper=0.6, lower=0.35))["thresholds"]["upper"]
0.6
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from crag.correct.bearers import Bearers
from crag.correct.condense import Condensed
from crag.correct.rounds import RoundsResult
from crag.correct.verify import Verification
from crag.generate import Generation, Replace
from crag.pipeline.answer_cache import CacheHit
from crag.pipeline.correction import Correction, Refinement, Rewrite, Search
from crag.pipeline.steps import Context, CorrectedContext, Decision, usage
from crag.types import (
    REJECTED_SHARED_NAME,
    REJECTED_UNVERIFIED,
    Action,
    Answer,
    Evaluation,
    Hit,
    Query,
    Retrieval,
    Strip,
)

Json = dict[str, Any]


def condense_summary(c: Condensed) -> Json:
    return {"asked": c.asked, "question": c.question, "history": c.history, "method": c.method,
            "llm_calls": c.llm_calls}  # fmt: skip


def condense_record(c: Condensed) -> Json:
    """The conversation turn: the message as asked; ``question`` (from ``query``) is the condensed one."""
    record: Json = {"asked": c.asked, "condensed": c.question, "history": c.history, "method": c.method,
                    "llm_calls": c.llm_calls}  # fmt: skip
    if c.rewrite and c.method == "fallback":
        record["rejected_rewrite"] = c.rewrite  # what the model wrote instead
    return {"conversation": record}


def query_summary(q: Query) -> Json:
    out: Json = {"question": q.text, "mode": q.mode, "language": q.language}
    if q.filters:
        out["filters"] = {k: list(v) for k, v in q.filters.items()}
    if q.mode == "crag":
        out |= {"query_type": q.query_type, "thresholds": q.thresholds()}
    return out


def query_record(q: Query) -> Json:
    out: Json = {"question": q.text, "mode": q.mode, "language": q.language}
    if q.filters:
        out["filters"] = {k: list(v) for k, v in q.filters.items()}
    if q.mode == "crag":
        if q.query_type:
            out["query_type"] = q.query_type
        out["thresholds"] = q.thresholds()
    return out


def cache_summary(h: CacheHit) -> Json:
    return h.record() | {"action": h.answer.action.value, "confidence": h.answer.confidence}


def cache_record(h: CacheHit) -> Json:
    a = h.answer
    out: Json = {"cache": h.record(), "action": a.action.value, "confidence": a.confidence,
                 "context": [context_record(s) for s in a.context]}  # fmt: skip
    if a.queries:
        out["queries"] = a.queries
    if a.abstained:
        out["abstained"] = True
    return out


def retrieve_summary(r: Retrieval) -> Json:
    keys = ("id", "title", "source", "url", "score", "rank", "metadata")
    return {"documents": [{k: v for k, v in hit_record(h).items() if k in keys} for h in r.hits]}


def retrieve_record(r: Retrieval) -> Json:
    return {"retrieved": [hit_record(h) for h in r.hits]}


def evaluate_summary(e: Evaluation) -> Json:
    return {"evaluator": e.evaluator, "grades": [asdict(g) for g in e.grades], "confidence": e.confidence}


def evaluate_record(e: Evaluation) -> Json:
    return evaluate_summary(e) | {"evaluation_reason": e.reason}


def decide_summary(d: Decision) -> Json:
    return {"action": d.action.value, "confidence": d.confidence}


def verify_summary(v: Verification) -> Json:
    return {"probability": v.probability, "threshold": v.threshold, "confirmed": v.confirmed, "note": v.note}


def escalation(d: Decision) -> Json:
    """Why the first action was left: the refused reply's reason, or a check before generation."""
    first, check = d.escalated_from, d.unverified
    out: Json = {"rejected": first.rejected if first else ""}
    if check is not None:  # before generation: the model did not read the answer in the strips
        out |= {"rejected": REJECTED_UNVERIFIED, "probability": check.probability, "threshold": check.threshold}
    if d.shared is not None:  # before generation: several people of the asked name, the question says not which
        out |= {"rejected": REJECTED_SHARED_NAME, "name": d.shared.name, "bearers": len(d.shared.bearers)}
    return out


def escalate_record(d: Decision) -> Json:
    """The first action and why it was left: the refused reply, or the failed verification.
    The later events overwrite ``strips``, ``context`` and the reply keys with the escalated run's.
    Escalation leaves Correct only (``can_escalate``, ``can_verify``, ``shared_name``)."""
    first = d.escalated_from
    reply = first.completions[0].text if first and first.completions else ""
    record: Json = {"from": Action.CORRECT.value, "reply": reply, "rejected": "",
                    "llm_calls": len(first.completions) if first else 0}  # fmt: skip
    return {"escalated": record | escalation(d), "action": d.action.value}


def refine_summary(r: Refinement) -> Json:
    return {"kept": [strip_record(s) for s in r.kept], "graded": len(r.graded)}


def rewrite_summary(r: Rewrite) -> Json:
    return {"queries": r.queries, "subqueries": r.subqueries}


def rewrite_record(r: Rewrite) -> Json:
    return ({"subqueries": r.subqueries} if r.subqueries else {}) | {"queries": r.queries}


def search_summary(s: Search) -> Json:
    results = [{"query": q, "title": r.title, "url": r.url, "provider": r.provider} for q, r in s.results]
    return {"results": results, "filtered": s.filtered}


def search_record(s: Search) -> Json:
    external = [asdict(r) | {"query": q} for q, r in s.results]
    return ({"filtered_results": s.filtered} if s.filtered else {}) | {"external": external}


def rounds_summary(r: RoundsResult) -> Json:
    return {"rounds": r.rounds + 1, "searches": r.searches + 1, "stopped": r.stopped, "history": r.history}


def correct_summary(c: Correction) -> Json:
    return {"internal": len(c.internal), "external": len(c.external), "graded": len(c.graded), "best": c.best()}


def correct_record(c: Correction) -> Json:
    kept = c.internal + c.external
    return {"strips": [{**strip_record(s, text=True), "kept": s in kept} for s in c.graded]}


def context_summary(c: Context) -> Json:
    return {
        "context": [strip_record(s) for s in c.strips],
        "duplicates_removed": c.duplicates,
        "conflicts": len(c.conflicts),
        "instruction_like": len(c.suspicious),
    }


def fuse_record(c: Context) -> Json:
    out: Json = {"instruction_like_strips": c.suspicious} if c.suspicious else {}
    out |= {"duplicates_removed": c.duplicates, "support": c.support, "conflicts": [x._asdict() for x in c.conflicts]}
    if c.instruction:
        out["generator_instruction"] = c.instruction
    return out


def bearers_summary(b: Bearers) -> Json:
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


def bearers_record(b: Bearers) -> Json:
    # a name the sources share: the trace says who, and what the answer did
    return {"bearers": bearers_summary(b)} if len(b.bearers) >= 2 else {}


def generation_summary(g: Generation) -> Json:
    return {
        "citations": [asdict(c) for c in g.citations],
        "refused": g.refused,
        "refusal_overridden": g.refusal_overridden,
        "citations_inferred": g.citations_inferred,
        "trimmed": g.trimmed,
        "usage": usage(g),
        "bearers": [asdict(b) for b in g.bearers],
    }


def abstain_record(g: Generation) -> Json:
    return {"abstained": True, "context": [context_record(s) for s in g.sources]}


def generate_record(g: Generation) -> Json:
    out: Json = {"context": [context_record(s) for s in g.sources]}
    if g.claims:  # each sentence shown, where it is, what it cites and how that was settled
        out["claims"] = [asdict(c) for c in g.claims]
    if g.citations_inferred:
        out["citations_inferred"] = True  # a marker was added or moved to the source that holds it
    if g.refusal_overridden:
        out["refusal_overridden"] = True
    if len(g.completions) > 1 or g.unsupported or g.rejected or g.trimmed:
        out["first_reply"] = g.completions[0].text if g.completions else ""
    if g.rejected:  # what the model said is in first_reply; why it is not the answer, here
        out["reply_rejected"] = g.rejected
    if g.trimmed:  # sentences of the reply the sources do not support: never shown
        out["answer_trimmed"] = g.trimmed
    if g.unsupported:  # the reply's new words that no source contains: not shown as an answer
        out["unsupported_terms"] = g.unsupported
    if g.checks:  # claims read by the model, and claims their sources talk around without stating
        out["claim_checks"] = g.checks
    return out


def replace_summary(r: Replace) -> Json:
    return {"reason": r.reason, "text": r.text}


def answer_record(a: Answer) -> Json:
    return {"answer": a.answer, "refused": a.refused, "citations": [asdict(c) for c in a.citations]}


def corrected_summary(c: CorrectedContext) -> Json:
    return decide_summary(c.decision) | {"context": [strip_record(s) for s in c.strips], "queries": c.queries}


def corrected_record(c: CorrectedContext) -> Json:
    # context_only: stopped before generation on purpose; no answer is not a failure
    return {"context": [context_record(s) for s in c.strips], "context_only": True}


# -- OpenAI chat-completion shapes -----------------------------------------------------------
def url_citations(answer: Answer) -> list[Json]:
    """OpenAI ``url_citation`` annotations: one per sentence and source it cites, with the
    sentence's start and end index in the message content (the answer text).

    >>> from crag.types import Action, Citation
    >>> a = Answer("Q", "It opened in 1901[1].", Action.CORRECT, 0.9,
    ...            [Citation(1, "a.md", "Museum", "", "…", quote="It opened in 1901.", spans=[(0, 21)])], [], "t", {})
    >>> url_citations(a)[0]["url_citation"]
    {'url': 'a.md', 'title': 'Museum', 'start_index': 0, 'end_index': 21}
    """
    out = []
    for c in answer.citations:
        for start, end in c.spans:
            where = {"url": c.url or c.source, "title": c.title or c.source, "start_index": start, "end_index": end}
            out.append({"type": "url_citation", "url_citation": where})
    return sorted(out, key=lambda a: (a["url_citation"]["start_index"], a["url_citation"]["url"]))


def crag_meta(answer: Answer) -> Json:
    """crag's own fields beside an OpenAI reply: the decision, and each citation with its quote."""
    cited = [
        {"id": c.id, "title": c.title, "url": c.url, "source": c.source, "quote": c.quote, "inferred": c.inferred}
        for c in answer.citations
    ]
    return {
        "trace_id": answer.trace_id,
        "action": answer.action.value,
        "confidence": answer.confidence,
        "refused": answer.refused,
        "citations": cited,
    } | ({"cache": answer.cache} if answer.cache is not None else {})


def chat_chunk(delta: Json, finish: str | None = None, **extra: Any) -> Json:
    """A ``chat.completion.chunk`` body without the stream's ``id``, ``object``, ``created``, ``model``."""
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]} | extra


def answer_chunks(answer: Answer, *, include_usage: bool) -> list[Json]:
    """The last chunks of a chat stream: the citations as ``delta.annotations`` with
    ``finish_reason`` ``stop`` (and crag's fields), then ``usage`` when the client asked."""
    out = [chat_chunk({"annotations": url_citations(answer)}, "stop", crag=crag_meta(answer))]
    if include_usage:  # every LLM call of the request, as the non-streamed reply counts it
        u = answer.usage
        counts = {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                  "total_tokens": u.total_tokens}  # fmt: skip
        out.append({"choices": [], "usage": counts})
    return out


# -- pieces of values ----------------------------------------------------------------------
def hit_record(h: Hit) -> Json:
    c = h.chunk
    return {
        "id": c.id, "source": c.source, "title": c.title, "text": c.text, "url": c.url,
        "score": h.score, "dense": h.dense, "keyword": h.keyword, "rank": h.rank,
    } | ({"metadata": c.metadata} if c.metadata else {})  # fmt: skip


def strip_record(s: Strip, *, text: bool = False) -> Json:
    out: Json = {"source": s.source, "title": s.title, "url": s.url, "origin": s.origin, "score": s.score}
    return {"text": s.text, **out} if text else out


def context_record(s: Strip) -> dict[str, object]:
    return {"text": s.text, "source": s.source, "origin": s.origin, "title": s.title}
