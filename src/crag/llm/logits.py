"""Reading a llama.cpp model's next-token logits: the ids of one-token answers, and their log-sum.

``yes_probability`` sums the probabilities of every single token that spells yes (yes, Yes,
YES, with or without a leading space) against those that spell no; a judge reading a 1–5
score does the same per digit. Logits are summed in log space, so a score stays finite when
every answer is unlikely.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["logsumexp", "single_token_ids"]


def single_token_ids(llama: Any, words: Sequence[str]) -> np.ndarray:
    """The ids of the tokens that spell one of ``words`` alone (with or without a leading space)."""
    ids: set[int] = set()
    for word in words:
        for variant in (word, " " + word):
            toks = llama.tokenize(variant.encode("utf-8"), add_bos=False, special=False)
            if len(toks) == 1:
                ids.add(int(toks[0]))
    return np.asarray(sorted(ids), dtype=np.int64)


def logsumexp(x: np.ndarray) -> float:
    """log(sum(exp(x))), without overflow."""
    m = float(np.max(x))
    return m + float(np.log(np.sum(np.exp(x - m))))
