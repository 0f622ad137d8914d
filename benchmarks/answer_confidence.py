"""Can the generator's own token probabilities tell a right answer from a wrong one?

A selective-answering engine would withhold answers the model is unsure of. This
benchmark asks whether the bundled model's confidence is a usable signal for that, before
any such rule goes into the engine. It answers the captured crag contexts of
``answer_generation.py capture`` (retrieval, grading and correction held fixed) with the
engine's own generator (:func:`crag.generate.generate`, best sources first, re-ask, cut,
refusal rules), while a llama.cpp logits processor records the log-probability of every
token the model writes (``create_chat_completion(logprobs=...)`` would need
``logits_all``, an n_ctx × vocabulary buffer). The final reply's tokens are then scored
with several confidence definitions, and each is measured by AUROC, per language:

* right vs wrong: answered questions, gold in the answer vs not (answerable or not);
* right vs unanswerable: right answers vs answers given to unanswerable questions.

Definitions (word pieces = tokens with a letter, digit or CJK character; citation markers
``[n]`` left out; "new" = a piece that is not in the question):

* ``min_all`` — the lowest log-probability over every generated token, end of turn included;
* ``min_words`` / ``low2_words`` — the lowest / the mean of the two lowest over word pieces;
* ``min_new`` / ``low2_new`` — the same over word pieces new to the question;
* ``mean_words`` — the mean over word pieces.

    python benchmarks/answer_confidence.py run --model qwen2.5-coder-1.5b
    python benchmarks/answer_confidence.py run --model qwen2.5-coder-0.5b
    python benchmarks/answer_confidence.py table

Results: ``benchmarks/out/answer_confidence/`` (one JSONL of replies with their token
log-probabilities per model, summary.json).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from crag.eval.metrics import gold_match
from crag.generate import generate
from crag.grade.metrics import auroc
from crag.llm.llama_cpp import LlamaCppLLM
from crag.protocols import Completion

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import answer_generation  # noqa: E402  (the captured contexts, the progress bar)

OUT = ROOT / "benchmarks" / "out" / "answer_confidence"
_MARKER = re.compile(r"\[\s*\d+(?:\s*[,，、]\s*\d+)*\s*\]")
_WORD = re.compile(r"\w")


class _Recording:
    """The bundled GGUF, loaded as the engine loads it, recording each step's log-probabilities.

    At every step the processor sees the logits of the next position; the token chosen is
    the one fed back at the next step, so each step stores the log-probability of every
    candidate's argmax and fixes it up once the chosen token is known (greedy: the same).
    """

    def __init__(self, model: str, n_ctx: int = 4096) -> None:
        engine = LlamaCppLLM(model, n_ctx=n_ctx)
        engine.warm_up()
        self.llama = engine._ready().llama
        self.model_id = model
        self.calls: list[dict[str, Any]] = []

    def complete(self, messages: Sequence[dict[str, str]], *, max_tokens: int = 512, temperature: float = 0.0,
                 **_: Any) -> Completion:  # fmt: skip
        from llama_cpp import LogitsProcessorList

        steps: list[tuple[int, float]] = []  # (argmax token, its log-probability) per step
        prev: dict[str, Any] = {}

        def record(input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
            if prev and steps and int(input_ids[-1]) != steps[-1][0]:  # sampled, not greedy
                tok = int(input_ids[-1])
                steps[-1] = (tok, float(prev["scores"][tok]) - prev["lse"])
            m = float(np.max(scores))
            lse = m + math.log(float(np.sum(np.exp(scores - m))))
            top = int(np.argmax(scores))
            steps.append((top, float(scores[top]) - lse))
            prev.update(scores=np.array(scores, copy=True), lse=lse)
            return scores

        out = self.llama.create_chat_completion(
            messages=[dict(x) for x in messages],
            max_tokens=max_tokens,
            temperature=temperature,
            seed=0,
            logits_processor=LogitsProcessorList([record]),
        )
        text = out["choices"][0]["message"].get("content") or ""
        pieces, raw, seen = [], b"", ""
        for tok, lp in steps:
            raw += self.llama.detokenize([tok])
            now = raw.decode("utf-8", errors="ignore")
            pieces.append((now[len(seen) :], lp))
            seen = now
        self.calls.append({"text": text, "tokens": pieces})
        usage = out.get("usage") or {}
        return Completion(text=text.strip(), prompt_tokens=int(usage.get("prompt_tokens", 0)),
                          completion_tokens=int(usage.get("completion_tokens", 0)), model=self.model_id)  # fmt: skip


def run(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in (answer_generation.OUT / "contexts.jsonl").open(encoding="utf-8")]
    rows = [r for r in rows if r["mode"] == "crag" and not r["abstained"]]
    if args.limit:
        rows = rows[: args.limit]
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"replies-{_slug(args.model)}.jsonl"
    done = {json.loads(line)["id"] for line in path.open(encoding="utf-8")} if path.exists() else set()
    llm = _Recording(args.model)
    with answer_generation._bar() as bar, path.open("a", encoding="utf-8") as f:
        task = bar.add_task(args.model, total=len(rows), completed=len(done))
        for r in rows:
            if r["id"] in done:
                continue
            llm.calls = []
            t0 = time.perf_counter()
            g = generate(
                r["question"], answer_generation._strips(r), llm, lang=r["lang"], max_tokens=160, reask_above=r["upper"]
            )
            rec = {
                "id": r["id"], "lang": r["lang"], "question": r["question"], "answerable": r["answerable"],
                "action": r["action"], "answer": g.text, "refused": g.refused,
                "hit": bool(r["answers"]) and gold_match(g.text, r["answers"]),
                "trimmed": g.trimmed, "tokens": llm.calls[-1]["tokens"], "llm_calls": len(llm.calls),
                "seconds": round(time.perf_counter() - t0, 2),
            }  # fmt: skip
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            f.flush()
            bar.advance(task)
    table(args)


def _words(rec: dict[str, Any], new_only: bool) -> list[float]:
    """Log-probabilities of the reply's word pieces (not in a citation marker; new to the question)."""
    pairs = rec["tokens"][:-1]  # the last step is the end of turn
    text = "".join(p for p, _ in pairs)
    markers = [m.span() for m in _MARKER.finditer(text)]
    question = rec["question"].lower()
    out, pos = [], 0
    for piece, lp in pairs:
        start, pos = pos, pos + len(piece)
        if not _WORD.search(piece) or any(a <= start < b for a, b in markers):
            continue
        if new_only and piece.strip().lower() in question:
            continue
        out.append(lp)
    return out or [0.0]


FEATURES: dict[str, Callable[[dict[str, Any]], float]] = {
    "min_all": lambda r: min(lp for _, lp in r["tokens"]),
    "min_words": lambda r: min(_words(r, False)),
    "low2_words": lambda r: float(np.mean(sorted(_words(r, False))[:2])),
    "min_new": lambda r: min(_words(r, True)),
    "low2_new": lambda r: float(np.mean(sorted(_words(r, True))[:2])),
    "mean_words": lambda r: float(np.mean(_words(r, False))),
}


def _auroc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    """AUROC of ``pos`` over ``neg`` (None when either is empty)."""
    a = auroc([1] * len(pos) + [0] * len(neg), [*pos, *neg])
    return None if math.isnan(a) else a


def table(args: argparse.Namespace) -> None:
    summary: dict[str, Any] = {}
    console = Console(width=150)
    for path in sorted(OUT.glob("replies-*.jsonl")):
        recs = [json.loads(line) for line in path.open(encoding="utf-8")]
        answered = [r for r in recs if not r["refused"]]
        model = path.stem.removeprefix("replies-")
        t = Table(
            title=f"{model}: AUROC of answer confidence ({len(recs)} contexts, {len(answered)} answered)",
            caption="r/w: right vs wrong answers; r/u: right answers vs answers to unanswerable questions "
            "(right/other counts in brackets); lowest 10 %: right/wrong answers among the least confident tenth",
        )
        t.add_column("confidence")
        for lang in ("en", "zh", "all"):
            t.add_column(f"{lang} r/w")
            t.add_column(f"{lang} r/u")
        t.add_column("lowest 10 % r/w")
        summary[model] = {"contexts": len(recs), "answered": len(answered), "features": {}}
        for name, f in FEATURES.items():
            cells, figures = [], {}
            for lang in ("en", "zh", "all"):
                sub = [r for r in answered if lang == "all" or r["lang"] == lang]
                right = [f(r) for r in sub if r["hit"]]
                wrong = [f(r) for r in sub if not r["hit"]]
                unanswerable = [f(r) for r in sub if not r["answerable"]]
                a, b = _auroc(right, wrong), _auroc(right, unanswerable)
                figures[lang] = {"right_vs_wrong": a, "right_vs_unanswerable": b, "right": len(right),
                                 "wrong": len(wrong), "unanswerable_answered": len(unanswerable)}  # fmt: skip
                cells += [_fmt(a, len(right), len(wrong)), _fmt(b, len(right), len(unanswerable))]
            # One operating point: withhold the least confident tenth of all answers.
            cut = float(np.quantile([f(r) for r in answered], 0.1))
            held = [r for r in answered if f(r) < cut]
            figures["withhold_lowest_10pct"] = {
                "right": sum(r["hit"] for r in held),
                "wrong": sum(not r["hit"] for r in held),
            }
            summary[model]["features"][name] = figures
            t.add_row(name, *cells, f"{sum(r['hit'] for r in held)}/{sum(not r['hit'] for r in held)}")
        console.print(t)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def _fmt(a: float | None, n_pos: int, n_neg: int) -> str:
    return "—" if a is None else f"{a:.3f} ({n_pos}/{n_neg})"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="answer the captured crag contexts, recording token log-probabilities")
    r.add_argument("--model", default="qwen2.5-coder-1.5b", help="a bundled model name or a GGUF path")
    r.add_argument("--limit", type=int, default=0, help="first N contexts only (0 = all)")
    r.set_defaults(func=run)
    sub.add_parser("table", help="AUROC tables of every run so far").set_defaults(func=table)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
