"""The trace log: traces and their ratings in the state database (:mod:`crag.state`).

Beside the knowledge base (``traces.sqlite``) unless ``kb.state_uri`` names a shared
PostgreSQL database; the tables and their migrations are defined once for both in
:mod:`crag.state.schema`. Each trace is kept twice: summary columns for listing and
filtering, and the full JSON in ``data`` for ``crag trace show``. Secrets are redacted
before anything is written, so the database never holds an API key.

On a full disk a SQLite file opens for reading only (SQLite cannot create its journals):
traces already saved can be listed and shown, and saving says the disk is full (the answer
stands, without its trace) until space is back (:meth:`crag.state.StateDB.open_read_only`).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import os
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from crag.errors import InputError, KnowledgeBaseError, TraceNotFoundError
from crag.paths import is_disk_full
from crag.redact import redact
from crag.state import TRACES, StateDB
from crag.state.schema import feedback as feedback_table
from crag.state.schema import traces as traces_table

__all__ = ["MIN_PREFIX", "STATUSES", "TraceStore", "trace_status"]

MIN_PREFIX = 6  # shorter prefixes match too much to be a useful handle
log = logging.getLogger("crag.trace")


STATUSES = ("answered", "degraded", "refused", "abstained", "failed", "cancelled", "retrieved")


def trace_status(trace: dict[str, Any]) -> str:
    """How the request ended: ``failed`` (an error, no answer), ``abstained`` (nothing reliable
    found), ``refused`` (the sources did not hold the answer), ``degraded`` (answered, with
    something given up on the way), or ``answered``; ``retrieved`` for a run that stopped
    before generation on purpose (a retriever's, :func:`crag.pipeline.run_crag_context`);
    ``cancelled`` when its reader stopped it (Ctrl-C, a client that hung up): no answer, and
    nothing failed.

    >>> trace_status({"action": "correct", "errors": ["llm: unknown model"]}), trace_status({"answer": "x"})
    ('failed', 'answered')
    """
    if not trace.get("errors") and "answer" not in trace and trace.get("context_only"):
        return "retrieved"
    if not trace.get("errors") and "answer" not in trace and trace.get("cancelled"):
        return "cancelled"
    if trace.get("errors") or "answer" not in trace:
        return "failed"
    if trace.get("abstained"):
        return "abstained"
    if trace.get("refused"):
        return "refused"
    return "degraded" if trace.get("degradations") else "answered"


SUMMARY_COLUMNS = ("id", "created_at", "question", "mode", "action", "confidence", "latency_ms", "answer", "status")


class TraceStore:
    """Saved traces and their ratings, in a SQLite file or a shared database (:mod:`crag.state`).

    >>> store = TraceStore(Path("kb/traces.sqlite"))          # doctest: +SKIP
    >>> tid = store.save(tracer.to_dict())                      # doctest: +SKIP
    >>> store.get(tid[:8])["action"]                            # doctest: +SKIP
    'correct'
    >>> [r["id"] for r in store.list(limit=5, action="incorrect")]  # doctest: +SKIP

    ``db`` is a path (the SQLite file) or a :class:`~crag.state.StateDB` of the ``traces``
    group (``crag.state.state_for(settings, TRACES)``). The tables are created or upgraded on
    open. Each call takes its own connection, so one store can be shared across threads.
    """

    def __init__(self, db: StateDB | Path | str) -> None:
        self.db = db if isinstance(db, StateDB) else StateDB.sqlite(db, TRACES)
        self.path: Path | None = self.db.path  # the SQLite file (None in a shared database)
        # Serialises writers inside this process; SQLite's busy timeout covers other processes.
        self._write_lock = threading.Lock()
        self.recovered: Path | None = None  # where a corrupt database was moved, if it was
        try:
            self._open()
        except KnowledgeBaseError as exc:
            if self.path is not None and is_disk_full(self.path.parent, exc):
                self.db.open_read_only()
            elif not _corrupt(exc):
                raise
            else:
                self.recover()

    @property
    def read_only(self) -> bool:
        """The disk was full when the store opened: it reads what is saved and saves nothing."""
        return self.db.read_only

    @property
    def applied(self) -> list[str]:
        """The migrations applied when this store opened the database (oldest first)."""
        return self.db.applied

    def _open(self) -> None:
        with self.db.connect():
            pass  # creates or upgrades the tables

    def recover(self) -> Path:
        """Move a corrupt SQLite file aside (kept for inspection) and start a new one.

        Traces are a record, not the service: a damaged file must never stop answers.
        """
        if self.path is None:
            raise KnowledgeBaseError(f"trace database {self.db.display} cannot be recovered by moving a file")
        with self._write_lock:
            self.db.reset()  # pooled connections hold the damaged file open
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
            bad = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
            os.replace(self.path, bad)
            for suffix in ("-wal", "-shm"):  # journal files of the old file would confuse the new one
                side = Path(f"{self.path}{suffix}")
                if side.exists():
                    os.replace(side, Path(f"{bad}{suffix}"))
            self._open()
            self.recovered = bad
        log.warning("trace database %s was corrupt; moved it to %s and started a new one", self.path, bad)
        return bad

    def save(self, data: dict[str, Any]) -> str:
        """Insert or replace the trace ``data`` (must have ``"id"``); return its id.

        Secrets from the environment are redacted from every string first.
        """
        if not isinstance(data, dict) or not data.get("id"):
            raise InputError("a trace must be a dict with an 'id'")
        # Round-trip through JSON so dataclasses/enums/numpy become plain values that
        # redact() can see into.
        clean: dict[str, Any] = redact(json.loads(json.dumps(data, default=_json_default)))
        trace_id = str(clean["id"])
        timings: dict[str, Any] = clean["timings"] if isinstance(clean.get("timings"), dict) else {}
        total = _float(timings.get("total"))
        row = {
            "kb": self.db.scope,
            "id": trace_id,
            "created_at": clean.get("created_at") or _now(),
            "question": _str(clean.get("question")),
            "mode": _str(clean.get("mode")),
            "action": _str(clean.get("action")),
            "confidence": _float(clean.get("confidence")),
            "latency_ms": total * 1000.0 if total is not None else None,
            "answer": _str(clean.get("answer")),
            "status": trace_status(clean),
            "data": json.dumps(clean, ensure_ascii=False),
        }
        try:
            self._insert(row)
        except KnowledgeBaseError as exc:
            if not _corrupt(exc):
                raise
            self.recover()  # damaged since it was opened: start over, then save this trace
            self._insert(row)
        return trace_id

    def _insert(self, row: dict[str, Any]) -> None:
        stmt = self.db.insert(traces_table).values(row)
        stmt = stmt.on_conflict_do_update(
            index_elements=["kb", "id"], set_={k: stmt.excluded[k] for k in row if k not in ("kb", "id")}
        )
        with self._write_lock, self.db.connect(write=True) as conn:
            conn.execute(stmt)

    def get(self, trace_id: str) -> dict[str, Any]:
        """The full trace dict for ``trace_id`` or a unique prefix of it (≥ 6 characters)."""
        trace_id = trace_id.strip()
        t = traces_table.c
        mine = t.kb == self.db.scope
        with self.db.connect() as conn:
            rows = conn.execute(sa.select(t.data).where(mine, t.id == trace_id)).all()
            if not rows and len(trace_id) >= MIN_PREFIX:
                prefix = sa.func.substr(t.id, 1, len(trace_id)) == trace_id
                rows = conn.execute(sa.select(t.data).where(mine, prefix).order_by(t.id).limit(2)).all()
        if len(rows) > 1:
            raise TraceNotFoundError(f"trace id prefix {trace_id!r} matches more than one trace; give more characters")
        if not rows:
            raise TraceNotFoundError(f"no trace with id {trace_id}; run `crag trace list` to see ids")
        trace: dict[str, Any] = json.loads(rows[0].data)
        trace.setdefault("status", trace_status(trace))
        return trace

    def count(self) -> int:
        """How many traces are stored."""
        with self.db.connect() as conn:
            query = sa.select(sa.func.count()).select_from(traces_table).where(traces_table.c.kb == self.db.scope)
            return int(conn.execute(query).scalar_one())

    def rate(self, trace_id: str, rating: str, comment: str | None = None) -> dict[str, Any]:
        """Record a user's ``"up"``/``"down"`` rating of a trace (replacing an earlier one).

        ``trace_id`` may be a unique prefix; the comment is redacted like every trace field.
        """
        if rating not in ("up", "down"):
            raise InputError(f"rating {rating!r} is not 'up' or 'down'")
        full_id = str(self.get(trace_id)["id"])
        row = {"trace_id": full_id, "rating": rating, "comment": redact(comment), "created_at": _now()}
        stmt = self.db.insert(feedback_table).values(kb=self.db.scope, **row)
        stmt = stmt.on_conflict_do_update(
            index_elements=["kb", "trace_id"], set_={k: stmt.excluded[k] for k in ("rating", "comment", "created_at")}
        )
        with self._write_lock, self.db.connect(write=True) as conn:
            conn.execute(stmt)
        return row

    def feedback(self, trace_id: str | None = None, *, limit: int = 100_000) -> list[dict[str, Any]]:
        """Ratings, newest first: of one trace (exact id), or of every trace."""
        f = feedback_table.c
        query = sa.select(f.trace_id, f.rating, f.comment, f.created_at).where(f.kb == self.db.scope)
        if trace_id is not None:
            query = query.where(f.trace_id == trace_id)
        query = query.order_by(f.created_at.desc()).limit(int(limit))
        with self.db.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def list(
        self,
        limit: int = 20,
        action: str | None = None,
        min_confidence: float | None = None,
        max_confidence: float | None = None,
        status: str | None = None,
        grep: str | None = None,
    ) -> list[dict[str, Any]]:
        """Summary rows (no ``data``), newest first, optionally filtered (``status``: one of :data:`STATUSES`).

        ``grep``: only traces whose question or answer contains the text (ASCII letters in
        any case).
        """
        t = traces_table.c
        query = sa.select(*(t[name] for name in SUMMARY_COLUMNS)).where(t.kb == self.db.scope)
        if grep:
            query = query.where(sa.or_(self.db.contains(t.question, grep), self.db.contains(t.answer, grep)))
        if action is not None:
            query = query.where(t.action == str(getattr(action, "value", action)))
        if status is not None:
            if status not in STATUSES:
                raise InputError(f"status {status!r} is not one of {', '.join(STATUSES)}")
            query = query.where(t.status == status)
        if min_confidence is not None:
            query = query.where(t.confidence >= float(min_confidence))
        if max_confidence is not None:
            query = query.where(t.confidence <= float(max_confidence))
        query = query.order_by(t.created_at.desc(), t.id.desc()).limit(int(limit))
        with self.db.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]


def _corrupt(exc: KnowledgeBaseError) -> bool:
    """The error is SQLite saying the file is not (or no longer) a database."""
    cause = exc.__cause__
    cause = getattr(cause, "orig", None) or cause  # SQLAlchemy wraps the driver's error
    text = str(cause)
    return isinstance(cause, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "corrupt" in text
    )


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _float(value: Any) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def _json_default(obj: Any) -> Any:
    # What pipeline steps tend to record: dataclasses, enums, paths, numpy values.
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    return str(obj)
