"""Answer and context metrics against gold answers, for Chinese and English.

Normalisation follows SQuAD (lower case, drop punctuation and English articles, squeeze
spaces) extended for Chinese (CJK punctuation, no spaces between characters). Token F1
uses the CMRC 2018 mixed segmentation: each CJK character is a token, each Latin or
digit run is a word.

>>> gold_match("Gentamicin is sold as Garamycin [1].", ["「Garamycin」"])
True
>>> round(token_f1("在1880年代走向商业化", ["1880年代"]), 2)
0.5
>>> exact_match("The Ming dynasty.", ["Ming dynasty"])
True
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from crag.generate import NO_CONTEXT, is_refusal
from crag.text import approx_tokens

__all__ = [
    "AnswerMetrics",
    "context_recall",
    "exact_match",
    "gold_match",
    "normalize_answer",
    "refused",
    "score_answer",
    "token_f1",
    "tokens_for_f1",
]

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CITATION = re.compile(r"\[\d{1,3}\]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CJK_SPACE = re.compile(rf"(?<=[{_CJK}])\s+|\s+(?=[{_CJK}])")
_F1_TOKEN = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
# ASCII punctuation plus the full-width and CJK marks SQuAD's list does not know.
_PUNCT = set(string.punctuation) | set("，。、；：？！「」『』（）《》〈〉【】〔〕“”‘’…—～·・﹏")


def normalize_answer(text: str) -> str:
    """SQuAD-style normalisation that also handles Chinese text and citation markers."""
    text = _CITATION.sub(" ", unicodedata.normalize("NFKC", text)).lower()
    text = "".join(" " if ch in _PUNCT or unicodedata.category(ch).startswith("P") else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    text = " ".join(text.split())
    # Spaces next to Chinese characters carry no meaning ("1880 年代" == "1880年代").
    return _CJK_SPACE.sub("", text)


def tokens_for_f1(text: str) -> list[str]:
    """Normalised tokens: Chinese per character, English per word."""
    return _F1_TOKEN.findall(normalize_answer(text))


def _contains(prediction: str, gold: str) -> bool:
    if not gold:
        return False
    if re.search(f"[{_CJK}]", gold):
        return gold in prediction
    # Word boundaries for Latin answers: "1880" must not match inside "18801".
    return re.search(rf"(?<![0-9a-z]){re.escape(gold)}(?![0-9a-z])", prediction) is not None


def gold_match(prediction: str, answers: Sequence[str]) -> bool:
    """True when any normalised gold answer occurs in the normalised prediction."""
    pred = normalize_answer(prediction)
    return any(_contains(pred, normalize_answer(a)) for a in answers)


def exact_match(prediction: str, answers: Sequence[str]) -> bool:
    """True when the normalised prediction equals a normalised gold answer."""
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(a) for a in answers)


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """Best token-overlap F1 over the gold answers (SQuAD / CMRC style)."""
    pred = tokens_for_f1(prediction)
    best = 0.0
    for a in answers:
        gold = tokens_for_f1(a)
        common = Counter(pred) & Counter(gold)
        same = sum(common.values())
        if not pred or not gold:
            score = float(pred == gold)
        elif same == 0:
            score = 0.0
        else:
            precision, recall = same / len(pred), same / len(gold)
            score = 2 * precision * recall / (precision + recall)
        best = max(best, score)
    return best


def context_recall(context: Sequence[str], answers: Sequence[str]) -> bool:
    """True when a gold answer occurs in any context strip the generator was given."""
    return any(gold_match(text, answers) for text in context)


@dataclass
class AnswerMetrics:
    """Gold-answer metrics of one answer (booleans are stored as 0/1 for averaging).

    >>> m = score_answer("Paris [1].", ["Paris"], ["Paris is the capital of France."])
    >>> m.accuracy, m.exact_match, m.context_recall, m.success, m.refused
    (1.0, 1.0, 1.0, 1.0, 0.0)
    """

    accuracy: float  # a gold answer is contained in the prediction
    exact_match: float
    f1: float
    context_recall: float
    context_tokens: int
    success: float  # a non-refusal answer was produced
    refused: float = 0.0  # the answer says the sources do not hold the answer

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_answer(
    prediction: str, answers: Sequence[str], context: Sequence[str], *, refusal: bool | None = None
) -> AnswerMetrics:
    """All answer and context metrics of one prediction.

    ``refusal`` is the engine's own verdict (:attr:`crag.types.Answer.refused`); without
    it the text is checked for the refusal phrases.
    """
    no = refused(prediction) if refusal is None else refusal
    return AnswerMetrics(
        accuracy=float(gold_match(prediction, answers)),
        exact_match=float(exact_match(prediction, answers)),
        f1=round(token_f1(prediction, answers), 4),
        context_recall=float(context_recall(context, answers)),
        context_tokens=sum(approx_tokens(t) for t in context),
        success=float(bool(prediction.strip()) and not no),
        refused=float(no),
    )


def cited_gold(answer: str, citations: Sequence[Any], answers: Sequence[str]) -> float | None:
    """Citation precision of one answer: does the sentence that gives the gold cite a source that holds it?

    1.0 when some answer sentence holding a gold answer cites (``spans``) a source whose text
    holds it too, 0.0 when none does, None when no cited sentence holds a gold answer (the
    answer is wrong, or cites nothing: nothing to check). ``citations`` are
    :class:`crag.types.Citation` objects or their dicts.

    >>> from crag.types import Citation
    >>> right = Citation(1, "a", "", "", "It opened in 1901.", spans=[(0, 12)])
    >>> wrong = Citation(2, "b", "", "", "It has a café.", spans=[(0, 12)])
    >>> cited_gold("In 1901 [1].", [right], ["1901"]), cited_gold("In 1901 [2].", [wrong], ["1901"])
    (1.0, 0.0)
    """
    spans: dict[tuple[int, int], list[str]] = {}
    for c in citations:
        get = c.get if isinstance(c, dict) else lambda k, c=c: getattr(c, k, None)
        for start, end in get("spans") or []:
            spans.setdefault((int(start), int(end)), []).append(str(get("text") or ""))
    holding = [texts for (start, end), texts in spans.items() if gold_match(answer[start:end], answers)]
    if not holding:
        return None
    return float(any(gold_match(text, answers) for texts in holding for text in texts))


def refused(prediction: str) -> bool:
    """``crag.generate.is_refusal`` plus the no-context replies in both languages.

    ``is_refusal`` misses the Chinese no-context reply (未能找到可靠的答案…), which
    would count as a success here.
    """
    return is_refusal(prediction) or any(m.split("：")[0].split(":")[0] in prediction for m in NO_CONTEXT.values())
