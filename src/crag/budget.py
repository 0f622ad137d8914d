"""Cost budgets: the LLM tokens and search calls one request, and one day, may spend.

:class:`Budget` counts per request in memory and per UTC day in SQLite under the
knowledge-base folder (shared by processes), raising :class:`~crag.errors.BudgetExceeded`
subtypes, which the pipeline turns into a degradation (search) or a one-line refusal
(LLM). :class:`BudgetedSearch` charges a search before making it; a request's LLM calls
are charged by ``crag.llm.guard.GuardedLLM``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from crag.errors import BudgetExceeded, LLMBudgetExceeded, SearchBudgetExceeded
from crag.protocols import WebSearch
from crag.types import WebResult

_SCHEMA = """
CREATE TABLE IF NOT EXISTS budget_usage (
    day TEXT NOT NULL,
    kind TEXT NOT NULL,
    used INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, kind)
)
"""


class Budget:
    """Limits on LLM tokens and search calls for one request, and for the day (UTC).

    Build one per request: the per-request counters live in the object; the per-day
    totals live in the SQLite file at ``path`` (e.g. ``<kb>/budget.sqlite``), shared by
    processes. ``None`` disables a limit; with every limit ``None`` no file is touched.
    A charge that would pass a limit raises and charges nothing.

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
        path: str | Path | None,
        per_request_tokens: int | None = None,
        per_day_tokens: int | None = None,
        per_request_searches: int | None = None,
        per_day_searches: int | None = None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.limits = {
            ("tokens", "request"): per_request_tokens,
            ("tokens", "day"): per_day_tokens,
            ("searches", "request"): per_request_searches,
            ("searches", "day"): per_day_searches,
        }
        if (per_day_tokens is not None or per_day_searches is not None) and self.path is None:
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
        if self.path is None or not self.path.exists():
            return 0
        with self._connect() as db:
            row = db.execute("SELECT used FROM budget_usage WHERE day = ? AND kind = ?", (self._day(), kind)).fetchone()
        return int(row[0]) if row else 0

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
        day = self._day()
        with self._connect() as db:
            # BEGIN IMMEDIATE takes the write lock first, so two processes cannot both pass the check.
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT used FROM budget_usage WHERE day = ? AND kind = ?", (day, kind)).fetchone()
            used = int(row[0]) if row else 0
            if not force and used + n > limit:
                db.execute("ROLLBACK")
                raise error(f"{head}: {used} of {limit} {unit} per day already used", backend_id="budget", step=kind)
            db.execute(
                "INSERT INTO budget_usage (day, kind, used) VALUES (?, ?, ?) "
                "ON CONFLICT(day, kind) DO UPDATE SET used = used + excluded.used",
                (day, kind, n),
            )
            db.execute("COMMIT")

    def _connect(self) -> _Closing:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        db.execute(_SCHEMA)
        return _Closing(db)

    def _day(self) -> str:
        return self._clock().astimezone(timezone.utc).strftime("%Y-%m-%d")


class _Closing:
    """``with`` closes the connection (sqlite3's own context manager only commits)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        return self.db

    def __exit__(self, *exc: object) -> None:
        self.db.close()


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
