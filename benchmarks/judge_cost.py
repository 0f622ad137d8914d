"""Where the seconds of the claim reading go (issue 46): each judge call of the sentence gate, timed.

The sentence gate asks the bundled model whether a two-sentence window states the answer when
no source states a claim in its words (``crag.generate.relation``). This script answers
``data/hard`` questions in process (``CRAG.ask_stream``, corpus search as in ``stream_gate.py``)
and records every such reading: the prompt's tokens, how many of them the second context's
cache already held, how long it waited for the compute lock (the answer's next token and the
reading take turns, ``crag.llm.compute``), how long the read took, and P(yes). Before the
questions it measures, on a fixed prompt:

* what a process's first reading costs: creating the second context, then its first read;
* the same reading on an idle model and while the main context streams a long reply.

    python benchmarks/judge_cost.py --kb KB [--per-lang 6] [--ids ID ...]

Use a copy of a knowledge base no earlier run asked (its search cache would answer). The rows
are printed and written to ``benchmarks/out/judge_cost/results.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "judge_cost"
sys.path.insert(0, str(ROOT / "src"))

import crag.llm.llama_cpp as llama_backend  # noqa: E402
import crag.pipeline.steps as steps  # noqa: E402
from crag import CRAG  # noqa: E402
from crag.correct.verify import verify_messages  # noqa: E402
from crag.llm.compute import COMPUTE  # noqa: E402
from crag.llm.prefix_cache import common_prefix  # noqa: E402
from crag.pipeline.events import TokenEvent  # noqa: E402

PASSAGE = (
    "Immune system: Tumor cells are attacked by antibodies produced by the immune system. "
    "This allows the complement system to destroy them."
)
CALLS: list[dict[str, Any]] = []  # the claim readings of the current question, in order
READS: list[dict[str, Any]] = []  # every yes/no read of the model (verification, grading, claims)


def instrument() -> None:
    """Wrap the claim judge and the yes/no read so that each call is timed (this process only)."""
    judge_of, read = steps.model_judge, llama_backend.LlamaCppLLM._next_token_logits

    def model_judge(llm: Any, lang: str) -> Any:
        judge = judge_of(llm, lang)
        if judge is None:
            return None

        def timed(question: str, passage: str, claim: str | None = None) -> float | None:
            start, before = time.perf_counter(), len(READS)
            p = judge(question, passage, claim)
            read = READS[before:][-1:] or [{}]  # the read this reading made (none: the model was not asked)
            CALLS.append({"asks": "the claim" if claim else "the answer", "chars": len(passage), "p": p,
                          "at": start, "s": round(time.perf_counter() - start, 3), **read[0]})  # fmt: skip
            return p

        return timed

    def next_token_logits(llama: Any, tokens: list[int]) -> Any:
        held, asked = common_prefix(llama, tokens), time.perf_counter()
        with COMPUTE:
            got = time.perf_counter()
            logits = read(llama, tokens)
        READS.append({"tokens": len(tokens), "cached": held,
                      "lock_wait_s": round(got - asked, 3), "read_s": round(time.perf_counter() - got, 3)})  # fmt: skip
        return logits

    steps.model_judge = model_judge
    llama_backend.LlamaCppLLM._next_token_logits = staticmethod(next_token_logits)


def reading(side: Any, n: int) -> dict[str, Any]:
    """One yes/no reading of the fixed passage, numbered ``n`` at its start so that nothing after the
    system prompt is in the cache (a passage comes before its question in the prompt)."""
    messages = verify_messages("Which molecules does the immune system produce?", [f"({n}) {PASSAGE}"], "en")
    start = time.perf_counter()
    side.yes_probability(messages)
    return {"s": round(time.perf_counter() - start, 3), "read": READS[-1]["tokens"] - READS[-1]["cached"]}


def fixed_prompt(rag: CRAG) -> dict[str, Any]:
    """The first reading's extra cost, and a reading idle against one while the main context streams."""
    llm = rag.llm
    start = time.perf_counter()
    side = llm.session()
    side.warm_up()
    created = round(time.perf_counter() - start, 3)
    first = reading(side, 0)
    idle = [reading(side, n) for n in range(1, 4)]
    stop = threading.Event()

    def stream() -> None:
        ask = [{"role": "user", "content": "Write a long, detailed history of Warsaw (at least 600 words)."}]
        for _ in llm.stream(ask, max_tokens=400):
            if stop.is_set():
                break

    writer = threading.Thread(target=stream)
    writer.start()
    time.sleep(8.0)  # past the prompt read: the main context is writing tokens
    busy = [reading(side, n) for n in range(4, 8)]
    stop.set()
    writer.join()
    return {"context_created_s": created, "first_read": first, "idle": idle, "while_streaming": busy}


def questions(per_lang: int, ids: list[str]) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (ROOT / "data" / "hard" / "questions.jsonl").open(encoding="utf-8")]
    if ids:
        return [r for r in rows if r["id"] in ids]
    return [r for lang in ("en", "zh") for r in [r for r in rows if r.get("lang") == lang][:per_lang]]


def ask(rag: CRAG, item: dict[str, Any], corpus: Path) -> dict[str, Any]:
    CALLS.clear()
    start, first = time.perf_counter(), None
    with rag.ask_stream(item["question"], search="corpus", search_corpus=corpus, no_cache=True) as events:
        for event in events:
            if isinstance(event, TokenEvent) and first is None:
                first = round(time.perf_counter() - start, 3)
    judged = [dict(c, at=round(c["at"] - start, 3)) for c in CALLS]
    return {"id": item["id"], "lang": item.get("lang"), "first_shown_s": first, "judged": judged}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kb", type=Path, required=True)
    ap.add_argument("--search-corpus", type=Path, default=ROOT / "data" / "hard" / "external")
    ap.add_argument("--per-lang", type=int, default=6)
    ap.add_argument("--ids", nargs="*", default=[])
    args = ap.parse_args()
    instrument()
    rag = CRAG.from_config(kb={"path": str(args.kb)})
    rag.ask("What is this knowledge base about?", no_cache=True)  # loads the model, outside the figures
    fixed = fixed_prompt(rag)
    print(json.dumps(fixed))
    rows = []
    for item in questions(args.per_lang, args.ids):
        row = ask(rag, item, args.search_corpus)
        rows.append(row)
        print(f"{row['id']} ({row['lang']}): first verified sentence {row['first_shown_s']} s")
        for c in row["judged"]:
            print(f"  reads {c['asks']:<10} at {c['at']:6.2f} s: {c.get('tokens', 0):4d} tokens "
                  f"({c.get('cached', 0)} cached), lock {c.get('lock_wait_s', 0):.2f} s, "
                  f"read {c.get('read_s', 0):.2f} s, P(yes) {c['p']}")  # fmt: skip
    reads = [c for row in rows for c in row["judged"] if "read_s" in c]
    if reads:
        rate = statistics.median((r["tokens"] - r["cached"]) / r["read_s"] for r in reads if r["read_s"] > 0)
        print(f"{len(reads)} claim readings in {len(rows)} questions: "
              f"read p50 {statistics.median(r['read_s'] for r in reads):.2f} s, {rate:.0f} tokens/s, "
              f"lock wait max {max(r['lock_wait_s'] for r in reads):.2f} s")  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    report = {"fixed_prompt": fixed, "questions": rows}
    (OUT / "results.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
