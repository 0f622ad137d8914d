"""Tests of the trace system: spans, the contextvar tracer, redaction, the SQLite store, rendering."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from rich.console import Console

from crag.errors import InputError, TraceNotFoundError
from crag.state import TRACES, StateDB
from crag.trace.render import render_list, render_trace
from crag.trace.spans import Tracer, env_secrets, redact
from crag.trace.store import TraceStore, trace_status

pytestmark = pytest.mark.unit


def _text(renderable: object) -> str:
    console = Console(record=True, width=120, color_system=None)
    console.print(renderable)
    return console.export_text()


def _trace(trace_id: str, **fields: object) -> dict:
    return {"id": trace_id, "created_at": "2025-01-01T00:00:00.000+00:00", **fields}


def test_span_times_block_and_timings_sum_repeats() -> None:
    t = Tracer()
    with t.span("retrieve", k=5) as s:
        time.sleep(0.02)
    with t.span("retrieve"):
        time.sleep(0.01)
    assert s.tags == {"k": 5} and s.error is None
    assert s.duration_ms >= 15
    timings = t.timings()
    assert set(timings) == {"retrieve", "total"}
    assert timings["retrieve"] >= 0.025
    assert timings["total"] >= timings["retrieve"]


def test_span_records_error_and_reraises() -> None:
    t = Tracer()
    with pytest.raises(ValueError, match="boom"), t.span("evaluate"):
        raise ValueError("boom")
    assert t.spans[0].error == "ValueError: boom"
    assert t.spans[0].duration_ms >= 0


def test_nested_spans_know_parent_and_depth() -> None:
    t = Tracer()
    with t.span("correct"), t.span("web_search"):
        pass
    with t.span("generate"):
        pass
    got = [(s.name, s.depth, s.parent) for s in t.spans]
    assert got == [("correct", 0, None), ("web_search", 1, "correct"), ("generate", 0, None)]


def test_ids_record_append_and_to_dict() -> None:
    ids = [Tracer().id for _ in range(50)]
    assert len(set(ids)) == 50 and Tracer("given").id == "given"
    stamp, rand = ids[0].split("-")  # sortable: UTC time first
    assert len(stamp) == 14 and stamp.isdigit() and len(rand) == 6
    t = Tracer()
    t.record("action", "correct")
    t.record("action", "ambiguous")  # last write wins
    t.append("degradations", "a")
    t.append("degradations", "b")
    with t.span("retrieve"):
        pass
    d = t.to_dict()
    assert d["id"] == t.id and d["created_at"].endswith("+00:00")
    assert d["action"] == "ambiguous" and d["degradations"] == ["a", "b"]
    assert d["spans"][0]["name"] == "retrieve"
    assert set(d["timings"]) == {"retrieve", "total"}


def test_tracer_records_only_what_it_is_given() -> None:
    # No context variable: a tracer sees only what its owner records on it.
    t = Tracer()
    with t.span("outer"), t.span("inner") as inner:
        pass
    assert inner.parent == "outer" and inner.depth == 1
    assert t.events == {}


def test_redact_nested_and_env_secrets_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    data = {"a": ["x sk-123456789 y", {"k": ("sk-123456789",)}], "sk-123456789": 1, "n": 3}
    out = redact(data, ["sk-123456789", "abc"])
    assert out == {"a": ["x *** y", {"k": ("***",)}], "***": 1, "n": 3}
    assert redact("abc def", ["abc"]) == "abc def"  # under 6 chars: left alone
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-secret-value")
    monkeypatch.setenv("MY_PASSWORD", "hunter2hunter2")
    monkeypatch.setenv("CRAG_KB__PATH", "not-a-secret-value")
    found = env_secrets()
    assert "tvly-secret-value" in found and "hunter2hunter2" in found
    assert "not-a-secret-value" not in found


def test_save_redacts_env_secrets_from_json_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-fake-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    store = TraceStore(tmp_path / "traces.sqlite")
    leaky = _trace("20250101000000-aaaaaa", question=f"why {secret}?", errors=[f"401 for /?key={secret}"])
    store.save(leaky)
    got = store.get("20250101000000-aaaaaa")
    assert secret not in str(got) and "***" in got["question"]
    assert store.list()[0]["question"] == "why ***?"
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert secret.encode() not in raw


def test_store_creates_parent_and_migrates_once(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "kb" / "traces.sqlite"
    assert TraceStore(path).applied == ["traces_0001", "traces_0002"]
    assert TraceStore(path).applied == []  # idempotent on reopen
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT version_num FROM crag_traces_version").fetchall() == [(TRACES.head,)]


def _legacy_m001(path: Path) -> None:
    """A trace database as crag's first migration (m001_initial) wrote it: no status, no feedback."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
        db.execute(
            "CREATE TABLE traces (id TEXT PRIMARY KEY, created_at TEXT, question TEXT, mode TEXT, action TEXT, "
            "confidence REAL, latency_ms REAL, answer TEXT, data TEXT)"
        )
        db.execute("CREATE INDEX traces_created_at ON traces(created_at)")
        db.execute("INSERT INTO _migrations VALUES ('m001_initial', '2025-01-01')")
        for tid, data in (("t-answered", {"answer": "Paris [1]."}), ("t-failed", {"errors": ["llm down"]})):
            db.execute(
                "INSERT INTO traces (id, created_at, action, data) VALUES (?, '2025-01-01', 'correct', ?)",
                (tid, json.dumps({"id": tid, **data})),
            )


def test_an_old_database_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "traces.sqlite"
    _legacy_m001(path)
    store = TraceStore(path)
    assert store.applied == ["traces_0001", "traces_0002"]
    # its rows survive, with the status crag's own m003 migration would have given them
    assert {r["id"]: r["status"] for r in store.list()} == {"t-answered": "answered", "t-failed": "failed"}
    store.rate("t-answered", "up")  # the feedback table came with the upgrade
    assert store.feedback("t-answered")[0]["rating"] == "up"
    assert TraceStore(path).applied == []


def test_a_failing_migration_leaves_nothing_half_done(tmp_path: Path) -> None:
    path = tmp_path / "traces.sqlite"
    TraceStore(path).save(_trace("20250101000000-aaaaaa", action="correct"))
    scripts = tmp_path / "migrations"
    shutil.copytree(TRACES.location, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / "traces_0003_broken.py").write_text(
        "import sqlalchemy as sa\nfrom alembic import op\n"
        "revision = 'traces_0003'\ndown_revision = 'traces_0002'\n"
        "def upgrade():\n"
        "    op.create_table('half', sa.Column('x', sa.Text))\n"
        "    op.add_column('traces', sa.Column('tags', sa.Text))\n"
        "    raise RuntimeError('bad migration')\n"
    )
    broken = dataclasses.replace(TRACES, head="traces_0003", location=scripts)
    with pytest.raises(RuntimeError, match="bad migration"):
        TraceStore(StateDB.sqlite(path, broken))
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        columns = {r[1] for r in db.execute("PRAGMA table_info(traces)")}
        version = db.execute("SELECT version_num FROM crag_traces_version").fetchall()
    assert "half" not in tables and "tags" not in columns and version == [("traces_0002",)]
    assert TraceStore(path).count() == 1


def test_save_columns_upsert_and_count(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite")
    t = Tracer("20250101000000-abcdef")
    fields = dict(question="What is CRAG?", action="ambiguous", confidence=0.42, mode="crag", answer="A [1].")
    for key, value in {**fields, "timings": {"retrieve": 0.1, "total": 1.5}}.items():
        t.record(key, value)
    assert store.save(t.to_dict()) == t.id
    row = store.list()[0]
    assert row["action"] == "ambiguous" and row["confidence"] == pytest.approx(0.42)
    assert row["latency_ms"] == pytest.approx(1500.0) and "data" not in row
    t.record("action", "correct")
    store.save(t.to_dict())
    assert store.count() == 1 and store.get(t.id)["action"] == "correct"
    with pytest.raises(InputError):
        store.save({"question": "no id"})


def test_get_by_prefix_and_not_found(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite")
    store.save(_trace("20250101000000-aaaaaa"))
    store.save(_trace("20250102000000-bbbbbb"))
    assert store.get("20250102")["id"] == "20250102000000-bbbbbb"
    with pytest.raises(TraceNotFoundError, match="more than one"):
        store.get("202501")
    with pytest.raises(TraceNotFoundError, match=r"no trace with id 2025; run `crag trace list`"):
        store.get("2025")  # too short to be a prefix
    with pytest.raises(TraceNotFoundError, match="no trace with id zzzzzzzz"):
        store.get("zzzzzzzz")


def test_list_filters_and_order(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite")
    rows = [("correct", 0.9), ("incorrect", 0.1), ("ambiguous", 0.5), ("correct", 0.7), ("rag", None)]
    for i, (action, conf) in enumerate(rows):
        day = f"2025-01-0{i + 1}T00:00:00+00:00"
        store.save(dict(id=f"id-{i:06d}", created_at=day, action=action, confidence=conf))
    assert [r["id"] for r in store.list()] == [f"id-{i:06d}" for i in (4, 3, 2, 1, 0)]
    assert [r["id"] for r in store.list(limit=2)] == ["id-000004", "id-000003"]
    assert [r["id"] for r in store.list(action="correct")] == ["id-000003", "id-000000"]
    assert [r["id"] for r in store.list(min_confidence=0.5)] == ["id-000003", "id-000002", "id-000000"]
    assert [r["id"] for r in store.list(max_confidence=0.5)] == ["id-000002", "id-000001"]
    assert [r["id"] for r in store.list(action="correct", max_confidence=0.8)] == ["id-000003"]


def test_corrupt_database_is_moved_aside_and_started_anew(tmp_path: Path) -> None:
    # Traces must never take answers down: the damaged file is kept beside, a new one starts.
    path = tmp_path / "traces.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    store = TraceStore(path)
    assert store.recovered is not None and store.recovered.name.startswith("traces.sqlite.corrupt-")
    assert store.recovered.read_bytes().startswith(b"this is not sqlite")
    store.save(_trace("t-after"))
    assert store.count() == 1
    path.write_bytes(b"damaged while open" * 100)  # and again, after it was opened
    store.save(_trace("t-again"))
    assert store.count() == 1 and len(list(tmp_path.glob("traces.sqlite.corrupt-*"))) == 2


def test_concurrent_saves_from_threads(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite")
    barrier = threading.Barrier(8)

    def save(i: int) -> None:
        barrier.wait()
        for j in range(10):
            store.save(_trace(f"t{i}-{j:06d}"))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(save, range(8)))
    assert store.count() == 80


HIT = dict(id="c1", source="crag.md", title="CRAG 论文", text="CRAG 用评估器判断检索质量。", rank=1)
WEB = dict(title="Web", url="https://example.org/crag", content="CRAG paper", provider="duckduckgo")
# Built in slices only to keep the file short; every key the pipeline may save is present.
FULL: dict = dict(id="20250101000000-abcdef", created_at="2025-01-01T12:34:56.000+00:00", mode="crag")
FULL.update(question="什么是纠错检索增强生成？", action="ambiguous", confidence=0.42, query_type="factual")
FULL.update(thresholds={"upper": 0.59, "lower": -0.99, "rule": "max grade"}, evaluator="heuristic")
FULL.update(evaluation_reason="best passage only partly relevant", queries=["corrective RAG evaluator"])
FULL.update(retrieved=[{**HIT, "score": 0.8, "dense": 0.71, "keyword": 3.2}])
FULL.update(grades=[{"id": "c1", "score": 0.55, "reason": "mentions evaluator"}])
FULL.update(external=[{**WEB, "query": "corrective RAG evaluator"}])
FULL["strips"] = [
    {"text": "kept strip", "source": "crag.md", "origin": "internal", "score": 0.6, "kept": True},
    {"text": "dropped strip", "source": "x", "origin": "web", "score": 0.1, "kept": False},
]
FULL["context"] = [{"text": "CRAG 用评估器判断检索质量。", "source": "crag.md", "origin": "internal"}]
FULL["answer"] = "CRAG 是一种纠错式 RAG 方法 [1]。"
FULL["citations"] = [{"id": 1, "source": "crag.md", "title": "CRAG 论文", "url": "", "text": "..."}]
FULL["timings"] = {"retrieve": 0.05, "evaluate": 0.2, "generate": 1.0, "total": 1.3}
FULL.update(degradations=["web search timed out; used internal knowledge only"], errors=["LLMError: bad"])
FULL["escalated"] = {"from": "correct", "reply": "资料中没有提到。", "rejected": "declined", "llm_calls": 1}


def test_render_trace_shows_decision_path_including_chinese() -> None:
    out = _text(render_trace(FULL))
    needles = (
        "什么是纠错检索增强生成|ambiguous|0.42|0.59|-0.99|heuristic|CRAG 论文|0.55|mentions evaluator|"
        "corrective RAG evaluator|https://example.org/crag|duckduckgo|dropped strip|纠错式 RAG 方法 [1]|"
        "[1] CRAG 论文|generate|1300 ms|web search timed out|LLMError: bad|"
        "from correct: the reply was declined|资料中没有提到。"
    )
    for needle in needles.split("|"):
        assert needle in out, needle


def test_render_trace_says_when_correct_was_not_verified() -> None:
    trace = dict(FULL, action="ambiguous")
    trace["escalated"] = {"from": "correct", "reply": "", "rejected": "not verified", "llm_calls": 0,
                          "probability": 0.31, "threshold": 0.7}  # fmt: skip
    out = _text(render_trace(trace))
    assert "from correct: not verified (P(yes) 0.31 < 0.7)" in out
    confirmed = dict(FULL, verification={"probability": 0.93, "threshold": 0.7, "confirmed": True, "note": ""})
    assert "P(yes) 0.93 ≥ 0.7" in _text(render_trace(confirmed))


def test_render_trace_tolerates_missing_and_odd_keys() -> None:
    assert "trace" in _text(render_trace({}))
    odd = dict(id="x", retrieved="nope", grades=[1, None], timings={"a": "fast"}, thresholds=None)
    odd.update(external=[None], confidence="high", queries=None, answer="[bold]literal[/bold]", escalated="yes")
    out = _text(render_trace(odd))
    assert "[bold]literal[/bold]" in out  # user text is never parsed as markup


def test_render_list_rows() -> None:
    rows = [
        dict(id="20250101000000-abcdef", created_at="2025-01-01T12:34:56.000+00:00", action="incorrect"),
        dict(id="20250101000001-123456", created_at=None, question=None, action=None, confidence=None),
    ]
    rows[0].update(question="什么是 CRAG？" * 30, confidence=0.1, latency_ms=1234.5)
    out = _text(render_list(rows))
    needles = "20250101000000-abcdef|2025-01-01 12:34:56|incorrect|0.10|1234 ms|什么是 CRAG|20250101000001-123456"
    for needle in needles.split("|"):
        assert needle in out, needle
    assert all(len(line) <= 120 for line in out.splitlines())  # long questions are cut, not wrapped
    assert len(out.strip().splitlines()) == 4  # header, rule, one line per trace


def test_a_failed_request_is_listed_as_failed_not_by_its_action(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.sqlite")
    store.save(_trace("20250101000000-aaaaaa", action="correct") | {"errors": ["llm: model 'x' not found"]})
    store.save(_trace("20250101000001-bbbbbb", action="correct") | {"answer": "Paris [1].", "refused": False})
    store.save(_trace("20250101000002-cccccc", action="ambiguous") | {"answer": "No.", "refused": True})
    rows = {r["id"][-6:]: r["status"] for r in store.list()}
    assert rows == {"aaaaaa": "failed", "bbbbbb": "answered", "cccccc": "refused"}
    assert [r["id"][-6:] for r in store.list(status="failed")] == ["aaaaaa"]
    assert trace_status({"answer": "x", "abstained": True, "refused": True}) == "abstained"
    assert trace_status({"answer": "x", "degradations": ["search timed out"]}) == "degraded"
    # stopped by its reader (Ctrl-C, a closed tab): no answer, and nothing failed
    assert trace_status({"action": "correct", "cancelled": "closed by its reader"}) == "cancelled"
    assert trace_status({"cancelled": "closed", "errors": ["llm: timed out"]}) == "failed"
