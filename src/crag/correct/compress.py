"""LLM compression of the Correct path's strips (the article's 2.2: "去噪和压缩").

:func:`compress` asks the LLM to cut strips down to what answers the question; on any
failure the strips pass unchanged and the reason is returned as a degradation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from crag.correct.diversity import trigrams
from crag.errors import CragError, LLMReplyError
from crag.protocols import LLM
from crag.redact import clip
from crag.text import split_sentences
from crag.types import Query, Strip

_COMPRESS_PROMPT = {
    "en": (
        "Question: {q}\n\nNumbered passages:\n{passages}\n\n"
        "For each passage, copy only the sentences needed to answer the question, word for word; "
        "use an empty string for a passage that does not help. Keep at most about {n} tokens in total. "
        'Reply as JSON: {{"passages": ["...", "..."]}} with one entry per passage, in order.'
    ),
    "zh": (
        "问题：{q}\n\n编号的段落：\n{passages}\n\n"
        "对每个段落，只逐字摘抄回答问题所需的句子；对回答没有帮助的段落给出空字符串。总长度不超过约{n}个词元。"
        '以JSON格式回复：{{"passages": ["...", "..."]}}，每个段落一项，顺序不变。'
    ),
}
# A compressed sentence must be (nearly) copied from its passage: this blocks the model
# from slipping new, unsupported facts into the context.
_COPY_OVERLAP = 0.7


class Compressed(NamedTuple):
    """The compressed strips, and why compression was skipped (if it was)."""

    strips: list[Strip]
    degradations: list[str]


def compress(question: Query, strips: Sequence[Strip], llm: LLM, max_tokens: int) -> Compressed:
    """LLM compression of ``strips`` for ``question``; the strips unchanged on any failure.

    Each strip keeps its provenance (source, origin, url, score); only its text shrinks.
    A reply that is not JSON, has the wrong number of entries, invents sentences not in
    the passage, or keeps nothing is a failure, returned in ``degradations``.

    >>> from crag.testing.fakes import ScriptedLLM
    >>> s = [Strip("Paris is the capital. It rains a lot.", "a", "web")]
    >>> out = compress(Query("capital?", "en"), s, ScriptedLLM(['{"passages": ["Paris is the capital."]}']), 50)
    >>> [x.text for x in out.strips], out.degradations
    (['Paris is the capital.'], [])
    """
    if not strips:
        return Compressed([], [])
    lang = "zh" if question.language == "zh" else "en"
    passages = "\n".join(f"[{i + 1}] {s.text}" for i, s in enumerate(strips))
    prompt = _COMPRESS_PROMPT[lang].format(q=question.text, passages=passages, n=max_tokens)
    try:
        out = llm.complete(
            [{"role": "user", "content": prompt}],
            max_tokens=max(64, min(max_tokens + 64, 2048)),
            json_schema={
                "type": "object",
                "properties": {"passages": {"type": "array", "items": {"type": "string"}}},
            },
        )
        texts = _parse_passages(out.text, len(strips), llm.model_id)
        result: list[Strip] = []
        for strip, text in zip(strips, texts, strict=True):
            if not text:
                continue  # the model judged the passage unhelpful
            _check_copied(text, strip.text, llm.model_id)
            result.append(replace(strip, text=text))
        if not result:
            raise LLMReplyError("compression kept nothing", backend_id=llm.model_id, step="compress")
        return Compressed(result, [])
    except CragError as exc:
        return Compressed(list(strips), [f"LLM compression failed ({exc}); used uncompressed strips"])


def _parse_passages(text: str, n: int, model: str = "") -> list[str]:
    m = re.search(r"\{.*\}", text, re.S)
    try:
        data = json.loads(m.group(0)) if m else None
    except json.JSONDecodeError:
        data = None
    if data is None:
        raise LLMReplyError(f"reply is not JSON: {clip(text, 60)!r}", backend_id=model, step="compress")
    items = data.get("passages") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != n or not all(isinstance(x, str) for x in items):
        raise LLMReplyError(f"reply needs a 'passages' list of {n} strings", backend_id=model, step="compress")
    return [x.strip() for x in items]


def _check_copied(compressed: str, original: str, model: str = "") -> None:
    source = trigrams(original)
    for sent in split_sentences(compressed):
        grams = trigrams(sent)
        if grams and len(grams & source) / len(grams) < _COPY_OVERLAP:
            raise LLMReplyError(
                f"compressed text is not copied from its passage: {clip(sent, 60)!r}", backend_id=model, step="compress"
            )
