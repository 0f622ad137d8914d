"""``crag eval``: answer a dataset in RAG and CRAG mode and report the difference.

Registered as ``crag eval`` by :mod:`crag.cli`::

    crag eval --dataset data/sample/questions.jsonl --kb kb --search corpus \\
        --search-corpus data/sample/external --limit 24 --judge llm --output eval-out/

Interrupt it at any time: finished answers are kept in ``eval-out/results.jsonl`` and
the same command resumes where it stopped. The report (``report.md``, ``report.html``,
``summary.json``, ``plots/``) is written only when the run ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from crag.cli._common import ConfigOpt, KbOpt, engine, err, friendly, out, warm_search
from crag.errors import InputError

if TYPE_CHECKING:
    from crag.engine import CRAG
    from crag.eval.datasets import EvalItem
    from crag.eval.judge import JudgeMode, LLMJudge
    from crag.eval.run import EvalRun

__all__ = ["eval_command"]

RESUMABLE = "answers so far are saved; run the same command again to resume"


# The options, named once here so the command's signature reads as a list of what it takes.
DatasetOpt = Annotated[
    Path, typer.Option("--dataset", help="JSONL: {question, answers: [...], id?, type?, lang?} per line.")
]
ModesOpt = Annotated[str, typer.Option(help="Comma-separated modes to run: rag, crag.")]
JudgeOpt = Annotated[str, typer.Option(help="llm: blind LLM judge scores 1-5; none: gold metrics only.")]
JudgeConfigOpt = Annotated[
    Path | None,
    typer.Option(
        help="TOML config whose \\[llm] is the judge (default: the engine's LLM); its \\[correction] "
        "deadline and token budgets bound each judged question."
    ),
]
JudgeModeOpt = Annotated[
    str,
    typer.Option(
        help="auto: digit probabilities when the model offers them (embedded llama.cpp), else JSON; "
        "logprob; json (one call per question, best with a strong hosted judge)."
    ),
]
OutputOpt = Annotated[Path, typer.Option(help="Folder for results.jsonl and the report.")]
LimitOpt = Annotated[
    int | None, typer.Option(help="At most N questions, balanced over language, type and expected action.")
]
SeedOpt = Annotated[int, typer.Option(help="Seed for sampling, judge order and bootstrap.")]
SearchOpt = Annotated[str | None, typer.Option(help="External source: corpus, tavily, none.")]
SearchCorpusOpt = Annotated[Path | None, typer.Option(help="Folder or .jsonl for --search corpus.")]
SearchRecordOpt = Annotated[Path | None, typer.Option(help="Save every search response to this cassette.")]
SearchReplayOpt = Annotated[Path | None, typer.Option(help="Answer searches from this cassette.")]
EvaluatorOpt = Annotated[str | None, typer.Option(help="Evaluator: heuristic, trained, llm, ensemble.")]


@friendly(interrupted=RESUMABLE)
def eval_command(
    dataset: DatasetOpt,
    modes: ModesOpt = "rag,crag",
    judge: JudgeOpt = "none",
    judge_config: JudgeConfigOpt = None,
    judge_mode: JudgeModeOpt = "auto",
    output: OutputOpt = Path("eval-out"),
    limit: LimitOpt = None,
    seed: SeedOpt = 0,
    kb: KbOpt = None,
    config: ConfigOpt = None,
    search: SearchOpt = None,
    search_corpus: SearchCorpusOpt = None,
    search_record: SearchRecordOpt = None,
    search_replay: SearchReplayOpt = None,
    evaluator: EvaluatorOpt = None,
) -> None:
    """Compare RAG and CRAG on a dataset: gold-answer metrics, optional LLM judge, paired tests."""
    from crag.eval.judge import JudgeMode
    from crag.eval.runner import EvalOptions, run_eval

    _check_judge(judge, judge_mode)
    options = EvalOptions(
        modes=tuple(m.strip() for m in modes.split(",") if m.strip()),
        seed=seed,
        search=search,
        search_corpus=search_corpus,
        search_record=search_record,
        search_replay=search_replay,
    )
    everything, items = _questions(dataset, limit, seed)

    extra: dict[str, Any] = {"evaluator": {"backend": evaluator}} if evaluator else {}
    rag = engine(config, kb, **extra)
    # judge_mode is checked above
    grader = _judge(rag, judge_config, cast(JudgeMode, judge_mode), seed) if judge == "llm" else None

    if "crag" in options.modes and not (search_record or search_replay):
        warm_search(rag, search, search_corpus)
    with _progress_bar(len(items) * len(options.modes)) as progress:
        run = run_eval(rag, items, output, options, judge=grader, progress=progress, dataset_items=everything)
    _report(run, output)


def _report(run: EvalRun, output: Path) -> None:
    """Write the report under ``output`` and print its summary; exit 1 when some pairs have no answer."""
    from crag.eval.report import write_report

    paths = write_report(run, output)
    _print_summary(run)
    out.print(f"report: {escape(str(paths[-1]))}  {escape(str(paths[-2]))}")
    if not run.complete:
        err.print(
            f"[yellow]partial:[/] {len(run.failed)} pairs have no answer (see the report); "
            "run the same command again to retry them"
        )
        raise typer.Exit(1)


def _check_judge(judge: str, judge_mode: str) -> None:
    """Reject an unknown ``--judge`` or ``--judge-mode`` before anything loads."""
    if judge not in ("llm", "none"):
        raise InputError(f"unknown --judge {judge!r}; use llm or none")
    if judge_mode not in ("auto", "json", "logprob"):
        raise InputError(f"unknown --judge-mode {judge_mode!r}; use auto, json or logprob")


def _questions(dataset: Path, limit: int | None, seed: int) -> tuple[list[EvalItem], list[EvalItem]]:
    """The whole dataset, and the (at most ``limit``) questions to run, balanced over language,
    type and, when the dataset names it, the expected action."""
    from crag.eval.datasets import balanced_sample, load_dataset

    everything = load_dataset(dataset)
    keys = ["lang", "type"] + (["expected_action"] if any("expected_action" in i.extra for i in everything) else [])
    return everything, balanced_sample(everything, limit, seed=seed, keys=keys)


def _judge(rag: CRAG, judge_config: Path | None, mode: JudgeMode, seed: int) -> LLMJudge:
    """The blind judge: ``rag``'s LLM, or the one ``judge_config`` names. Each judged question is
    guarded like a request, by the deadline and token budgets of the config that names the
    model (its per-day total beside that config's knowledge base)."""
    from crag.engine import CRAG
    from crag.eval.judge import LLMJudge
    from crag.pipeline.guard import RequestGuard

    judged_by = CRAG.from_config(judge_config) if judge_config else rag
    return LLMJudge(judged_by.llm, seed=seed, mode=mode, guard=RequestGuard(judged_by.settings))


@contextlib.contextmanager
def _progress_bar(total: int) -> Iterator[Callable[[int, int, str], None]]:
    """A progress bar on stderr for ``total`` answers; yields the callback ``run_eval`` reports to."""
    with Progress(
        TextColumn("[bold]eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=total)

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=escape(label))

        yield progress


def _print_summary(run: Any) -> None:
    from crag.eval.aggregate import paired_results, row_stats

    ids = [it.id for it in run.items]
    table = Table(title=f"{len(ids)} questions")
    for col in ("mode", "accuracy", "F1", "ctx recall", "success", "latency p50 s", "LLM calls"):
        table.add_column(col, justify="right")
    for m in run.modes:
        st = row_stats(run, m, ids)
        table.add_row(
            m,
            f"{st['accuracy']:.3f}",
            f"{st['f1']:.3f}",
            f"{st['context_recall']:.3f}",
            f"{st['success']:.3f}",
            f"{st['latency_p50']:.2f}",
            f"{st['llm_calls']:.2f}",
        )
    out.print(table)
    if "rag" in run.modes and "crag" in run.modes:
        for t in paired_results(run, "rag", "crag", ids, ("accuracy", "f1")):
            p = "—" if t.p is None else f"{t.p:.4f}"
            out.print(
                f"CRAG − RAG {t.metric}: {t.mean_diff:+.3f} (95% CI {t.ci_low:+.3f} … {t.ci_high:+.3f}), "
                f"p = {p}, n = {t.n}"
            )
