"""Names that several people share (issue 32, item 3): accuracy, the lists shown, what they cost.

Four measurements, each resumable (an interrupted run keeps its answers; the same command
goes on), each with a progress bar, all with the default config and the bundled 1.5B model:

* ``popqa`` — the 70 long-tail questions of ``../shared/data/popqa-dev`` end to end, ``rag``
  and ``crag``: internal knowledge base = its ranks 1–5 (``kb.jsonl``), external corpus =
  ranks 6–10 (``web.jsonl``, the ``corpus`` search). Accuracy is PopQA's own match (the answer
  contains a gold string as written, lower-cased or capitalised), with the word-bounded
  :func:`crag.eval.metrics.gold_match` beside it; LLM calls and latency split by whether the
  answer listed several people;
* ``popqa --oracle gold`` — the reader's ceiling: each question answered from the passages
  about its subject alone (title = ``subject``), no retrieval, no other bearer;
* ``set`` — ``data/namesakes`` (invented people, both languages): a shared name must be
  answered for every bearer, a question that names one bearer gets one answer;
* ``hard`` — how often ``data/hard`` answers would list several people: every question
  through retrieval, grading and correction with a recording model (nothing generated),
  and the ``bearers`` step over each final context.

    python benchmarks/namesakes.py popqa                 # ~1–3 h on 2 shared cores
    python benchmarks/namesakes.py popqa --oracle gold
    python benchmarks/namesakes.py set
    python benchmarks/namesakes.py hard --kb KB          # KB: crag ingest data/hard/internal --kb KB
    python benchmarks/namesakes.py table

Results: ``benchmarks/out/namesakes/`` (one JSONL per run, ``summary.json``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from crag import CRAG
from crag.correct.bearers import find_bearers
from crag.correct.names import fold
from crag.eval.metrics import gold_match
from crag.generate import generate
from crag.pipeline.events import CompressEvent, FuseEvent
from crag.protocols import Completion
from crag.types import Answer, Query, Strip

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "namesakes"
POPQA = ROOT.parent / "shared" / "data" / "popqa-dev"
SET = ROOT / "data" / "namesakes"
HARD = ROOT / "data" / "hard"


def popqa_match(answer: str, golds: Sequence[str]) -> bool:
    """PopQA's scoring: a gold string in the answer, as written, lower-cased or capitalised."""
    return any(g in answer or g.lower() in answer or g.capitalize() in answer for g in golds)


def _bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=Console(stderr=True),
    )  # fmt: skip


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()] if path.exists() else []


def _resume(path: Path, items: Sequence[dict[str, Any]], label: str, answer: Callable[[dict[str, Any]], dict]) -> None:
    """Answer every item not yet in ``path``, appending each row as soon as it is done."""
    done = {r["id"] for r in _rows(path)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh, _bar() as bar:
        task = bar.add_task(label, total=len(items), completed=len(done))
        for item in items:
            if item["id"] in done:
                continue
            fh.write(json.dumps(answer(item), ensure_ascii=False) + "\n")
            fh.flush()
            bar.advance(task)


def _row(item: dict[str, Any], a: Answer, seconds: float) -> dict[str, Any]:
    return {
        "id": item["id"],
        "question": item["question"],
        "mode": a.mode,
        "action": a.action.value,
        "answer": a.answer,
        "refused": a.refused,
        "bearers": [asdict(b) for b in a.bearers],
        "llm_calls": a.usage.calls,
        "prompt_tokens": a.usage.prompt_tokens,
        "seconds": round(seconds, 2),
        "generate": a.timings.get("generate", 0.0),
        "context": [{"title": s.title, "origin": s.origin} for s in a.context],
        "trace_id": a.trace_id,
    }


# -- popqa ---------------------------------------------------------------------------------
def popqa(args: argparse.Namespace) -> None:
    items = _rows(POPQA / "questions.jsonl")[: args.limit or None]
    if args.oracle:
        return _popqa_oracle(items)
    engine = CRAG.from_config(
        kb={"path": OUT / "popqa-kb"},
        search={"provider": "corpus", "corpus_path": POPQA / "web.jsonl"},
        correction={"search_timeout": 120},  # what correction finds, not how a busy machine times out
    )
    engine.ingest([POPQA / "kb.jsonl"])  # idempotent
    engine.search_provider().warm_up()
    for mode in args.modes.split(","):

        def one(item: dict[str, Any], mode: str = mode) -> dict[str, Any]:
            t0 = time.perf_counter()
            a = engine.ask(item["question"], mode=mode)
            row = _row(item, a, time.perf_counter() - t0)
            row |= {"popqa": popqa_match(a.answer, item["answers"]), "gold": gold_match(a.answer, item["answers"])}
            if len(a.bearers) >= 2:  # what one answer from the same sources would have said
                g = generate(
                    item["question"],
                    a.context,
                    engine.llm,
                    lang="en",
                    max_tokens=engine.settings.llm.max_tokens,
                    reask_above=engine.settings.evaluator.upper,
                )
                row |= {"ordinary": g.text, "ordinary_popqa": popqa_match(g.text, item["answers"])}
            return row

        _resume(OUT / f"popqa-{mode}.jsonl", items, f"popqa {mode}", one)
    table(args)


def reachable() -> int:
    """Questions whose top-10 passages hold a gold string in a passage that names the question's
    subject (its title, or the name as the question or the subject writes it): the most any
    reader of these passages can get right without guessing. A gold string anywhere in the
    ten (63 of 70) counts "politician" in a passage about another politician."""
    passages = [*_rows(POPQA / "kb.jsonl"), *_rows(POPQA / "web.jsonl")]
    found = 0
    for item in _rows(POPQA / "questions.jsonl"):
        asked = item["question"].split("'s occupation")[0].removeprefix("What is ")
        names = {fold(item["subject"].split(" (")[0]), fold(asked)}
        golds = [fold(g) for g in item["answers"]]
        about = [p for p in passages if p["title"] == item["subject"] or any(n in fold(p["text"]) for n in names)]
        found += any(re.search(rf"\b{re.escape(g)}\b", fold(p["text"])) for p in about for g in golds if g)
    return found


def _popqa_oracle(items: Sequence[dict[str, Any]]) -> None:
    passages = [*_rows(POPQA / "kb.jsonl"), *_rows(POPQA / "web.jsonl")]
    engine = CRAG.from_config(kb={"path": OUT / "popqa-kb"})
    llm = engine.llm

    def one(item: dict[str, Any]) -> dict[str, Any]:
        own = list({p["text"]: p for p in passages if p["title"] == item["subject"]}.values())
        ctx = [Strip(p["text"], "gold", "internal", p["title"], score=1.0) for p in own]
        if not ctx:
            return {"id": item["id"], "answer": "", "popqa": False, "gold": False, "has_passage": False}
        g = generate(item["question"], ctx, llm, lang="en", max_tokens=engine.settings.llm.max_tokens)
        ok = popqa_match(g.text, item["answers"])
        return {"id": item["id"], "answer": g.text, "popqa": ok, "gold": gold_match(g.text, item["answers"])}

    _resume(OUT / "popqa-oracle-gold.jsonl", items, "popqa gold passage alone", one)
    table(argparse.Namespace())


# -- data/namesakes --------------------------------------------------------------------------
def passes(item: dict[str, Any], answer: str, bearers: Sequence[Any]) -> bool:
    """``shared``: every bearer listed and answered; ``singled``: one answer, about that bearer;
    ``single``: an ordinary answer."""
    if item["kind"] == "shared":
        return len(bearers) >= 2 and all(a in answer for a in item["answers"])
    found = any(a in answer for a in item["answers"])
    if item["kind"] == "singled":
        return len(bearers) <= 1 and found and not any(n in answer for n in item.get("not", []))
    return not bearers and found


def namesake_set(args: argparse.Namespace) -> None:
    engine = CRAG.from_config(kb={"path": OUT / "set-kb"})
    engine.ingest([SET / "kb.jsonl"])
    items = _rows(SET / "questions.jsonl")

    def one(item: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        a = engine.ask(item["question"])
        row = _row(item, a, time.perf_counter() - t0)
        return row | {"lang": item["lang"], "kind": item["kind"], "pass": passes(item, a.answer, a.bearers)}

    _resume(OUT / "set.jsonl", items, "data/namesakes", one)
    table(args)


# -- data/hard: the detector over the final contexts ------------------------------------------
class _Recorder:
    """Stands in for the LLM: what is measured is which contexts the bearers step lists."""

    model_id = "recorder"

    def complete(self, messages: Sequence[dict[str, str]], **_: Any) -> Completion:
        return Completion(text="(not generated)", model=self.model_id)


def hard(args: argparse.Namespace) -> None:
    engine = CRAG.from_config(
        kb={"path": args.kb},
        search={"provider": "corpus", "corpus_path": HARD / "external"},
        trace={"enabled": False},
        correction={"search_timeout": 120},
    )
    engine.ingest([HARD / "internal"])  # idempotent
    engine.search_provider().warm_up()
    engine._llm = _Recorder()  # the engine's LLM slot: nothing is generated
    items = _rows(HARD / "questions.jsonl")
    max_sources = engine.settings.generation.max_sources

    def one(item: dict[str, Any]) -> dict[str, Any]:
        with engine.ask_stream(item["question"]) as events:  # the last context read
            read = [e.value.strips[:max_sources] for e in events if isinstance(e, (FuseEvent, CompressEvent))][-1:]
        return {
            "id": item["id"],
            "lang": item["lang"],
            "question": item["question"],
            "same_name_distractors": bool(item.get("same_name_distractors")),
            "strips": [asdict(s) for s in (read[0] if read else [])],
        }

    _resume(OUT / "hard.jsonl", items, "data/hard contexts", one)
    table(args)


# -- the tables --------------------------------------------------------------------------------
def _mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return round(statistics.fmean(xs), 2) if xs else 0.0


def _median(xs: Iterable[float]) -> float:
    xs = list(xs)
    return round(statistics.median(xs), 1) if xs else 0.0


def table(args: argparse.Namespace) -> None:
    console = Console()
    summary: dict[str, Any] = {}
    t = Table(title="popqa-dev (70 questions, strict PopQA match)")
    for col in ("run", "n", "accuracy (PopQA)", "gold_match", "several listed", "LLM calls", "s p50", "s mean"):
        t.add_column(col)
    for name in ("rag", "crag"):
        rows = _rows(OUT / f"popqa-{name}.jsonl")
        if not rows:
            continue
        several = [r for r in rows if len(r["bearers"]) >= 2]
        other = [r for r in rows if len(r["bearers"]) < 2]
        summary[f"popqa-{name}"] = s = {
            "n": len(rows),
            "accuracy": round(sum(r["popqa"] for r in rows) / len(rows), 3),
            "gold_match": round(sum(r["gold"] for r in rows) / len(rows), 3),
            "several": len(several),
            "several_right": sum(r["popqa"] for r in several),
            "several_right_with_one_answer": sum(r.get("ordinary_popqa", False) for r in several),
            "llm_calls": _mean(r["llm_calls"] for r in rows),
            "llm_calls_several": _mean(r["llm_calls"] for r in several),
            "llm_calls_other": _mean(r["llm_calls"] for r in other),
            "seconds_p50": _median(r["seconds"] for r in rows),
            "seconds_mean": _mean(r["seconds"] for r in rows),
            "generate_several": _mean(r["generate"] for r in several),
            "generate_other": _mean(r["generate"] for r in other),
        }
        t.add_row(
            name, str(s["n"]), f"{s['accuracy']:.3f}", f"{s['gold_match']:.3f}",
            f"{s['several']} ({s['several_right']} right; one answer: {s['several_right_with_one_answer']})",
            f"{s['llm_calls']} (several {s['llm_calls_several']})",
            str(s["seconds_p50"]), str(s["seconds_mean"]),
        )  # fmt: skip
    reach = reachable()
    summary["popqa-reachable"] = {"n": 70, "questions": reach, "share": round(reach / 70, 3)}
    t.add_row("a passage naming the subject holds a gold string", "70", f"{reach / 70:.3f}", "", "")
    oracle = _rows(OUT / "popqa-oracle-gold.jsonl")
    if oracle:
        summary["popqa-oracle-gold"] = {"n": len(oracle), "accuracy": round(sum(r["popqa"] for r in oracle) / 70, 3)}
        t.add_row("gold passage alone", str(len(oracle)), f"{summary['popqa-oracle-gold']['accuracy']:.3f}", "", "")
    console.print(t)
    _set_table(console, summary)
    _hard_table(console, summary)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", "utf-8")


def _set_table(console: Console, summary: dict[str, Any]) -> None:
    rows = _rows(OUT / "set.jsonl")
    if not rows:
        return
    t = Table(title="data/namesakes (crag)")
    for col in ("lang", "kind", "pass", "LLM calls", "s mean"):
        t.add_column(col)
    for lang in ("zh", "en"):
        for kind in ("shared", "singled", "single"):
            group = [r for r in rows if r["lang"] == lang and r["kind"] == kind]
            if group:
                ok = sum(r["pass"] for r in group)
                summary[f"set-{lang}-{kind}"] = {"pass": ok, "n": len(group)}
                calls, secs = _mean(r["llm_calls"] for r in group), _mean(r["seconds"] for r in group)
                t.add_row(lang, kind, f"{ok}/{len(group)}", str(calls), str(secs))
    console.print(t)


def _hard_table(console: Console, summary: dict[str, Any]) -> None:
    """The bearers step of today's code over the captured contexts."""
    rows = _rows(OUT / "hard.jsonl")
    if not rows:
        return
    for r in rows:
        found = find_bearers(Query.of(r["question"]), [Strip(**s) for s in r["strips"]])
        r["several"], r["chosen"] = found.several, found.chosen is not None
    t = Table(title="data/hard: final contexts whose answer would list several people")
    for col in ("lang", "contexts", "several listed", "share", "one named by the question"):
        t.add_column(col)
    for lang in ("en", "zh", "all"):
        group = [r for r in rows if lang in ("all", r["lang"])]
        several = sum(r["several"] for r in group)
        summary[f"hard-{lang}"] = {"n": len(group), "several": several, "chosen": sum(r["chosen"] for r in group)}
        t.add_row(
            lang, str(len(group)), str(several), f"{several / len(group):.1%}", str(summary[f"hard-{lang}"]["chosen"])
        )
    console.print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("popqa", help="popqa-dev end to end (rag, crag), or the gold passage alone")
    p.add_argument("--modes", default="rag,crag")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--oracle", choices=["gold"], default=None)
    sub.add_parser("set", help="data/namesakes end to end (crag)")
    h = sub.add_parser("hard", help="the bearers step over data/hard's final contexts (no generation)")
    h.add_argument("--kb", required=True, help="a knowledge base of data/hard/internal (ingested if needed)")
    sub.add_parser("table", help="the tables of every run so far")
    args = ap.parse_args()
    {"popqa": popqa, "set": namesake_set, "hard": hard, "table": table}[args.cmd](args)


if __name__ == "__main__":
    main()
