"""Run every question through each mode of one engine, resumably.

Each finished (question, mode) pair is appended to ``<output>/results.jsonl`` at once
(flushed and fsynced), so an interrupted run loses at most the pair in flight; running
the same command again skips the pairs already done and retries the ones that failed.
``<output>/run.json`` records what the results belong to (dataset fingerprint, model,
evaluator, thresholds); resuming into a folder of another run is refused rather than
mixing incomparable answers. ``<output>/status.json`` says whether the run is complete.

>>> from crag.eval.runner import EvalOptions
>>> EvalOptions(modes=("rag", "crag"), seed=1).modes
('rag', 'crag')
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from crag.atomic import write_atomic
from crag.errors import (
    ConfigError,
    CragError,
    InputError,
    KnowledgeBaseError,
    LLMUnavailableError,
    ModelIntegrityError,
)
from crag.eval.datasets import EvalItem, dataset_fingerprint
from crag.eval.judge import LLMJudge
from crag.eval.metrics import cited_gold, score_answer
from crag.eval.run import MODES, REPORT_FILES, RESULTS, RUN_META, STATUS, EvalRun
from crag.redact import redact
from crag.request import Request
from crag.types import Answer, Query

__all__ = ["EvalOptions", "run_eval"]

# Errors that would fail every question the same way: stop instead of recording each.
FATAL = (ConfigError, KnowledgeBaseError, LLMUnavailableError, ModelIntegrityError)

Progress = Callable[[int, int, str], None]


class Engine(Protocol):
    """What the runner needs of an engine: :meth:`crag.CRAG.ask`."""

    def ask(self, request: Request, /) -> Answer: ...


@dataclass
class EvalOptions:
    """How to run an evaluation: which modes, which external source, which seed."""

    modes: tuple[str, ...] = MODES
    seed: int = 0
    search: str | None = None
    search_corpus: str | Path | None = None
    search_record: str | Path | None = None
    search_replay: str | Path | None = None

    def request(self, question: str, mode: str) -> Request:
        """The request for one question in one mode (an ``InputError`` for a bad question)."""
        return Request.of(
            question,
            mode=mode,
            search=self.search,
            search_corpus=self.search_corpus,
            search_record=self.search_record,
            search_replay=self.search_replay,
            no_cache=True,  # an evaluation measures the pipeline, not what an earlier run left
            via="eval",
        )

    def __post_init__(self) -> None:
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise InputError(f"unknown mode(s) {', '.join(bad) or '(none)'}; use --modes rag,crag")
        if len(set(self.modes)) != len(self.modes):
            raise InputError(f"--modes lists a mode twice: {','.join(self.modes)}")


def engine_signature(engine: Any) -> dict[str, Any]:
    """The settings that make results comparable; a resumed run must match them."""
    s = getattr(engine, "settings", None)
    if s is None:
        return {}
    return {
        "llm": f"{s.llm.backend}:{s.llm.model}",
        "evaluator": s.evaluator.backend,
        "thresholds": [s.evaluator.lower, s.evaluator.upper, s.evaluator.rule],
        "top_k": s.retrieval.top_k,
        "kb": str(s.kb.path),
    }


def run_eval(
    engine: Engine,
    items: Sequence[EvalItem],
    output: str | Path,
    options: EvalOptions,
    *,
    judge: LLMJudge | None = None,
    progress: Progress | None = None,
    dataset_items: Sequence[EvalItem] | None = None,
) -> EvalRun:
    """Answer ``items`` in every mode, appending each result to ``output/results.jsonl``.

    ``dataset_items`` (default ``items``) is the whole dataset, whose fingerprint ties the
    output folder to it, so ``--limit 10`` can later be resumed as ``--limit 40``.
    """
    out = Path(output)
    _prepare_output(out)
    meta = {
        "dataset": dataset_fingerprint(dataset_items if dataset_items is not None else items),
        "engine": engine_signature(engine),
        "judge": judge.label if judge else None,
    }
    _check_meta(out, meta)
    records, judgements = load_results(out / RESULTS)
    run = EvalRun(list(items), options.modes, records, judgements, meta, options.seed)
    total = len(items) * len(options.modes)
    done = sum(1 for it in items for m in options.modes if _ok(records.get((it.id, m))))
    _write_status(out, complete=False, done=done, total=total)
    if progress:
        progress(done, total, "")
    with (out / RESULTS).open("a", encoding="utf-8") as sink:
        for it in items:
            for mode in options.modes:
                if _ok(records.get((it.id, mode))):
                    continue
                rec = _answer_record(engine, it, mode, options)
                records[(it.id, mode)] = rec
                _append(sink, rec)
                done += 1
                # Cheap next to an LLM answer, and tells an observer how far a live run is.
                _write_status(out, complete=False, done=done, total=total)
                if progress:
                    progress(done, total, f"{it.id} [{mode}]")
            if judge is not None and it.id not in judgements:
                verdict = _judge(judge, it, options.modes, records)
                if verdict is not None:
                    judgements[it.id] = verdict
                    _append(sink, verdict)
    _write_status(out, complete=run.complete, done=done, total=total, failed=len(run.failed))
    return run


def _answer_record(engine: Engine, it: EvalItem, mode: str, options: EvalOptions) -> dict[str, Any]:
    base: dict[str, Any] = {"kind": "answer", "id": it.id, "mode": mode, "question": it.question}
    try:
        answer = engine.ask(options.request(it.question, mode))
    except FATAL:
        raise
    except CragError as exc:
        # One bad question (an LLM hiccup, a refused input) must not sink the whole run.
        return base | {"error": f"{type(exc).__name__}: {exc}"}
    context = [s.text for s in answer.context]
    metrics = score_answer(answer.answer, it.answers, context, refusal=getattr(answer, "refused", None))
    return base | {
        "answer": answer.answer,
        "action": answer.action.value,
        "confidence": answer.confidence,
        "latency": answer.timings.get("total", 0.0),
        "timings": answer.timings,
        "llm_calls": answer.usage.calls,  # every call of the request, grading and verification included
        "searches": len(answer.queries),
        "context": context,
        "context_origins": [s.origin for s in answer.context],
        "citations": len(answer.citations),
        # citation precision: the sentence that gives the gold cites a source holding it (None: nothing to check)
        "cited_gold": cited_gold(answer.answer, answer.citations, it.answers),
        "degradations": answer.degradations,
        "trace_id": answer.trace_id,
        "metrics": metrics.to_dict(),
        "error": None,
    }


def _judge(
    judge: LLMJudge, it: EvalItem, modes: Sequence[str], records: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, Any] | None:
    recs = {m: records.get((it.id, m)) for m in modes}
    if not all(_ok(r) for r in recs.values()):
        return None  # judge only complete sets, so every mode is scored on the same questions
    answers = {m: (r["answer"], r["context"]) for m, r in recs.items() if r is not None}
    verdict = judge.judge(Query(it.question, it.lang), it.answers, answers)
    return {"kind": "judge", "id": it.id} | verdict.to_dict()


def _ok(rec: dict[str, Any] | None) -> bool:
    return rec is not None and not rec.get("error")


def load_results(path: Path) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[str, dict[str, Any]]]:
    """The last answer record per (id, mode) and the last judge record per id.

    A line cut short by an interruption is ignored; its pair simply runs again.
    """
    records: dict[tuple[str, str], dict[str, Any]] = {}
    judgements: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return records, judgements
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict):
                continue
            if rec.get("kind") == "answer" and "id" in rec and "mode" in rec:
                records[(str(rec["id"]), str(rec["mode"]))] = rec
            elif rec.get("kind") == "judge" and "id" in rec:
                judgements[str(rec["id"])] = rec
    return records, judgements


def _append(sink: Any, rec: dict[str, Any]) -> None:
    # A model that echoes a key would write it here: eval output passes the one redaction point.
    sink.write(json.dumps(redact(rec), ensure_ascii=False, default=str) + "\n")
    sink.flush()
    os.fsync(sink.fileno())


def _prepare_output(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(f"--output {out} is a file; pass a folder (created if needed)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output folder {out}: {exc.strerror or exc}") from None
    results = out / RESULTS
    # A previous kill may have cut the last line; start ours on a fresh line.
    if results.exists() and results.stat().st_size:
        with results.open("rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
    # Reports from an earlier run would look final while this one is in progress.
    for name in REPORT_FILES:
        (out / name).unlink(missing_ok=True)


def _check_meta(out: Path, meta: dict[str, Any]) -> None:
    path = out / RUN_META
    if path.exists() and (out / RESULTS).exists():
        try:
            old = json.loads(path.read_text("utf-8"))
        except ValueError:
            old = {}
        for key in ("dataset", "engine"):
            if old.get(key) != meta[key]:
                raise InputError(
                    f"{out} holds results of another run ({key} differs: {old.get(key)} vs {meta[key]}); "
                    "pass a new --output or delete the folder"
                )
        # Judge verdicts from another judge model are not comparable: judge again.
        if old.get("judge") != meta["judge"] and meta["judge"]:
            _drop_judgements(out / RESULTS)
    write_atomic(path, json.dumps(meta | {"updated": _now()}, ensure_ascii=False, indent=2))


def _drop_judgements(results: Path) -> None:
    lines = results.read_text("utf-8", errors="replace").splitlines(keepends=True)
    write_atomic(results, "".join(x for x in lines if '"kind": "judge"' not in x))


def _write_status(out: Path, *, complete: bool, done: int, total: int, failed: int = 0) -> None:
    status = {"complete": complete, "done": done, "total": total, "failed": failed, "updated": _now()}
    write_atomic(out / STATUS, json.dumps(status, indent=2))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
