"""``crag grade``, ``crag calibrate``, ``crag evaluator label`` and ``crag evaluator train``.

Input lines are validated before any work starts, outputs are written to a temporary
file and renamed when complete, so a failure never leaves a partial file that looks done.
An evaluator that asks an LLM grades each question behind a guard of its own, as a request
does (``correction.deadline_seconds`` and the token budgets); a grading the guard stopped
falls back to ``evaluator.fallback`` and says so.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from crag.atomic import write_atomic
from crag.cli._common import ConfigOpt, KbOpt, engine, err, friendly, out
from crag.errors import ConfigError, InputError
from crag.grade.classify import query_for
from crag.grade.pairs import read_jsonl_objects, read_pairs, score_pairs
from crag.protocols import Evaluator
from crag.types import Passage

if TYPE_CHECKING:
    from crag.engine import CRAG
    from crag.grade.calibrate import Calibration
    from crag.grade.trained import Model
    from crag.pipeline.guard import GuardedEvaluator

__all__ = ["calibrate", "evaluator_app", "grade"]

evaluator_app = typer.Typer(help="Label data for and train the lightweight evaluator.", no_args_is_help=True)


def _make(config: Path | None, kb: Path | None, evaluator: str | None) -> CRAG:
    extra = {"evaluator": {"backend": evaluator}} if evaluator else {}
    return engine(config, kb, **extra)


def _guarded(rag: CRAG, evaluator: Evaluator | None = None) -> GuardedEvaluator:
    """``evaluator`` (default the engine's) grading each question behind a request's guard."""
    from crag.pipeline.guard import GuardedEvaluator, RequestGuard

    return GuardedEvaluator(evaluator or rag.evaluator, lambda: rag.llm, RequestGuard(rag.settings))


def _warn_degraded(ev: GuardedEvaluator, questions: int) -> None:
    """One line on stderr when some gradings fell back (the guard stopped the LLM, or it failed)."""
    if ev.degraded:
        first = next(iter(ev.degraded.values()))
        err.print(f"[yellow]degraded:[/] {len(ev.degraded)} of {questions} questions: {escape(first)}", soft_wrap=True)


@friendly
def grade(
    input: Annotated[Path, typer.Option("--input", "-i", help='JSONL of {"query", "passage"} lines.')],
    evaluator: Annotated[str | None, typer.Option(help="heuristic, trained, llm, ensemble.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="JSONL output (default stdout).")] = None,
    config: ConfigOpt = None,
    kb: KbOpt = None,
) -> None:
    """Score (query, passage) pairs; each line comes back with "score" and "reason"."""
    rows = read_pairs(input)
    rag = _make(config, kb, evaluator)
    ev = _guarded(rag)
    scored = score_pairs(ev, rows, settings=rag.settings)
    lines = (
        json.dumps({**r, "score": round(s, 4), "reason": why} | _degraded(ev, r), ensure_ascii=False) + "\n"
        for r, (s, why) in zip(rows, scored, strict=True)
    )
    if output is None:
        sys.stdout.writelines(lines)
    else:
        write_atomic(output, lines)
        err.print(f"wrote {len(rows)} graded pairs to {output}")
    _warn_degraded(ev, len({r["query"] for r in rows}))


def _degraded(ev: GuardedEvaluator, row: dict[str, Any]) -> dict[str, str]:
    """``{"degraded": why}`` for a pair whose question's grading fell back, else nothing."""
    why = ev.degraded.get(row["query"])
    return {"degraded": why} if why else {}


@friendly
def calibrate(
    labels: Annotated[Path, typer.Option(help='JSONL of {"query", "passage", "label": 0|1}.')],
    evaluator: Annotated[str | None, typer.Option(help="Evaluator to calibrate (default from config).")] = None,
    objective: Annotated[str, typer.Option(help="accuracy or cost.")] = "accuracy",
    cost_wrong: Annotated[float, typer.Option(help="Cost of trusting an irrelevant passage.")] = 10.0,
    cost_discard: Annotated[float, typer.Option(help="Cost of discarding a relevant passage.")] = 3.0,
    cost_search: Annotated[float, typer.Option(help="Cost of one external search.")] = 1.0,
    plot: Annotated[Path | None, typer.Option(help="Reliability diagram PNG.")] = Path("reliability.png"),
    write_config: Annotated[Path | None, typer.Option(help="Write upper/lower into this TOML file.")] = None,
    config: ConfigOpt = None,
    kb: KbOpt = None,
) -> None:
    """Choose tau_low/tau_high on labelled pairs and report AUROC, accuracy, precision/recall."""
    from crag.grade.calibrate import write_thresholds

    rows = read_pairs(labels, need_label=True)
    rag = _make(config, kb, evaluator)
    ev = _guarded(rag)
    scores = [s for s, _ in score_pairs(ev, rows, settings=rag.settings)]
    _warn_degraded(ev, len({r["query"] for r in rows}))
    y = [int(r["label"]) for r in rows]
    costs = {"cost_wrong": cost_wrong, "cost_discard": cost_discard, "cost_search": cost_search}
    cal = _choose_thresholds(y, scores, objective, costs)
    out.print(_calibration_table(cal, title=f"Calibration of {rag.evaluator.name} on {cal.n} pairs ({objective})"))
    if plot is not None:
        _reliability_plot(y, scores, plot, title=f"{rag.evaluator.name}: reliability")
    if write_config is not None:
        write_thresholds(write_config, cal.upper, cal.lower)
        out.print(f"wrote evaluator.upper={cal.upper} evaluator.lower={cal.lower} to {write_config}")


# The rows of calibrate's table, in order; each is an attribute of the Calibration.
_CALIBRATION_ROWS = (
    "lower",
    "upper",
    "auroc",
    "accuracy",
    "cost",
    "precision_correct",
    "recall_correct",
    "precision_incorrect",
    "recall_incorrect",
    "ece",
)


def _choose_thresholds(y: list[int], scores: list[float], objective: str, costs: dict[str, float]) -> Calibration:
    """The thresholds for ``objective``; a bad objective or label set is an ``InputError``."""
    from crag.grade.calibrate import choose_thresholds

    try:
        return choose_thresholds(y, scores, objective=objective, **costs)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _calibration_table(cal: Calibration, *, title: str) -> Table:
    """The chosen thresholds, the metrics at them and how questions would be routed."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k in _CALIBRATION_ROWS:
        table.add_row(k, f"{getattr(cal, k):.4g}")
    table.add_row("routing", ", ".join(f"{k} {v:.0%}" for k, v in cal.share.items()))
    return table


def _reliability_plot(y: list[int], scores: list[float], plot: Path, *, title: str) -> None:
    """Draw the reliability diagram, or say on stderr why it was skipped."""
    from crag.grade.calibrate import reliability_plot

    try:
        reliability_plot(y, scores, plot, title=title)
        out.print(f"reliability diagram: {plot}")
    except ConfigError as exc:  # the thresholds matter more than the picture
        err.print(f"[yellow]skipped:[/] {escape(str(exc))}", soft_wrap=True)


@evaluator_app.command("label")
@friendly
def label(
    questions: Annotated[Path | None, typer.Option(help='JSONL with a "question" per line.')] = None,
    from_traces: Annotated[bool, typer.Option(help="Also use questions of past traces.")] = True,
    output: Annotated[Path, typer.Option("--output", "-o", help="Labelled pairs JSONL.")] = Path("labels.jsonl"),
    k: Annotated[int, typer.Option(help="Passages retrieved per question.")] = 5,
    limit: Annotated[int, typer.Option(help="Most questions to label.")] = 200,
    config: ConfigOpt = None,
    kb: KbOpt = None,
) -> None:
    """Have the LLM judge label (question, passage) pairs from your own knowledge base."""
    from crag.registry import EVALUATORS, BackendDeps

    rag = _make(config, kb, None)
    qs: list[str] = []
    if questions is not None:
        qs += [r["question"] for r in _read_questions(questions)]
    if from_traces:
        qs += [t["question"] for t in rag.traces.list(limit=limit) if t.get("question")]
    qs = list(dict.fromkeys(q for q in qs if q.strip()))[:limit]
    if not qs:
        raise InputError("no questions to label: pass --questions FILE or ask some questions first")
    judge = _guarded(
        rag, EVALUATORS.create("llm", rag.settings, BackendDeps(embedder=rag.embedder, llm_factory=lambda: rag.llm))
    )
    kbase = rag.knowledge_base()
    rows = []
    with out.status("labelling…") as status:
        for n, q in enumerate(qs, 1):
            status.update(f"labelling {n}/{len(qs)}: {q[:40]}")
            hits = kbase.search(q, k=k)
            ev = judge.grade(query_for(q, rag.settings), [Passage(h.chunk.id, h.chunk.text) for h in hits])
            for h, g in zip(hits, ev.grades, strict=True):
                rows.append(
                    {
                        "query": q,
                        "passage": h.chunk.text,
                        "label": int(g.score >= 0.5),
                        "score": round(g.score, 4),
                        "labeller": judge.name,
                    }
                )
    write_atomic(output, (json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    out.print(f"wrote {len(rows)} labelled pairs ({sum(1 for r in rows if r['label'])} relevant) to {output}")
    _warn_degraded(judge, len(qs))


@evaluator_app.command("train")
@friendly
def train(
    pairs: Annotated[
        list[Path], typer.Option(help="Labelled pairs JSONL ({query, passage, label}); repeat for more files.")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Model file (.npz).")] = Path("evaluator.npz"),
    with_builtin: Annotated[
        bool, typer.Option(help="Mix in the built-in CMRC 2018 + SQuAD 2.0 pairs (data/eval_pairs).")
    ] = False,
    builtin_pairs: Annotated[
        Path | None, typer.Option(help="Built-in pairs file (default: data/eval_pairs/train.jsonl).")
    ] = None,
    builtin_limit: Annotated[
        int,
        typer.Option(
            min=0, help="Built-in pairs to sample (0 = all 8,908; their vectors are embedded once, then cached)."
        ),
    ] = 1000,
    own_share: Annotated[
        float, typer.Option(min=0.01, max=0.99, help="Share of the training weight your pairs get when mixed.")
    ] = 0.25,
    warm_start: Annotated[
        bool,
        typer.Option(help="With --with-builtin: start from evaluator.model_path or the bundled model."),
    ] = True,
    config: ConfigOpt = None,
    kb: KbOpt = None,
) -> None:
    """Fit the lightweight evaluator on labelled pairs; point evaluator.model_path at the result."""
    from crag.grade.trained import Model, default_model_path

    own = _own_pairs(pairs)
    rag = _make(config, kb, None)
    rows, init = own, None
    if with_builtin:
        rows = _mixed_with_builtin(own, builtin_pairs, builtin_limit, own_share)
        if warm_start:
            init = Model.load(rag.settings.evaluator.model_path or default_model_path())
    tmp = output.with_name(output.stem + ".partial.npz")
    metrics = _train_showing_progress(rows, rag, tmp, init)
    os.replace(tmp, output)
    out.print(json.dumps(metrics, ensure_ascii=False, indent=2, default=str))
    out.print(f'model written to {output}; use it with [evaluator] backend = "trained", model_path = "{output}"')


def _own_pairs(paths: list[Path]) -> list[dict[str, Any]]:
    """The user's labelled pairs, every file validated first: never train on half a file."""
    from crag.grade.train import load_pairs

    own: list[dict[str, Any]] = []
    for path in paths:
        read_pairs(path, need_label=True)  # validate first: never train on half a file
        own += load_pairs(path)
    return own


def _mixed_with_builtin(
    own: list[dict[str, Any]], builtin_pairs: Path | None, limit: int, own_share: float
) -> list[dict[str, Any]]:
    """``own`` mixed with a sample of ``limit`` built-in pairs (all when 0), weighted to ``own_share``."""
    from crag.grade.train import builtin_pairs_path, mix_pairs, sample_rows

    source = builtin_pairs or builtin_pairs_path()
    builtin = sample_rows(read_pairs(source, need_label=True), limit or None)
    return mix_pairs(own, builtin, own_share=own_share)


def _train_showing_progress(rows: list[dict[str, Any]], rag: CRAG, tmp: Path, init: Model | None) -> dict[str, Any]:
    """Train on ``rows`` into ``tmp``, showing the embedding progress (the slow part) as it goes."""
    from crag.grade.train import train_rows

    with out.status("embedding and training…") as status:

        def progress(kind: str, done: int, total: int) -> None:
            status.update(f"embedding {kind} texts {done}/{total} (cached for the next run)…")

        return train_rows(rows, rag.embedder, tmp, init=init, progress=progress)


def _read_questions(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, row in read_jsonl_objects(path):
        if not isinstance(row.get("question"), str):
            raise InputError(f"{path} line {n}: field 'question' is missing or not a string")
        rows.append(row)
    return rows
