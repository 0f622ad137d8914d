"""Telling a refusal from an answer, in both languages.

A refusal is decided from what the reply *says* ("the sources do not mention …",
"资料中没有提到……"), not from one fixed sentence: the generator's prompt holds no refusal
template for a small model to copy, so models refuse in their own words.

>>> is_refusal("The sources do not mention when Corser was born.")
True
>>> is_refusal("资料中没有提到该公司的创始人。")
True
>>> is_refusal("Edward Corser was an Australian politician [1].")
False
>>> is_refusal("He did not contain his anger, the sources say [2].")
False
>>> is_refusal("Not in the sources."), is_refusal("答案不在资料中。")
(True, True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crag.generate.citations import CITE
from crag.text import split_sentences

# What the engine says when it has nothing to generate from (no context at all).
NO_CONTEXT = {
    "en": "I could not find a reliable answer: no relevant sources were found for this question.",
    "zh": "未能找到可靠的答案：没有找到与该问题相关的资料。",
}

_SUBJECT_EN = r"(?:sources?|documents?|context|texts?|passages?|information|provided|given|above|they|it)"
_EN = re.compile(
    r"\b(?:"
    rf"{_SUBJECT_EN}\b[^.]{{0,40}}?\b(?:do(?:es)?\s*n[o'’]t|did\s*n[o'’]t|cannot|can[’']t)\s+"
    r"(?:contain|mention|provide|include|say|state|specify|give|offer|answer|tell|discuss|describe|cover)"
    r"|(?:is|are|was|were)\s+not\s+(?:mentioned|provided|specified|stated|given|included|found|available|known)"
    r"|no\s+(?:information|mention|details?|answer|data|relevant)\b"
    r"|(?:cannot|can[’']t|unable\s+to|could\s*n[o'’]t|not\s+able\s+to)\s+(?:find|determine|answer|tell|identify|be\s+determined)"
    r"|i\s+(?:do\s*n[o'’]t|don[’']t)\s+know"
    r"|not\s+enough\s+information"
    r"|there\s+is\s+no\s+(?:information|mention|answer)"
    r"|\bnot\s+(?:in|found\s+in|given\s+in)\s+(?:the\s+|any\s+(?:of\s+the\s+)?)?(?:provided\s+)?(?:sources?|documents?|context|passages?)\b"
    r"|could\s+not\s+find\s+a\s+reliable\s+answer"
    r")",
    re.I,
)
_ZH = re.compile(
    r"(?:没有|未|并未|未曾|均未|都没有)(?:直接)?(?:提到|提及|找到|说明|给出|包含|涉及|明确|记载|相关信息|相关内容|关于|答案)"
    r"|无法(?:确定|回答|找到|得知|判断|得出|提供)"
    r"|不知道|没有答案|不包含|尚无(?:相关)?(?:信息|资料|记载)"
    r"|未能找到可靠的答案|没能找到可靠的答案|资料中没有|资料没有回答|信息不足"
    r"|不在(?:所给|提供的|这些)?资料(?:中|里|之中)"
)


def is_refusal(answer: str, sources: Sequence[str] = ()) -> bool:
    """True when the reply says the sources do not hold the answer.

    Only the opening sentence (or a short reply as a whole) counts: a long answer that
    mentions in passing what a source leaves out is still an answer. A sentence copied from
    one of ``sources`` is the source's content, not the model declining ("3,000 were killed.
    The exact number is not known." quotes a source that says so).

    >>> is_refusal("3,000 were killed [2]. The exact number is not known.", ["The exact number is not known."])
    False
    >>> is_refusal("The number is not known.", ["3,000 were killed."])
    True
    """
    text = answer.strip()
    if not text:
        return True
    sents = split_sentences(text) or [text]
    head = sents if len(text) <= 160 else sents[:1]
    quoted = _norm(" ".join(sources))
    said = " ".join(t for t in head if not (quoted and _norm(t) and _norm(t) in quoted))
    return bool(_EN.search(said) or _ZH.search(said))


def _norm(text: str) -> str:
    """Lower case, no citation markers, single spaces, no closing punctuation."""
    return " ".join(CITE.sub(" ", text).lower().split()).rstrip(" .。!！?？;；")
