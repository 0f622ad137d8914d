"""Traces and feedback in a shared PostgreSQL database: written by one process, read by another.

Each process has its own empty working folder, as replicas on different machines would; only
``kb.state_uri`` and ``kb.name`` are shared.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crag.engine import CRAG
from crag.errors import TraceNotFoundError
from crag.grade.feedback import export_feedback

pytestmark = pytest.mark.integration

# Runs in another process: save a trace (with a secret in it) and rate it, through an engine.
WRITER = """
import json, sys
from crag.engine import CRAG
rag = CRAG.from_config(kb={"path": sys.argv[2], "state_uri": sys.argv[1], "name": "handbook"})
trace = json.loads(sys.argv[3])
tid = rag.traces.save(trace)
rag.traces.rate(tid[:10], "down", "wrong year")
print(tid)
"""


def trace(trace_id: str, secret: str) -> dict[str, object]:
    return {
        "id": trace_id,
        "created_at": "2026-01-02T03:04:05.000+00:00",
        "question": f"天津犹太会堂是什么时候建成的？ {secret}",
        "action": "correct",
        "confidence": 0.91,
        "answer": "天津犹太会堂建成于1940年[1]。",
        "context": [{"text": "天津犹太会堂建成于1940年。", "source": "tianjin.md", "origin": "internal"}],
        "strips": [{"text": "天津犹太会堂建成于1940年。", "source": "tianjin.md", "score": 0.9, "kept": True}],
        "timings": {"total": 1.25},
    }


def test_a_trace_written_by_one_process_is_read_and_rated_by_another(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-0123456789abcdefXYZ"
    monkeypatch.setenv("OPENAI_API_KEY", secret)  # the writer redacts it: the database never holds it
    tid = "20260102030405-abc123"
    out = subprocess.run(
        [sys.executable, "-c", WRITER, pg_url, str(tmp_path / "replica1"), json.dumps(trace(tid, secret))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == tid

    reader = CRAG.from_config(kb={"path": str(tmp_path / "replica2"), "state_uri": pg_url, "name": "handbook"})
    rows = reader.traces.list()
    assert [r["id"] for r in rows] == [tid]
    assert rows[0]["status"] == "answered" and rows[0]["latency_ms"] == pytest.approx(1250.0)
    got = reader.traces.get("20260102030405")  # a prefix works across processes too
    assert secret not in json.dumps(got) and "***" in got["question"]
    assert [r["id"] for r in reader.traces.list(grep="1940")] == [tid]
    assert reader.traces.list(grep="1941") == []
    assert [(f["rating"], f["comment"]) for f in reader.traces.feedback()] == [("down", "wrong year")]
    report = export_feedback(reader.traces)  # the feedback export sees the other process's rating
    assert report.ratings == {"down": 1} and report.count(0) == 1
    assert not (tmp_path / "replica2").exists()  # nothing was written to this replica's folder

    other = CRAG.from_config(kb={"path": str(tmp_path / "replica2"), "state_uri": pg_url, "name": "catalogue"})
    assert other.traces.list() == [] and other.traces.count() == 0  # another knowledge base's rows
    with pytest.raises(TraceNotFoundError):
        other.traces.get(tid)


def test_the_same_trace_id_in_two_knowledge_bases_is_two_traces(pg_url: str, tmp_path: Path) -> None:
    a = CRAG.from_config(kb={"path": str(tmp_path / "a"), "state_uri": pg_url}).traces  # named "a", its folder
    b = CRAG.from_config(kb={"path": str(tmp_path / "b"), "state_uri": pg_url}).traces
    a.save({"id": "20260101000000-000001", "question": "in a"})
    b.save({"id": "20260101000000-000001", "question": "in b"})
    a.rate("20260101000000-000001", "up")
    assert a.get("20260101000000-000001")["question"] == "in a" and b.get("20260101000000")["question"] == "in b"
    assert len(a.feedback()) == 1 and b.feedback() == []


def test_crag_trace_list_reads_a_shared_database_from_an_empty_folder(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from crag.cli import app

    monkeypatch.setenv("CRAG_KB__STATE_URI", pg_url)
    monkeypatch.setenv("CRAG_KB__NAME", "handbook")
    writer = CRAG.from_config(kb={"path": str(tmp_path / "replica1")})
    tid = writer.traces.save(trace("20260102030405-def456", "no-secret-here"))
    result = CliRunner().invoke(app, ["trace", "list", "--kb", str(tmp_path / "replica2"), "--json"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in result.output.splitlines()] == [tid]  # JSON lines
    assert not (tmp_path / "replica2").exists()  # no folder needed, none created
