"""The CRAG data flow, top to bottom: retrieve → evaluate → decide → correct → generate.

``run_crag`` is the whole algorithm; ``run_rag`` is the plain baseline with the same
components (retrieve → generate) that the article compares against. Both record every
step on the tracer, and neither reads global state. Helpers for the individual steps
live in ``crag.correct``, ``crag.evaluate`` and ``crag.search``; the conversions and the
guards around external calls (timeouts, budgets, caching) are at the bottom of this file.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from crag.config import CragSettings
from crag.correct.budget import Budget, BudgetedLLM, BudgetedSearch, compress
from crag.correct.contradict import conflict_instruction, detect_conflicts
from crag.correct.decompose import decompose, search_parallel
from crag.correct.fuse import fuse_ranked
from crag.correct.injection import flag_instructions
from crag.correct.refine import Doc, refine
from crag.correct.rewrite import keyword_queries, llm_queries
from crag.correct.rounds import RoundsResult, abstain_text, correct_until_confident
from crag.errors import CragError, LLMError
from crag.evaluate.classify import query_thresholds
from crag.evaluate.decide import decide
from crag.generate import Generation, generate
from crag.kb import KnowledgeBase
from crag.protocols import LLM, Evaluator, WebSearch
from crag.search.cache import CachedSearch
from crag.search.timeout import Deadline, TimeoutLLM, TimeoutSearch, with_deadline
from crag.text import detect_language
from crag.trace.spans import Tracer, use_tracer
from crag.types import Action, Answer, Citation, Hit, Passage, Strip, WebResult


def _traced(fn: Callable[[str, Deps, CragSettings, Tracer], Answer]) -> Callable[..., Answer]:
    """Make ``tracer`` the current tracer, so deep helpers (parallel search, fetching)
    can record degradations on it without it being passed down."""

    @functools.wraps(fn)
    def run(question: str, deps: Deps, cfg: CragSettings, tracer: Tracer) -> Answer:
        with use_tracer(tracer):
            return fn(question, deps, cfg, tracer)

    return run


@dataclass
class Deps:
    """The components one question runs through."""

    kb: KnowledgeBase
    evaluator: Evaluator
    llm: LLM
    search: WebSearch | None


@_traced
def run_crag(question: str, deps: Deps, cfg: CragSettings, tracer: Tracer) -> Answer:
    """Answer ``question`` with corrective retrieval; the trace records every decision."""
    lang = detect_language(question)
    fix = cfg.correction
    tracer.record("question", question)
    tracer.record("mode", "crag")
    deadline = Deadline(fix.deadline_seconds)
    llm, search = _guard(deps, cfg, deadline)  # timeouts, budgets and a cache around external calls

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
        evaluation.grades, confidence=evaluation.confidence, upper=th.upper, lower=th.lower, rule=cfg.evaluator.rule
    )
    tracer.record("thresholds", {"upper": th.upper, "lower": th.lower, "rule": cfg.evaluator.rule})
    tracer.record("action", action.value)

    # 4. Correct.
    internal: list[Strip] = []
    external: list[Strip] = []
    graded: list[Strip] = []
    strip_args = {"sentences_per_strip": fix.strip_sentences, "keep": fix.strip_keep, "max_strips": fix.max_strips}
    if action is not Action.INCORRECT:
        # Correct and Ambiguous keep what the internal documents offer: refine into strips.
        useful = [h for h, g in zip(hits, evaluation.grades, strict=True) if g.score > th.lower] or hits[:1]
        with tracer.span("refine", documents=len(useful)):
            internal, strips = refine(question, [_doc(h) for h in useful], deps.evaluator, **strip_args)
        graded += strips
    rounds: RoundsResult | None = None
    if action is not Action.CORRECT:
        # Ambiguous and Incorrect search the external source with rewritten queries
        # (the question itself is never replaced: the answer is always to it).
        with tracer.span("rewrite"):
            queries = _rewrite(question, hits, llm, cfg, tracer)
        tracer.record("queries", queries)
        with tracer.span("search", provider=getattr(search, "name", "none"), queries=len(queries)):
            results = _search(question, queries, search, cfg, tracer, deadline)
        tracer.record("external", [asdict(r) | {"query": q} for q, r in results])
        if results:
            with tracer.span("refine_external", documents=len(results)):
                external, strips = refine(question, _web_docs(results), deps.evaluator, **strip_args)
            graded += strips
        elif action is Action.INCORRECT and hits:
            # Degradation path: nothing external, so fall back to the best internal strips.
            tracer.append("degradations", "no external results; answered from internal documents")
            with tracer.span("refine"):
                internal, strips = refine(question, [_doc(h) for h in hits], deps.evaluator, **strip_args)
            graded += strips
        if fix.max_rounds > 1 and search is not None:
            # Multi-round: re-evaluate, search again for what is still missing, until confident.
            with tracer.span("rounds", max_rounds=fix.max_rounds):
                rounds = _more_rounds(question, internal + external, deps, search, cfg, tracer, deadline, th)
            external = [s for s in rounds.strips if s.origin == "web"]
    tracer.record("strips", [_strip_record(s, s in internal or s in external) for s in graded])
    # Retrieved text is data: strips that address the assistant are flagged and ranked lower.
    suspicious = flag_instructions(internal + external)
    if suspicious:
        tracer.record("instruction_like_strips", suspicious)

    # Fuse: dedupe, rank by grade and cross-source support, diversify, fit the budget.
    budget_tokens = fix.context_tokens or cfg.generation.max_context_chars // 2
    with tracer.span("fuse"):
        fused = fuse_ranked(
            [internal, external],
            max_tokens=budget_tokens,
            diversity=fix.diversity,
            mmr_lambda=fix.mmr_lambda,
            detect_contradictions=False,
        )
    # What the generator will see: fusion's ranking, capped; conflicts are numbered as it sees them.
    context = fused.context[: cfg.generation.max_sources]
    conflicts = detect_conflicts(context)
    tracer.record("duplicates_removed", fused.duplicates)
    tracer.record("support", fused.support)
    tracer.record("conflicts", [c._asdict() for c in conflicts])
    if action is Action.CORRECT and fix.compress_with_llm:
        with tracer.span("compress"):
            context = compress(question, context, llm, budget_tokens)

    # Abstain honestly when correction found nothing reliable (best grade still ≤ tau_low).
    best = max((s.score for s in internal + external), default=0.0)
    if fix.abstain and action is not Action.CORRECT and best <= th.lower:
        tracer.record("abstained", True)
        return _abstain(question, context, action, evaluation.confidence, tracer, lang)

    # 5. Generate from the corrected context, citing it (and told about any conflict);
    #    a refusal despite a source graded >= tau_high is asked again once.
    extra = conflict_instruction(conflicts, lang)
    return _generate(question, context, action, evaluation.confidence, llm, cfg, tracer, lang, extra, th.upper)


@_traced
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
    lang = detect_language(question)
    return _generate(question, context, Action.RAG, None, deps.llm, cfg, tracer, lang)


# -- steps ------------------------------------------------------------------------------
def _rewrite(question: str, hits: Sequence[Hit], llm: LLM, cfg: CragSettings, tracer: Tracer) -> list[str]:
    fix = cfg.correction
    docs = [h.chunk.text for h in hits]
    queries: list[str] = []
    if fix.rewrite_with_llm:
        try:
            queries = with_deadline(
                lambda: llm_queries(question, docs, llm, max_queries=fix.max_queries),
                fix.rewrite_timeout,
                what="LLM rewrite",
                error=LLMError,
                step="rewrite",
            )
        except (CragError, ValueError) as exc:
            tracer.append("degradations", f"LLM query rewrite failed ({exc}); used keyword rewrite")
    queries = queries or keyword_queries(question, docs, max_queries=fix.max_queries)
    if fix.decompose:
        # A complex question becomes sub-queries searched in parallel (article 3.2.1).
        try:
            subs = with_deadline(
                lambda: decompose(question, llm if fix.rewrite_with_llm else None),
                fix.rewrite_timeout,
                what="decompose",
                error=LLMError,
                step="decompose",
            )
        except CragError as exc:
            tracer.append("degradations", f"decomposition failed ({exc}); searched without it")
            subs = []
        if len(subs) > 1:
            tracer.record("subqueries", subs)
            queries = list(dict.fromkeys([*queries, *subs]))
    return queries


def _search(
    question: str,
    queries: Sequence[str],
    search: WebSearch | None,
    cfg: CragSettings,
    tracer: Tracer,
    deadline: Deadline,
) -> list[tuple[str, WebResult]]:
    if search is None:
        tracer.append("degradations", "no external search configured; used internal documents only")
        return []
    fix = cfg.correction
    results = search_parallel(queries, search, fix.web_k, fix.search_timeout, deadline=deadline)
    return _apply_policy(question, results, cfg, tracer)


def _more_rounds(
    question: str,
    strips: list[Strip],
    deps: Deps,
    search: WebSearch,
    cfg: CragSettings,
    tracer: Tracer,
    deadline: Deadline,
    th: object,
) -> RoundsResult:
    fix = cfg.correction
    strip_args = {"sentences_per_strip": fix.strip_sentences, "keep": fix.strip_keep, "max_strips": fix.max_strips}

    def evaluate(q: str, ss: Sequence[Strip]) -> list[float]:
        ev = deps.evaluator.grade(q, [Passage(str(i), s.text) for i, s in enumerate(ss)])
        return [g.score for g in ev.grades]

    def search_round(queries: Sequence[str]) -> list[Strip]:
        found = _search(question, queries, search, cfg, tracer, deadline)
        return refine(question, _web_docs(found), deps.evaluator, **strip_args)[0] if found else []

    result = correct_until_confident(
        question,
        strips,
        evaluate,
        search_round,
        upper=th.upper,
        lower=th.lower,  # type: ignore[attr-defined]
        max_rounds=fix.max_rounds - 1,
        max_queries=fix.max_queries,
        deadline=deadline,
    )
    tracer.record(
        "rounds",
        {
            "rounds": result.rounds + 1,
            "searches": result.searches + 1,
            "stopped": result.stopped,
            "history": result.history,
            "queries": result.queries,
        },
    )
    return result


def _apply_policy(
    question: str, results: list[tuple[str, WebResult]], cfg: CragSettings, tracer: Tracer
) -> list[tuple[str, WebResult]]:
    """Trusted sources and recency (article challenge 3), then optional page fetching."""
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
    llm: LLM,
    cfg: CragSettings,
    tracer: Tracer,
    lang: str,
    extra_instruction: str = "",
    reask_above: float | None = None,
) -> Answer:
    with tracer.span("generate", model=llm.model_id, context_items=len(context)) as span:
        gen = generate(
            question,
            context,
            llm,
            lang=lang,
            max_tokens=cfg.llm.max_tokens,
            temperature=cfg.llm.temperature,
            extra_instruction=extra_instruction,
            max_sources=cfg.generation.max_sources,
            reask_above=reask_above,
        )
        span.tags.update(
            prompt_tokens=sum(c.prompt_tokens for c in gen.completions),
            completion_tokens=sum(c.completion_tokens for c in gen.completions),
            llm_calls=len(gen.completions),
        )
    _record_generation(gen, extra_instruction, tracer)
    return _answer(question, gen.text, gen.citations, gen.sources, action, confidence, tracer, lang, gen.refused)


def _record_generation(gen: Generation, extra_instruction: str, tracer: Tracer) -> None:
    tracer.record("context", [_context_record(s) for s in gen.sources])
    if extra_instruction:
        tracer.record("generator_instruction", extra_instruction)
    if gen.citations_inferred:
        tracer.record("citations_inferred", True)  # the model gave none; matched by overlap
    if gen.refusal_overridden:
        tracer.record("refusal_overridden", True)
    if len(gen.completions) > 1 or gen.unsupported:
        tracer.record("first_reply", gen.completions[0].text)
    if gen.unsupported:  # the reply's new words that no source contains: not shown as an answer
        tracer.record("unsupported_terms", gen.unsupported)


def _abstain(
    question: str, context: list[Strip], action: Action, confidence: float | None, tracer: Tracer, lang: str
) -> Answer:
    """No guess: say so, and list what was found by title and link.

    Titles and links only: quoting raw retrieved text back to the user would also
    repeat whatever instructions a page planted in it.
    """
    shown = context[:3]
    tracer.record("context", [_context_record(s) for s in shown])
    lines = [abstain_text(lang)] + [f"[{n}] {s.title or s.source} {s.url}".rstrip() for n, s in enumerate(shown, 1)]
    citations = [Citation(n, s.source, s.title, s.url, s.text) for n, s in enumerate(shown, 1)]
    return _answer(question, "\n".join(lines), citations, shown, action, confidence, tracer, lang, True)


def _answer(
    question: str,
    text: str,
    citations: list[Citation],
    context: list[Strip],
    action: Action,
    confidence: float | None,
    tracer: Tracer,
    lang: str,
    refused: bool = False,
) -> Answer:
    tracer.record("answer", text)
    tracer.record("refused", refused)
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
        refused=refused,
    )


# -- guards around external calls ---------------------------------------------------------
def _guard(deps: Deps, cfg: CragSettings, deadline: Deadline) -> tuple[LLM, WebSearch | None]:
    """Wrap the LLM and search in budgets, timeouts and the search cache (cache outermost,
    so a cache hit costs no budget and no time)."""
    fix = cfg.correction
    budget = Budget(
        deps.kb.path / "budget.sqlite",
        fix.per_request_llm_tokens,
        fix.per_day_llm_tokens,
        fix.per_request_searches,
        fix.per_day_searches,
    )
    llm: LLM = BudgetedLLM(TimeoutLLM(deps.llm, deadline), budget)
    search = deps.search
    if search is not None:
        search = BudgetedSearch(TimeoutSearch(search, timeout=fix.search_timeout, deadline=deadline), budget)
        if fix.search_cache_ttl:
            search = CachedSearch(search, deps.kb.path / "search_cache.sqlite", fix.search_cache_ttl)
    return llm, search


# -- conversions ------------------------------------------------------------------------
def _passage(h: Hit) -> Passage:
    return Passage(h.chunk.id, h.chunk.text, vector=h.vector, dense=h.dense, keyword=h.keyword)


def _doc(h: Hit) -> Doc:
    return Doc(h.chunk.id, h.chunk.text, h.chunk.source, "internal", h.chunk.title, h.chunk.url, h.vector)


def _web_docs(results: Sequence[tuple[str, WebResult]]) -> list[Doc]:
    return [Doc(f"web-{n}", r.content, r.url, "web", r.title, r.url) for n, (_, r) in enumerate(results)]


def _hit_record(h: Hit) -> dict[str, object]:
    c = h.chunk
    return {
        "id": c.id, "source": c.source, "title": c.title, "text": c.text, "url": c.url,
        "score": h.score, "dense": h.dense, "keyword": h.keyword, "rank": h.rank,
    }  # fmt: skip


def _strip_record(s: Strip, kept: bool) -> dict[str, object]:
    return {"text": s.text, "source": s.source, "origin": s.origin, "score": s.score, "kept": kept}


def _context_record(s: Strip) -> dict[str, object]:
    return {"text": s.text, "source": s.source, "origin": s.origin, "title": s.title}
