"""Guards around a request's external calls: one budget and one deadline for the request.

Every LLM call of the request goes through one :class:`~crag.llm.guard.GuardedLLM`: the
evaluator too, when it asks an LLM (:class:`~crag.protocols.LLMEvaluator`), so LLM grading
counts against the request's tokens and stops at its deadline like generation does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from crag.budget import Budget, BudgetedSearch
from crag.config import CragSettings
from crag.deadline import Deadline
from crag.kb import KnowledgeBase
from crag.llm.guard import GuardedLLM
from crag.protocols import LLM, Evaluator, LLMEvaluator, WebSearch
from crag.search.cache import CachedSearch
from crag.search.timeout import TimeoutSearch
from crag.state import BUDGET, CACHE, state_for


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
    budget = Budget(
        state_for(cfg, BUDGET, sqlite_path=kb.path / BUDGET.file),
        fix.per_request_llm_tokens,
        fix.per_day_llm_tokens,
        fix.per_request_searches,
        fix.per_day_searches,
    )
    guarded = GuardedLLM(llm, budget=budget, deadline=deadline, heartbeat=heartbeat)
    if search is not None:
        search = BudgetedSearch(TimeoutSearch(search, timeout=fix.search_timeout, deadline=deadline), budget)
        if fix.search_cache_ttl:
            search = CachedSearch(search, state_for(cfg, CACHE, sqlite_path=kb.path / CACHE.file), fix.search_cache_ttl)
    if isinstance(evaluator, LLMEvaluator):
        evaluator = evaluator.with_llm(guarded)
    return Guarded(guarded, search, evaluator)
