"""Choose and check ``correction.verify_threshold`` away from the answer benchmark.

The Correct-path verification (:mod:`crag.correct.verify`) asks the LLM whether the kept
strips state the answer. Its threshold is chosen here, on the evaluator's held-out
*test* pairs (``data/eval_pairs/test.jsonl``: articles never trained on), with every
``data/hard`` question left out, so the answer benchmark plays no part in it:

* positives: a question with the window of its paragraph that holds the answer;
* hard negatives: another window of the same paragraph or article (on topic, no answer),
  the very mistake the verification is for; in English also SQuAD 2.0's unanswerable
  questions with their own passage.

For each language it prints AUROC and, per threshold, the share of positives kept
(Correct stands) and of negatives caught (sent to search). The rule for a model's
threshold: the highest that keeps ≥ 90 % of positives in each language — a wrong Correct
costs the answer, a wrong Ambiguous only a search; none (the model is not asked) when no
threshold of the grid does.

    python benchmarks/verify_correct.py --per-kind 50 [--model qwen2.5-coder-0.5b] [--serve]
    python benchmarks/verify_correct.py --pairs data/nearmiss/pairs_test.jsonl --per-kind 54

``--pairs`` reads other pairs: the near-miss set's (positives against passages about the same
company, product or person that lack the asked attribute) is the one the sentence gate's
model reading (:mod:`crag.generate.relation`) and its threshold are measured on.

``--serve`` reads P(yes) through the OpenAI-compatible path instead (the same GGUF behind
``llama_cpp.server`` on loopback, scored from its ``logprobs``), as a hosted model is.

Results: ``benchmarks/out/verify_correct-<model>.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import track
from rich.table import Table

from crag.correct.verify import verify_messages
from crag.grade.metrics import auroc

ROOT = Path(__file__).resolve().parents[1]
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
KINDS = {"zh": ("positive", "hard"), "en": ("positive", "hard", "unanswerable")}
NEAR_MISS = {"zh": ("positive", "near_miss"), "en": ("positive", "near_miss")}


def sample(per_kind: int, seed: int, pairs: Path | None = None) -> list[dict[str, Any]]:
    held = {json.loads(line)["question"] for line in (ROOT / "data/hard/questions.jsonl").open(encoding="utf-8")}
    kinds = NEAR_MISS if pairs is not None else KINDS
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for line in (pairs or ROOT / "data/eval_pairs/test.jsonl").open(encoding="utf-8"):
        r = json.loads(line)
        if r["query"] not in held and r["kind"] in kinds.get(r["lang"], ()):
            by[(r["lang"], r["kind"])].append(r)
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for key in sorted(by):
        rows = by[key]
        rng.shuffle(rows)
        out += rows[:per_kind]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--per-kind", type=int, default=50, help="pairs per language and kind")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--serve", action="store_true", help="score through llama_cpp.server's OpenAI API")
    ap.add_argument("--pairs", type=Path, help="pairs file (default: the evaluator's held-out test pairs)")
    args = ap.parse_args()
    if args.serve:
        from crag.llm.openai_chat import OpenAIChatLLM
        from crag.testing.llama_server import serve_gguf

        with serve_gguf(args.model) as base:
            run(args, OpenAIChatLLM(base, args.model, timeout=300), f"{args.model}-served")
    else:
        from crag.llm.llama_cpp import LlamaCppLLM

        llm = LlamaCppLLM(args.model, n_ctx=4096)
        llm.warm_up()
        run(args, llm, args.model)


def run(args: argparse.Namespace, llm: Any, label: str) -> None:
    """Score every sampled pair with ``llm``; print the table and write the results file."""
    pairs = sample(args.per_kind, args.seed, args.pairs)
    kinds = NEAR_MISS if args.pairs is not None else KINDS
    if args.pairs is not None:
        label += f"-{args.pairs.stem}"
    t0 = time.perf_counter()
    for r in track(pairs, description=f"P(yes) {label}"):
        r["p"] = llm.yes_probability(verify_messages(r["query"], [r["passage"]], r["lang"]))
    seconds = (time.perf_counter() - t0) / max(1, len(pairs))
    table = Table(title=f"Correct-path verification on held-out evaluator pairs ({label})")
    for col in ("lang", "pos / neg", "AUROC", *(f"keep / catch @{t}" for t in THRESHOLDS)):
        table.add_column(col)
    summary: dict[str, Any] = {"model": label, "pairs": len(pairs), "seconds_per_call": round(seconds, 2)}
    best: dict[str, float | None] = {}
    for lang in ("en", "zh"):
        rows = [r for r in pairs if r["lang"] == lang]
        pos = [r["p"] for r in rows if r["label"] == 1]
        neg = [r["p"] for r in rows if r["label"] == 0]
        cells = {t: (sum(p >= t for p in pos) / len(pos), sum(p < t for p in neg) / len(neg)) for t in THRESHOLDS}
        best[lang] = max([t for t, (keep, _) in cells.items() if keep >= 0.9], default=None)
        by_kind = {}
        for k in kinds[lang][1:]:
            kneg = [r["p"] for r in rows if r["kind"] == k]
            by_kind[k] = round(auroc([1] * len(pos) + [0] * len(kneg), pos + kneg), 3)
        summary[lang] = {
            "positives": len(pos),
            "negatives": len(neg),
            "auroc": round(auroc([1] * len(pos) + [0] * len(neg), pos + neg), 3),
            "auroc_by_negative_kind": by_kind,
            "keep_catch": {str(t): [round(k, 3), round(c, 3)] for t, (k, c) in cells.items()},
            "highest_threshold_keeping_90pct": best[lang],
        }
        table.add_row(
            lang, f"{len(pos)} / {len(neg)}", f"{summary[lang]['auroc']:.3f}",
            *(f"{k:.2f} / {c:.2f}" for k, c in cells.values()),
        )  # fmt: skip
    # None: no threshold of the grid keeps 90 % in some language, so the check is too weak to use.
    summary["chosen_threshold"] = None if None in best.values() else min(v for v in best.values() if v is not None)
    Console().print(table)
    Console().print(f"threshold keeping ≥ 90 % of positives in each language: {summary['chosen_threshold']}"
                    " (crag.correct.verify.CALIBRATED holds the bundled models')")  # fmt: skip
    out = ROOT / "benchmarks" / "out" / f"verify_correct-{label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()
