"""How fast the embedded model reads a prompt, by llama.cpp micro-batch size (``n_ubatch``).

Before its first token the model evaluates the answer prompt; on a 2-core CPU that is most
of the wait a streaming reader sees. This script builds the engine's answer prompts for
``data/hard`` questions (as ``benchmarks/decode.py`` does), loads the bundled model once per
setting and times the evaluation of each prompt after its system prompt (the head the engine
restores from a saved state), best of ``--repeat``. Run it on a quiet machine::

    python benchmarks/prompt_eval.py [--per-lang 8] [--ubatch 512,256,128] [--repeat 2]

Output: ``benchmarks/out/prompt_eval/summary.json`` and a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from decode import prompts  # noqa: E402

from crag.llm.chat_prompt import prompt_with_head  # noqa: E402
from crag.llm.models import resolve_gguf  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "prompt_eval"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-lang", type=int, default=8)
    ap.add_argument("--ubatch", default="512,256,128", help="n_ubatch values to compare (n_batch stays 512)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    args = ap.parse_args()

    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    path = resolve_gguf(args.model)
    cases = prompts(args.per_lang)
    threads = os.cpu_count() or 1
    summary: dict[str, dict[str, float]] = {}
    for ubatch in (int(u) for u in args.ubatch.split(",")):
        llama = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=4096,
            n_threads=threads,
            n_threads_batch=threads,
            n_ubatch=ubatch,
            flash_attn=True,
            verbose=False,
        )
        eos = llama.detokenize([llama.token_eos()], special=True).decode()
        fmt = Jinja2ChatFormatter(template=llama.metadata["tokenizer.chat_template"], eos_token=eos, bos_token="")
        rates, seconds, tails = [], [], []
        for _, _, messages in cases:
            tokens, head = prompt_with_head(llama, fmt, messages)
            llama.reset()
            llama.eval(tokens[:head])
            best = float("inf")
            for _ in range(args.repeat):
                llama.n_tokens = head
                start = time.perf_counter()
                llama.eval(tokens[head:])
                best = min(best, time.perf_counter() - start)
            seconds.append(best)
            tails.append(len(tokens) - head)
            rates.append((len(tokens) - head) / best)
        summary[str(ubatch)] = {
            "prompts": len(cases),
            "median_tail_tokens": statistics.median(tails),
            "median_s": round(statistics.median(seconds), 3),
            "tokens_per_s": round(statistics.median(rates), 1),
        }
        print(f"n_ubatch {ubatch:>4}: {summary[str(ubatch)]}", flush=True)
        llama.close()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2), "utf-8")


if __name__ == "__main__":
    main()
