"""Does retrieval find the passage that answers, when it is in the other language?

For every answerable question of ``data/nearmiss`` (whose answering documents are in zh or en
regardless of the question's language) and of ``data/hard``: is a gold answer in the top ``k``
hits of the engine's retriever (dense + keyword, fused, and the other-language place), with
and without the keyword search of the question's words in translation (``crag.bilingual``)?
Real embedder and indexes, no LLM; a few minutes.

    python benchmarks/cross_language_retrieval.py --nearmiss-kb KB1 --hard-kb KB2

KB1: a knowledge base of ``data/nearmiss/internal`` and ``data/nearmiss/kestrel`` (``nearmiss.py``
builds one in ``benchmarks/out/nearmiss/kb``); KB2: ``crag ingest data/hard/internal --kb KB2``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from unittest import mock

from rich.console import Console
from rich.table import Table

from crag.engine import CRAG
from crag.eval.metrics import gold_match
from crag.kb import retriever

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "cross_language_retrieval.json"


def questions(path: Path, keep: Callable[[dict], bool]) -> list[tuple[str, str, list[str]]]:
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [(r["lang"], r["question"], r["answers"]) for r in rows if r.get("answers") and keep(r)]


def found(engine: CRAG, items: list[tuple[str, str, list[str]]], k: int) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = {}
    for lang, question, answers in items:
        hits = engine.knowledge_base().search(question, k=k)
        ok = any(gold_match(h.chunk.text, answers) for h in hits)
        got = out.setdefault(lang, [0, 0])
        got[0] += ok
        got[1] += 1
    return {lang: (a, b) for lang, (a, b) in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nearmiss-kb", type=Path, required=True)
    ap.add_argument("--hard-kb", type=Path, required=True)
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    sets = {
        "near-miss, internal answers": (
            args.nearmiss_kb,
            questions(ROOT / "data/nearmiss/questions.jsonl", lambda r: r.get("gold_location") == "internal"),
        ),
        "data/hard, internal answers": (
            args.hard_kb,
            questions(ROOT / "data/hard/questions.jsonl", lambda r: r.get("gold_location") == "internal"),
        ),
    }
    table = Table(title=f"gold in the top {args.k}: without / with the question's words in translation")
    for col in ("set", "lang", "questions", "without", "with"):
        table.add_column(col)
    result: dict[str, dict[str, dict[str, int]]] = {}
    for name, (kb, items) in sets.items():
        engine = CRAG.from_config(kb={"path": str(kb)})
        with mock.patch.object(retriever, "translated_query", lambda q: ""):
            without = found(engine, items, args.k)
        with_ = found(engine, items, args.k)
        for lang in sorted(with_):
            n = with_[lang][1]
            result.setdefault(name, {})[lang] = {"n": n, "without": without[lang][0], "with": with_[lang][0]}
            table.add_row(name, lang, str(n), str(without[lang][0]), str(with_[lang][0]))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", "utf-8")
    Console().print(table)


if __name__ == "__main__":
    main()
