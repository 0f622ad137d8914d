"""The CRAG data flow, top to bottom: retrieve → evaluate → decide → correct → generate.

``run_crag`` is the whole algorithm; ``run_rag`` is the plain baseline with the same
components (retrieve → generate) that the article compares against. Both record every
step on the tracer, and neither reads global state.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from crag.config import CragSettings
from crag.correct.fuse import fuse
from crag.correct.refine import Doc, refine
from crag.correct.rewrite import keyword_queries, llm_queries
from crag.errors import CragError, SearchError
from crag.evaluate.classify import query_thresholds
from crag.evaluate.decide import decide
from crag.generate import generate
from crag.kb import KnowledgeBase
from crag.protocols import LLM, Evaluator, WebSearch
from crag.text import detect_language
from crag.trace.spans import Tracer
from crag.types import Action, Answer, Hit, Passage, Strip, WebResult


@dataclass
class Deps:
    """The components one question runs through."""

    kb: KnowledgeBase
    evaluator: Evaluator
    llm: LLM
    search: WebSearch | None


def run_crag(question: str, deps: Deps, cfg: CragSettings, tracer: Tracer) -> Answer:
    """Answer ``question`` with corrective retrieval; the trace records every decision."""
    lang = detect_language(question)
    ev_cfg, fix = cfg.evaluator, cfg.correction
    tracer.record("question", question)
    tracer.record("mode", "crag")

    # 1. Retrieve: hybrid dense + keyword top-k from the knowledge base.
    with tracer.span("retrieve", k=cfg.retrieval.top_k):
        hits = deps.kb.search(question, k=cfg.retrieval.top_k)
    tracer.record("retrieved", [_hit_record(h) for h in hits])

    # 2. Evaluate: a relevance grade per document and a confidence for the set.
    with tracer.span("evaluate", evaluator=deps.evaluator.name):
        evaluation = deps.evaluator.grade(question, [_passage(h) for h in hits])
    tracer.record("evaluator", evaluation.evaluator)
    tracer.record("grades", [asdict(g) for g in evaluation.grades])
    tracer.record("confidence", evaluation.confidence)
    tracer.record("evaluation_reason", evaluation.reason)
    if evaluation.degraded:
        tracer.append("degradations", evaluation.degraded)

    # 3. Decide: Correct / Ambiguous / Incorrect from the grades and two thresholds,
    #    chosen per kind of question when classification is on (article 3.2.3).
    th = query_thresholds(question, cfg)
    if th.query_type:
        tracer.record("query_type", th.query_type)
    action = decide(
        evaluation.grades,
        confidence=evaluation.confidence,
        upper=th.upper,
        lower=th.lower,
        rule=ev_cfg.rule,
    )
    tracer.record("thresholds", {"upper": th.upper, "lower": th.lower, "rule": ev_cfg.rule})
    tracer.record("action", action.value)

    # 4. Correct.
    internal: list[Strip] = []
    external: list[Strip] = []
    graded_strips: list[Strip] = []
    strip_args = {
        "sentences_per_strip": fix.strip_sentences,
        "keep": fix.strip_keep,
        "max_strips": fix.max_strips,
    }
    if action is not Action.INCORRECT:
        # Correct and Ambiguous keep what the internal documents offer: refine into strips.
        useful = [h for h, g in zip(hits, evaluation.grades, strict=True) if g.score > th.lower] or hits[:1]
        with tracer.span("refine", documents=len(useful)):
            internal, all_strips = refine(question, [_doc(h) for h in useful], deps.evaluator, **strip_args)
        graded_strips += all_strips
    if action is not Action.CORRECT:
        # Ambiguous and Incorrect search the external source with rewritten queries.
        with tracer.span("rewrite"):
            queries = _rewrite(question, hits, deps.llm, cfg, tracer)
        tracer.record("queries", queries)
        with tracer.span("search", provider=getattr(deps.search, "name", "none"), queries=len(queries)):
            results = _search_all(queries, deps.search, fix.web_k, tracer)
            # Trusted sources and recency (article challenge 3), then optional page fetching.
            results = _apply_policy(question, results, cfg, tracer)
        tracer.record("external", [asdict(r) | {"query": q} for q, r in results])
        if results:
            with tracer.span("refine_external", documents=len(results)):
                external, ext_strips = refine(
                    question,
                    [_web_doc(r, n) for n, (_, r) in enumerate(results)],
                    deps.evaluator,
                    **strip_args,
                )
            graded_strips += ext_strips
        elif action is Action.INCORRECT and hits:
            # Degradation path: nothing external, so fall back to the best internal strips.
            tracer.append("degradations", "no external results; answered from internal documents")
            with tracer.span("refine"):
                internal, all_strips = refine(question, [_doc(h) for h in hits], deps.evaluator, **strip_args)
            graded_strips += all_strips
    tracer.record("strips", [_strip_record(s, s in internal or s in external) for s in graded_strips])

    # Fuse: dedupe, rank by grade, fit the context budget, keep source tags.
    with tracer.span("fuse"):
        context, dupes = fuse([internal, external], max_chars=cfg.generation.max_context_chars)
    tracer.record("duplicates_removed", dupes)

    # 5. Generate from the corrected context, citing it.
    return _generate(question, context, action, evaluation.confidence, deps, cfg, tracer, lang)


def run_rag(question: str, deps: Deps, cfg: CragSettings, tracer: Tracer) -> Answer:
    """The baseline: retrieve top-k and generate from the chunks as they are."""
    tracer.record("question", question)
    tracer.record("mode", "rag")
    with tracer.span("retrieve", k=cfg.retrieval.top_k):
        hits = deps.kb.search(question, k=cfg.retrieval.top_k)
    tracer.record("retrieved", [_hit_record(h) for h in hits])
    tracer.record("action", Action.RAG.value)
    context = [
        Strip(h.chunk.text, h.chunk.source, "internal", h.chunk.title, h.chunk.url, h.chunk.id, h.score) for h in hits
    ]
    return _generate(question, context, Action.RAG, None, deps, cfg, tracer, detect_language(question))


# -- steps ------------------------------------------------------------------------------
def _rewrite(question: str, hits: Sequence[Hit], llm: LLM, cfg: CragSettings, tracer: Tracer) -> list[str]:
    docs = [h.chunk.text for h in hits]
    n = cfg.correction.max_queries
    if cfg.correction.rewrite_with_llm:
        try:
            return llm_queries(question, docs, llm, max_queries=n)
        except (CragError, ValueError) as exc:
            tracer.append("degradations", f"LLM query rewrite failed ({exc}); used keyword rewrite")
    return keyword_queries(question, docs, max_queries=n)


def _search_all(
    queries: Sequence[str], search: WebSearch | None, k: int, tracer: Tracer
) -> list[tuple[str, WebResult]]:
    if search is None:
        tracer.append("degradations", "no external search configured; used internal documents only")
        return []

    def one(q: str) -> list[tuple[str, WebResult]]:
        try:
            return [(q, r) for r in search.search(q, k=k)]
        except SearchError as exc:
            tracer.append("degradations", f"search for {q!r} failed: {exc}")
            return []

    # Queries are independent: run them in parallel so n queries cost about one.
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(queries)))) as pool:
        batches = list(pool.map(one, queries))
    seen: set[str] = set()
    out: list[tuple[str, WebResult]] = []
    for batch in batches:
        for q, r in batch:
            key = r.url + "\x00" + r.content[:200]
            if key not in seen:
                seen.add(key)
                out.append((q, r))
    return out


def _apply_policy(
    question: str, results: list[tuple[str, WebResult]], cfg: CragSettings, tracer: Tracer
) -> list[tuple[str, WebResult]]:
    if not results:
        return results
    from crag.search.trust import apply_search_policy

    query_of = {id(r): q for q, r in results}
    kept = apply_search_policy([r for _, r in results], cfg.search, question=question)
    if len(kept) < len(results):
        tracer.record("filtered_results", len(results) - len(kept))
    if cfg.search.fetch_pages and kept:
        import httpx

        from crag.search.fetch import enrich

        with httpx.Client(follow_redirects=False) as client:
            kept = enrich(
                kept,
                client=client,
                deadline=cfg.search.fetch_timeout,
                max_bytes=cfg.search.fetch_max_bytes,
                allow_private=cfg.search.allow_private_fetch,
            )
    return [(query_of.get(id(r), ""), r) for r in kept]


def _generate(
    question: str,
    context: list[Strip],
    action: Action,
    confidence: float | None,
    deps: Deps,
    cfg: CragSettings,
    tracer: Tracer,
    lang: str,
) -> Answer:
    tracer.record(
        "context",
        [{"text": s.text, "source": s.source, "origin": s.origin, "title": s.title} for s in context],
    )
    with tracer.span("generate", model=deps.llm.model_id, context_items=len(context)) as span:
        text, citations, completion = generate(
            question, context, deps.llm, max_tokens=cfg.llm.max_tokens, temperature=cfg.llm.temperature
        )
        if completion is not None:
            span.tags.update(prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens)
    tracer.record("answer", text)
    tracer.record("citations", [asdict(c) for c in citations])
    tracer.record("language", lang)
    return Answer(
        question=question,
        answer=text,
        action=action,
        confidence=confidence,
        citations=citations,
        context=context,
        trace_id=tracer.id,
        timings={k: round(v, 4) for k, v in tracer.timings().items()},
        mode="rag" if action is Action.RAG else "crag",
        degradations=list(tracer.events.get("degradations", [])),
        queries=list(tracer.events.get("queries", [])),
    )


# -- conversions ------------------------------------------------------------------------
def _passage(h: Hit) -> Passage:
    return Passage(h.chunk.id, h.chunk.text, vector=h.vector, dense=h.dense, keyword=h.keyword)


def _doc(h: Hit) -> Doc:
    return Doc(h.chunk.id, h.chunk.text, h.chunk.source, "internal", h.chunk.title, h.chunk.url, h.vector)


def _web_doc(r: WebResult, n: int) -> Doc:
    return Doc(f"web-{n}", r.content, r.url, "web", r.title, r.url)


def _hit_record(h: Hit) -> dict[str, object]:
    c = h.chunk
    return {
        "id": c.id,
        "source": c.source,
        "title": c.title,
        "text": c.text,
        "url": c.url,
        "score": h.score,
        "dense": h.dense,
        "keyword": h.keyword,
        "rank": h.rank,
    }


def _strip_record(s: Strip, kept: bool) -> dict[str, object]:
    return {"text": s.text, "source": s.source, "origin": s.origin, "score": s.score, "kept": kept}
