"""4. Correct: the article's three actions over the internal documents and an external source.

Correct and Ambiguous refine the internal documents into strips; Ambiguous and Incorrect
rewrite the question into search queries (the question itself is never replaced: the
answer is always to it), search, refine what was found, and, with multi-round correction
on, search again for what is still missing until confident. Each sub-step runs through
:class:`~crag.pipeline.steps.Steps`, so its value reaches the observers as it finishes;
:meth:`Corrector.correct` returns them all in one :class:`Correction`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

from crag.config import CragSettings
from crag.correct.decompose import decompose, search_parallel
from crag.correct.refine import Doc, refine
from crag.correct.rewrite import keyword_queries, llm_queries
from crag.correct.rounds import RoundsResult, correct_until_confident
from crag.deadline import Deadline, with_deadline
from crag.errors import CragError, LLMError
from crag.pipeline.steps import Decision, Steps
from crag.protocols import LLM, Evaluator, WebSearch
from crag.types import Action, Evaluation, Hit, Passage, Query, Retrieval, Strip, WebResult


@dataclass
class Rewrite:
    """The search queries written for the question (and its sub-queries when it splits)."""

    queries: list[str]
    subqueries: list[str] = field(default_factory=list)
    degradations: list[str] = field(default_factory=list)


@dataclass
class Search:
    """``(query, result)`` pairs from the external source, after the trust and recency policy."""

    results: list[tuple[str, WebResult]]
    filtered: int = 0  # results the policy dropped
    degradations: list[str] = field(default_factory=list)


@dataclass
class Refinement:
    """Strips kept from the documents (in document order), and every strip graded."""

    kept: list[Strip]
    graded: list[Strip]
    degradations: list[str] = field(default_factory=list)


@dataclass
class Correction:
    """What correction produced: strips by origin and how each part went.

    ``degradations`` gathers those of every part, in the order they happened.
    """

    internal: list[Strip] = field(default_factory=list)
    external: list[Strip] = field(default_factory=list)
    graded: list[Strip] = field(default_factory=list)  # every strip graded, kept or not
    rewrite: Rewrite | None = None
    search: Search | None = None
    rounds: RoundsResult | None = None
    degradations: list[str] = field(default_factory=list)

    @property
    def queries(self) -> list[str]:
        return self.rewrite.queries if self.rewrite else []

    def best(self) -> float:
        """The best grade of a kept strip (0 when none)."""
        return max((s.score for s in self.internal + self.external), default=0.0)


class Corrector:
    """Runs the correction of one question with the request's (guarded) LLM and search.

    ``http`` is the client page fetching uses (``search.fetch_pages``), owned by the caller.
    """

    def __init__(
        self,
        query: Query,
        evaluator: Evaluator,
        llm: LLM,
        search: WebSearch | None,
        cfg: CragSettings,
        deadline: Deadline,
        steps: Steps,
        *,
        http: httpx.Client | None = None,
    ) -> None:
        self.query, self.evaluator, self.llm, self.search = query, evaluator, llm, search
        self.cfg, self.fix, self.deadline, self.steps = cfg, cfg.correction, deadline, steps
        self.http = http

    def correct(self, decision: Decision, retrieval: Retrieval, grading: Evaluation) -> Correction:
        hits, steps, out = retrieval.hits, self.steps, Correction()
        parts: list[Rewrite | Search | Refinement | RoundsResult] = []
        if decision.action is not Action.INCORRECT:
            # Correct and Ambiguous keep what the internal documents offer: refine into strips.
            useful = [h for h, g in zip(hits, grading.grades, strict=True) if g.score > self.query.lower] or hits[:1]
            refined = steps.run("refine", lambda: self.refine(_docs(useful)), documents=len(useful))
            out.internal = refined.kept
            parts.append(refined)
        if decision.action is not Action.CORRECT:
            # Ambiguous and Incorrect search the external source with rewritten queries.
            out.rewrite = steps.run("rewrite", lambda: self.rewrite(hits))
            name = getattr(self.search, "name", "none")
            queries = out.rewrite.queries
            out.search = steps.run("search", lambda: self.search_once(queries), provider=name, queries=len(queries))
            parts += [out.rewrite, out.search]
            found = out.search.results
            if found:
                refined = steps.run("refine_external", lambda: self.refine(_web_docs(found)), documents=len(found))
                out.external = refined.kept
                parts.append(refined)
            elif decision.action is Action.INCORRECT and hits:
                # Degradation path: nothing external, so fall back to the best internal strips.
                note = "no external results; answered from internal documents"
                refined = steps.run("refine", lambda: self.refine(_docs(hits), note))
                out.internal = refined.kept
                parts.append(refined)
            if self.fix.max_rounds > 1 and self.search is not None:
                # Multi-round: re-evaluate, search again for what is still missing, until confident.
                strips = out.internal + out.external
                out.rounds = steps.run("rounds", lambda: self.more_rounds(strips), max_rounds=self.fix.max_rounds)
                out.external = [s for s in out.rounds.strips if s.origin == "web"]
                parts.append(out.rounds)
        out.graded = [s for p in parts if isinstance(p, Refinement) for s in p.graded]
        out.degradations = [d for p in parts for d in p.degradations]
        return out

    # -- sub-steps ----------------------------------------------------------------------
    def refine(self, docs: Sequence[Doc], note: str = "") -> Refinement:
        fix = self.fix
        kept, graded = refine(
            self.query,
            docs,
            self.evaluator,
            sentences_per_strip=fix.strip_sentences,
            keep=fix.strip_keep,
            max_strips=fix.max_strips,
        )
        return Refinement(kept, graded, [note] if note else [])

    def rewrite(self, hits: Sequence[Hit]) -> Rewrite:
        fix, q, llm = self.fix, self.query, self.llm
        docs = [h.chunk.text for h in hits]
        queries: list[str] = []
        notes: list[str] = []
        if fix.rewrite_with_llm:
            try:
                queries = with_deadline(
                    lambda: llm_queries(q, docs, llm, max_queries=fix.max_queries),
                    fix.rewrite_timeout,
                    what="LLM rewrite",
                    error=LLMError,
                    step="rewrite",
                )
            except CragError as exc:
                notes.append(f"LLM query rewrite failed ({exc}); used keyword rewrite")
        queries = queries or keyword_queries(q, docs, max_queries=fix.max_queries)
        subs: list[str] = []
        if fix.decompose:
            # A complex question becomes sub-queries searched in parallel (article 3.2.1).
            try:
                split = with_deadline(
                    lambda: decompose(q, llm if fix.rewrite_with_llm else None),
                    fix.rewrite_timeout,
                    what="decompose",
                    error=LLMError,
                    step="decompose",
                )
                subs, notes = split.subqueries, notes + split.degradations
            except CragError as exc:
                notes.append(f"decomposition failed ({exc}); searched without it")
            if len(subs) > 1:
                queries = list(dict.fromkeys([*queries, *subs]))
        return Rewrite(queries, subs if len(subs) > 1 else [], notes)

    def search_once(self, queries: Sequence[str]) -> Search:
        if self.search is None:
            return Search([], 0, ["no external search configured; used internal documents only"])
        fix = self.fix
        found = search_parallel(queries, self.search, fix.web_k, fix.search_timeout, deadline=self.deadline)
        return self.apply_policy(found.results, found.degradations)

    def apply_policy(self, results: list[tuple[str, WebResult]], notes: list[str]) -> Search:
        """Trusted sources and recency (article challenge 3), then optional page fetching."""
        if not results:
            return Search(results, 0, notes)
        from crag.search.trust import apply_search_policy

        s = self.cfg.search
        query_of = {id(r): q for q, r in results}
        kept = apply_search_policy([r for _, r in results], s, question=self.query.text)
        filtered = len(results) - len(kept)
        if s.fetch_pages and kept and self.http is None:
            notes = [*notes, "pages not fetched: no HTTP client was given (Deps.http)"]
        elif s.fetch_pages and kept and self.http is not None:
            from crag.search.fetch import enrich

            kept, fetch_notes = enrich(
                kept,
                client=self.http,
                deadline=s.fetch_timeout,
                max_bytes=s.fetch_max_bytes,
                allow_private=s.allow_private_fetch,
            )
            notes = notes + fetch_notes
        return Search([(query_of.get(id(r), ""), r) for r in kept], filtered, notes)

    def more_rounds(self, strips: list[Strip]) -> RoundsResult:
        assert self.search is not None  # only called with a search configured
        notes: list[str] = []

        def evaluate(q: Query, ss: Sequence[Strip]) -> list[float]:
            ev = self.evaluator.grade(q, [Passage(str(i), s.text) for i, s in enumerate(ss)])
            return [g.score for g in ev.grades]

        def search_round(queries: Sequence[str]) -> list[Strip]:
            found = self.search_once(queries)
            notes.extend(found.degradations)
            return self.refine(_web_docs(found.results)).kept if found.results else []

        result = correct_until_confident(
            self.query,
            strips,
            evaluate,
            search_round,
            upper=self.query.upper,
            lower=self.query.lower,
            max_rounds=self.fix.max_rounds - 1,
            max_queries=self.fix.max_queries,
            deadline=self.deadline,
        )
        result.degradations = notes + result.degradations
        return result


def _docs(hits: Sequence[Hit]) -> list[Doc]:
    return [
        Doc(
            h.chunk.id,
            h.chunk.text,
            h.chunk.source,
            "internal",
            h.chunk.title,
            h.chunk.url,
            h.vector,
            section=str(h.chunk.metadata.get("section", "")),
        )
        for h in hits
    ]


def _web_docs(results: Sequence[tuple[str, WebResult]]) -> list[Doc]:
    return [Doc(f"web-{n}", r.content, r.url, "web", r.title, r.url) for n, (_, r) in enumerate(results)]
