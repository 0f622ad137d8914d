"""Build ``data/nearmiss``: documents about the right entity that lack the asked attribute.

Everything is invented and written by hand in ``nearmiss_docs`` (internal documents of three
companies), ``nearmiss_external`` (the external corpus) and ``nearmiss_questions``; the evaluator's
training pairs come from templated companies of their own (``nearmiss_train``,
``nearmiss_train_pairs``). Writes:

* ``kestrel/``: the Kestrel Labs documents (the four cases of the report), small enough for an
  end-to-end test to ingest alone; ``internal/``: the other two companies. The internal knowledge
  base of the benchmark is both folders;
* ``external/corpus.jsonl``: the corpus the ``corpus`` search provider reads;
* ``questions.jsonl``: the eval set (``crag eval`` format);
* ``pairs_test.jsonl``: (question, passage) pairs of the dev set's own passages, label 1 when the
  passage states the answer, 0 for a passage of the same company without it;
* ``pairs_train.jsonl``: pairs of the templated companies (no name of the dev set).

Deterministic (fixed seed; DOCX archives get fixed dates)::

    PYTHONPATH=src python scripts/build_nearmiss.py [--out data/nearmiss] [--seed 46]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from nearmiss_docs import all_docs
from nearmiss_external import external_corpus
from nearmiss_questions import questions
from nearmiss_render import Doc, Passage, passages, write
from nearmiss_train_pairs import train_pairs

from crag.eval.metrics import gold_match
from crag.text import tokenize

ROOT = Path(__file__).resolve().parents[1]
COMPANY_NAMES = {"kestrel": "Kestrel Labs", "qinglan": "Qinglan Technology", "larkspur": "Larkspur Mobility"}
NEGATIVES_PER_QUESTION = 4


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def dev_passages(docs: list[Doc], corpus: list[dict[str, Any]]) -> list[Passage]:
    out = [p for d in docs for p in passages(d)]
    for row in corpus:
        meta = row["metadata"]
        out.append(Passage(row["id"], meta["lang"], meta["company"], f"{row['title']}\n{row['text']}"))
    return out


def test_pairs(items: list[dict[str, Any]], pool: list[Passage], seed: int) -> list[dict[str, Any]]:
    """Each question with the passages that state its answer and its nearest near misses.

    Candidates are the passages of the question's company (a namesake company such as Kestrel
    Aerospace counts: ``kestrel-aerospace``). A passage of the answer's own document (or, for an
    external question, any external passage) holding a gold answer is a positive; a passage without
    any gold answer is a near miss; a passage elsewhere that happens to hold a gold string is left
    out rather than guessed. Near misses come from the question's own document first, then by the
    words they share with the question.
    """
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for q in items:
        if q["kind"] == "namesake":  # every bearer is part of the answer: no single positive
            continue
        cands = [p for p in pool if p.company.split("-")[0] == q["company"]]
        words = set(tokenize(q["question"]))
        pos, neg = [], []
        for p in cands:
            holds = bool(q["answers"]) and gold_match(p.text, q["answers"])
            own = p.doc == q["source"] or (q["kind"] == "external" and p.doc.startswith("ext-"))
            if holds and own:
                pos.append(p)
            elif not holds:
                neg.append(p)
        if q["answerable"] and not pos:
            raise SystemExit(f"{q['id']}: no passage of {q['source']} holds {q['answers']}")
        jitter = {id(p): rng.random() for p in neg}  # ties broken at random, reproducibly
        # The question's own document first (the near miss it was written against), then shared words.
        neg.sort(key=lambda p: (p.doc != q["source"], -len(words & set(tokenize(p.text))), jitter[id(p)]))
        for p, label in [(p, 1) for p in pos] + [(p, 0) for p in neg[:NEGATIVES_PER_QUESTION]]:
            miss = "" if label else (q.get("miss") or ("same_document" if p.doc == q["source"] else "same_company"))
            out.append({
                "query": q["question"], "passage": p.text, "label": label, "lang": q["lang"],
                "source": "nearmiss-dev", "kind": "positive" if label else "near_miss", "miss": miss,
                "title": COMPANY_NAMES[q["company"]], "entity": COMPANY_NAMES[q["company"]], "qid": q["id"],
                "question_kind": q["kind"], "passage_lang": p.lang, "passage_doc": p.doc, "table": p.table,
            })  # fmt: skip
    return out


def build(out: Path, seed: int, train_companies: int) -> dict[str, Any]:
    for sub in ("kestrel", "internal", "external"):
        shutil.rmtree(out / sub, ignore_errors=True)
    docs = all_docs()
    for d in docs:
        write(d, out)
    corpus = external_corpus()
    _write_jsonl(out / "external" / "corpus.jsonl", corpus)
    items = questions({r["id"]: r["metadata"]["company"].split("-")[0] for r in corpus})
    _write_jsonl(out / "questions.jsonl", items)
    dev = test_pairs(items, dev_passages(docs, corpus), seed)
    _write_jsonl(out / "pairs_test.jsonl", dev)
    train = train_pairs(seed, train_companies)
    _write_jsonl(out / "pairs_train.jsonl", train)
    return {
        "documents": dict(Counter(f"{d.company}/{d.lang}/{d.format}" for d in docs)),
        "external": dict(Counter(f"{r['metadata']['lang']}/{r['metadata']['role']}" for r in corpus)),
        "questions": dict(Counter(f"{q['lang']}/{q['kind']}" for q in items)),
        "pairs_test": dict(Counter(f"{p['lang']}/{p['label']}" for p in dev)),
        "pairs_train": dict(Counter(f"{p['lang']}/{p['label']}" for p in train)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "nearmiss")
    ap.add_argument("--seed", type=int, default=46)
    ap.add_argument("--train-companies", type=int, default=30, help="templated companies per language")
    args = ap.parse_args()
    counts = build(args.out, args.seed, args.train_companies)
    for name, c in counts.items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))


if __name__ == "__main__":
    main()
