"""Evaluation harness: prove (or disprove) that CRAG beats plain RAG on your questions.

``crag eval --dataset questions.jsonl`` answers every question in both modes with the
same engine, scores the answers against gold answers (and optionally with a blind LLM
judge), runs paired significance tests and writes a Markdown + HTML report.

>>> from crag.eval import score_answer
>>> score_answer("The Ming dynasty followed [1].", ["Ming dynasty"], []).accuracy
1.0

Modules: ``datasets`` (JSONL loading), ``metrics`` (EM, F1, gold match, context recall),
``judge`` (LLM judge), ``stats`` (paired t-test, bootstrap CI), ``run`` (a run's data and
folder layout), ``runner`` (resumable runs), ``aggregate`` (per-mode rates and paired
tests), ``report`` with ``blocks`` and ``plots`` (report.md / report.html / figures). The
``crag eval`` command itself is :mod:`crag.cli.eval`.
Figures need matplotlib and the t-test prefers scipy: ``pip install 'crag[eval]'``.
"""

from crag.eval.datasets import EvalItem, balanced_sample, load_dataset
from crag.eval.judge import JudgeVerdict, LLMJudge
from crag.eval.metrics import AnswerMetrics, exact_match, gold_match, score_answer, token_f1
from crag.eval.report import build_report, write_report
from crag.eval.run import EvalRun
from crag.eval.runner import EvalOptions, run_eval
from crag.eval.stats import PairedResult, paired_test

__all__ = [
    "AnswerMetrics",
    "EvalItem",
    "EvalOptions",
    "EvalRun",
    "JudgeVerdict",
    "LLMJudge",
    "PairedResult",
    "balanced_sample",
    "build_report",
    "exact_match",
    "gold_match",
    "load_dataset",
    "paired_test",
    "run_eval",
    "score_answer",
    "token_f1",
    "write_report",
]
