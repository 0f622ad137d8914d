"""One evaluation run as data: its output folder's files and the answers it holds.

Both the runner (which writes the folder) and the report (which reads the run) depend
on this module, and not on each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crag.eval.datasets import EvalItem

__all__ = ["MODES", "REPORT_FILES", "RESULTS", "RUN_META", "STATUS", "EvalRun"]

RESULTS = "results.jsonl"  # one line per finished (question, mode) pair and per judgement
RUN_META = "run.json"  # what the results belong to: dataset fingerprint, model, evaluator
STATUS = "status.json"  # complete or not, how many done
REPORT_FILES = ("report.md", "report.html", "summary.json")
MODES = ("rag", "crag")


@dataclass
class EvalRun:
    """Everything a report needs: the questions, the last record per pair, the verdicts."""

    items: list[EvalItem]
    modes: tuple[str, ...]
    records: dict[tuple[str, str], dict[str, Any]]
    judgements: dict[str, dict[str, Any]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    @property
    def failed(self) -> list[tuple[str, str]]:
        """Pairs with no answer (errored or never run)."""
        return [
            (it.id, m)
            for it in self.items
            for m in self.modes
            if (it.id, m) not in self.records or self.records[(it.id, m)].get("error")
        ]

    @property
    def complete(self) -> bool:
        return not self.failed
