"""Near misses (``data/nearmiss``): does crag say "the sources do not say" when they do not?

The internal knowledge base is ``data/nearmiss/internal`` + ``data/nearmiss/kestrel`` (invented
company documents, zh + en, with Markdown, HTML and DOCX tables); a third of the questions have
their answer nowhere while documents about the same entity exist. Default configuration and the
bundled model, two settings:

* ``off`` — no external source (``search.provider = none``): ``rag`` and ``crag``;
* ``corpus`` — the ``corpus`` provider on ``data/nearmiss/external``: ``crag`` (``rag`` never
  searches, so its answers are those of ``off``).

Per language and setting: the honest-answer rate on unanswerable questions (``Answer.refused``;
with the corpus on, an external-only question is honest when refused or answered with its gold),
accuracy on questions the documents answer, on table cells and on external-only questions,
how often an unanswerable question got a near-by wrong value (a distractor), citation
precision, LLM calls per question and latency. Answers are matched with :mod:`crag.eval.metrics`;
a shared-name question must contain every gold string.

    python benchmarks/nearmiss.py                          # everything (~2 h on 2 shared cores)
    python benchmarks/nearmiss.py --limit 10 --lang zh     # 10 questions per language, all kinds
    python benchmarks/nearmiss.py --cases                  # the four reported cases, both languages
    python benchmarks/nearmiss.py --search off             # one setting
    python benchmarks/nearmiss.py --report-only            # the tables of what is done so far
    python benchmarks/nearmiss.py --pairs                  # the evaluator alone on pairs_test.jsonl

``--pairs`` grades ``data/nearmiss/pairs_test.jsonl`` with the configured evaluator: AUROC of
passages that state the answer against near misses, per language and per kind of near miss, and
the share of near misses at or above ``evaluator.upper`` (``pairs.json``).

Resumable (the ``crag eval`` runner): rerun the same command after an interruption. Results:
``benchmarks/out/nearmiss/`` (``off/`` and ``corpus/`` with results.jsonl and the eval report,
``summary.json``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from crag import CRAG
from crag.eval.aggregate import percentile
from crag.eval.datasets import EvalItem, balanced_sample, load_dataset
from crag.eval.metrics import gold_match
from crag.eval.report import write_report
from crag.eval.run import RESULTS, EvalRun
from crag.eval.runner import EvalOptions, load_results, run_eval
from crag.grade.metrics import auroc
from crag.grade.pairs import score_pairs
from crag.grade.train import load_pairs

ROOT = Path(__file__).resolve().parents[1]
SET = ROOT / "data" / "nearmiss"
OUT = ROOT / "benchmarks" / "out" / "nearmiss"
SETTINGS = {"off": ("rag", "crag"), "corpus": ("crag",)}
LANGS = ("zh", "en")


def select(items: Sequence[EvalItem], langs: Sequence[str], limit: int, seed: int) -> list[EvalItem]:
    """Up to ``limit`` questions per language, round-robin over kinds; the languages interleaved."""
    per_lang = [
        balanced_sample([it for it in items if it.lang == lang], limit or None, seed=seed, keys=("kind",))
        for lang in langs
    ]
    out: list[EvalItem] = []
    for i in range(max(map(len, per_lang), default=0)):
        out += [group[i] for group in per_lang if i < len(group)]
    return out


def correct(item: EvalItem, answer: str) -> bool:
    """A gold string in the answer; every one of them for a shared name (each bearer described)."""
    if item.extra.get("answers_all"):
        return all(gold_match(answer, [a]) for a in item.answers)
    return gold_match(answer, item.answers)


def _rate(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


def stats(items: Sequence[EvalItem], records: dict[tuple[str, str], dict[str, Any]], mode: str) -> dict[str, Any]:
    """The figures of one mode over ``items`` (only answered questions count)."""
    done = [(it, records[(it.id, mode)]) for it in items if not records.get((it.id, mode), {"error": 1}).get("error")]

    def of(kind: str | tuple[str, ...]) -> list[tuple[EvalItem, dict[str, Any]]]:
        kinds = (kind,) if isinstance(kind, str) else kind
        return [(it, r) for it, r in done if it.extra["kind"] in kinds]

    def refused(r: dict[str, Any]) -> bool:
        return bool(r["metrics"]["refused"])

    internal = of(("table", "text", "namesake"))
    unanswerable = of("unanswerable")
    with_distractors = [(it, r) for it, r in unanswerable if it.extra.get("distractors")]
    cited = [float(r["cited_gold"]) for _, r in internal if r.get("cited_gold") is not None]
    latency = [float(r.get("latency") or 0.0) for _, r in done]
    return {
        "n": len(done),
        "asked": len(items),
        # honest: "the sources do not say" where nothing answers
        "honest_unanswerable": _rate([refused(r) for _, r in unanswerable]),
        # ... and where the documents do not answer: refused, or answered from the external corpus
        "honest_not_internal": _rate(
            [refused(r) or correct(it, r["answer"]) for it, r in of(("unanswerable", "external"))]
        ),
        # a near-by value that does not answer (the sales director as CEO, a shipment count as capacity)
        "distractor_asserted": _rate(
            [not refused(r) and gold_match(r["answer"], it.extra["distractors"]) for it, r in with_distractors]
        ),
        "accuracy_internal": _rate([correct(it, r["answer"]) for it, r in internal]),
        "accuracy_table": _rate([correct(it, r["answer"]) for it, r in of("table")]),
        "accuracy_text": _rate([correct(it, r["answer"]) for it, r in of(("text", "namesake"))]),
        "accuracy_external": _rate([correct(it, r["answer"]) for it, r in of("external")]),
        "false_refusal": _rate([refused(r) for _, r in internal]),
        "citation_precision": round(sum(cited) / len(cited), 3) if cited else None,
        "cited_checked": len(cited),
        "llm_calls": round(sum(r.get("llm_calls") or 0 for _, r in done) / len(done), 2) if done else None,
        "latency_p50": round(percentile(latency, 50), 1) if latency else None,
        "latency_mean": round(sum(latency) / len(latency), 1) if latency else None,
        "degraded": sum(bool(r.get("degradations")) for _, r in done),
        "n_unanswerable": len(unanswerable),
        "n_table": len(of("table")),
        "n_external": len(of("external")),
        "n_internal": len(internal),
    }


def cases(items: Sequence[EvalItem], records: dict[tuple[str, str], dict[str, Any]], mode: str) -> list[dict]:
    """The four cases of the report that this set was built for, answer by answer."""
    out = []
    for it in items:
        case = it.extra.get("case")
        rec = records.get((it.id, mode))
        if not case or not rec or rec.get("error"):
            continue
        ok = correct(it, rec["answer"]) if it.answerable else bool(rec["metrics"]["refused"])
        out.append({"id": it.id, "case": case, "lang": it.lang, "pass": ok, "answer": rec["answer"]})
    return out


def summarize(everything: Sequence[EvalItem], chosen: Sequence[EvalItem]) -> dict[str, Any]:
    summary: dict[str, Any] = {"questions_in_set": len(everything), "selected": len(chosen), "runs": {}}
    for setting, modes in SETTINGS.items():
        records, _ = load_results(OUT / setting / RESULTS)
        if setting == "corpus":  # rag never searches: its answers are those of "off"
            off, _ = load_results(OUT / "off" / RESULTS)
            records |= {k: v for k, v in off.items() if k[1] == "rag"}
            modes = ("rag", *modes)
        for mode in modes:
            for lang in (*LANGS, "all"):
                group = [it for it in chosen if lang in ("all", it.lang)]
                s = stats(group, records, mode)
                if s["n"]:
                    summary["runs"][f"{setting}/{mode}/{lang}"] = s
            found = cases(chosen, records, mode) if (setting, mode) != ("corpus", "rag") else []
            if found:
                summary.setdefault("cases", {})[f"{setting}/{mode}"] = found
    # Final only when every mode of every setting answered every question of the set.
    full = [
        summary["runs"].get(f"{setting}/{mode}/all", {}).get("n", 0) for setting in SETTINGS for mode in ("rag", "crag")
    ]
    summary["partial"] = min(full) < len(everything)
    return summary


def _fmt(v: Any) -> str:
    return "—" if v is None else f"{v:.3f}" if isinstance(v, float) and v <= 1 else str(v)


def show(summary: dict[str, Any]) -> None:
    console = Console(width=200)  # a log file or pipe would otherwise squeeze twelve columns into 80
    partial = " — PARTIAL" if summary["partial"] else ""
    t = Table(title=f"data/nearmiss ({summary['selected']} of {summary['questions_in_set']} questions){partial}")
    cols = ("run", "n", "honest (none)", "honest (not internal)", "distractor said", "acc. internal", "acc. table",
            "acc. external", "false refusal", "citation prec.", "LLM calls", "s p50")  # fmt: skip
    keys = ("n", "honest_unanswerable", "honest_not_internal", "distractor_asserted", "accuracy_internal",
            "accuracy_table", "accuracy_external", "false_refusal", "citation_precision", "llm_calls",
            "latency_p50")  # fmt: skip
    for c in cols:
        t.add_column(c, justify="left" if c == "run" else "right")
    sizes = {"honest_unanswerable": "n_unanswerable", "accuracy_internal": "n_internal", "accuracy_table": "n_table",
             "accuracy_external": "n_external"}  # fmt: skip
    for name, s in summary["runs"].items():
        # a rate over few questions says little: each rate of a subset shows how many it covers
        t.add_row(name, *(_fmt(s[k]) + (f" ({s[sizes[k]]})" if k in sizes else "") for k in keys))
    console.print(t)
    for run, found in summary.get("cases", {}).items():
        c = Table(title=f"the four reported cases: {run}")
        for col in ("id", "case", "pass", "answer"):
            c.add_column(col)
        for f in found:
            c.add_row(f["id"], f["case"], "yes" if f["pass"] else "NO", f["answer"][:160])
        console.print(c)


def pairs(args: argparse.Namespace) -> None:
    """The configured evaluator on ``pairs_test.jsonl``: does it score a near miss below a passage
    that answers? AUROC per language and per kind of near miss, and how many near misses reach
    ``evaluator.upper`` (the Correct path, where no correction runs)."""
    engine = CRAG.from_config(kb={"path": args.kb})
    rows = [r for r in load_pairs(SET / "pairs_test.jsonl") if args.lang in ("all", r["lang"])]
    scores = [s for s, _ in score_pairs(engine.evaluator, rows)]
    upper = engine.settings.evaluator.upper
    result: dict[str, Any] = {"evaluator": engine.settings.evaluator.backend, "upper": upper, "langs": {}}
    t = Table(title=f"near-miss pairs: evaluator {result['evaluator']} (upper {upper})")
    for col in ("lang", "pairs", "AUROC", "near misses ≥ upper", "answers ≥ upper", "AUROC per miss"):
        t.add_column(col)
    for lang in (*LANGS, "all"):
        mine = [(r, sc) for r, sc in zip(rows, scores, strict=True) if lang in ("all", r["lang"])]
        if not mine:
            continue
        y, sc = [int(r["label"]) for r, _ in mine], [s for _, s in mine]
        pos = [s for r, s in mine if r["label"]]
        by_miss = {}
        for miss in sorted({r["miss"] for r, _ in mine if not r["label"]}):
            sub = [(1, s) for s in pos] + [(0, s) for r, s in mine if r["miss"] == miss and not r["label"]]
            by_miss[miss] = round(auroc([a for a, _ in sub], [b for _, b in sub]), 3)
        neg = [s for r, s in mine if not r["label"]]
        result["langs"][lang] = row = {
            "pairs": len(mine),
            "auroc": round(auroc(y, sc), 3),
            "near_miss_at_upper": round(sum(s >= upper for s in neg) / len(neg), 3),
            "answer_at_upper": round(sum(s >= upper for s in pos) / len(pos), 3),
            "auroc_by_miss": by_miss,
        }
        t.add_row(lang, str(row["pairs"]), f"{row['auroc']:.3f}", f"{row['near_miss_at_upper']:.1%}",
                  f"{row['answer_at_upper']:.1%}", ", ".join(f"{k} {v:.2f}" for k, v in by_miss.items()))  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "pairs.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", "utf-8")
    Console(width=200).print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=0, help="questions per language (0: all), balanced over kinds")
    ap.add_argument("--lang", choices=(*LANGS, "all"), default="all")
    ap.add_argument("--cases", action="store_true", help="only the questions of the four reported cases")
    ap.add_argument("--search", default="off,corpus", help="settings to run: off, corpus or both")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kb", default=str(OUT / "kb"))
    ap.add_argument("--report-only", action="store_true", help="the tables of the results so far, no answering")
    ap.add_argument("--pairs", action="store_true", help="the evaluator alone on pairs_test.jsonl (no answers)")
    args = ap.parse_args()
    if args.pairs:
        return pairs(args)

    everything = load_dataset(SET / "questions.jsonl")
    langs = LANGS if args.lang == "all" else (args.lang,)
    pool = [it for it in everything if it.extra.get("case")] if args.cases else everything
    chosen = select(pool, langs, args.limit, args.seed)
    if not args.report_only:
        run(args, everything, chosen)
    summary = summarize(everything, chosen)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", "utf-8")
    show(summary)


def run(args: argparse.Namespace, everything: list[EvalItem], chosen: list[EvalItem]) -> None:
    settings = [s.strip() for s in args.search.split(",") if s.strip()]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise SystemExit(f"--search: unknown setting(s) {', '.join(unknown)}; use off, corpus or off,corpus")
    console = Console(stderr=True)
    engine = CRAG.from_config(kb={"path": args.kb})  # default configuration: search off, bundled model
    engine.ingest([SET / "internal", SET / "kestrel"])  # idempotent: unchanged files are skipped
    external = SET / "external"
    t0 = time.perf_counter()

    def progress(done: int, total: int, label: str) -> None:
        console.print(f"[dim]{done}/{total} {time.perf_counter() - t0:6.0f}s {escape(label)}[/]")  # "[rag]" is no tag

    for setting in settings:
        corpus = setting == "corpus"
        if corpus:
            engine.search_provider("corpus", external).warm_up()  # index once, outside the timings
        options = EvalOptions(
            modes=SETTINGS[setting],
            seed=args.seed,
            search="corpus" if corpus else None,
            search_corpus=external if corpus else None,
        )
        out = OUT / setting
        result: EvalRun = run_eval(engine, chosen, out, options, progress=progress, dataset_items=everything)
        notes = [
            f"data/nearmiss, setting `{setting}`: {len(chosen)} of {len(everything)} questions "
            f"({args.limit or 'all'} per language, balanced over kinds; seed {args.seed}); default configuration, "
            f"model `{engine.settings.llm.model}`, evaluator `{engine.settings.evaluator.backend}`.",
        ]
        write_report(result, out, title=f"Near misses ({setting})", notes=notes)


if __name__ == "__main__":
    main()
