"""A knowledge base written by the release before the state layer upgrades in place and answers.

``legacy_kb`` was built by ``build_legacy_kb.py`` with that release (its traces, ratings,
budget and search cache in their SQLite files, with crag's own ``_migrations`` table).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from test_schema import schema_diff

from crag.state import BUDGET, CACHE, GROUPS, MANIFEST, TRACES, StateDB
from crag.state.schema import budget_usage, cache

pytestmark = pytest.mark.integration

LEGACY = Path(__file__).parent / "legacy_kb"
# The groups the old release kept in SQLite files. The manifest group lives only in a shared
# database; a folder's manifest.sqlite is crag.store.manifest's (moved in: test_shared_manifest).
FILE_GROUPS = [g for g in GROUPS.values() if g is not MANIFEST]


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    copy = tmp_path / "kb"
    shutil.copytree(LEGACY, copy)
    return copy


def test_legacy_files_have_no_alembic_version(legacy: Path) -> None:
    # The fixture is what the old release wrote, not something this code already touched.
    for group in FILE_GROUPS:
        with sqlite3.connect(legacy / group.file) as db:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert group.version_table not in tables and {t.name for t in group.tables} <= tables


def test_every_state_file_upgrades_in_place_keeping_its_rows(legacy: Path) -> None:
    for group in FILE_GROUPS:
        db = StateDB.sqlite(legacy / group.file, group)
        assert schema_diff(db) == [], group.name  # now exactly the current schema
        assert db.applied == [f"{group.name}_0001", f"{group.name}_0002"]
    with StateDB.sqlite(legacy / BUDGET.file, BUDGET).connect() as conn:
        usage = {r.kind: r.used for r in conn.execute(sa.select(budget_usage))}
    assert usage["tokens"] > 0 and usage["searches"] >= 1
    with StateDB.sqlite(legacy / CACHE.file, CACHE).connect() as conn:
        entries = conn.execute(sa.select(cache.c.namespace, cache.c.kb)).all()
    assert entries and all(ns.startswith("search:") and kb == "" for ns, kb in entries)
    assert StateDB.sqlite(legacy / TRACES.file, TRACES).applied == []  # once upgraded, nothing more


@pytest.mark.slow
def test_an_upgraded_knowledge_base_opens_and_answers(legacy: Path) -> None:
    from crag import CRAG

    rag = CRAG.from_config(kb={"path": str(legacy)}, llm={"model": "qwen2.5-coder-0.5b"})
    old = rag.traces.list()
    assert len(old) == 3 and {r["status"] for r in old} <= {"answered", "degraded", "refused"}
    ratings = {f["rating"]: f["comment"] for f in rag.traces.feedback()}
    assert ratings == {"up": "正确", "down": "missing the year"}
    answer = rag.ask("天津犹太会堂是什么时候建成的？")
    assert "1940" in answer.answer and answer.citations, answer.answer
    assert rag.traces.count() == 4 and rag.traces.get(answer.trace_id)["question"] == "天津犹太会堂是什么时候建成的？"
    assert not any("trace not saved" in d for d in answer.degradations)
