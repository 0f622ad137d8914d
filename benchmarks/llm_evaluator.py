"""The LLM-judge and ensemble evaluators on the held-out test pairs, with the embedded model.

For a sample of test queries per language (all of each query's labelled passages), grades
with: ``llm`` in ``logprob`` and ``batch`` modes (the embedded Qwen2.5-Coder GGUF), and
``ensemble`` (trained + heuristic). Reports AUROC, accuracy at the best threshold, median
seconds per 10 passages, and the LLM judge's parse-failure rate (replies that could not be
read and fell back to another evaluator).

    python benchmarks/llm_evaluator.py [--queries 10] [--model qwen2.5-coder-1.5b]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from crag.config import load_settings
from crag.embed.cache import make_embedder
from crag.grade.metrics import accuracy_at, auroc, best_threshold
from crag.registry import EVALUATORS, LLMS, BackendDeps
from crag.types import Passage, Query

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=10, help="test queries per language")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--modes", default="logprob,batch")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    by_query: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for line in (ROOT / "data" / "eval_pairs" / "test.jsonl").read_text("utf-8").splitlines():
        r = json.loads(line)
        by_query[(r["lang"], r["query"])].append(r)
    rng = random.Random(args.seed)
    sample: dict[str, list[tuple[str, list[dict]]]] = {}
    for lang in ("zh", "en"):
        keys = sorted(k for k, v in by_query.items() if k[0] == lang and {0, 1} <= {p["label"] for p in v})
        sample[lang] = [(q, by_query[(lang, q)][:6]) for _, q in rng.sample(keys, min(args.queries, len(keys)))]

    base = load_settings(llm={"model": args.model, "max_tokens": 384})
    emb = make_embedder(base)
    llm = LLMS.create(base.llm.backend, base)
    llm.warm_up()  # type: ignore[attr-defined]
    runs = [(f"llm/{m}", {"backend": "llm", "llm_mode": m}) for m in args.modes.split(",")]
    runs += [("ensemble", {"backend": "ensemble"}), ("trained", {"backend": "trained"})]
    table = Table(title=f"Evaluators on held-out pairs ({args.queries} queries per language, LLM {args.model})")
    for col in ("evaluator", "lang", "pairs", "AUROC", "accuracy", "s / 10 passages", "parse failures"):
        table.add_column(col, justify="left" if col in ("evaluator", "lang") else "right")
    results = []
    for name, ev_cfg in runs:
        cfg = load_settings(llm={"model": args.model, "max_tokens": 384}, evaluator=ev_cfg)
        ev = EVALUATORS.create(ev_cfg["backend"], cfg, BackendDeps(embedder=emb, llm_factory=lambda: llm))
        for lang, items in sample.items():
            labels, scores, per10 = [], [], []
            calls0 = getattr(ev, "calls", 0)
            fails0 = getattr(ev, "parse_failures", 0)
            for query, pairs in items:
                t0 = time.perf_counter()
                out = ev.grade(Query.of(query), [Passage(str(i), p["passage"]) for i, p in enumerate(pairs)])
                per10.append((time.perf_counter() - t0) / len(pairs) * 10)
                labels += [p["label"] for p in pairs]
                scores += [g.score for g in out.grades]
            calls = getattr(ev, "calls", 0) - calls0
            fails = getattr(ev, "parse_failures", 0) - fails0
            th = best_threshold(labels, scores)
            row = {
                "evaluator": name,
                "lang": lang,
                "pairs": len(labels),
                "auroc": auroc(labels, scores),
                "accuracy": accuracy_at(labels, scores, th),
                "threshold": th,
                "s_per_10": statistics.median(per10),
                "llm_calls": calls,
                "parse_failures": fails,
            }
            results.append(row)
            rate = f"{fails}/{calls}" if calls else "—"
            table.add_row(
                name,
                lang,
                str(len(labels)),
                f"{row['auroc']:.3f}",
                f"{row['accuracy']:.3f}",
                f"{row['s_per_10']:.2f}",
                rate,
            )
            Console().print(table.rows[-1] if False else f"{name} {lang} done")
    Console().print(table)
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    (out / "llm_evaluator.json").write_text(json.dumps({"model": args.model, "rows": results}, indent=2))


if __name__ == "__main__":
    main()
