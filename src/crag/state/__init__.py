"""A knowledge base's state: traces and feedback, budgets, the correction caches.

Unset ``kb.state_uri`` keeps each group of tables in its SQLite file beside the knowledge
base (``traces.sqlite``, ``budget.sqlite``, ``search_cache.sqlite``); a ``postgresql://`` URL
puts them all in one database that several ``crag serve`` replicas share. The tables are
defined once (:mod:`crag.state.schema`) and upgraded by versioned migrations
(:mod:`crag.state.migrate`), on both engines, in place.

>>> from crag.config import CragSettings
>>> state_for(CragSettings(kb={"path": "kb"}), TRACES).display
'kb/traces.sqlite'
>>> db = state_for(CragSettings(kb={"path": "kb", "state_uri": "postgresql://crag:pw@db:5432/crag"}), TRACES)
>>> db.display, db.scope, db.shared
('postgresql://crag:***@db:5432/crag', 'kb', True)
"""

from __future__ import annotations

from pathlib import Path

from crag.config import CragSettings
from crag.state.db import StateDB
from crag.state.schema import BUDGET, CACHE, GROUPS, MANIFEST, TRACES, Group

__all__ = ["BUDGET", "CACHE", "GROUPS", "MANIFEST", "TRACES", "Group", "StateDB", "kb_name", "state_for"]


def kb_name(settings: CragSettings) -> str:
    """The knowledge base's name in a shared state database: ``kb.name``, else its folder's name."""
    return settings.kb.name or Path(settings.kb.path).resolve().name


def state_for(settings: CragSettings, group: Group, *, sqlite_path: Path | None = None) -> StateDB:
    """Where ``group`` of the knowledge base ``settings.kb`` lives: ``kb.state_uri`` if set,
    else ``sqlite_path`` (default: the group's file in the knowledge base folder)."""
    kb = settings.kb
    return StateDB.for_kb(
        kb.state_uri,
        group,
        sqlite_path=sqlite_path or Path(kb.path) / group.file,
        name=kb_name(settings),
        timeout=kb.state_timeout,
    )
