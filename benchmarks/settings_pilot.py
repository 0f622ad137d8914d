"""A quick accuracy check of a settings change on the data/hard questions it can change.

A full ``stream_gate.py`` run takes over an hour. A change to what the answer prompt holds can
only change the questions whose context it touches, so this script asks those again with the
engine (non-streaming, default config plus ``--set`` overrides) and compares them with the
answers of a ``stream_gate.py`` run (its ``results.jsonl``) and that run's traces::

    python benchmarks/settings_pilot.py --kb KB --results benchmarks/out/stream_gate_full/results.jsonl \\
        --set generation.max_sources=3 --more-than 3

``--more-than N``: only the questions whose traced context held more than N strips. Output:
``benchmarks/out/settings_pilot/<set>.jsonl`` (resumable) and a summary per language: right
answers before and after, and refusals with the gold in the context.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from crag.config import load_settings  # noqa: E402
from crag.engine import CRAG  # noqa: E402
from crag.eval.metrics import context_recall, gold_match  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "settings_pilot"


def overrides(pairs: list[str]) -> dict[str, Any]:
    """``["generation.max_sources=3"]`` -> ``{"generation": {"max_sources": 3}}``."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        section, _, name = key.partition(".")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(section, {})[name] = value
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", type=Path, required=True, help="the KB of the stream_gate run (its traces.sqlite)")
    ap.add_argument("--results", type=Path, required=True, help="results.jsonl of that stream_gate run")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="SECTION.KEY=VALUE (repeatable)")
    ap.add_argument("--more-than", type=int, default=0, help="only contexts that held more strips than this")
    ap.add_argument("--search-corpus", type=Path, default=ROOT / "data" / "hard" / "external")
    args = ap.parse_args()

    items = {json.loads(line)["id"]: json.loads(line) for line in (ROOT / "data/hard/questions.jsonl").open()}
    by_question = {q["question"]: q for q in items.values()}
    before = {json.loads(line)["id"]: json.loads(line) for line in args.results.open()}
    with sqlite3.connect(args.kb / "traces.sqlite") as db:
        rows = db.execute("SELECT question, data FROM traces ORDER BY created_at DESC").fetchall()
    contexts: dict[str, int] = {}
    for question, data in rows:  # newest first: the run's own trace of each question
        q = by_question.get(question)
        if q and q["id"] in before and q["id"] not in contexts:
            contexts[q["id"]] = len(json.loads(data).get("context") or [])
    todo = [i for i in before if contexts.get(i, 0) > args.more_than]

    OUT.mkdir(parents=True, exist_ok=True)
    out_path = OUT / ("_".join(args.sets).replace("/", "-") or "defaults") + ".jsonl"
    done = {json.loads(line)["id"] for line in out_path.open()} if out_path.exists() else set()
    cfg = overrides(args.sets)
    cfg.setdefault("search", {}).update({"provider": "corpus", "corpus_path": str(args.search_corpus)})
    cfg.setdefault("trace", {})["enabled"] = False
    engine = CRAG(load_settings(kb={"path": str(args.kb)}, **cfg))
    print(f"{len(todo)} questions ({len(done)} done)", flush=True)
    with out_path.open("a", encoding="utf-8") as out:
        for n, qid in enumerate(todo, 1):
            if qid in done:
                continue
            q, old = items[qid], before[qid]
            answers = q.get("answers") or []
            got = engine.ask(q["question"])
            rec = {
                "id": qid, "lang": q["lang"], "answerable": bool(answers) and q.get("answerable", True),
                "accurate": bool(answers) and gold_match(got.answer, answers), "old_accurate": old["accurate"],
                "refused": got.refused, "old_refused": old["refused"],
                "holds_gold": bool(answers) and context_recall([s.text for s in got.context], answers),
                "old_holds_gold": old["context_holds_gold"], "answer": got.answer,
            }  # fmt: skip
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            out.flush()
            print(f"[{n}/{len(todo)}] {qid} accurate {rec['old_accurate']} -> {rec['accurate']}", flush=True)
    recs = [json.loads(line) for line in out_path.open()]
    for lang in ("en", "zh"):
        rows_ = [r for r in recs if r["lang"] == lang and r["answerable"]]
        print(
            f"{lang}: {len(rows_)} answerable; right {sum(r['old_accurate'] for r in rows_)} -> "
            f"{sum(r['accurate'] for r in rows_)}; refusals with gold in context "
            f"{sum(r['old_refused'] and r['old_holds_gold'] for r in rows_)} -> "
            f"{sum(r['refused'] and r['holds_gold'] for r in rows_)}"
        )


if __name__ == "__main__":
    main()
