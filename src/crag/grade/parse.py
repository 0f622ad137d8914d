"""A tolerant parser for LLM judge replies: scores, reasons and yes/no answers.

Small local models (and some servers that ignore ``json_schema``) reply in many shapes:
JSON inside code fences, ``Score: 0.7 Reason: ...``, the article's ``分数：0.7 理由：…``,
full-width digits and colons, percentages, 0–10 scales, a bare ``Yes.``. Everything is
normalised to a score in [0, 1]; anything that cannot be read returns ``None`` so the
caller can fall back loudly instead of inventing a neutral 0.5.

>>> parse_score("分数：０.７ 理由：文档直接回答了问题")
0.7
>>> parse_score("Score: 8/10")
0.8
>>> parse_yes_no("Yes.")
True
>>> parse_judgement('```json\\n{"score": 0.2, "reason": "off topic"}\\n```')
Judgement(score=0.2, reason='off topic')
>>> parse_score("I cannot tell.") is None
True
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any, NamedTuple

from crag.redact import clip

__all__ = [
    "BatchJudgement",
    "Judgement",
    "parse_batch",
    "parse_judgement",
    "parse_reason",
    "parse_score",
    "parse_yes_no",
]


class Judgement(NamedTuple):
    """One parsed grade: a score in [0, 1] and a (possibly empty) one-line reason."""

    score: float
    reason: str


class BatchJudgement(NamedTuple):
    """A parsed batch reply: judgements by 0-based document index, plus the set score if given."""

    documents: dict[int, Judgement]
    score: float | None
    reason: str


_SCORE_KEYS = ("score", "分数", "得分", "评分", "置信度", "confidence", "relevance", "rating", "相关性")
_REASON_KEYS = ("reason", "理由", "原因", "explanation", "rationale", "justification")
_NUM = r"[-+]?\d+(?:\.\d+)?|[-+]?\.\d+"
_SCALE = rf"(?P<num>{_NUM})\s*(?:(?P<pct>%|percent)|/\s*(?P<den>\d+(?:\.\d+)?)|(?:out\s+of|满分)\s*(?P<den2>\d+))?"
_LABELLED = re.compile(
    rf"(?:{'|'.join(map(re.escape, _SCORE_KEYS))})\s*(?:score)?\s*(?:\([^)]*\))?"
    rf"\s*(?:is|为|是)?\s*[:=]?\s*\[?\s*{_SCALE}",
    re.IGNORECASE,
)
_BARE = re.compile(rf"^\s*\[?\s*{_SCALE}\s*\]?\s*(?:[.。!！]|$|\s)", re.IGNORECASE)
_REASON = re.compile(rf"(?:{'|'.join(map(re.escape, _REASON_KEYS))})\s*[:=]\s*(?P<r>[^\n]+)", re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z]*\s*|```")
_YES = re.compile(r"^(?:yes|true|relevant|是|相关|有|包含|能)(?![a-z])", re.IGNORECASE)
_NO = re.compile(r"^(?:no|false|irrelevant|not relevant|否|不是|不相关|不包含|不能|没有|无关)(?![a-z])", re.IGNORECASE)
# Chat-template leftovers a small model may emit after its answer.
_JUNK = re.compile(r"<\|[^|>]*\|>|</?s>")
_DOC_LINE = re.compile(
    r"^\s*(?:\[|\(|#|doc(?:ument)?\s*|passage\s*|文档\s*|段落\s*)?(?P<i>\d{1,2})\s*[\])\].:：、-]?\s*(?P<rest>.*)$",
    re.IGNORECASE,
)


def normalise(text: str) -> str:
    """NFKC folds full-width digits, colons and percent signs to ASCII; junk tokens go."""
    return _JUNK.sub(" ", unicodedata.normalize("NFKC", text or "")).strip()


def _scaled(m: re.Match[str]) -> float | None:
    try:
        v = float(m.group("num"))
    except (TypeError, ValueError):
        return None
    den = m.group("den") or m.group("den2")
    if m.group("pct"):
        v /= 100.0
    elif den:
        d = float(den)
        if d <= 0:
            return None
        v /= d
    elif 1.0 < v <= 10.0:  # a 0–10 scale ("Score: 7")
        v /= 10.0
    elif 10.0 < v <= 100.0:  # a percentage written without the sign
        v /= 100.0
    return round(v, 6) if 0.0 <= v <= 1.0 else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        m = _BARE.match(str(value))
        return _scaled(m) if m else None
    if isinstance(value, str):
        return parse_score(value)
    return None


def _json_values(text: str) -> list[Any]:
    """Every JSON object or array embedded in ``text`` (code fences and trailing junk ignored)."""
    text = _FENCE.sub("\n", text)
    dec = json.JSONDecoder()
    out: list[Any] = []
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = dec.raw_decode(text, i)
            except json.JSONDecodeError:
                i += 1
                continue
            out.append(value)
            i = end
        else:
            i += 1
    return out


def _lookup(obj: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    low = {str(k).strip().lower(): v for k, v in obj.items()}
    for k in keys:
        if k in low:
            return low[k]
    return None


def parse_yes_no(text: str) -> bool | None:
    """``True`` for yes-like replies (Yes. / yes / YES / 是), ``False`` for no-like, else ``None``."""
    t = normalise(text).strip(" \t\n\"'`*[]()（）【】「」")
    if not t:
        return None
    # No first: "not relevant" must not be read as "relevant".
    if _NO.match(t):
        return False
    if _YES.match(t):
        return True
    return None


def parse_score(text: str) -> float | None:
    """A score in [0, 1] from a judge reply, or ``None`` when there is none to read."""
    t = normalise(text)
    if not t:
        return None
    for value in _json_values(t):
        if isinstance(value, Mapping):
            s = _number(_lookup(value, _SCORE_KEYS))
            if s is not None:
                return s
    for m in _LABELLED.finditer(t):
        s = _scaled(m)
        if s is not None:
            return s
    bare = _BARE.match(_FENCE.sub("", t))
    if bare:
        return _scaled(bare)
    yn = parse_yes_no(t)
    return None if yn is None else float(yn)


def parse_reason(text: str) -> str:
    """The one-line reason of a judge reply ('' when none is given)."""
    t = normalise(text)
    for value in _json_values(t):
        if isinstance(value, Mapping):
            r = _lookup(value, _REASON_KEYS)
            if isinstance(r, str) and r.strip():
                return _one_line(r)
    m = _REASON.search(t)
    return _one_line(m.group("r")) if m else ""


def parse_judgement(text: str) -> Judgement | None:
    """Score and reason of a single-document reply, or ``None`` if no score can be read."""
    s = parse_score(text)
    return None if s is None else Judgement(s, parse_reason(text))


def parse_batch(text: str, n: int) -> BatchJudgement | None:
    """Per-document judgements of a batch reply grading ``n`` documents numbered 1..n.

    Documents the reply does not grade are simply absent from ``documents``; an item
    without an id is placed by position only when the reply grades exactly ``n`` items.
    Returns ``None`` when nothing at all can be read.
    """
    t = normalise(text)
    for value in _json_values(t):
        items: list[Any] | None = None
        set_score: float | None = None
        set_reason = ""
        if isinstance(value, Mapping):
            raw = _lookup(value, ("documents", "docs", "grades", "passages", "results", "文档"))
            items = raw if isinstance(raw, list) else None
            set_score = _number(_lookup(value, _SCORE_KEYS))
            r = _lookup(value, _REASON_KEYS)
            set_reason = _one_line(r) if isinstance(r, str) else ""
        elif isinstance(value, list):
            items = value
        if items is None:
            continue
        docs = _place(items, n)
        if docs or set_score is not None:
            return BatchJudgement(docs, set_score, set_reason)
    docs = _text_lines(t, n)
    overall = _overall(t)
    if docs or overall is not None:
        return BatchJudgement(docs, overall, "")
    return None


def _place(items: list[Any], n: int) -> dict[int, Judgement]:
    docs: dict[int, Judgement] = {}
    unplaced: list[tuple[int, Judgement]] = []
    for pos, item in enumerate(items):
        if isinstance(item, Mapping):
            s = _number(_lookup(item, _SCORE_KEYS))
            r = _lookup(item, _REASON_KEYS)
            j = None if s is None else Judgement(s, _one_line(r) if isinstance(r, str) else "")
            idx = _index(_lookup(item, ("id", "doc", "document", "index", "编号", "文档")))
        else:
            s = _number(item)
            j = None if s is None else Judgement(s, "")
            idx = None
        if j is None:
            continue
        if idx is not None and 1 <= idx <= n:
            docs.setdefault(idx - 1, j)
        else:
            unplaced.append((pos, j))
    if unplaced and len(items) == n:
        for pos, j in unplaced:
            docs.setdefault(pos, j)
    return docs


def _index(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = re.search(r"\d+", normalise(value))
        return int(m.group()) if m else None
    return None


def _text_lines(t: str, n: int) -> dict[int, Judgement]:
    docs: dict[int, Judgement] = {}
    for line in t.splitlines():
        m = _DOC_LINE.match(line)
        if not m:
            continue
        i = int(m.group("i"))
        if 1 <= i <= n and i - 1 not in docs:
            j = parse_judgement(m.group("rest"))
            if j is not None:
                docs[i - 1] = j
    return docs


def _overall(t: str) -> float | None:
    for line in t.splitlines():
        if re.match(r"\s*(?:overall|set|总体|整体|总分)", line, re.IGNORECASE):
            return parse_score(line)
    return None


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return clip(line.strip(" []【】\"'"), 300)  # a model's words: redacted before the cut
