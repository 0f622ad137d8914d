"""The evaluation report: ``report.md``, ``report.html``, ``summary.json`` and ``plots/``.

:func:`build_report` lays out tables, paired tests and figures as blocks
(:mod:`crag.eval.blocks`) from the numbers of :mod:`crag.eval.aggregate`. Files are
written atomically at the end of a run: a folder holds either a finished report or none.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crag.atomic import write_atomic
from crag.eval.aggregate import (
    ACTIONS,
    RATE_METRICS,
    judge_agreement,
    judge_scores,
    paired_results,
    row_stats,
)
from crag.eval.blocks import Block, Report, fmt
from crag.eval.judge import CRITERIA
from crag.eval.plots import figures
from crag.eval.run import EvalRun
from crag.eval.stats import PairedResult
from crag.redact import redact, redact_text

__all__ = ["LABELS", "build_report", "write_report"]

LABELS = {
    "accuracy": "accuracy (gold in answer)",
    "exact_match": "exact match",
    "f1": "token F1",
    "context_recall": "context recall",
    "success": "success (non-refusal)",
    "false_refusal": "false refusal (context held gold)",
    "answer_given_context": "gold in answer | gold in context",
    "citation_precision": "citation precision (the gold's sentence cites a source holding it)",
    "abstention": "refused | unanswerable",
    "context_tokens": "context tokens",
    "latency": "latency s",
    "llm_calls": "LLM calls",
    "searches": "searches",
}


def build_report(run: EvalRun, *, title: str = "crag eval: RAG vs CRAG", notes: Sequence[str] = ()) -> Report:
    """Tables, paired tests and figures for a finished (or partial) run."""
    ids = [it.id for it in run.items]
    failed = run.failed
    blocks = _header(run, title, notes)
    judged = any(judge_scores(run, i, m) for i in ids for m in run.modes)
    summary: dict[str, Any] = {"complete": not failed, "failed": len(failed), "modes": list(run.modes)}

    blocks.append(Block("h2", "Overall"))
    overall = {m: row_stats(run, m, ids) for m in run.modes}
    summary["overall"] = overall
    blocks.append(_stats_table(["mode"], [([m], overall[m]) for m in run.modes], judged))

    groupings = [("lang", "language"), ("type", "question type")]
    if any("expected_action" in it.extra for it in run.items):
        groupings.append(("expected_action", "expected action"))
    summary["groups"] = {}
    blocks += _by_group(run, groupings, judged, summary["groups"])
    blocks += _by_action(run, ids, judged, summary["groups"])
    if "rag" in run.modes and "crag" in run.modes:
        blocks += _paired(run, ids, groupings, judged, summary)
    if judged:
        blocks += _judge_trust(run, ids, summary)
    if "crag" in run.modes and any("expected_action" in it.extra for it in run.items):
        blocks += _confusion(run)
    blocks += figures(run, ids, judged)
    blocks += _failures(run, summary)
    return Report(blocks, summary)


def _header(run: EvalRun, title: str, notes: Sequence[str]) -> list[Block]:
    """The title, a PARTIAL warning when pairs are missing, and what was run with what."""
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
    return blocks + [Block("p", n) for n in notes]


def _by_group(run: EvalRun, groupings: Sequence[tuple[str, str]], judged: bool, summary: dict[str, Any]) -> list[Block]:
    """One table per grouping (language, question type, expected action); stats into ``summary``."""
    blocks: list[Block] = []
    for key, label in groupings:
        groups = sorted({it.group(key) for it in run.items})
        blocks.append(Block("h2", f"By {label}"))
        rows = []
        for g in groups:
            gids = [it.id for it in run.items if it.group(key) == g]
            for m in run.modes:
                st = row_stats(run, m, gids)
                summary.setdefault(key, {}).setdefault(g, {})[m] = st
                rows.append(([g, m], st))
        blocks.append(_stats_table([label, "mode"], rows, judged))
    return blocks


def _by_action(run: EvalRun, ids: Sequence[str], judged: bool, summary: dict[str, Any]) -> list[Block]:
    """By the action each mode actually took (rag always "rag"): where answers are lost."""
    rows = []
    for m in run.modes:
        taken: dict[str, list[str]] = {}
        for i in ids:
            rec = run.records.get((i, m))
            if rec is not None and not rec.get("error"):
                taken.setdefault(str(rec.get("action", "?")), []).append(i)
        for a in sorted(taken, key=lambda a: ACTIONS.index(a) if a in ACTIONS else len(ACTIONS)):
            st = row_stats(run, m, taken[a])
            summary.setdefault("action", {}).setdefault(a, {})[m] = st
            rows.append(([a, m], st))
    return [Block("h2", "By action taken"), _stats_table(["action taken", "mode"], rows, judged)]


def _paired(
    run: EvalRun, ids: Sequence[str], groupings: Sequence[tuple[str, str]], judged: bool, summary: dict[str, Any]
) -> list[Block]:
    """CRAG − RAG: paired bootstrap CIs and t-tests, overall and per group."""
    metrics = [*RATE_METRICS, "context_tokens", "latency", "llm_calls", "searches"]
    if judged:
        metrics += [f"judge_{c}" for c in CRITERIA]
    tests = paired_results(run, "rag", "crag", ids, metrics)
    summary["paired"] = [t.to_dict() for t in tests]
    blocks = [
        Block("h2", "CRAG − RAG: paired tests"),
        Block(
            "p",
            "Difference of means over the questions both modes answered; 95% CI from a paired "
            "bootstrap (5000 resamples, seeded); p from a two-sided paired t-test "
            "(— when every difference is equal).",
        ),
        _tests_table(tests),
    ]
    if groupings:
        group_rows: list[list[str]] = []
        for key, label in groupings:
            for g in sorted({it.group(key) for it in run.items}):
                gids = [it.id for it in run.items if it.group(key) == g]
                for t in paired_results(run, "rag", "crag", gids, ("accuracy", "f1")):
                    group_rows.append([f"{label} = {g}", LABELS[t.metric], *_test_cells(t)])
        blocks.append(Block("h3", "By group (accuracy and F1)"))
        blocks.append(Block("table", headers=["group", "metric", *_TEST_HEADERS], rows=group_rows))
    return blocks


def _judge_trust(run: EvalRun, ids: Sequence[str], summary: dict[str, Any]) -> list[Block]:
    """How far the LLM judge's accuracy score agrees with the gold match (AUROC)."""
    agreement = judge_agreement(run, ids)
    summary["judge_agreement_auroc"] = agreement
    if agreement is None:
        return []
    return [
        Block("h3", "How far to trust the judge"),
        Block(
            "p",
            f"AUROC of the judge's accuracy score for telling answers that contain a gold answer "
            f"from those that do not: **{agreement:.2f}** (1.0 = the judge ranks every correct "
            "answer above every wrong one; 0.5 = no better than chance).",
        ),
    ]


def _failures(run: EvalRun, summary: dict[str, Any]) -> list[Block]:
    """Pairs without an answer and judge replies that could not be scored."""
    blocks: list[Block] = []
    if run.failed:
        blocks.append(Block("h2", "Unanswered pairs"))
        missing = [
            [qid, mode, (run.records.get((qid, mode)) or {}).get("error") or "not run"]
            for qid, mode in run.failed[:200]
        ]
        blocks.append(Block("table", headers=["id", "mode", "error"], rows=missing))
    jfail = [j for j in run.judgements.values() if j.get("error")]
    if jfail:
        blocks.append(Block("h2", "Judge failures (not scored)"))
        blocks.append(Block("table", headers=["id", "reason"], rows=[[j["id"], j["error"]] for j in jfail[:200]]))
    summary["judge_failures"] = len(jfail)
    return blocks


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
        "cite prec.",
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
            fmt(st["accuracy"]),
            fmt(st["exact_match"]),
            fmt(st["f1"]),
            fmt(st["context_recall"]),
            fmt(st["context_tokens"], 0),
            fmt(st["success"]),
            _rate_cell(st["false_refusal"], st["context_holds_gold"]),
            fmt(st["answer_given_context"]),
            _rate_cell(st["citation_precision"], st["cited_checked"]),
            _rate_cell(st["abstention"], st["unanswerable"]),
            fmt(st["latency_p50"], 2),
            fmt(st["latency_p90"], 2),
            fmt(st["llm_calls"], 2),
            fmt(st["searches"], 2),
            actions,
        ]
        if judged:
            row += [fmt(st[f"judge_{c}"], 2) for c in CRITERIA]
        out.append(row)
    return Block("table", headers=headers, rows=out)


def _rate_cell(rate: float, n: int) -> str:
    """A rate with its denominator, so 0.000 of 3 is not mistaken for 0.000 of 100."""
    return "—" if not n else f"{fmt(rate)} ({round(rate * n)}/{n})"


_TEST_HEADERS = ["n", "RAG", "CRAG", "CRAG − RAG", "95% CI", "t", "p"]


def _test_cells(t: PairedResult) -> list[str]:
    digits = 1 if t.metric in ("context_tokens",) else 3
    return [
        str(t.n),
        fmt(t.mean_a, digits),
        fmt(t.mean_b, digits),
        ("+" if t.mean_diff > 0 else "") + fmt(t.mean_diff, digits),
        f"[{fmt(t.ci_low, digits)}, {fmt(t.ci_high, digits)}]",
        fmt(t.t, 2),
        (fmt(t.p, 4) + (" *" if t.significant else "")) if t.p is not None else "—",
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


def write_report(run: EvalRun, output: str | Path, **kw: Any) -> list[Path]:
    """Write report.md, report.html, summary.json and plots/*.png into ``output``."""
    out = Path(output)
    report = build_report(run, **kw)
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    for b in report.blocks:
        if b.kind == "img":
            write_atomic(plots / b.name, b.png)
    paths = [out / "summary.json", out / "report.html", out / "report.md"]
    summary = redact(json_safe(report.summary))  # reports quote answers and errors: redacted like any output
    write_atomic(paths[0], json.dumps(summary, ensure_ascii=False, indent=2, default=str))
    write_atomic(paths[1], redact_text(report.html()))
    # report.md last: its presence is what says "this run is finished".
    write_atomic(paths[2], redact_text(report.markdown()))
    return paths


def json_safe(obj: Any) -> Any:
    """``obj`` with every NaN replaced by ``None``: NaN is not JSON, so an undefined mean becomes null.

    >>> json_safe({"abstention": float("nan"), "n": [1, 2.5]})
    {'abstention': None, 'n': [1, 2.5]}
    """
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj
