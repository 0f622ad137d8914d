"""Conversations (issue 34): two-turn dialogues over the shipped sample, answered by the bundled model.

``data/sample/dialogues.jsonl`` holds 10 English and 10 Chinese dialogues; the second
question cannot be answered without the first ("When was its Royal University
established?", "它是哪一年建成的？", "那雌鱼呢？"). Each dialogue is asked as a chat front end
asks it: the first question alone, then the second with the history (the first question
and crag's own first answer, citations and all).

A dialogue is right when the second answer holds a gold answer (the first answer is
reported too). Every LLM call of the engine is counted per turn (the model is wrapped),
and the condense step's own calls are read from the trace (``conversation.llm_calls``):
condensing must add at most one call per follow-up turn and none on a first turn.

    python benchmarks/dialogues.py [--lang en|zh] [--ids en-warsaw,zh-cf4] [--model qwen2.5-coder-1.5b] [--out DIR]

Writes ``benchmarks/out/dialogues/results.jsonl`` (one row per dialogue) and ``summary.json``;
the two languages can run side by side (``--lang en --out benchmarks/out/dialogues-en`` and
the same for zh) over the one knowledge base.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crag.engine import CRAG

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
DIALOGUES = SAMPLE / "dialogues.jsonl"
OUT = ROOT / "benchmarks" / "out" / "dialogues"


def load_dialogues(path: Path = DIALOGUES) -> list[dict[str, Any]]:
    """The dialogues, one JSON object a line: ``{id, lang, title, turns: [{question, answers}, ...]}``."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def holds_gold(text: str, answers: list[str]) -> bool:
    """A gold answer in ``text``, ignoring case, spaces and thousands separators."""

    def norm(s: str) -> str:
        return "".join(s.lower().split()).replace(",", "").replace("，", "")

    return any(norm(a) in norm(text) for a in answers)


class CallCounter:
    """Counts the calls of the engine's LLM (complete, stream, yes/no and choice probabilities)."""

    def __init__(self, llm: Any) -> None:
        self.calls = 0
        for name in ("complete", "stream", "yes_probability", "choice_probabilities"):
            method = getattr(llm, name, None)
            if method is not None:
                setattr(llm, name, self._counted(method))

    def _counted(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return method(*args, **kwargs)

        return call


def engine(kb: Path, model: str, threads: int = 0) -> CRAG:
    """The demo's engine on the sample: internal documents in the KB, the external corpus as the search."""
    rag = CRAG.from_config(
        kb={"path": kb},
        search={"provider": "corpus", "corpus_path": SAMPLE / "external"},
        llm={"model": model, "n_threads": threads},
    )
    if not (kb / "manifest.sqlite").is_file():
        rag.ingest([SAMPLE / "internal"])
    warm = getattr(rag.search_provider(), "warm_up", None)
    if warm is not None:
        warm()
    return rag


def run_dialogue(rag: CRAG, counter: CallCounter, dialogue: dict[str, Any]) -> dict[str, Any]:
    """Ask both turns; the row of results for one dialogue."""
    history: list[dict[str, str]] = []
    turns = []
    for n, turn in enumerate(dialogue["turns"]):
        before, start = counter.calls, time.monotonic()
        answer = rag.ask(turn["question"], history=history or None)
        trace = rag.traces.get(answer.trace_id)
        conversation = trace.get("conversation") or {}
        turns.append({
            "question": turn["question"],
            "condensed": answer.question,
            "method": conversation.get("method", "first turn" if n == 0 else ""),
            "condense_calls": int(conversation.get("llm_calls", 0)),
            "llm_calls": counter.calls - before,
            "answer": answer.answer,
            "action": answer.action.value,
            "right": holds_gold(answer.answer, turn["answers"]),
            "seconds": round(time.monotonic() - start, 2),
            "degradations": answer.degradations,
            "trace_id": answer.trace_id,
        })  # fmt: skip
        history += [{"role": "user", "content": turn["question"]}, {"role": "assistant", "content": answer.answer}]
    return {"id": dialogue["id"], "lang": dialogue["lang"], "right": turns[-1]["right"], "turns": turns}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Right dialogues per language, and the condense step's calls on first and later turns."""
    out: dict[str, Any] = {}
    for lang in sorted({r["lang"] for r in rows}):
        mine = [r for r in rows if r["lang"] == lang]
        follow = [t for r in mine for t in r["turns"][1:]]
        out[lang] = {
            "dialogues": len(mine),
            "right": sum(r["right"] for r in mine),
            "first_turn_right": sum(r["turns"][0]["right"] for r in mine),
            "condensed_by": {m: sum(t["method"] == m for t in follow) for m in ("llm", "kept", "fallback")},
            "condense_calls_first_turn_max": max(r["turns"][0]["condense_calls"] for r in mine),
            "condense_calls_follow_up_max": max(t["condense_calls"] for t in follow),
            "llm_calls_first_turn_mean": round(sum(r["turns"][0]["llm_calls"] for r in mine) / len(mine), 2),
            "llm_calls_follow_up_mean": round(sum(t["llm_calls"] for t in follow) / len(follow), 2),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lang", choices=("en", "zh"))
    ap.add_argument("--ids", help="comma-separated dialogue ids")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--out", type=Path, default=OUT, help="folder for results.jsonl and summary.json")
    ap.add_argument("--threads", type=int, default=0, help="llm.n_threads (0: all cores; 1 on a shared machine)")
    ap.add_argument("--kb", type=Path, default=OUT / "kb", help="knowledge base (built from the sample if missing)")
    args = ap.parse_args()
    os.environ.setdefault("CRAG_CACHE_DIR", str(ROOT / ".cache" / "crag"))
    dialogues = [d for d in load_dialogues() if not args.lang or d["lang"] == args.lang]
    if args.ids:
        wanted = set(args.ids.split(","))
        dialogues = [d for d in dialogues if d["id"] in wanted]
    args.out.mkdir(parents=True, exist_ok=True)
    rag = engine(args.kb, args.model, args.threads)
    counter = CallCounter(rag.llm)
    rows = []
    with (args.out / "results.jsonl").open("w", encoding="utf-8") as fh:
        for d in dialogues:
            row = run_dialogue(rag, counter, d)
            rows.append(row)
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            last = row["turns"][-1]
            print(f"{'ok ' if row['right'] else 'MISS'} {d['id']:24} {last['method']:8} {last['condensed']}",
                  file=sys.stderr)  # fmt: skip
    summary = {"model": args.model, "threads": args.threads, "by_language": summarise(rows)}
    (args.out / "summary.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2) + "\n", "utf-8")
    print(json.dumps(summary, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
