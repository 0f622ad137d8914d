"""RAG vs CRAG on the shipped bilingual sample: the article's section 5.1 experiment.

The internal KB is ``data/sample/internal`` (deliberately missing part of the answers),
the external source is the corpus ``data/sample/external``; the same engine answers each
question in both modes with the embedded LLM. Gold-answer metrics always, a blind LLM
judge with ``--judge llm``; paired t-tests and bootstrap CIs for CRAG − RAG.

    python benchmarks/rag_vs_crag.py                       # 1.5B model, 40 questions
    python benchmarks/rag_vs_crag.py --model qwen2.5-coder-0.5b --limit 24 --judge llm

Results go to ``benchmarks/out/rag_vs_crag/`` (report.md, report.html, summary.json,
plots/, results.jsonl). The run is resumable: rerun the same command after an interruption.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console

from crag import CRAG
from crag.eval.aggregate import paired_results
from crag.eval.datasets import balanced_sample, load_dataset
from crag.eval.judge import LLMJudge
from crag.eval.report import write_report
from crag.eval.run import EvalRun
from crag.eval.runner import EvalOptions, load_results, run_eval

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", default=str(ROOT / ".cache" / "bench-eval-kb"))
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--limit", type=int, default=40, help="questions, balanced over lang x expected action")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--judge", choices=("llm", "none"), default="none")
    ap.add_argument("--judge-mode", choices=("auto", "json", "logprob"), default="auto")
    ap.add_argument("--output", default=str(ROOT / "benchmarks" / "out" / "rag_vs_crag"))
    ap.add_argument(
        "--report-only", action="store_true", help="report the results so far without answering (marked PARTIAL)"
    )
    args = ap.parse_args()

    console = Console(stderr=True)
    rag = CRAG.from_config(
        kb={"path": args.kb},
        llm={"model": args.model},
        search={"provider": "corpus", "corpus_path": str(SAMPLE / "external")},
    )
    if not args.report_only:
        rag.ingest([SAMPLE / "internal"])  # idempotent: unchanged files are skipped
    everything = load_dataset(SAMPLE / "questions.jsonl")
    items = balanced_sample(everything, args.limit, seed=args.seed, keys=("lang", "expected_action"))
    judge = LLMJudge(rag.llm, seed=args.seed, mode=args.judge_mode) if args.judge == "llm" else None

    t0 = time.perf_counter()

    def progress(done: int, total: int, label: str) -> None:
        console.print(f"[dim]{done}/{total} {time.perf_counter() - t0:6.0f}s {label}[/]")

    if args.report_only:
        # Same items, no engine calls: whatever results.jsonl holds, missing pairs marked PARTIAL.
        records, judgements = load_results(Path(args.output) / "results.jsonl")
        meta = json.loads((Path(args.output) / "run.json").read_text("utf-8"))
        run = EvalRun(items, ("rag", "crag"), records, judgements, meta, args.seed)
    else:
        run = run_eval(
            rag,
            items,
            args.output,
            EvalOptions(seed=args.seed),
            judge=judge,
            progress=progress,
            dataset_items=everything,
        )
    notes = [
        f"Model `{args.model}` (embedded llama.cpp), evaluator `{rag.settings.evaluator.backend}`, "
        f"external source: corpus `data/sample/external`; {len(items)} of {len(everything)} questions, "
        f"balanced over language × expected action (seed {args.seed}); judge: {args.judge} "
        f"(the same model as the generator when llm; mode {judge.mode if judge else '—'}).",
    ]
    paths = write_report(run, args.output, title="RAG vs CRAG on the bilingual sample", notes=notes)
    ids = [it.id for it in run.items]
    metrics = ["accuracy", "f1", "context_recall", "success", "latency"]
    if judge is not None:
        metrics += ["judge_accuracy", "judge_completeness", "judge_clarity", "judge_faithfulness"]
    for t in paired_results(run, "rag", "crag", ids, metrics):
        p = "—" if t.p is None else f"{t.p:.4f}"
        print(
            f"{t.metric:20s} RAG {t.mean_a:7.3f}  CRAG {t.mean_b:7.3f}  diff {t.mean_diff:+7.3f} "
            f"[{t.ci_low:+.3f}, {t.ci_high:+.3f}]  p={p}  n={t.n}"
        )
    print("report:", paths[-1])


if __name__ == "__main__":
    main()
