"""Which query finds the gold passage: the keyword rewrite or the question as asked?

The correction step searches the external source with ``keyword_queries`` (the first
query; ``correction.max_queries = 1`` by default). This measures, with the real embedder
and the hybrid corpus search over ``data/hard/external``, whether a passage holding a gold
answer is the first result (gold@1) or among the first five (gold@5), for

* ``data/hard``: its answerable questions whose gold is only in the external corpus;
* held out: questions of the same source data sets (CMRC 2018 dev, SQuAD 2.0 dev half),
  through the same loaders and filters, that are *not* in ``data/hard`` but whose passage
  is in its external corpus (150 per language, seeded sample), so a query change is not
  judged on the questions it was looked at on.

No LLM runs; about two minutes on 2 cores once the corpus is indexed (the index goes to
``--index``, reused across runs).

    python benchmarks/search_queries.py [--index .cache/search_queries] [--k 5]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from crag.correct.rewrite import keyword_queries
from crag.engine import CRAG
from crag.eval.metrics import gold_match
from crag.types import Query

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from build_sample_data import load_cmrc, load_squad  # noqa: E402  (the loaders data/hard was built with)

HARD = ROOT / "data" / "hard"
SHARED = ROOT.parent / "shared" / "data"
OUT = ROOT / "benchmarks" / "out" / "search_queries.json"
HELD_OUT = 150  # questions per language


def hard_questions() -> list[tuple[str, str, list[str]]]:
    rows = [json.loads(line) for line in (HARD / "questions.jsonl").open(encoding="utf-8")]
    return [(r["lang"], r["question"], r["answers"]) for r in rows if r["answers"] and r["gold_location"] == "external"]


def held_out_questions(seed: int = 1) -> list[tuple[str, str, list[str]]]:
    """Source questions not in data/hard whose passage is in its external corpus.

    They come from the loaders that built ``data/hard`` (same filters, same passage ids).
    """
    asked = {json.loads(line)["id"] for line in (HARD / "questions.jsonl").open(encoding="utf-8")}
    corpus = {json.loads(line)["id"] for line in (HARD / "external" / "corpus.jsonl").open(encoding="utf-8")}
    rng = random.Random(seed)
    picked: list[tuple[str, str, list[str]]] = []
    for articles in (
        load_cmrc(SHARED / "cmrc2018" / "cmrc2018_dev.squad_style.json"),
        load_squad(SHARED / "squad2-dev-half"),
    ):
        found = [
            (q.lang, q.question, q.answers)
            for a in articles
            for qs in a.questions.values()
            for q in qs
            if q.passage.id in corpus and q.source_id not in asked
        ]
        rng.shuffle(found)
        picked += found[:HELD_OUT]
    return picked


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--index", type=Path, default=ROOT / ".cache" / "search_queries", help="folder for the corpus index"
    )
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()

    engine = CRAG.from_config(kb={"path": args.index})
    search = engine.search_provider("corpus", HARD / "external" / "corpus.jsonl")
    assert search is not None

    def rank(query: str, answers: list[str]) -> int:
        for i, r in enumerate(search.search(query, k=args.k), 1):
            if gold_match(r.content, answers):
                return i
        return 0

    summary: dict[str, dict[str, dict[str, int]]] = {}
    table = Table(title=f"gold passage among the corpus search's first {args.k}")
    for col in ("set", "lang", "n", "keyword @1", "question @1", f"keyword @{args.k}", f"question @{args.k}"):
        table.add_column(col, justify="right" if col not in ("set", "lang") else "left")
    for name, questions in (("data/hard", hard_questions()), ("held out", held_out_questions())):
        for lang in ("en", "zh"):
            rows = [
                (rank(keyword_queries(Query.of(q), [], max_queries=1)[0], a), rank(q, a))
                for la, q, a in questions
                if la == lang
            ]
            s = {
                "n": len(rows),
                "keyword_at_1": sum(kw == 1 for kw, _ in rows),
                "question_at_1": sum(v == 1 for _, v in rows),
                f"keyword_at_{args.k}": sum(kw > 0 for kw, _ in rows),
                f"question_at_{args.k}": sum(v > 0 for _, v in rows),
            }
            summary.setdefault(name, {})[lang] = s
            table.add_row(name, lang, *(str(v) for v in s.values()))
    Console().print(table)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
