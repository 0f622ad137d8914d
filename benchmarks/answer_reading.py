"""Can the bundled model tell a right answer from a role swap? (issue 46, measured and not adopted)

A SQuAD 2.0 question written to look answered ("Where were French defeated in Canada?") gets
an answer its source states in one sentence ("The British were defeated at Sainte Foy"): every
lexical check holds it, and read as a claim it is stated. This script reads each answer of a
``crag eval`` run twice more with the bundled model, as one LLM call per answer would:

* ``qa``: the question and the answer alone — does the answer answer the question as asked?
* ``qpa``: the cited source, the question and the answer — is it the answer, by the source?

and prints P(yes) for right answers, wrong answers and answers to unanswerable questions per
language, with the seconds each reading took::

    python benchmarks/answer_reading.py --results OUT/results.jsonl [--dataset data/hard/questions.jsonl]

Output: ``benchmarks/out/answer_reading/<run>.jsonl`` (one row per answer) and the table.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from crag.eval.metrics import refused  # noqa: E402
from crag.generate.citations import CITE  # noqa: E402
from crag.text import detect_language  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "answer_reading"
PROMPTS = {
    "qa": {
        "en": "Question: {q}\nAnswer: {a}\nDoes this answer answer the question as asked, about the same people, "
        "things and roles? Answer yes or no.",
        "zh": "问题：{q}\n回答：{a}\n这个回答是否针对问题所问的对象和关系作答？只用 yes 或 no 回答。",
    },
    "qpa": {
        "en": "Passage:\n{p}\n\nQuestion: {q}\nProposed answer: {a}\nAccording to the passage, is the proposed "
        "answer the answer to the question? Answer yes or no.",
        "zh": "段落：\n{p}\n\n问题：{q}\n候选回答：{a}\n"
        "根据这段文字，候选回答是否就是这个问题的答案？只用 yes 或 no 回答。",
    },
}
_MARK = re.compile(r"\s*" + CITE.pattern)  # a marker with the space before it


def cited(result: dict[str, Any]) -> str:
    """The first source the answer cites (else its first two), as the model would read it."""
    context = result["context"]
    marks = [int(m) for m in CITE.findall(result["answer"]) if 0 < int(m) <= len(context)]
    return context[marks[0] - 1] if marks else " ".join(context[:2])


def read(llm: Any, result: dict[str, Any], lang: str) -> dict[str, float]:
    """P(yes) and seconds of each reading of one answer."""
    answer = _MARK.sub("", result["answer"]).strip()[:400]
    row: dict[str, float] = {}
    for name, prompt in PROMPTS.items():
        text = prompt[lang].format(q=result["question"], a=answer, p=cited(result)[:900])
        started = time.perf_counter()
        row[name] = round(float(llm.yes_probability([{"role": "user", "content": text}])), 3)
        row[f"{name}_s"] = round(time.perf_counter() - started, 2)
    return row


def summary(rows: list[dict[str, Any]]) -> None:
    """P(yes) per reading, language and kind of answer (min / median / max)."""
    kinds = {
        "right": lambda r: r["answerable"] and r["accuracy"] == 1,
        "wrong": lambda r: r["answerable"] and r["accuracy"] == 0,
        "unanswerable": lambda r: not r["answerable"],
    }
    for name in PROMPTS:
        for lang in ("en", "zh"):
            parts = []
            for kind, keep in kinds.items():
                ps = sorted(r[name] for r in rows if r["lang"] == lang and keep(r))
                if ps:
                    parts.append(f"{kind} n={len(ps)} {ps[0]:.2f}/{statistics.median(ps):.2f}/{ps[-1]:.2f}")
            seconds = statistics.median(r[f"{name}_s"] for r in rows if r["lang"] == lang)
            print(f"{name:4} {lang}  " + " | ".join(parts) + f"  ({seconds:.2f} s p50)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, required=True, help="results.jsonl of a crag eval run")
    ap.add_argument("--dataset", type=Path, default=ROOT / "data" / "hard" / "questions.jsonl")
    args = ap.parse_args()
    from crag.llm.llama_cpp import LlamaCppLLM

    answerable = {q["id"]: q.get("answerable", True) for q in map(json.loads, args.dataset.open(encoding="utf-8"))}
    llm = LlamaCppLLM("qwen2.5-coder-1.5b", n_ctx=2048)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    with (OUT / f"{args.results.parent.name}.jsonl").open("w", encoding="utf-8") as out:
        for result in map(json.loads, args.results.open(encoding="utf-8")):
            if result.get("error") or refused(result["answer"]):
                continue
            lang = "zh" if detect_language(result["question"]) == "zh" else "en"
            row = {"id": result["id"], "lang": lang, "answerable": answerable.get(result["id"], True)}
            row |= {"accuracy": result["metrics"]["accuracy"], **read(llm, result, lang)}
            rows.append(row)
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    summary(rows)


if __name__ == "__main__":
    main()
