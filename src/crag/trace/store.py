"""The trace log: one SQLite file, upgraded in place by named migrations (like llm's logs.db).

Each trace is kept twice: summary columns for listing and filtering, and the full
JSON in ``data`` for ``crag trace show``. Secrets are redacted before anything is
written, so the database file never holds an API key.

On a full disk the database opens for reading only (SQLite cannot create its journals):
traces already saved can be listed and shown, and saving says the disk is full (the answer
stands, without its trace) until space is back.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from crag._sqlite import set_wal
from crag.errors import InputError, KnowledgeBaseError, TraceNotFoundError
from crag.paths import disk_full_error, is_disk_full, make_folder
from crag.redact import redact

__all__ = ["MIGRATIONS", "MIN_PREFIX", "TraceStore", "apply_migrations", "migration"]

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: list[Migration] = []
MIN_PREFIX = 6  # shorter prefixes match too much to be a useful handle
log = logging.getLogger("crag.trace")


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration. Names are permanent: never rename one."""
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE traces (
            id TEXT PRIMARY KEY,
            created_at TEXT,
            question TEXT,
            mode TEXT,
            action TEXT,
            confidence REAL,
            latency_ms REAL,
            answer TEXT,
            data TEXT
        )"""
    )
    db.execute("CREATE INDEX traces_created_at ON traces(created_at)")
    db.execute("CREATE INDEX traces_action ON traces(action)")


@migration
def m002_feedback(db: sqlite3.Connection) -> None:
    # One rating per trace (the latest wins), kept beside the trace it rates.
    db.execute(
        """CREATE TABLE feedback (
            trace_id TEXT PRIMARY KEY,
            rating TEXT NOT NULL CHECK (rating IN ('up', 'down')),
            comment TEXT,
            created_at TEXT
        )"""
    )


@migration
def m003_status(db: sqlite3.Connection) -> None:
    # How a request ended, beside the action it took: a green action means an answer was given.
    db.execute("ALTER TABLE traces ADD COLUMN status TEXT")
    db.execute("CREATE INDEX traces_status ON traces(status)")
    rows = db.execute("SELECT id, data FROM traces").fetchall()
    for trace_id, data in rows:
        try:
            status = trace_status(json.loads(data))
        except (TypeError, ValueError):
            status = "failed"
        db.execute("UPDATE traces SET status = ? WHERE id = ?", (status, trace_id))


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


def apply_migrations(db: sqlite3.Connection, migrations: Sequence[Migration]) -> list[str]:
    """Apply the migrations not yet recorded in ``_migrations``; return their names.

    Each runs in its own ``BEGIN IMMEDIATE`` transaction and is re-checked inside it,
    so two processes opening the same new file do not both apply it.
    ``db`` must be in autocommit mode (``isolation_level=None``).
    """
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    applied: list[str] = []
    for fn in migrations:
        name = fn.__name__
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                db.execute("COMMIT")
                continue
            fn(db)
            db.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, _now()))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied


SUMMARY_COLUMNS = ("id", "created_at", "question", "mode", "action", "confidence", "latency_ms", "answer", "status")


class TraceStore:
    """Saved traces in a SQLite database, migrated when opened.

    >>> store = TraceStore(Path("kb/traces.sqlite"))          # doctest: +SKIP
    >>> tid = store.save(tracer.to_dict())                      # doctest: +SKIP
    >>> store.get(tid[:8])["action"]                            # doctest: +SKIP
    'correct'
    >>> [r["id"] for r in store.list(limit=5, action="incorrect")]  # doctest: +SKIP

    Each call opens its own connection, so one store can be shared across threads.
    """

    def __init__(self, path: Path | str, *, migrations: Sequence[Migration] | None = None) -> None:
        self.path = Path(path)
        make_folder(self.path.parent, "trace database")
        self._migrations = list(MIGRATIONS if migrations is None else migrations)
        # Serialises writers inside this process; SQLite's busy timeout covers other processes.
        self._write_lock = threading.Lock()
        self.recovered: Path | None = None  # where a corrupt database was moved, if it was
        self.read_only = False  # the disk is full: read what is saved, save nothing (see _writable)
        try:
            self._open()
        except KnowledgeBaseError as exc:
            if is_disk_full(self.path.parent, exc):
                self.read_only = True
            elif not _corrupt(exc):
                raise
            else:
                self.recover()

    def _open(self) -> None:
        with self._connect(write=True) as db:
            set_wal(db)
            self.applied = apply_migrations(db, self._migrations)

    def recover(self) -> Path:
        """Move a corrupt database aside (kept for inspection) and start a new one.

        Traces are a record, not the service: a damaged file must never stop answers.
        """
        with self._write_lock:
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

    def _writable(self) -> None:
        """Before a write: open for writing again if the disk had been full, or say it still is."""
        if not self.read_only:
            return
        try:
            self._open()
        except KnowledgeBaseError as exc:
            if not is_disk_full(self.path.parent, exc):
                raise
            raise disk_full_error(
                self.path.parent, "the trace database is open for reading only", "free space to record traces again"
            ) from None
        self.read_only = False

    def _read_only_connection(self) -> sqlite3.Connection:
        """A connection that writes nothing: the file as it is (SQLite's ``immutable``, when no
        write-ahead log holds commits the file lacks), or an empty database when there is none."""
        wal = Path(f"{self.path}-wal")
        has_log = wal.exists() and wal.stat().st_size > 0
        if self.path.exists() and self.path.stat().st_size > 0:
            mode = "mode=ro" if has_log else "mode=ro&immutable=1"
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?{mode}", uri=True, isolation_level=None)
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'traces'").fetchone():
                return db
            db.close()
        db = sqlite3.connect(":memory:", isolation_level=None)  # created on a full disk: no trace yet
        apply_migrations(db, self._migrations)
        return db

    @contextmanager
    def _connect(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        try:
            if self.read_only and not write:
                db = self._read_only_connection()
            else:
                db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except sqlite3.Error as exc:
            raise KnowledgeBaseError(f"cannot open trace database {self.path}: {exc}") from exc
        db.row_factory = sqlite3.Row
        try:
            yield db
        except sqlite3.DatabaseError as exc:
            raise self._database_error(exc) from exc
        finally:
            db.close()

    def _database_error(self, exc: sqlite3.DatabaseError) -> KnowledgeBaseError:
        text = str(exc)
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return KnowledgeBaseError(
                f"trace database {self.path} is corrupt ({text}); move it aside "
                f"(e.g. mv {self.path} {self.path}.bad) and crag will start a new one"
            )
        return KnowledgeBaseError(f"trace database {self.path}: {text}")

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
        row = (
            trace_id,
            clean.get("created_at") or _now(),
            _str(clean.get("question")),
            _str(clean.get("mode")),
            _str(clean.get("action")),
            _float(clean.get("confidence")),
            total * 1000.0 if total is not None else None,
            _str(clean.get("answer")),
            trace_status(clean),
            json.dumps(clean, ensure_ascii=False),
        )
        try:
            self._insert(row)
        except KnowledgeBaseError as exc:
            if not _corrupt(exc):
                raise
            self.recover()  # damaged since it was opened: start over, then save this trace
            self._insert(row)
        return trace_id

    def _insert(self, row: tuple[Any, ...]) -> None:
        self._writable()
        with self._write_lock, self._connect() as db:
            slots = ", ".join("?" * (len(SUMMARY_COLUMNS) + 1))
            db.execute(
                f"INSERT INTO traces ({', '.join(SUMMARY_COLUMNS)}, data) VALUES ({slots}) "
                "ON CONFLICT(id) DO UPDATE SET created_at=excluded.created_at, question=excluded.question, "
                "mode=excluded.mode, action=excluded.action, confidence=excluded.confidence, "
                "latency_ms=excluded.latency_ms, answer=excluded.answer, status=excluded.status, data=excluded.data",
                row,
            )

    def get(self, trace_id: str) -> dict[str, Any]:
        """The full trace dict for ``trace_id`` or a unique prefix of it (≥ 6 characters)."""
        trace_id = trace_id.strip()
        with self._connect() as db:
            rows = db.execute("SELECT data FROM traces WHERE id = ?", (trace_id,)).fetchall()
            if not rows and len(trace_id) >= MIN_PREFIX:
                rows = db.execute(
                    "SELECT data FROM traces WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT 2",
                    (len(trace_id), trace_id),
                ).fetchall()
        if len(rows) > 1:
            raise TraceNotFoundError(f"trace id prefix {trace_id!r} matches more than one trace; give more characters")
        if not rows:
            raise TraceNotFoundError(f"no trace with id {trace_id}; run `crag trace list` to see ids")
        trace: dict[str, Any] = json.loads(rows[0]["data"])
        trace.setdefault("status", trace_status(trace))
        return trace

    def count(self) -> int:
        """How many traces are stored."""
        with self._connect() as db:
            return int(db.execute("SELECT count(*) FROM traces").fetchone()[0])

    def rate(self, trace_id: str, rating: str, comment: str | None = None) -> dict[str, Any]:
        """Record a user's ``"up"``/``"down"`` rating of a trace (replacing an earlier one).

        ``trace_id`` may be a unique prefix; the comment is redacted like every trace field.
        """
        if rating not in ("up", "down"):
            raise InputError(f"rating {rating!r} is not 'up' or 'down'")
        full_id = str(self.get(trace_id)["id"])
        row = {"trace_id": full_id, "rating": rating, "comment": redact(comment), "created_at": _now()}
        self._writable()
        with self._write_lock, self._connect() as db:
            db.execute(
                "INSERT INTO feedback (trace_id, rating, comment, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(trace_id) DO UPDATE SET rating=excluded.rating, comment=excluded.comment, "
                "created_at=excluded.created_at",
                tuple(row.values()),
            )
        return row

    def feedback(self, trace_id: str | None = None, *, limit: int = 100_000) -> list[dict[str, Any]]:
        """Ratings, newest first: of one trace (exact id), or of every trace."""
        sql = "SELECT trace_id, rating, comment, created_at FROM feedback"
        params: list[str | int] = []
        if trace_id is not None:
            sql += " WHERE trace_id = ?"
            params.append(trace_id)
        sql += " ORDER BY created_at DESC LIMIT ?"
        params.append(int(limit))
        with self._connect() as db:
            return [dict(r) for r in db.execute(sql, params).fetchall()]

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
        where: list[str] = []
        params: list[str | float] = []
        if grep:
            where.append("(instr(lower(question), lower(?)) > 0 OR instr(lower(answer), lower(?)) > 0)")
            params += [grep, grep]
        if action is not None:
            where.append("action = ?")
            params.append(str(getattr(action, "value", action)))
        if status is not None:
            if status not in STATUSES:
                raise InputError(f"status {status!r} is not one of {', '.join(STATUSES)}")
            where.append("status = ?")
            params.append(status)
        if min_confidence is not None:
            where.append("confidence >= ?")
            params.append(float(min_confidence))
        if max_confidence is not None:
            where.append("confidence <= ?")
            params.append(float(max_confidence))
        sql = f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM traces"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        params.append(int(limit))
        with self._connect() as db:
            return [dict(r) for r in db.execute(sql, params).fetchall()]


def _corrupt(exc: KnowledgeBaseError) -> bool:
    cause = exc.__cause__
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
