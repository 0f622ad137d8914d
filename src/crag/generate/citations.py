"""Citations: the ``[n]`` markers an answer carries, and adding them when a model forgets.

>>> from crag.types import Strip
>>> ctx = [Strip("The Ming dynasty followed the Yuan.", "a.txt", "internal")]
>>> attach_citations("The Ming dynasty followed the Yuan.", ctx)
'The Ming dynasty followed the Yuan[1].'
>>> [c.id for c in citations_for("Ming [1] and [7].", ctx)]
[1]
>>> fence_markers('Ming, argues <source id="1" from="[web]" title="Yuan">.')
'Ming, argues [1].'
>>> trail_lead_markers("[2] Nearly 3,000 were killed in Toulouse. The total is not known.")
'Nearly 3,000 were killed in Toulouse[2]. The total is not known.'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crag.text import join_sentences, split_sentences
from crag.types import Citation, Strip

CITE = re.compile(r"\[(\d{1,3})\]")
# The prompt's fence tags echoed in a reply: a small model sometimes cites a source that way.
_FENCE_OPEN = re.compile(r"""<\s*source\b[^>]*?\bid\s*=\s*["']?(\d{1,3})["']?[^>]*>""", re.I)
_FENCE_OTHER = re.compile(r"<\s*/?\s*source\b[^>]*>", re.I)


def fence_markers(answer: str) -> str:
    """A reply that echoes the prompt's ``<source id="n" …>`` tags cites ``[n]`` instead."""
    return _FENCE_OTHER.sub("", _FENCE_OPEN.sub(r"[\1]", answer))


_LEAD = re.compile(r"^\s*((?:\[\d{1,3}\]\s*)+)(?=\w)")


def trail_lead_markers(answer: str) -> str:
    """Markers a reply opens with (``[2] Nearly 3,000 …``) move to the end of its first sentence,
    where a reader expects a citation; the text is otherwise unchanged."""
    m = _LEAD.match(answer)
    if not m:
        return answer
    marks = "".join(f"[{n}]" for n in CITE.findall(m.group(1)))
    sents = split_sentences(answer[m.end() :])
    if not sents:
        return answer
    sents[0] = cite_at_end(sents[0], marks)
    return join_sentences(sents)


def cite_at_end(sentence: str, marks: str) -> str:
    """``marks`` just before the sentence's closing punctuation (or at its end)."""
    body = sentence.rstrip("。.!！?？")
    return f"{body}{marks}{sentence[len(body) :]}"


def attach_citations(answer: str, context: Sequence[Strip], min_overlap: float = 0.3) -> str:
    """Append ``[n]`` to each answer sentence whose trigrams overlap a context strip enough."""
    grams = [_trigrams(s.text) for s in context]
    out = []
    for sent in split_sentences(answer) or [answer]:
        g = _trigrams(sent)
        best, score = 0, 0.0
        for n, cg in enumerate(grams, 1):
            ov = len(g & cg) / len(g) if g else 0.0
            if ov > score:
                best, score = n, ov
        if best and score >= min_overlap:
            sent = cite_at_end(sent, f"[{best}]")
        out.append(sent)
    return join_sentences(out)


def citations_for(answer: str, context: Sequence[Strip]) -> list[Citation]:
    """Citations for the ``[n]`` markers in the answer that point at real context items."""
    used = sorted({int(m) for m in CITE.findall(answer) if 1 <= int(m) <= len(context)})
    return [
        Citation(n, context[n - 1].source, context[n - 1].title, context[n - 1].url, context[n - 1].text) for n in used
    ]


def _trigrams(text: str) -> set[str]:
    t = re.sub(r"\s+", " ", text.lower())
    return {t[i : i + 3] for i in range(max(0, len(t) - 2))}
