"""Context-aware decoding for the bundled reader: does contrasting "with sources" and "without" help?

A small model often answers from what it already believes instead of from the passage.
Context-aware decoding (Shi et al. 2023, "Trusting Your Evidence") scores each next token
twice, with the sources and without them, and keeps what the sources add:

    score(y) = (1 + α) · log p(y | sources, question) − α · log p(y | question)

restricted to tokens with p ≥ 0.1 × the likeliest (the plausibility constraint of
contrastive decoding, Li et al. 2023). ``--alpha ada`` sets α per token to the
Jensen-Shannon divergence of the two distributions (AdaCAD, Wang et al. 2024), so the
contrast is off where the sources change nothing (restating the question).

The engine's generator (:func:`crag.generate.generate`: prompt, re-ask, cut, refusal rules)
writes every answer; only decoding changes. The "without" distribution comes from a
second llama.cpp context over the same GGUF that reads the prompt without the sources and
follows the reply token by token. Contexts: ``--oracle gold`` (the gold passage alone, the
reader's ceiling; baseline: ``answer_generation.py run --oracle gold``) or ``--oracle none``
(the captured crag contexts; baseline: ``answer_confidence.py``'s replies, the same
generator with plain decoding). Rows alternate between languages, so a partial run is
balanced.

    python benchmarks/context_aware_decoding.py run --alpha 0.5 --oracle gold --lang en
    python benchmarks/context_aware_decoding.py run --alpha ada --oracle none
    python benchmarks/context_aware_decoding.py table

Results: ``benchmarks/out/context_aware_decoding/``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from crag.eval.metrics import gold_match, token_f1
from crag.generate import generate
from crag.llm.llama_cpp import LlamaCppLLM
from crag.protocols import Completion

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import answer_generation  # noqa: E402  (the captured contexts and the oracle)

OUT = ROOT / "benchmarks" / "out" / "context_aware_decoding"
BASELINES = {
    "gold": ROOT / "benchmarks/out/answer_generation/answers-qwen2.5_coder_1.5b_oracle_gold-crag-crag.jsonl",
    "none": ROOT / "benchmarks/out/answer_confidence/replies-qwen2_5_coder_1_5b.jsonl",
}
PLAUSIBLE = math.log(0.1)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = float(x.max())
    return x - (m + math.log(float(np.exp(x - m).sum())))


class Contrasting:
    """The bundled model, decoding by contrast with a second context that has no sources."""

    def __init__(self, model: str, alpha: float | None) -> None:
        self.model_id = model
        self.alpha = alpha  # None: adaptive (Jensen-Shannon divergence per token)
        self.main = LlamaCppLLM(model, n_ctx=4096)
        self.main.warm_up()
        prior = LlamaCppLLM(model, n_ctx=2048)
        prior.warm_up()
        self.prior = prior._ready()
        LlamaCppLLM._prepare_yes_no(self.prior)  # the chat template

    def complete(self, messages: Any, *, max_tokens: int = 512, temperature: float = 0.0, **_: Any) -> Completion:
        from llama_cpp import LogitsProcessorList

        user = messages[1]["content"]  # fenced sources, then "\n\nQuestion: …": keep the question only
        without = [messages[0], {"role": "user", "content": user[user.rfind("\n\n") + 2 :]}]
        prompt = self.prior.formatter(messages=without).prompt
        tokens = self.prior.llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        start: list[int] = []

        def contrast(input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
            if not start:
                start.append(len(input_ids))
            reply = [int(t) for t in input_ids[start[0] :]]
            ls = _log_softmax(np.asarray(scores, dtype=np.float64))
            lq = _log_softmax(LlamaCppLLM._next_token_logits(self.prior.llama, tokens + reply))
            if self.alpha is None:
                p, q = np.exp(ls), np.exp(lq)
                m = np.log(0.5 * (p + q) + 1e-30)
                a = max(0.0, 0.5 * float(np.sum(p * (ls - m))) + 0.5 * float(np.sum(q * (lq - m)))) / math.log(2)
            else:
                a = self.alpha
            out = (1 + a) * ls - a * lq
            out[ls < ls.max() + PLAUSIBLE] = -1e9
            return out.astype(scores.dtype)

        loaded = self.main._ready()
        with loaded.lock:
            reply = loaded.llama.create_chat_completion(
                messages=[dict(m) for m in messages],
                max_tokens=max_tokens,
                temperature=0.0,
                seed=0,
                logits_processor=LogitsProcessorList([contrast]),
            )
        return Completion(text=(reply["choices"][0]["message"].get("content") or "").strip(), model=self.model_id)


def run(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in (answer_generation.OUT / "contexts.jsonl").open(encoding="utf-8")]
    rows = [r for r in rows if r["mode"] == "crag" and not r["abstained"]]
    if args.oracle == "gold":
        rows = answer_generation._with_gold(rows, "gold")
    by_lang = [[r for r in rows if r["lang"] == lang and args.lang in ("all", lang)] for lang in ("en", "zh")]
    rows = [r for pair in itertools.zip_longest(*by_lang) for r in pair if r is not None]
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{args.model}-alpha_{args.alpha}-oracle_{args.oracle}.jsonl"
    done = {json.loads(line)["id"] for line in path.open(encoding="utf-8")} if path.exists() else set()
    llm = Contrasting(args.model, None if args.alpha == "ada" else float(args.alpha))
    with path.open("a", encoding="utf-8") as f:
        for r in rows:
            if r["id"] in done:
                continue
            t0 = time.perf_counter()
            g = generate(
                r["question"], answer_generation._strips(r), llm, lang=r["lang"], max_tokens=160, reask_above=r["upper"]
            )
            rec = {
                "id": r["id"], "lang": r["lang"], "answerable": r["answerable"], "answer": g.text,
                "refused": g.refused, "hit": bool(r["answers"]) and gold_match(g.text, r["answers"]),
                "f1": token_f1(g.text, r["answers"]) if r["answers"] else 0.0,
                "seconds": round(time.perf_counter() - t0, 2),
            }  # fmt: skip
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            f.flush()
            print(r["lang"], "hit" if rec["hit"] else "miss", g.text[:80], flush=True)
    table(args)


def table(args: argparse.Namespace) -> None:
    answers = {
        q["id"]: q["answers"] for q in map(json.loads, (ROOT / "data/hard/questions.jsonl").open(encoding="utf-8"))
    }
    t = Table(title="Context-aware decoding vs plain decoding, question by question (the same contexts)")
    columns = ["run", "lang", "n", "answerable", "gold in answer: plain → contrast", "gained / lost"]
    columns += ["refused, answerable", "refused, unanswerable", "token F1", "answer chars", "s per answer"]
    for col in columns:
        t.add_column(col)
    for path in sorted(OUT.glob("*.jsonl")):
        oracle = path.stem.rsplit("oracle_", 1)[1]
        base = {r["id"]: r for r in map(json.loads, BASELINES[oracle].open(encoding="utf-8"))}
        new = [r for r in map(json.loads, path.open(encoding="utf-8")) if r["id"] in base]
        for lang in ("en", "zh"):
            sub = [r for r in new if r["lang"] == lang]
            if not sub:
                continue
            ans = [r for r in sub if r["answerable"]]
            b = [base[r["id"]] for r in sub]
            bans = [base[r["id"]] for r in ans]
            gained = sum(r["hit"] and not base[r["id"]]["hit"] for r in ans)
            lost = sum(base[r["id"]]["hit"] and not r["hit"] for r in ans)
            f1 = [token_f1(x["answer"], answers[x["id"]]) for x in bans], [r["f1"] for r in ans]
            t.add_row(
                path.stem, lang, str(len(sub)), str(len(ans)),
                f"{sum(x['hit'] for x in bans)} → {sum(r['hit'] for r in ans)}", f"+{gained} / −{lost}",
                f"{sum(x['refused'] for x in bans)} → {sum(r['refused'] for r in ans)}",
                f"{sum(x['refused'] for x in b if not x['answerable'])} → "
                f"{sum(r['refused'] for r in sub if not r['answerable'])}",
                f"{np.mean(f1[0]):.3f} → {np.mean(f1[1]):.3f}" if ans else "—",
                f"{np.mean([len(x['answer']) for x in b]):.0f} → {np.mean([len(r['answer']) for r in sub]):.0f}",
                f"{np.mean([x.get('seconds', 0) for x in b]):.1f} → {np.mean([r['seconds'] for r in sub]):.1f}",
            )  # fmt: skip
    Console(width=200).print(t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="answer with context-aware decoding")
    r.add_argument("--model", default="qwen2.5-coder-1.5b")
    r.add_argument("--alpha", default="0.5", help="the contrast weight α, or 'ada' (per token, AdaCAD)")
    r.add_argument("--oracle", choices=["gold", "none"], default="none", help="gold passage alone, or captured context")
    r.add_argument("--lang", choices=["en", "zh", "all"], default="all")
    r.set_defaults(func=run)
    sub.add_parser("table", help="every run against plain decoding").set_defaults(func=table)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
