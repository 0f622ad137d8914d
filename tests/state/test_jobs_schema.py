"""The jobs group (ingest jobs and their uploads): its migration builds exactly its tables on both
engines, and the job rows keep what ``GET /v1/jobs/{id}`` reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from test_schema import schema_diff

from crag.jobs import JOBS, JobFile, JobStore
from crag.state import StateDB

pytestmark = pytest.mark.integration


def test_head_is_the_newest_revision() -> None:
    assert ScriptDirectory(str(JOBS.location)).get_current_head() == JOBS.head


def test_sqlite_migration_builds_the_schema(tmp_path: Path) -> None:
    db = StateDB.sqlite(tmp_path / JOBS.file, JOBS)
    assert schema_diff(db) == [] and db.applied == ["jobs_0001"]


def test_postgres_migration_builds_the_schema_and_keeps_jobs_per_kb(pg_url: str) -> None:
    db = StateDB(pg_url, JOBS, scope="handbook")
    assert schema_diff(db) == []
    jobs = JobStore(db)
    files = [JobFile("notes", "notes.md", True, "# 笔记\n\n内容。".encode()), JobFile("x", "x.bin.txt", True, b"\x00")]
    job = jobs.create("handbook", files, {"metadata": {"team": "产品"}, "clear_metadata": False})
    record = jobs.get(job)
    assert record is not None and record.status == "queued" and record.attempts == 0
    assert record.progress == {"files": 2, "files_done": 0, "bytes": sum(len(f.data) for f in files), "chunks": 0}
    assert jobs.files(job) == files
    assert JobStore(StateDB(pg_url, JOBS, scope="catalogue")).get(job) is None  # another knowledge base's

    jobs.start(job, "host:1")
    jobs.start(job, "host:2")  # a second worker took it over
    summary = {
        "added": 1,
        "files": [
            {"path": "uploads/a/notes.md", "id": "notes", "status": "added", "chunks": 1, "reason": ""},
            {"path": "uploads/b/x.bin.txt", "id": "x", "status": "skipped", "chunks": 0, "reason": "binary content"},
        ],
        "warnings": [],
    }
    jobs.finish(job, {"files": 2, "files_done": 2, "chunks": 1}, summary)
    view = JobStore(db).get(job).view()  # type: ignore[union-attr]
    assert (view["status"], view["attempts"], view["error"]) == ("done", 2, None)
    assert view["skipped"] == [{"id": "x", "path": "uploads/b/x.bin.txt", "reason": "binary content"}]
    assert view["finished_at"] and jobs.files(job) == []  # the bytes go with the job done

    other = jobs.create("handbook", files[:1], {})
    jobs.fail(other, "knowledge base is read-only")
    failed = jobs.get(other)
    assert failed is not None and (failed.status, failed.error) == ("failed", "knowledge base is read-only")
