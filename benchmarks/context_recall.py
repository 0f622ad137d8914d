"""Does the final context hold a gold answer? CRAG against plain RAG, and at what size.

On the bundled bilingual sample (an internal knowledge base that deliberately lacks part
of the answers; the external corpus has them), every question runs retrieve → evaluate →
correct with the real embedder, store, evaluator and corpus search. Generation is not
what is measured here, so a scripted LLM stands in for it (the context is complete before
the generator is called). Reports, per language and expected action: the share of
questions whose final context contains a gold answer, context size in tokens, rounds and
searches per question.

Goal (issue: correction): CRAG's context holds a gold answer ≥ 90% of the time, with less
context than plain RAG on the Correct path.

    python benchmarks/context_recall.py [--limit 120] [--max-rounds 1]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from crag.config import load_settings
from crag.embed.cache import make_embedder
from crag.kb import KnowledgeBase, index_corpus
from crag.pipeline import Deps, run_crag, run_rag
from crag.registry import EVALUATORS, SEARCHES, BackendDeps
from crag.testing.fakes import ScriptedLLM
from crag.text import approx_tokens
from crag.trace.spans import Tracer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=120)
    ap.add_argument("--max-rounds", type=int, default=1)
    ap.add_argument("--evaluator", default="trained")
    ap.add_argument("--upper", type=float, default=None, help="tau_high (default from settings)")
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--lang", choices=["zh", "en"], default=None, help="only this language")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_settings(
            kb={"path": Path(tmp) / "kb"},
            evaluator={"backend": args.evaluator} | ({"upper": args.upper} if args.upper else {}),
            search={"provider": "corpus", "corpus_path": SAMPLE / "external"},
            correction={"max_rounds": args.max_rounds, "search_cache_ttl": 0}
            | ({"max_queries": args.max_queries} if args.max_queries else {}),
        )
        emb = make_embedder(cfg)
        kb = KnowledgeBase(cfg.kb.path, emb, chunking=cfg.chunking, retrieval=cfg.retrieval)
        kb.ingest([SAMPLE / "internal"])
        index = functools.partial(index_corpus, index_root=cfg.kb.path / "corpora", embedder=emb)
        deps = Deps(
            kb=kb,
            evaluator=EVALUATORS.create(cfg.evaluator.backend, cfg, BackendDeps(embedder=emb)),
            llm=ScriptedLLM(["(not measured)"]),
            search=SEARCHES.create("corpus", cfg, BackendDeps(embedder=emb, corpus_index=index)),
        )
        deps.search.warm_up()  # type: ignore[union-attr]
        qs = [json.loads(x) for x in (SAMPLE / "questions.jsonl").read_text("utf-8").splitlines() if x.strip()]
        rows = []
        t0 = time.perf_counter()
        qs = [q for q in qs if args.lang in (None, q["lang"])]
        for q in qs[: args.limit]:
            for mode, run in (("rag", run_rag), ("crag", run_crag)):
                tracer = Tracer()
                a = run(q["question"], deps, cfg, tracer)
                trace = tracer.to_dict()
                texts = [s.text for s in a.context]
                rows.append(
                    {
                        "lang": q["lang"],
                        "expected": q["expected_action"],
                        "mode": mode,
                        "action": a.action.value,
                        "gold": any(g in t for g in q["answers"] for t in texts),
                        "tokens": sum(approx_tokens(t) for t in texts),
                        "searches": len(trace.get("queries", [])) if mode == "crag" else 0,
                        "rounds": trace.get("rounds", {}).get("rounds", 1 if trace.get("queries") else 0),
                        "abstained": bool(trace.get("abstained")),
                    }
                )
        elapsed = time.perf_counter() - t0

    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for r in rows:
        for key in ((r["mode"], "all", "all"), (r["mode"], r["lang"], "all"), (r["mode"], "all", r["expected"])):
            groups[key].append(r)
    table = Table(title=f"Final context holds a gold answer ({len(rows) // 2} questions, evaluator {args.evaluator})")
    for col in ("slice", "RAG gold", "CRAG gold", "RAG tokens", "CRAG tokens", "CRAG searches/q", "CRAG rounds/q"):
        table.add_column(col, justify="right" if col != "slice" else "left")
    summary = {}
    for lang, exp in [
        ("all", "all"),
        ("zh", "all"),
        ("en", "all"),
        ("all", "correct"),
        ("all", "ambiguous"),
        ("all", "incorrect"),
    ]:
        rag, crag = groups[("rag", lang, exp)], groups[("crag", lang, exp)]
        if not crag:
            continue
        s = {
            "rag_gold": statistics.mean(r["gold"] for r in rag),
            "crag_gold": statistics.mean(r["gold"] for r in crag),
            "rag_tokens": statistics.mean(r["tokens"] for r in rag),
            "crag_tokens": statistics.mean(r["tokens"] for r in crag),
            "searches": statistics.mean(r["searches"] for r in crag),
            "rounds": statistics.mean(r["rounds"] for r in crag),
        }
        name = f"{lang}/{exp}"
        summary[name] = s
        table.add_row(
            name,
            f"{s['rag_gold']:.0%}",
            f"{s['crag_gold']:.0%}",
            f"{s['rag_tokens']:.0f}",
            f"{s['crag_tokens']:.0f}",
            f"{s['searches']:.2f}",
            f"{s['rounds']:.2f}",
        )
    crag_rows = [r for r in rows if r["mode"] == "crag"]
    actions = {a: sum(r["action"] == a for r in crag_rows) for a in ("correct", "ambiguous", "incorrect")}
    console = Console()
    console.print(table)
    console.print(
        f"CRAG actions: {actions}; abstained: {sum(r['abstained'] for r in crag_rows)}; "
        f"{elapsed:.0f}s for {len(rows)} runs"
    )
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    tag = (
        f"rounds{args.max_rounds}"
        + (f"-upper{args.upper}" if args.upper else "")
        + (f"-{args.lang}" if args.lang else "")
    )
    (out / f"context_recall_{tag}.json").write_text(
        json.dumps({"summary": summary, "actions": actions, "rows": rows}, indent=2)
    )


if __name__ == "__main__":
    main()
