"""How fast the embedded model writes an answer: plain greedy decoding against prompt lookup.

The sentence gate shows a sentence once the model has finished it, so the time the model takes
to write its first sentence is what a streaming reader waits for after the first token. This
script builds the answer prompt the engine builds (``crag.generate.prompts.build_messages``) for
``data/hard`` questions, from the gold passage and the two passages after it in the knowledge
base, and lets the bundled model answer each prompt once per decoding setting:

* ``plain``: one token per forward pass (``llm.lookup_decoding = false``);
* ``lookupN``: prompt lookup guessing up to N tokens per pass after the output's last 2–3 tokens
  recur (``llm.lookup_decoding = true``, the default, guesses ``crag.llm.lookup.DRAFT_TOKENS``);
* ``lookupNnM``: the same after a match of 3 down to M tokens (``n1``: after one token too, the
  rule before 2026-12-06; ``n3``: after three only); ``plain2``: plain again (run-to-run noise);
* a ``cN`` suffix (``lookup3c4096``): the prompt read N tokens at a time between two chances to
  stop (default ``crag.llm.prefix_cache.PROMPT_CHUNK``; ``c4096``: in one go, as before 2026-12-06).

Before each reply the model's cache is emptied, so every setting reads its prompt as the engine
does (the system prompt's saved state restored, the rest read).

``--from-traces KB/traces.sqlite`` answers the contexts the engine really answered from instead
(each saved trace's question and final context, rebuilt into the answer prompt), ``--per-lang``
of each language in trace order.

It reports the time to the first token, the time from the first token to the end of the first
sentence and to the end of the reply, forward passes, and how many replies equal the plain
ones (a batched pass can break a near tie the other way). Run it on a quiet machine::

    python benchmarks/decode.py [--per-lang 15] [--settings plain,lookup3,lookup8] [--flash-attn]
    python benchmarks/decode.py --from-traces KB/traces.sqlite --per-lang 35 --settings plain,lookup3,lookup3n1,plain2
    python benchmarks/decode.py --from-traces KB/traces.sqlite --per-lang 20 --settings lookup3c4096,lookup3

Output: ``benchmarks/out/decode/results.jsonl`` and ``summary.json``.
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

import crag.llm.lookup as lookup  # noqa: E402
import crag.llm.prefix_cache as prefix_cache  # noqa: E402
from crag.generate.prompts import build_messages  # noqa: E402
from crag.llm.llama_cpp import LlamaCppLLM  # noqa: E402
from crag.text import split_sentences  # noqa: E402
from crag.trace.store import TraceStore  # noqa: E402
from crag.types import Strip  # noqa: E402

DATA = ROOT / "data" / "hard"
DEFAULT_NGRAM = lookup.NGRAM
DEFAULT_CHUNK = prefix_cache.PROMPT_CHUNK
SETTING = re.compile(r"(?P<name>plain\d*|lookup(?P<draft>\d+)(?:n(?P<n>\d))?)(?:c(?P<chunk>\d+))?")


def prompts(per_lang: int) -> list[tuple[str, str, list[dict[str, str]]]]:
    """(id, language, messages) for the first questions of each language whose gold is in the knowledge base."""
    passages: dict[str, list[dict[str, Any]]] = {}
    for lang in ("en", "zh"):
        passages[lang] = [json.loads(line) for line in (DATA / "internal" / f"{lang}.jsonl").open(encoding="utf-8")]
    out: list[tuple[str, str, list[dict[str, str]]]] = []
    counts = {"en": 0, "zh": 0}
    for line in (DATA / "questions.jsonl").open(encoding="utf-8"):
        q = json.loads(line)
        lang = q["lang"]
        if counts[lang] >= per_lang or q.get("gold_location") != "internal":
            continue
        docs = passages[lang]
        at = next((i for i, d in enumerate(docs) if d["id"] == q["gold_passage_id"]), None)
        if at is None:
            continue
        strips = [Strip(d["text"], d["id"], "internal", d.get("title", "")) for d in docs[at : at + 3]]
        out.append((q["id"], lang, build_messages(q["question"], strips, lang)))
        counts[lang] += 1
    return out


def traced_prompts(db: Path, per_lang: int) -> list[tuple[str, str, list[dict[str, str]]]]:
    """(id, language, messages) rebuilt from saved traces, oldest first: the question and its final context."""
    store = TraceStore(db)
    out: list[tuple[str, str, list[dict[str, str]]]] = []
    counts = {"en": 0, "zh": 0}
    for row in reversed(store.list(limit=store.count())):  # list() is newest first
        trace = store.get(row["id"])
        lang = trace.get("language")
        if lang not in counts or counts[lang] >= per_lang or not trace.get("context"):
            continue
        strips = [Strip(c["text"], c["source"], c["origin"], c.get("title", "")) for c in trace["context"]]
        out.append((trace["id"], lang, build_messages(trace["question"], strips, lang)))
        counts[lang] += 1
    return out


def first_sentence_end(pieces: list[tuple[float, str]]) -> float:
    """Seconds at which the reply's first sentence was complete (the whole reply if it is one)."""
    text = ""
    for at, piece in pieces:
        text += piece
        if len(split_sentences(text)) > 1:
            return at
    return pieces[-1][0] if pieces else 0.0


def run_one(llm: LlamaCppLLM, messages: list[dict[str, str]], setting: str) -> dict[str, Any]:
    # "plain", "plain2" (a repeat), "lookupN", "lookupNnM" (guess after a match of 3 down to M tokens),
    # any of them + "cN" (read the prompt N tokens at a time)
    spec = SETTING.fullmatch(setting)
    assert spec is not None  # checked in main
    draft_tokens = int(spec["draft"]) if spec["draft"] else 0
    lookup.NGRAM = tuple(range(3, int(spec["n"]) - 1, -1)) if spec["n"] else DEFAULT_NGRAM
    prefix_cache.PROMPT_CHUNK = int(spec["chunk"]) if spec["chunk"] else DEFAULT_CHUNK
    loaded = llm._ready()
    loaded.llama.reset()  # read the prompt again (its system prompt restored from the saved state)
    decode = loaded.llama._ctx.decode
    passes = [0]

    def counted(batch: object) -> object:
        passes[0] += 1
        return decode(batch)

    llm.lookup_decoding, llm.draft_tokens = draft_tokens > 0, draft_tokens
    loaded.llama._ctx.decode = counted
    try:
        start = time.perf_counter()
        # "" pieces say the prompt is still being read: not the reply
        pieces = [(time.perf_counter() - start, p) for p in llm.stream(messages, max_tokens=160) if p]
    finally:
        loaded.llama._ctx.decode = decode
    first = pieces[0][0] if pieces else 0.0
    return {
        "first_token_s": round(first, 3),
        "first_sentence_s": round(first_sentence_end(pieces) - first, 3),
        "reply_s": round((pieces[-1][0] if pieces else 0.0) - first, 3),
        "passes": passes[0],
        "text": "".join(p for _, p in pieces).strip(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-lang", type=int, default=15)
    ap.add_argument("--settings", default="plain,lookup3,lookup8")
    ap.add_argument("--flash-attn", action="store_true", help="load the model with flash attention")
    ap.add_argument("--from-traces", type=Path, help="a knowledge base's traces.sqlite: answer its traced contexts")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "decode")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    settings = args.settings.split(",")
    if bad := [n for n in settings if not SETTING.fullmatch(n)]:
        raise SystemExit(f"unknown --settings {', '.join(bad)}: use plain, plain2, lookupN or lookupNnM (+cN)")
    llm = LlamaCppLLM("qwen2.5-coder-1.5b", flash_attn=args.flash_attn)
    llm.warm_up()
    items = traced_prompts(args.from_traces, args.per_lang) if args.from_traces else prompts(args.per_lang)
    rows: list[dict[str, Any]] = []
    with (args.out / "results.jsonl").open("w", encoding="utf-8") as f:
        for qid, lang, messages in items:
            for name in settings:
                row = {"id": qid, "lang": lang, "setting": name, **run_one(llm, messages, name)}
                rows.append(row)
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                print(f"{qid} {name}: first sentence {row['first_sentence_s']} s, reply {row['reply_s']} s",
                      flush=True)  # fmt: skip
    plain = {r["id"]: r["text"] for r in rows if r["setting"] == "plain"}
    first = {r["id"]: r["text"] for r in rows if r["setting"] == settings[0]}
    summary: dict[str, Any] = {}
    for name in settings:
        for lang in ("en", "zh", "all"):
            mine = [r for r in rows if r["setting"] == name and lang in (r["lang"], "all")]
            if not mine:
                continue
            summary.setdefault(name, {})[lang] = {
                "prompts": len(mine),
                "first_token_s_p50": round(statistics.median(r["first_token_s"] for r in mine), 3),
                "first_sentence_s_p50": round(statistics.median(r["first_sentence_s"] for r in mine), 3),
                "reply_s_mean": round(statistics.fmean(r["reply_s"] for r in mine), 3),
                "passes_mean": round(statistics.fmean(r["passes"] for r in mine), 1),
                "same_as_plain": sum(plain.get(r["id"]) == r["text"] for r in mine),
                "same_as_first": sum(first.get(r["id"]) == r["text"] for r in mine),
            }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
