"""Guards around a request's external calls: one budget and one deadline for the request.

Every LLM call of the request goes through one :class:`~crag.llm.guard.GuardedLLM`: the
evaluator too, when it asks an LLM (:class:`~crag.protocols.LLMEvaluator`), so LLM grading
counts against the request's tokens and stops at its deadline like generation does.

Work that is not an answer treats each of its units as one request: :class:`RequestGuard`
gives ``crag eval``'s blind judge a guard per judged question, and :class:`GuardedEvaluator`
gives ``crag grade``, ``crag calibrate`` and ``crag evaluator label`` one per graded question,
with the same deadline and budget from settings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from crag.budget import Budget, BudgetedSearch
from crag.config import CragSettings
from crag.deadline import Deadline
from crag.kb import KnowledgeBase
from crag.llm.guard import GuardedLLM
from crag.protocols import LLM, Evaluator, LLMEvaluator, WebSearch
from crag.search.cache import CachedSearch
from crag.search.timeout import TimeoutSearch
from crag.state import BUDGET, CACHE, StateDB, state_for
from crag.types import Evaluation, Passage, Query


class Guarded(NamedTuple):
    """A request's components behind its guards."""

    llm: GuardedLLM
    search: WebSearch | None
    evaluator: Evaluator


def guard(
    kb: KnowledgeBase,
    llm: LLM,
    search: WebSearch | None,
    evaluator: Evaluator,
    cfg: CragSettings,
    deadline: Deadline,
    heartbeat: Callable[[], None] | None = None,
) -> Guarded:
    """Put the LLM, the search and an LLM evaluator behind the request's budget and deadline
    (search cache outermost, so a cache hit costs no budget and no time). Per-day budgets
    and the cache persist beside the knowledge base, or in the shared ``kb.state_uri``.
    ``heartbeat`` (a run watched live) may stop any LLM call between two pieces of its reply
    (:class:`~crag.llm.guard.GuardedLLM`)."""
    fix = cfg.correction
    budget = _budget(cfg, state_for(cfg, BUDGET, sqlite_path=kb.path / BUDGET.file))
    guarded = GuardedLLM(llm, budget=budget, deadline=deadline, heartbeat=heartbeat)
    if search is not None:
        search = BudgetedSearch(TimeoutSearch(search, timeout=fix.search_timeout, deadline=deadline), budget)
        if fix.search_cache_ttl:
            search = CachedSearch(search, state_for(cfg, CACHE, sqlite_path=kb.path / CACHE.file), fix.search_cache_ttl)
    if isinstance(evaluator, LLMEvaluator):
        evaluator = evaluator.with_llm(guarded)
    return Guarded(guarded, search, evaluator)


def _budget(cfg: CragSettings, db: StateDB) -> Budget:
    """A request's budget: its own counters, the day's totals in ``db``."""
    fix = cfg.correction
    return Budget(
        db, fix.per_request_llm_tokens, fix.per_day_llm_tokens, fix.per_request_searches, fix.per_day_searches
    )


class RequestGuard:
    """Guards for LLM work outside an answer, each unit of it (a judged question, a graded
    question) bound like one request: ``correction.deadline_seconds`` and the per-request and
    per-day token budgets of ``cfg`` (the day's totals beside the knowledge base ``cfg.kb.path``,
    or in the shared ``kb.state_uri``, as a request's).

    ### Usage example
    >>> from crag.config import CragSettings
    >>> from crag.testing.fakes import ScriptedLLM
    >>> cfg = CragSettings(correction={"deadline_seconds": 30, "per_request_llm_tokens": 1000})
    >>> guarded = RequestGuard(cfg)(ScriptedLLM(["Paris."]))
    >>> guarded.deadline.seconds, guarded.budget.limits[("tokens", "request")]
    (30.0, 1000)
    """

    def __init__(self, cfg: CragSettings) -> None:
        self.cfg = cfg
        self._db = state_for(cfg, BUDGET)  # one per run, opened on first use only (a per-day limit)

    def __call__(self, llm: LLM) -> GuardedLLM:
        """``llm`` behind a fresh guard: a new deadline and a new per-request budget."""
        deadline = Deadline(self.cfg.correction.deadline_seconds)
        return GuardedLLM(llm, budget=_budget(self.cfg, self._db), deadline=deadline)


class GuardedEvaluator:
    """An evaluator that grades each question as one request: an evaluator that asks an LLM
    (:class:`~crag.protocols.LLMEvaluator`) asks it behind a fresh guard of ``guard`` per
    ``grade`` call; another grades as it is. ``degraded`` keeps, per question text, what a
    grading fell back from (a guard's timeout or spent budget among them).

    ### Usage example
    >>> from crag.config import CragSettings
    >>> from crag.grade.heuristic import HeuristicEvaluator
    >>> from crag.testing.fakes import ScriptedLLM
    >>> ev = GuardedEvaluator(HeuristicEvaluator(), lambda: ScriptedLLM([]), RequestGuard(CragSettings()))
    >>> ev.name, ev.grade(Query.of("capital of France"), [Passage("a", "Paris is the capital.")]).degraded
    ('heuristic', '')
    """

    def __init__(self, evaluator: Evaluator, llm: Callable[[], LLM], guard: RequestGuard) -> None:
        self.evaluator = evaluator
        self.name: str = evaluator.name
        self._llm = llm  # the raw model, made only when the evaluator asks one
        self._guard = guard
        self.degraded: dict[str, str] = {}

    def grade(self, query: Query, passages: Sequence[Passage]) -> Evaluation:
        bound = self.evaluator
        if isinstance(bound, LLMEvaluator):
            bound = bound.with_llm(self._guard(self._llm()))
        ev = bound.grade(query, passages)
        if ev.degraded:
            self.degraded[query.text] = ev.degraded
        return ev
