"""SQLite helpers shared by the manifest, trace store, embedding and search caches."""

from __future__ import annotations

import sqlite3
import time


def set_wal(db: sqlite3.Connection, attempts: int = 20) -> None:
    """Switch ``db`` to WAL, retrying briefly while another process holds the lock.

    The switch takes an exclusive lock that SQLite's busy timeout does not wait for, so two
    processes (server workers, parallel ingest) opening the same new file can otherwise fail
    at once with "database is locked".
    """
    for attempt in range(attempts):
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
