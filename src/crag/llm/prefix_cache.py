"""Saved model states of prompt heads, so a system prompt is evaluated once, not once per request.

A prompt's *head* is everything before its last message's text: the system prompt and the
opening of the user turn. The answer prompt's head is the same for every question of a
language, and on this CPU it costs about a second to evaluate. llama.cpp reuses the
KV cache for the prefix a prompt shares with the previous call, but any other call in
between (the Correct path's yes/no verification, LLM grading, a condensed follow-up)
replaces it, and the next answer evaluates its head again. Here the state after the head
(KV cache cells, about 2 MB for 100 tokens; no logits) is kept, a few heads at most, and
restored when the model's cache no longer holds the head: restoring takes ~50 ms.

The tokens that follow are evaluated as before, so a reply after a restore is the reply
after the head was evaluated and saved, token for token (tests/llm/test_llm_llama_cpp.py
compares them). With flash attention, a prompt evaluated in one batch instead of head then
tail can differ in its last decimals, as any change of batch split does.

>>> cache = PrefixStates(capacity=2, min_tokens=4)
>>> cache.head_to_keep([1, 2, 3, 4, 5, 6], head=5), cache.head_to_keep([1, 2, 3], head=2)
(5, 0)
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from crag.llm.compute import COMPUTE

__all__ = ["PrefixStates", "common_prefix", "read_prompt"]

MIN_HEAD_TOKENS = 48  # shorter heads (a grader's bare user turn) cost less than keeping them
CAPACITY = 4  # answer prompts in two languages, and a contradiction notice or two
# Prompt tokens read between two chances to stop (~1.5 s on 2 cores): as fast as one read, and
# the same replies on 40 of 40 traced prompts (benchmarks/README, "Reading the prompt in blocks").
PROMPT_CHUNK = 128


@dataclass(frozen=True)
class _State:
    data: bytes  # llama_state_get_data: the KV cells of the head (and the context's small buffers)
    tokens: np.ndarray


def common_prefix(llama: Any, tokens: Sequence[int]) -> int:
    """How many leading ``tokens`` the model's KV cache already holds."""
    n_prev = min(int(llama.n_tokens), len(tokens))
    prev = np.asarray(llama.input_ids[:n_prev])
    differ = np.nonzero(prev != np.asarray(tokens[:n_prev], dtype=prev.dtype))[0]
    return int(differ[0]) if len(differ) else n_prev


class PrefixStates:
    """A small LRU of model states after a prompt head; use it under the model's lock.

    Call :meth:`prepare` before evaluating a prompt: afterwards the model's cache holds the
    head (restored, or evaluated and saved), and the caller's usual prefix reuse evaluates
    only the rest.
    """

    def __init__(self, capacity: int = CAPACITY, min_tokens: int = MIN_HEAD_TOKENS) -> None:
        self.capacity = capacity
        self.min_tokens = min_tokens
        self._states: OrderedDict[tuple[int, ...], _State] = OrderedDict()  # guarded by the model's lock
        self.restored = 0  # counters, for tests and benchmarks
        self.saved = 0

    def head_to_keep(self, tokens: Sequence[int], head: int) -> int:
        """``head`` when it is worth a saved state (long enough, and not the whole prompt), else 0."""
        return head if self.min_tokens <= head < len(tokens) else 0

    def prepare(self, llama: Any, tokens: Sequence[int], head: int) -> None:
        """Leave ``tokens[:head]`` in ``llama``'s cache, from a saved state when one matches."""
        head = self.head_to_keep(tokens, head)
        if not head or common_prefix(llama, tokens) >= head:
            return  # nothing to keep, or the cache already holds the head
        import llama_cpp

        key = tuple(int(t) for t in tokens[:head])
        state = self._states.get(key)
        if state is not None:
            self._states.move_to_end(key)
        ctx = llama._ctx.ctx
        if state is not None:
            buf = (ctypes.c_uint8 * len(state.data)).from_buffer_copy(state.data)
            if llama_cpp.llama_state_set_data(ctx, buf, len(state.data)) == len(state.data):
                llama.input_ids[:head] = state.tokens
                llama.n_tokens = head
                llama._requires_eval = True  # logits are not restored: the rest of the prompt refreshes them
                self.restored += 1
                return
            llama.n_tokens = 0  # a state that does not fit this context: evaluate the head again
        start = common_prefix(llama, tokens)
        llama.n_tokens = start
        with COMPUTE:
            llama.eval(list(tokens[start:head]))
        size = int(llama_cpp.llama_state_get_size(ctx))
        buf = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_get_data(ctx, buf, size))
        self._states[key] = _State(bytes(buf)[:written], np.asarray(tokens[:head], dtype=np.intc))
        while len(self._states) > self.capacity:
            self._states.popitem(last=False)
        self.saved += 1


def read_prompt(llama: Any, tokens: Sequence[int], chunk: int | None = None) -> Iterator[int]:
    """Evaluate the leading whole ``chunk``-token blocks of ``tokens`` after the cached prefix,
    leaving the last block (at least one token) to the decoder, which reads it for its logits;
    yield how many tokens are read after each block.

    A reader that stops between two blocks (a closed stream) frees the model there instead of
    after the whole prompt. The last block stays with the decoder: read alone, the last token
    changed 4 of 20 English replies (the batch split changes the order of the sums), while
    blocks of 128 with the rest read whole changed none of 40 (benchmarks/README).
    """
    step = max(1, chunk or PROMPT_CHUNK)
    llama.n_tokens = min(common_prefix(llama, tokens), max(len(tokens) - 1, 0))
    start = int(llama.n_tokens)
    while start + step < len(tokens):
        with COMPUTE:
            llama.eval(tokens[start : start + step])
        start += step
        yield start
