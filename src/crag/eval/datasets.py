"""Evaluation datasets: one JSON object per line, checked line by line.

Each line is ``{"question": str, "answers": [str, ...], "id"?: str, "type"?: str,
"lang"?: "zh"|"en", "answerable"?: bool, ...}``; ``"answerable": false`` marks a question
whose answer is in no source (``answers`` may then be empty): the right reply is a
refusal, and the report counts those apart from the gold-answer metrics. Any other
field (``expected_action``, ``gold_location`` …) is kept in :attr:`EvalItem.extra` and
can be used to group the report. A bad line
stops the load with one :class:`~crag.errors.InputError` naming the file and line.

>>> from crag.eval.datasets import parse_lines
>>> items = parse_lines(['{"question": "Capital of France?", "answers": ["Paris"]}'], "qa.jsonl")
>>> items[0].id, items[0].lang, items[0].type
('qa.jsonl:1', 'en', 'unknown')
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crag.errors import InputError
from crag.text import detect_language

__all__ = ["EvalItem", "balanced_sample", "dataset_fingerprint", "load_dataset", "parse_lines"]

_LANGS = ("zh", "en")


@dataclass
class EvalItem:
    """One evaluation question with its accepted gold answers.

    >>> item = EvalItem(id="q1", question="谁发明了电话？", answers=["贝尔"], lang="zh")
    >>> item.group("lang")
    'zh'
    """

    id: str
    question: str
    answers: list[str]
    lang: str
    type: str = "unknown"
    extra: dict[str, Any] = field(default_factory=dict)
    answerable: bool = True

    def group(self, key: str) -> str:
        """The value of a grouping key (``lang``, ``type`` or any extra field) as text."""
        if key == "lang":
            return self.lang
        if key == "type":
            return self.type
        value = self.extra.get(key)
        return "unknown" if value is None else str(value)


def load_dataset(path: str | Path) -> list[EvalItem]:
    """Read and check a JSONL dataset; raises ``InputError`` naming the first bad line."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"dataset {p} does not exist; pass a .jsonl file with --dataset") from None
    except IsADirectoryError:
        raise InputError(f"dataset {p} is a folder; pass a .jsonl file with --dataset") from None
    except OSError as exc:
        raise InputError(f"cannot read dataset {p}: {exc.strerror or exc}") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a UTF-8 BOM from Windows editors is harmless
    lines: list[str] = []
    # Decode line by line so a file with mixed encodings names the offending line.
    for n, chunk in enumerate(raw.split(b"\n"), 1):
        try:
            lines.append(chunk.decode("utf-8"))
        except UnicodeDecodeError:
            raise InputError(
                f"{p}:{n}: not valid UTF-8 (mixed or legacy encoding?); re-save the file as UTF-8"
            ) from None
    items = parse_lines(lines, str(p))
    if not items:
        raise InputError(f"dataset {p} has no questions; add one JSON object per line")
    return items


def parse_lines(lines: Iterable[str], name: str = "<dataset>") -> list[EvalItem]:
    """Parse JSONL text lines (blank lines are skipped) into checked items."""
    items: list[EvalItem] = []
    seen: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        where = f"{name}:{n}"
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        item = _item(obj, where)
        if item.id in seen:
            raise InputError(f"{where}: duplicated id {item.id!r} (first on line {seen[item.id]}); ids must be unique")
        seen[item.id] = n
        items.append(item)
    return items


def _item(obj: Any, where: str) -> EvalItem:
    if not isinstance(obj, dict):
        raise InputError(f'{where}: expected a JSON object like {{"question": ..., "answers": [...]}}')
    q = obj.get("question")
    if q is None:
        raise InputError(f'{where}: missing "question"')
    if not isinstance(q, str) or not q.strip():
        raise InputError(f'{where}: "question" must be a non-empty string')
    if "answers" not in obj:
        raise InputError(f'{where}: missing "answers" (a list of accepted gold answers)')
    answers = obj["answers"]
    if isinstance(answers, str):
        raise InputError(f'{where}: "answers" must be a list of strings, e.g. ["Paris"]')
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise InputError(f'{where}: "answers" must be a list of strings')
    answers = [a.strip() for a in answers if a.strip()]
    answerable = obj.get("answerable", True)
    if not isinstance(answerable, bool):
        raise InputError(f'{where}: "answerable" must be true or false')
    if not answers and answerable:
        # An answerable question without gold answers would score every system 0.
        raise InputError(
            f'{where}: "answers" is empty; give at least one gold answer, or mark a question that no '
            'source answers with "answerable": false'
        )
    qid = obj.get("id", where)
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
        raise InputError(f'{where}: "id" must be a string or an integer')
    qtype = obj.get("type", "unknown")
    if not isinstance(qtype, str):
        raise InputError(f'{where}: "type" must be a string')
    lang = obj.get("lang")
    if lang is None:
        lang = detect_language(q)
    elif lang not in _LANGS:
        raise InputError(f'{where}: "lang" must be one of {", ".join(_LANGS)} (got {lang!r})')
    extra = {k: v for k, v in obj.items() if k not in ("id", "question", "answers", "type", "lang", "answerable")}
    return EvalItem(str(qid), q.strip(), answers, lang, qtype or "unknown", extra, answerable)


def balanced_sample(
    items: Sequence[EvalItem], limit: int | None, *, seed: int = 0, keys: Sequence[str] = ("lang", "type")
) -> list[EvalItem]:
    """Up to ``limit`` items drawn round-robin over the groups formed by ``keys``.

    Within a group the order is shuffled with ``seed`` so different seeds give different
    (but reproducible) subsets; groups take turns so a small limit still covers each.

    >>> qs = [EvalItem(str(i), "q", ["a"], "zh" if i % 2 else "en") for i in range(6)]
    >>> [q.id for q in balanced_sample(qs, 4, keys=("lang",), seed=1)]
    ['2', '5', '4', '1']
    """
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1 (got {limit})")
    if limit is None or limit >= len(items):
        return list(items)
    groups: dict[tuple[str, ...], list[EvalItem]] = {}
    for it in items:
        groups.setdefault(tuple(it.group(k) for k in keys), []).append(it)
    rng = random.Random(seed)
    queues = []
    for members in groups.values():
        members = list(members)
        rng.shuffle(members)
        queues.append(members)
    out: list[EvalItem] = []
    while len(out) < limit:
        for q in queues:
            if q and len(out) < limit:
                out.append(q.pop(0))
    return out


def dataset_fingerprint(items: Sequence[EvalItem]) -> str:
    """A short hash of the questions and answers, so a resumed run can check its dataset."""
    h = hashlib.sha256()
    for it in items:
        key: list[Any] = [it.id, it.question, it.answers]
        if not it.answerable:  # only then, so fingerprints of older datasets stay the same
            key.append(False)
        h.update(json.dumps(key, ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()[:16]
