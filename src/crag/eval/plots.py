"""The report's figures: metric bars with CIs, actions, latency, confidence, judge scores.

matplotlib is optional (``pip install 'crag[eval]'``); without it the report says the
figures were skipped.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from crag.eval.aggregate import ACTIONS, RATE_METRICS, answered, metric_value
from crag.eval.blocks import Block
from crag.eval.judge import CRITERIA
from crag.eval.run import EvalRun
from crag.eval.stats import mean_ci

__all__ = ["figures"]


def figures(run: EvalRun, ids: Sequence[str], judged: bool) -> list[Block]:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: figures go to PNG bytes
        import matplotlib.pyplot as plt
    except ImportError:
        return [Block("p", "Figures skipped: install matplotlib (`pip install 'crag[eval]'`).")]
    blocks = [Block("h2", "Figures")]
    makers: list[tuple[str, str, Callable[[Any], bool]]] = [
        ("metrics.png", "Mean of each metric per mode, with bootstrap 95% CI", lambda ax: _plot_metrics(ax, run, ids)),
        ("actions.png", "Actions taken (CRAG split by expected action when known)", lambda ax: _plot_actions(ax, run)),
        ("latency.png", "Latency per answer", lambda ax: _plot_latency(ax, run, ids)),
        (
            "confidence.png",
            "CRAG evaluator confidence, by whether the CRAG answer was correct",
            lambda ax: _plot_confidence(ax, run, ids),
        ),
    ]
    if judged:
        makers.append(
            ("judge.png", "LLM judge scores (1-5) per mode, with 95% CI", lambda ax: _plot_judge(ax, run, ids))
        )
    for name, caption, draw in makers:
        fig, ax = plt.subplots(figsize=(7.5, 3.8), dpi=100)
        try:
            if not draw(ax):
                continue
            fig.tight_layout()
            buf = io.BytesIO()
            fig.savefig(buf, format="png")
            blocks.append(Block("img", caption, png=buf.getvalue(), name=name))
        finally:
            plt.close(fig)
    return blocks


def _bars(ax: Any, run: EvalRun, ids: Sequence[str], metrics: Sequence[str], labels: Sequence[str]) -> bool:
    width = 0.8 / max(1, len(run.modes))
    drawn = False
    for k, mode in enumerate(run.modes):
        means, lows, highs = [], [], []
        for metric in metrics:
            vals = [v for r in answered(run, mode, ids) if (v := metric_value(run, r, metric)) is not None]
            mean, low, high = mean_ci(vals, seed=run.seed)
            means.append(0.0 if math.isnan(mean) else mean)
            lows.append(0.0 if math.isnan(low) else mean - low)
            highs.append(0.0 if math.isnan(high) else high - mean)
            drawn = drawn or bool(vals)
        x = np.arange(len(metrics)) + k * width
        ax.bar(x, means, width, yerr=[lows, highs], capsize=3, label=mode.upper())
    ax.set_xticks(np.arange(len(metrics)) + width * (len(run.modes) - 1) / 2, labels)
    ax.legend()
    return drawn


def _plot_metrics(ax: Any, run: EvalRun, ids: Sequence[str]) -> bool:
    ok = _bars(ax, run, ids, RATE_METRICS, ["accuracy", "EM", "F1", "ctx recall", "success"])
    ax.set_ylim(0, 1.05)
    return ok


def _plot_judge(ax: Any, run: EvalRun, ids: Sequence[str]) -> bool:
    ok = _bars(ax, run, ids, [f"judge_{c}" for c in CRITERIA], list(CRITERIA))
    ax.set_ylim(0, 5.3)
    return ok


def _plot_actions(ax: Any, run: EvalRun) -> bool:
    if "crag" not in run.modes:
        return False
    cats = sorted({it.extra.get("expected_action", "all") for it in run.items})
    bottom = np.zeros(len(cats))
    for action in ACTIONS[:3]:
        counts = np.array(
            [
                sum(
                    1
                    for it in run.items
                    if it.extra.get("expected_action", "all") == c
                    and (rec := run.records.get((it.id, "crag")))
                    and rec.get("action") == action
                )
                for c in cats
            ],
            dtype=float,
        )
        ax.bar(cats, counts, bottom=bottom, label=action)
        bottom += counts
    ax.set_xlabel("expected action" if cats != ["all"] else "")
    ax.set_ylabel("questions")
    ax.legend(title="CRAG action")
    return bool(bottom.sum())


def _plot_latency(ax: Any, run: EvalRun, ids: Sequence[str]) -> bool:
    data = [[float(r.get("latency") or 0.0) for r in answered(run, m, ids)] for m in run.modes]
    if not any(data):
        return False
    ax.boxplot([d or [0.0] for d in data], showmeans=True)
    ax.set_xticks(range(1, len(run.modes) + 1), [m.upper() for m in run.modes])
    ax.set_ylabel("seconds")
    return True


def _plot_confidence(ax: Any, run: EvalRun, ids: Sequence[str]) -> bool:
    recs = [r for r in answered(run, "crag", ids) if r.get("confidence") is not None] if "crag" in run.modes else []
    if not recs:
        return False
    right = [r["confidence"] for r in recs if r["metrics"]["accuracy"]]
    wrong = [r["confidence"] for r in recs if not r["metrics"]["accuracy"]]
    bins = np.linspace(0, 1, 11)
    ax.hist([right, wrong], bins=bins, label=["answer correct", "answer wrong"], stacked=False)
    ax.set_xlabel("evaluator confidence")
    ax.set_ylabel("questions")
    ax.legend()
    return True
