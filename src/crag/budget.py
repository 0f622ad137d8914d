"""Cost budgets: the LLM tokens and search calls one request, and one day, may spend.

:class:`Budget` counts per request in memory and per UTC day in the state database
(:mod:`crag.state`: ``budget.sqlite`` beside the knowledge base, or the shared
``kb.state_uri``, so replicas on several machines share one daily total), raising
:class:`~crag.errors.BudgetExceeded` subtypes, which the pipeline turns into a degradation
(search) or a one-line refusal (LLM). :class:`BudgetedSearch` charges a search before
making it; a request's LLM calls are charged by ``crag.llm.guard.GuardedLLM``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa

from crag.errors import BudgetExceeded, LLMBudgetExceeded, SearchBudgetExceeded
from crag.protocols import WebSearch
from crag.state import BUDGET, StateDB
from crag.state.schema import budget_usage
from crag.types import WebResult


class Budget:
    """Limits on LLM tokens and search calls for one request, and for the day (UTC).

    Build one per request: the per-request counters live in the object; the per-day
    totals live in ``db``, a :class:`~crag.state.StateDB` of the ``budget`` group or a SQLite
    file path (e.g. ``<kb>/budget.sqlite``), shared by processes. ``None`` disables a limit;
    with every limit ``None`` the database is never touched. A charge that would pass a
    limit raises and charges nothing: the check and the charge are one statement, so
    processes sharing a database cannot both pass it.

    ### Usage example
    >>> import tempfile, pathlib
    >>> b = Budget(pathlib.Path(tempfile.mkdtemp()) / "budget.sqlite", per_request_searches=1)
    >>> b.charge_search()
    >>> try:
    ...     b.charge_search()
    ... except BudgetExceeded as exc:
    ...     print(exc)
    search budget exceeded: 1 of 1 searches per request already used
    """

    def __init__(
        self,
        db: StateDB | str | Path | None,
        per_request_tokens: int | None = None,
        per_day_tokens: int | None = None,
        per_request_searches: int | None = None,
        per_day_searches: int | None = None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.db = db if isinstance(db, StateDB) or db is None else StateDB.sqlite(db, BUDGET)
        self.limits = {
            ("tokens", "request"): per_request_tokens,
            ("tokens", "day"): per_day_tokens,
            ("searches", "request"): per_request_searches,
            ("searches", "day"): per_day_searches,
        }
        if (per_day_tokens is not None or per_day_searches is not None) and self.db is None:
            raise ValueError("per-day limits need a path for the usage database")
        self.used = {"tokens": 0, "searches": 0}
        self._clock = clock
        self._lock = threading.Lock()

    def charge_tokens(self, n: int, *, force: bool = False) -> None:
        """Charge ``n`` LLM tokens; ``force`` records tokens already spent even past a limit."""
        self._charge("tokens", max(0, int(n)), force=force)

    def charge_search(self) -> None:
        """Charge one search call (before making it)."""
        self._charge("searches", 1, force=False)

    def used_today(self, kind: str) -> int:
        """Today's total for ``kind`` (``"tokens"`` or ``"searches"``) from the database."""
        if self.db is None or not self.db.exists():
            return 0
        with self.db.connect() as conn:
            return self._used(conn, self._day(), kind)

    def _used(self, conn: sa.Connection, day: str, kind: str) -> int:
        assert self.db is not None
        u = budget_usage.c
        found = conn.execute(sa.select(u.used).where(u.kb == self.db.scope, u.day == day, u.kind == kind)).scalar()
        return int(found or 0)

    def _charge(self, kind: str, n: int, *, force: bool) -> None:
        error = SearchBudgetExceeded if kind == "searches" else LLMBudgetExceeded
        unit = "searches" if kind == "searches" else "LLM tokens"
        what = "search" if kind == "searches" else "LLM token"
        with self._lock:
            per_request = self.limits[(kind, "request")]
            if not force and per_request is not None and self.used[kind] + n > per_request:
                raise error(
                    f"{what} budget exceeded: {self.used[kind]} of {per_request} {unit} per request already used",
                    backend_id="budget",
                    step=kind,
                )
            per_day = self.limits[(kind, "day")]
            if per_day is not None:
                self._charge_day(kind, n, per_day, force, error, f"{what} budget exceeded", unit)
            self.used[kind] += n

    def _charge_day(
        self, kind: str, n: int, limit: int, force: bool, error: type[BudgetExceeded], head: str, unit: str
    ) -> None:
        assert self.db is not None
        day = self._day()
        u = budget_usage.c
        stmt = self.db.insert(budget_usage).values(kb=self.db.scope, day=day, kind=kind, used=n)
        # One statement checks and charges: "add n unless that passes the limit". A first charge
        # of the day inserts the row (checked below); later ones update it only under the limit.
        stmt = stmt.on_conflict_do_update(
            index_elements=["kb", "day", "kind"],
            set_={"used": u.used + stmt.excluded.used},
            where=None if force else (u.used + stmt.excluded.used <= limit),
        ).returning(u.used)
        with self.db.connect(write=True) as conn:
            charged = None if not force and n > limit else conn.execute(stmt).scalar()
            if charged is None:
                used = self._used(conn, day, kind)
                raise error(f"{head}: {used} of {limit} {unit} per day already used", backend_id="budget", step=kind)

    def _day(self) -> str:
        return self._clock().astimezone(timezone.utc).strftime("%Y-%m-%d")


class BudgetedSearch:
    """A ``WebSearch`` that charges ``budget`` before each call (``SearchBudgetExceeded``).

    >>> from crag.errors import SearchError
    >>> from crag.testing.fakes import StaticWebSearch
    >>> s = BudgetedSearch(StaticWebSearch(), Budget(None, per_request_searches=0))
    >>> try:
    ...     s.search("q", k=1)
    ... except SearchError as exc:  # a SearchError, so the pipeline degrades as for an outage
    ...     print(type(exc).__name__)
    SearchBudgetExceeded
    """

    def __init__(self, inner: WebSearch, budget: Budget) -> None:
        self.inner = inner
        self.budget = budget
        self.name: str = getattr(inner, "name", "search")

    def search(self, query: str, *, k: int) -> list[WebResult]:
        self.budget.charge_search()
        return self.inner.search(query, k=k)
