"""Guards around a request's external calls: budgets, timeouts and the search cache."""

from __future__ import annotations

from crag.config import CragSettings
from crag.correct.budget import Budget, BudgetedLLM, BudgetedSearch
from crag.deadline import Deadline
from crag.kb import KnowledgeBase
from crag.llm.timeout import TimeoutLLM
from crag.protocols import LLM, WebSearch
from crag.search.cache import CachedSearch
from crag.search.timeout import TimeoutSearch


def guard(
    kb: KnowledgeBase, llm: LLM, search: WebSearch | None, cfg: CragSettings, deadline: Deadline
) -> tuple[LLM, WebSearch | None]:
    """Wrap the LLM and search in budgets, timeouts and the search cache (cache outermost,
    so a cache hit costs no budget and no time). Budgets persist beside the knowledge base."""
    fix = cfg.correction
    budget = Budget(
        kb.path / "budget.sqlite",
        fix.per_request_llm_tokens,
        fix.per_day_llm_tokens,
        fix.per_request_searches,
        fix.per_day_searches,
    )
    guarded: LLM = BudgetedLLM(TimeoutLLM(llm, deadline), budget)
    if search is not None:
        search = BudgetedSearch(TimeoutSearch(search, timeout=fix.search_timeout, deadline=deadline), budget)
        if fix.search_cache_ttl:
            search = CachedSearch(search, kb.path / "search_cache.sqlite", fix.search_cache_ttl)
    return guarded, search
