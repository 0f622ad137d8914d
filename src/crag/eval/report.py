"""The evaluation report: ``report.md`` and a self-contained ``report.html``.

Both come from one list of blocks (headings, paragraphs, tables, figures) so they say
the same thing; the HTML embeds its figures as base64 PNG so it can be mailed as one
file, the Markdown links the PNGs written beside it. Files are written atomically at the
end of a run: a folder holds either a finished report or none.

>>> from crag.eval.report import percentile
>>> percentile([1.0, 2.0, 3.0, 4.0], 50)
2.5
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crag.eval.judge import CRITERIA
from crag.eval.stats import PairedResult, mean_ci, paired_test

if TYPE_CHECKING:
    from crag.eval.runner import EvalRun

__all__ = ["REPORT_FILES", "Report", "build_report", "paired_results", "percentile", "row_stats", "write_report"]

REPORT_FILES = ("report.md", "report.html", "summary.json")
RATE_METRICS = ("accuracy", "exact_match", "f1", "context_recall", "success")
# Rates over a subset: answerable questions whose context holds gold, unanswerable ones.
SUBSET_RATES = ("false_refusal", "answer_given_context", "abstention")
ACTIONS = ("correct", "ambiguous", "incorrect", "rag")
LABELS = {
    "accuracy": "accuracy (gold in answer)",
    "exact_match": "exact match",
    "f1": "token F1",
    "context_recall": "context recall",
    "success": "success (non-refusal)",
    "false_refusal": "false refusal (context held gold)",
    "answer_given_context": "gold in answer | gold in context",
    "abstention": "refused | unanswerable",
    "context_tokens": "context tokens",
    "latency": "latency s",
    "llm_calls": "LLM calls",
    "searches": "searches",
}


@dataclass
class Block:
    """One piece of the report: kind is h1/h2/h3/p/table/img."""

    kind: str
    text: str = ""
    headers: Sequence[str] = ()
    rows: Sequence[Sequence[str]] = ()
    png: bytes = b""
    name: str = ""


@dataclass
class Report:
    """The rendered report, before it is written: blocks plus a JSON summary.

    ### Usage example
    >>> r = Report([Block("h1", "Eval"), Block("table", headers=["a"], rows=[["1"]])], {})
    >>> print(r.markdown().splitlines()[2])
    | a |
    """

    blocks: list[Block]
    summary: dict[str, Any]

    def markdown(self) -> str:
        out: list[str] = []
        for b in self.blocks:
            if b.kind in ("h1", "h2", "h3"):
                out += ["#" * int(b.kind[1]) + " " + b.text, ""]
            elif b.kind == "p":
                out += [b.text, ""]
            elif b.kind == "table":
                out.append("| " + " | ".join(_md_cell(h) for h in b.headers) + " |")
                out.append("|" + "|".join("---" for _ in b.headers) + "|")
                out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
                out.append("")
            elif b.kind == "img":
                out += [f"![{b.text}](plots/{b.name})", ""]
        return "\n".join(out)

    def html(self) -> str:
        body: list[str] = []
        for b in self.blocks:
            if b.kind in ("h1", "h2", "h3"):
                body.append(f"<{b.kind}>{html.escape(b.text)}</{b.kind}>")
            elif b.kind == "p":
                cls = ' class="warn"' if b.text.startswith("**PARTIAL") else ""
                body.append(f"<p{cls}>{_inline(b.text)}</p>")
            elif b.kind == "table":
                head = "".join(f"<th>{html.escape(h)}</th>" for h in b.headers)
                rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in b.rows)
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif b.kind == "img":
                data = base64.b64encode(b.png).decode("ascii")
                body.append(
                    f'<figure><img alt="{html.escape(b.text)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(b.text)}</figcaption></figure>"
                )
        return (
            "<!doctype html><html><head><meta charset='utf-8'><title>crag eval report</title><style>"
            "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
            "table{border-collapse:collapse;margin:1em 0;font-size:14px}"
            "th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}"
            "th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}"
            "img{max-width:100%}.warn{background:#fff3cd;padding:.5em;border:1px solid #e0c000}"
            "</style></head><body>" + "\n".join(body) + "</body></html>"
        )


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _inline(text: str) -> str:
    # Only **bold** and `code` are used in paragraphs.
    import re

    t = html.escape(text)
    t = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", t)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", t)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (linear interpolation); NaN for no values."""
    return float(np.percentile(values, q)) if len(values) else float("nan")


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


# -- aggregation ------------------------------------------------------------------------
def _answered(run: EvalRun, mode: str, ids: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for i in ids:
        rec = run.records.get((i, mode))
        if rec is not None and not rec.get("error"):
            out.append(rec)
    return out


def _judge_scores(run: EvalRun, qid: str, mode: str) -> dict[str, float] | None:
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
    recs = _answered(run, mode, ids)
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
    judged = [s for s in (_judge_scores(run, r["id"], mode) for r in recs) if s]
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
    from crag.grade.metrics import auroc

    labels, scores = [], []
    for m in run.modes:
        for r in _answered(run, m, ids):
            s = _judge_scores(run, r["id"], m)
            if s:
                labels.append(int(r["metrics"]["accuracy"] > 0))
                scores.append(float(s["accuracy"]))
    if len(set(labels)) < 2:
        return None
    return round(float(auroc(labels, scores)), 3)


def _metric_value(run: EvalRun, rec: dict[str, Any], metric: str) -> float | None:
    if metric in RATE_METRICS:
        # Gold-answer rates mean nothing for a question no source answers.
        return _rate(rec, metric) if rec["id"] in _answerable_ids(run) else None
    if metric == "context_tokens":
        return float(rec["metrics"][metric])
    if metric.startswith("judge_"):
        s = _judge_scores(run, rec["id"], rec["mode"])
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
            va, vb = _metric_value(run, ra, metric), _metric_value(run, rb, metric)
            if va is not None and vb is not None:
                a.append(va)
                b.append(vb)
        if a:
            out.append(paired_test(metric, a, b, seed=run.seed))
    return out


# -- the report -------------------------------------------------------------------------
def build_report(run: EvalRun, *, title: str = "crag eval: RAG vs CRAG", notes: Sequence[str] = ()) -> Report:
    """Tables, paired tests and figures for a finished (or partial) run."""
    ids = [it.id for it in run.items]
    blocks: list[Block] = [Block("h1", title)]
    failed = run.failed
    total = len(run.items) * len(run.modes)
    if failed:
        blocks.append(
            Block(
                "p",
                f"**PARTIAL RUN**: {len(failed)} of {total} (question, mode) pairs have no answer; "
                "the figures cover the answered pairs only. Run the same command again to retry them.",
            )
        )
    engine = run.meta.get("engine") or {}
    settings = ", ".join(f"{k} `{v}`" for k, v in engine.items())
    blocks.append(
        Block(
            "p",
            f"{len(run.items)} questions × modes {', '.join(run.modes)}; seed {run.seed}; "
            f"dataset fingerprint `{run.meta.get('dataset', '?')}`. {settings}",
        )
    )
    blocks += [Block("p", n) for n in notes]

    judged = any(_judge_scores(run, i, m) for i in ids for m in run.modes)
    summary: dict[str, Any] = {"complete": not failed, "failed": len(failed), "modes": list(run.modes)}

    blocks.append(Block("h2", "Overall"))
    overall = {m: row_stats(run, m, ids) for m in run.modes}
    summary["overall"] = overall
    blocks.append(_stats_table(["mode"], [([m], overall[m]) for m in run.modes], judged))

    groupings = [("lang", "language"), ("type", "question type")]
    if any("expected_action" in it.extra for it in run.items):
        groupings.append(("expected_action", "expected action"))
    summary["groups"] = {}
    for key, label in groupings:
        groups = sorted({it.group(key) for it in run.items})
        blocks.append(Block("h2", f"By {label}"))
        rows = []
        for g in groups:
            gids = [it.id for it in run.items if it.group(key) == g]
            for m in run.modes:
                st = row_stats(run, m, gids)
                summary["groups"].setdefault(key, {}).setdefault(g, {})[m] = st
                rows.append(([g, m], st))
        blocks.append(_stats_table([label, "mode"], rows, judged))

    # By the action each mode actually took (rag always "rag"): where answers are lost.
    blocks.append(Block("h2", "By action taken"))
    rows = []
    for m in run.modes:
        taken: dict[str, list[str]] = {}
        for i in ids:
            rec = run.records.get((i, m))
            if rec is not None and not rec.get("error"):
                taken.setdefault(str(rec.get("action", "?")), []).append(i)
        for a in sorted(taken, key=lambda a: ACTIONS.index(a) if a in ACTIONS else len(ACTIONS)):
            st = row_stats(run, m, taken[a])
            summary["groups"].setdefault("action", {}).setdefault(a, {})[m] = st
            rows.append(([a, m], st))
    blocks.append(_stats_table(["action taken", "mode"], rows, judged))

    if "rag" in run.modes and "crag" in run.modes:
        metrics = [*RATE_METRICS, "context_tokens", "latency", "llm_calls", "searches"]
        if judged:
            metrics += [f"judge_{c}" for c in CRITERIA]
        tests = paired_results(run, "rag", "crag", ids, metrics)
        summary["paired"] = [t.to_dict() for t in tests]
        blocks.append(Block("h2", "CRAG − RAG: paired tests"))
        blocks.append(
            Block(
                "p",
                "Difference of means over the questions both modes answered; 95% CI from a paired "
                "bootstrap (5000 resamples, seeded); p from a two-sided paired t-test "
                "(— when every difference is equal).",
            )
        )
        blocks.append(_tests_table(tests))
        if groupings:
            group_rows: list[list[str]] = []
            for key, label in groupings:
                for g in sorted({it.group(key) for it in run.items}):
                    gids = [it.id for it in run.items if it.group(key) == g]
                    for t in paired_results(run, "rag", "crag", gids, ("accuracy", "f1")):
                        group_rows.append([f"{label} = {g}", LABELS[t.metric], *_test_cells(t)])
            blocks.append(Block("h3", "By group (accuracy and F1)"))
            blocks.append(Block("table", headers=["group", "metric", *_TEST_HEADERS], rows=group_rows))

    if judged:
        agreement = judge_agreement(run, ids)
        summary["judge_agreement_auroc"] = agreement
        if agreement is not None:
            blocks.append(Block("h3", "How far to trust the judge"))
            blocks.append(
                Block(
                    "p",
                    f"AUROC of the judge's accuracy score for telling answers that contain a gold answer "
                    f"from those that do not: **{agreement:.2f}** (1.0 = the judge ranks every correct "
                    "answer above every wrong one; 0.5 = no better than chance).",
                )
            )

    if "crag" in run.modes and any("expected_action" in it.extra for it in run.items):
        blocks += _confusion(run)

    blocks += _figures(run, ids, judged)

    if failed:
        blocks.append(Block("h2", "Unanswered pairs"))
        missing = [
            [qid, mode, (run.records.get((qid, mode)) or {}).get("error") or "not run"] for qid, mode in failed[:200]
        ]
        blocks.append(Block("table", headers=["id", "mode", "error"], rows=missing))
    jfail = [j for j in run.judgements.values() if j.get("error")]
    if jfail:
        blocks.append(Block("h2", "Judge failures (not scored)"))
        blocks.append(Block("table", headers=["id", "reason"], rows=[[j["id"], j["error"]] for j in jfail[:200]]))
    summary["judge_failures"] = len(jfail)
    return Report(blocks, summary)


def _stats_table(keys: Sequence[str], rows: Sequence[tuple[list[str], dict[str, Any]]], judged: bool) -> Block:
    headers = [
        *keys,
        "n",
        "accuracy",
        "EM",
        "F1",
        "ctx recall",
        "ctx tokens",
        "success",
        "false refusal",
        "ans | ctx",
        "abstain | unans.",
        "latency p50 s",
        "latency p90 s",
        "LLM calls",
        "searches",
        "actions",
    ]
    if judged:
        headers += [f"judge {c}" for c in CRITERIA]
    out = []
    for key, st in rows:
        actions = " ".join(f"{a}:{n}" for a, n in sorted(st["actions"].items()))
        row = [
            *key,
            f"{st['n']}/{st['asked']}",
            _fmt(st["accuracy"]),
            _fmt(st["exact_match"]),
            _fmt(st["f1"]),
            _fmt(st["context_recall"]),
            _fmt(st["context_tokens"], 0),
            _fmt(st["success"]),
            _rate_cell(st["false_refusal"], st["context_holds_gold"]),
            _fmt(st["answer_given_context"]),
            _rate_cell(st["abstention"], st["unanswerable"]),
            _fmt(st["latency_p50"], 2),
            _fmt(st["latency_p90"], 2),
            _fmt(st["llm_calls"], 2),
            _fmt(st["searches"], 2),
            actions,
        ]
        if judged:
            row += [_fmt(st[f"judge_{c}"], 2) for c in CRITERIA]
        out.append(row)
    return Block("table", headers=headers, rows=out)


def _rate_cell(rate: float, n: int) -> str:
    """A rate with its denominator, so 0.000 of 3 is not mistaken for 0.000 of 100."""
    return "—" if not n else f"{_fmt(rate)} ({round(rate * n)}/{n})"


_TEST_HEADERS = ["n", "RAG", "CRAG", "CRAG − RAG", "95% CI", "t", "p"]


def _test_cells(t: PairedResult) -> list[str]:
    digits = 1 if t.metric in ("context_tokens",) else 3
    return [
        str(t.n),
        _fmt(t.mean_a, digits),
        _fmt(t.mean_b, digits),
        ("+" if t.mean_diff > 0 else "") + _fmt(t.mean_diff, digits),
        f"[{_fmt(t.ci_low, digits)}, {_fmt(t.ci_high, digits)}]",
        _fmt(t.t, 2),
        (_fmt(t.p, 4) + (" *" if t.significant else "")) if t.p is not None else "—",
    ]


def _tests_table(tests: Sequence[PairedResult]) -> Block:
    rows = [[LABELS.get(t.metric, t.metric.replace("_", " ")), *_test_cells(t)] for t in tests]
    return Block("table", headers=["metric", *_TEST_HEADERS], rows=rows)


def _confusion(run: EvalRun) -> list[Block]:
    rows = []
    for exp in ("correct", "ambiguous", "incorrect"):
        its = [it for it in run.items if it.extra.get("expected_action") == exp]
        if not its:
            continue
        got = Counter(
            rec.get("action") for it in its if (rec := run.records.get((it.id, "crag"))) and not rec.get("error")
        )
        rows.append([exp, *(str(got.get(a, 0)) for a in ACTIONS[:3])])
    return [
        Block("h2", "CRAG action vs expected action"),
        Block("table", headers=["expected \\ taken", *ACTIONS[:3]], rows=rows),
    ]


# -- figures ----------------------------------------------------------------------------
def _figures(run: EvalRun, ids: Sequence[str], judged: bool) -> list[Block]:
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
            vals = [v for r in _answered(run, mode, ids) if (v := _metric_value(run, r, metric)) is not None]
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
    data = [[float(r.get("latency") or 0.0) for r in _answered(run, m, ids)] for m in run.modes]
    if not any(data):
        return False
    ax.boxplot([d or [0.0] for d in data], showmeans=True)
    ax.set_xticks(range(1, len(run.modes) + 1), [m.upper() for m in run.modes])
    ax.set_ylabel("seconds")
    return True


def _plot_confidence(ax: Any, run: EvalRun, ids: Sequence[str]) -> bool:
    recs = [r for r in _answered(run, "crag", ids) if r.get("confidence") is not None] if "crag" in run.modes else []
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


def write_report(run: EvalRun, output: str | Path, **kw: Any) -> list[Path]:
    """Write report.md, report.html, summary.json and plots/*.png into ``output``."""
    import json

    from crag.eval.runner import write_atomic

    out = Path(output)
    report = build_report(run, **kw)
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    for b in report.blocks:
        if b.kind == "img":
            write_atomic(plots / b.name, b.png)
    paths = [out / "summary.json", out / "report.html", out / "report.md"]
    write_atomic(paths[0], json.dumps(_clean(report.summary), ensure_ascii=False, indent=2, default=str))
    write_atomic(paths[1], report.html())
    # report.md last: its presence is what says "this run is finished".
    write_atomic(paths[2], report.markdown())
    return paths


def _clean(obj: Any) -> Any:
    # NaN is not JSON: an undefined mean becomes null.
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj
