"""The numbers of an evaluation run: per-mode rates, latencies, judge scores, paired tests.

Gold-answer rates cover the answerable questions only; every figure of the report and
of ``summary.json`` comes from here.

>>> from crag.eval.aggregate import percentile
>>> percentile([1.0, 2.0, 3.0, 4.0], 50)
2.5
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from crag.eval.judge import CRITERIA
from crag.eval.run import EvalRun
from crag.eval.stats import PairedResult, paired_test
from crag.grade.metrics import auroc

__all__ = [
    "ACTIONS",
    "RATE_METRICS",
    "SUBSET_RATES",
    "answered",
    "judge_agreement",
    "judge_scores",
    "metric_value",
    "paired_results",
    "percentile",
    "row_stats",
]

RATE_METRICS = ("accuracy", "exact_match", "f1", "context_recall", "success")
# Rates over a subset: answerable questions whose context holds gold, unanswerable ones.
SUBSET_RATES = ("false_refusal", "answer_given_context", "abstention")
ACTIONS = ("correct", "ambiguous", "incorrect", "rag")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (linear interpolation); NaN for no values."""
    return float(np.percentile(values, q)) if len(values) else float("nan")


def answered(run: EvalRun, mode: str, ids: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for i in ids:
        rec = run.records.get((i, mode))
        if rec is not None and not rec.get("error"):
            out.append(rec)
    return out


def judge_scores(run: EvalRun, qid: str, mode: str) -> dict[str, float] | None:
    j = run.judgements.get(qid)
    if not j or j.get("error"):
        return None
    scores = (j.get("scores") or {}).get(mode)
    return scores if isinstance(scores, dict) else None


def row_stats(run: EvalRun, mode: str, ids: Sequence[str]) -> dict[str, Any]:
    """Means of one mode over ``ids``.

    Gold-answer rates cover the answerable questions only. ``false_refusal`` is the share
    of refusals among answerable questions whose final context holds a gold answer, and
    ``answer_given_context`` the share of gold answers among them: together they say how
    often generation loses an answer that retrieval and correction found. ``abstention``
    is the share of refusals among unanswerable questions (the right reply there).
    """
    recs = answered(run, mode, ids)
    answerable = _answerable_ids(run)
    ans = [r for r in recs if r["id"] in answerable]
    unans = [r for r in recs if r["id"] not in answerable]
    stats: dict[str, Any] = {"n": len(recs), "asked": len(ids), "answerable": len(ans)}
    for m in RATE_METRICS:
        stats[m] = _mean([_rate(r, m) for r in ans])
    with_gold = [r for r in ans if r["metrics"]["context_recall"] > 0]
    stats["context_holds_gold"] = len(with_gold)
    stats["false_refusal"] = _mean([_rate(r, "refused") for r in with_gold])
    stats["answer_given_context"] = _mean([_rate(r, "accuracy") for r in with_gold])
    cited = [float(r["cited_gold"]) for r in ans if r.get("cited_gold") is not None]
    stats["citation_precision"], stats["cited_checked"] = _mean(cited), len(cited)
    stats["unanswerable"] = len(unans)
    stats["abstention"] = _mean([_rate(r, "refused") for r in unans])
    stats["context_tokens"] = _mean([r["metrics"]["context_tokens"] for r in recs])
    lat = [float(r.get("latency") or 0.0) for r in recs]
    stats["latency_p50"], stats["latency_p90"] = percentile(lat, 50), percentile(lat, 90)
    stats["latency_mean"] = _mean(lat)
    calls = [r["llm_calls"] for r in recs if r.get("llm_calls") is not None]
    stats["llm_calls"] = _mean(calls)
    stats["searches"] = _mean([r.get("searches", 0) for r in recs])
    stats["actions"] = dict(Counter(r.get("action", "?") for r in recs))
    judged = [s for s in (judge_scores(run, r["id"], mode) for r in recs) if s]
    for c in CRITERIA:
        stats[f"judge_{c}"] = float(np.mean([s[c] for s in judged])) if judged else float("nan")
    stats["judged"] = len(judged)
    return stats


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def _rate(rec: dict[str, Any], metric: str) -> float:
    m = rec["metrics"]
    if metric == "refused" and "refused" not in m:  # records written before the field existed
        return 1.0 - float(m["success"])
    return float(m[metric])


def _answerable_ids(run: EvalRun) -> set[str]:
    return {it.id for it in run.items if it.answerable}


def judge_agreement(run: EvalRun, ids: Sequence[str]) -> float | None:
    """AUROC of judge accuracy vs gold-answer match over judged answers (None if one class)."""
    labels, scores = [], []
    for m in run.modes:
        for r in answered(run, m, ids):
            s = judge_scores(run, r["id"], m)
            if s:
                labels.append(int(r["metrics"]["accuracy"] > 0))
                scores.append(float(s["accuracy"]))
    if len(set(labels)) < 2:
        return None
    return round(float(auroc(labels, scores)), 3)


def metric_value(run: EvalRun, rec: dict[str, Any], metric: str) -> float | None:
    if metric in RATE_METRICS:
        # Gold-answer rates mean nothing for a question no source answers.
        return _rate(rec, metric) if rec["id"] in _answerable_ids(run) else None
    if metric == "context_tokens":
        return float(rec["metrics"][metric])
    if metric.startswith("judge_"):
        s = judge_scores(run, rec["id"], rec["mode"])
        return float(s[metric[6:]]) if s else None
    v = rec.get(metric)
    return None if v is None else float(v)


def paired_results(
    run: EvalRun, base: str, other: str, ids: Sequence[str], metrics: Sequence[str]
) -> list[PairedResult]:
    """Paired tests of ``other − base`` on the questions both answered (and were judged)."""
    out = []
    for metric in metrics:
        a: list[float] = []
        b: list[float] = []
        for i in ids:
            ra, rb = run.records.get((i, base)), run.records.get((i, other))
            if not ra or not rb or ra.get("error") or rb.get("error"):
                continue
            va, vb = metric_value(run, ra, metric), metric_value(run, rb, metric)
            if va is not None and vb is not None:
                a.append(va)
                b.append(vb)
        if a:
            out.append(paired_test(metric, a, b, seed=run.seed))
    return out
