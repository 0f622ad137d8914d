"""Greedy decoding for the embedded model, optionally with prompt lookup.

:func:`greedy_lookup` writes the greedy reply token by token on the model's own KV cache (the
prefix shared with the previous call is reused, and only the positions that are read ask for
logits). With ``draft_tokens`` > 0 it also *guesses* the next tokens by looking up the output's
last tokens in the prompt (prompt-lookup decoding, Saxena 2023: a grounded answer repeats its
sources) and checks the guess in one batch: the model's greedy choice at each position
confirms a guessed token or replaces it, and decoding resumes from the first disagreement.

Whether guessing pays depends on the machine and on when the decoder guesses. On the 2-core
CPU we measure on, a pass is compute-bound: 1 token 64 ms, 4 tokens 134 ms, 9 tokens 281 ms
(1.5B model, ~700-token context), so a wrong guess costs time. Guessing after any one-token
match (a name's first token, "the", a comma) was wrong so often that it was slower than plain
greedy decoding on real answer prompts; guessing 3 tokens only where the output's last two or
three tokens occur earlier (a clause being copied from a source, the question being restated)
writes the first sentence 0.26 s (English) and 0.41 s (Chinese) sooner, p50 over prompts rebuilt
from traced questions, and 32 of 35 English ones sooner (``benchmarks/decode.py --from-traces``).
Hence ``llm.lookup_decoding`` is on by default and guesses :data:`DRAFT_TOKENS` after an
n-gram of :data:`NGRAM`.

A batched pass computes in another order than a single one, so a near tie between two tokens
can rarely go the other way: with guessing on, the reply is the greedy reply up to such ties.

llama-cpp-python offers lookup (``LlamaPromptLookupDecoding``) only by computing logits for
every prompt token (``logits_all``): hundreds of MB copied per prompt, which a 2-core
machine pays for in prompt time. Here only the checked positions ask for logits.

Used by :class:`crag.llm.llama_cpp.LlamaCppLLM` at temperature 0; the model's lock is held
by the caller.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import numpy as np

from crag.llm.compute import COMPUTE
from crag.llm.prefix_cache import common_prefix

__all__ = ["DRAFT_TOKENS", "greedy_lookup", "lookup_draft"]

DRAFT_TOKENS = 3  # tokens guessed per pass: on a 2-core CPU a longer guess costs more than it saves
# The longest suffix of the output found earlier decides the guess. No one-token suffix: a single
# token recurs everywhere, and the guesses it gave were mostly wrong passes (benchmarks/decode.py).
NGRAM: tuple[int, ...] = (3, 2)


def lookup_draft(history: Sequence[int], prompt_len: int, limit: int = DRAFT_TOKENS) -> list[int]:
    """The tokens that followed the latest earlier occurrence of the output's last n-gram.

    >>> lookup_draft([5, 6, 7, 8, 9, 6, 7], prompt_len=5, limit=3)  # "6 7" was followed by 8, 9
    [8, 9, 6]
    >>> lookup_draft([1, 2, 3, 4], prompt_len=4)
    []
    >>> lookup_draft([5, 6, 7, 8, 9, 7], prompt_len=5)  # one token ("7") is too little to guess from
    []
    """
    n = len(history)
    for size in NGRAM:
        if n <= size:
            continue
        tail = list(history[n - size :])
        # search the prompt and the output so far, latest match first (the clause being copied)
        for start in range(n - size - 1, -1, -1):
            if list(history[start : start + size]) == tail:
                follow = list(history[start + size : start + size + limit])
                if follow:
                    return follow
    del prompt_len  # the whole history is searched; kept for callers that cap it later
    return []


def greedy_lookup(
    llama: Any, prompt: Sequence[int], max_tokens: int, draft_tokens: int = 0
) -> Generator[int, None, None]:
    """Yield the greedy continuation of ``prompt`` token by token (end-of-generation excluded).

    ``draft_tokens``: tokens guessed from the prompt per pass (0: none, one token per pass).

    ``llama`` is a loaded ``llama_cpp.Llama``; its KV cache is reused for the prefix this
    prompt shares with the last call, and left holding prompt + output (so the next call
    reuses it in turn). Closing the generator stops decoding.
    """
    import llama_cpp

    prompt = list(prompt)
    decoder = _Decoder(llama, llama_cpp)
    # Reuse the KV cache for the prefix shared with the previous call, as Llama.generate does.
    common = min(common_prefix(llama, prompt), len(prompt) - 1)
    llama.n_tokens = common
    with COMPUTE:
        llama.eval(prompt[common:])  # logits of the last prompt position only
    history = list(prompt)
    token = decoder.argmax(-1)
    written = 0
    while True:
        if decoder.is_end(token):
            return
        yield token
        written += 1
        history.append(token)
        if written >= max_tokens or llama.n_tokens + 1 >= llama.n_ctx():
            return
        room = min(draft_tokens, max_tokens - written, llama.n_ctx() - llama.n_tokens - 2)
        draft = lookup_draft(history, len(prompt), room) if room > 0 else []
        n_past, predicted = decoder.decode([token, *draft])
        accepted = 0
        for guess, choice in zip(draft, predicted, strict=False):
            if guess != choice or decoder.is_end(guess):
                break
            yield guess
            written += 1
            accepted += 1
            history.append(guess)
            if written >= max_tokens:
                decoder.keep(n_past + 1 + accepted)
                return
        decoder.keep(n_past + 1 + accepted)  # the rejected guesses leave the cache
        token = predicted[accepted]


class _Decoder:
    """The llama.cpp calls of a lookup decode: greedy picks, a batch decoded at once, the cache trimmed."""

    def __init__(self, llama: Any, lib: Any) -> None:
        self.llama, self.lib = llama, lib  # lib: the llama_cpp module
        self.ctx = llama._ctx
        self.vocab = llama._model.vocab
        self.n_vocab = llama.n_vocab()

    def argmax(self, i: int) -> int:
        """The greedy token after batch position ``i`` (-1: the last)."""
        logits = np.ctypeslib.as_array(self.lib.llama_get_logits_ith(self.ctx.ctx, i), shape=(self.n_vocab,))
        return int(np.argmax(logits))

    def is_end(self, token: int) -> bool:
        """Whether ``token`` ends the generation."""
        return bool(self.lib.llama_vocab_is_eog(self.vocab, token))

    def decode(self, batch: list[int]) -> tuple[int, list[int]]:
        """Decode ``batch`` after the cached tokens; return where it started and the greedy
        token after each of its positions."""
        llama = self.llama
        n_past = int(llama.n_tokens)
        with COMPUTE:
            llama._batch.set_batch(batch=batch, n_past=n_past, logits_all=True)
            self.ctx.decode(llama._batch)
            llama.input_ids[n_past : n_past + len(batch)] = batch
            predicted = [self.argmax(i) for i in range(len(batch))]
        return n_past, predicted

    def keep(self, n: int) -> None:
        """Keep the first ``n`` tokens in the cache; the rest leave it."""
        self.llama.n_tokens = n
        self.ctx.kv_cache_seq_rm(-1, n, -1)
