"""How fast one llama-cpp-python build reads a prompt and writes tokens (compare CPU builds).

The Makefile builds llama.cpp for AVX2 (``GGML_NATIVE=OFF``), so the wheel runs on any x86-64
CPU of the last decade. To see what a build for a wider instruction set would give, build it
into a folder and put that folder first on the path::

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON" \\
        pip wheel --no-deps --no-cache-dir llama-cpp-python==0.3.36 -w /tmp/wheels
    python -m zipfile -e /tmp/wheels/llama_cpp_python-*.whl /tmp/avx512
    python benchmarks/llama_build.py                          # the installed build
    PYTHONPATH=/tmp/avx512 python benchmarks/llama_build.py   # the other one

It loads the bundled 1.5B as the engine does (all cores by default, flash attention), reads a
~440-token prompt from scratch and writes 25 tokens, ``--repeat`` times, and prints the median
prompt speed and time per written token. Run it on a quiet machine, alternating builds.

``--requantize TYPE`` (e.g. ``Q4_0``, ``Q8_0``) first rewrites the bundled Q4_K_M model in another
llama.cpp quantisation (under ``benchmarks/out/``) and measures that file instead, to compare
weight formats with one build.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from crag.llm.models import resolve_gguf  # noqa: E402

PASSAGE = (
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region "
    "in France. They were descended from Norse raiders and pirates from Denmark, Iceland and Norway. "
)


def requantize(source: Path, kind: str, threads: int) -> Path:
    """``source`` rewritten as llama.cpp quantisation ``kind`` (once) under benchmarks/out/."""
    import llama_cpp

    dest = ROOT / "benchmarks" / "out" / "llama_build" / f"{source.stem}.{kind.lower()}.gguf"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{kind.upper()}")
        params.allow_requantize = True  # the bundled weights are already quantised (Q4_K_M)
        params.nthread = threads
        if llama_cpp.llama_model_quantize(str(source).encode(), str(dest).encode(), params) != 0:
            raise SystemExit(f"could not requantize {source} as {kind}")
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--requantize", default="", help="llama.cpp type to rewrite the model in first, e.g. Q4_0")
    args = ap.parse_args()
    import llama_cpp

    print(llama_cpp.__file__)
    print(llama_cpp.llama_print_system_info().decode().strip())
    path = resolve_gguf(args.model)
    if args.requantize:
        path = requantize(path, args.requantize, args.threads)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=4096, n_threads=args.threads, flash_attn=True, verbose=False)
    prompt = f"<|im_start|>user\n{PASSAGE * 9}\nQuestion: In what country is Normandy located?<|im_end|>\n"
    tokens = llm.tokenize((prompt + "<|im_start|>assistant\n").encode(), special=True)
    newline = llm.tokenize(b"\n", add_bos=False)[0]
    reads, steps = [], []
    for _ in range(args.repeat):
        llm.reset()
        start = time.perf_counter()
        llm.eval(tokens)
        reads.append(time.perf_counter() - start)
        for _ in range(25):  # one token per pass, as greedy decoding writes them
            start = time.perf_counter()
            llm.eval([newline])
            steps.append(time.perf_counter() - start)
    read = statistics.median(reads)
    print(
        f"prompt {len(tokens)} tokens: {read:.2f} s ({len(tokens) / read:.0f} tokens/s); "
        f"writing {1000 * statistics.median(steps):.0f} ms/token"
    )


if __name__ == "__main__":
    main()
