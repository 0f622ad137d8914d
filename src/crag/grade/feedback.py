"""User feedback on answers turned into evaluator training pairs.

A rating (👍 ``up`` / 👎 ``down``) is stored beside the trace it rates
(:meth:`crag.trace.store.TraceStore.rate`). :func:`feedback_pairs` reads what the trace
recorded — the question, the context the generator saw with the grade of each strip,
the citations — and turns the rating into ``(query, passage, label)`` pairs for
``crag evaluator train``:

* **up** on an answer: the passages the answer *cited* answered the question → label 1.
  Uncited context says nothing certain and is left out.
* **up** on an abstention ("the sources do not say"): the user agrees that the passages
  shown do not answer → label 0.
* **down** on an answer: the passages the evaluator graded relevant (grade ≥
  :data:`RELEVANT_AT`) did not lead to a good answer → label 0. Passages already graded
  irrelevant add nothing and are left out. **Except** a passage the answer cites that
  holds the sentence citing it (its content words and figures, :mod:`crag.generate.grounding`),
  or that holds a gold answer the trace knows: the evidence says it *is* relevant, so the
  👎 is about something else (the answer's wording, a namesake, the user's own knowledge).
  Such a pair goes to the **review queue** (``review``), never into the export as "not
  relevant": a retrained evaluator must not learn a label the evidence contradicts.
* **down** on an abstention: the answer may sit in a passage the grader dropped, but no
  pair is certain → nothing exported (counted as skipped).

A 👎 on an answer whose context was *all* graded relevant is a **likely grader miss**
(:func:`likely_grader_miss`): the grader let through passages the user found useless.
Its pairs carry ``"likely_grader_miss": true`` and the viewer shows the flag.

Passages are written as the evaluator grades them (document title in front, see
:func:`crag.correct.refine.graded_text`), so a retrained model sees what it will grade.

>>> trace = {"id": "t1", "question": "Who?", "answer": "Ada [1].", "language": "en",
...          "context": [{"text": "Ada wrote it.", "source": "a.md", "origin": "internal", "title": "Notes"}],
...          "strips": [{"text": "Ada wrote it.", "source": "a.md", "score": 0.9, "kept": True}],
...          "citations": [{"id": 1, "source": "a.md", "title": "Notes", "text": "Ada wrote it."}]}
>>> [(p["passage"], p["label"]) for p in feedback_pairs(trace, "up")]
[('Notes: Ada wrote it.', 1)]
>>> [(p["passage"], p["label"], p["review"]) for p in feedback_pairs(trace, "down")]
[('Notes: Ada wrote it.', 0, 'cited, and it holds the sentence that cites it')]
>>> del trace["citations"]  # an uncited passage graded relevant: the 👎 is exported
>>> [(p["passage"], p["label"], p["review"]) for p in feedback_pairs(trace, "down")]
[('Notes: Ada wrote it.', 0, '')]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from crag.correct.refine import graded_text
from crag.generate.grounding import grounded

__all__ = [
    "RELEVANT_AT",
    "ExportReport",
    "context_grades",
    "evidence_for",
    "export_feedback",
    "feedback_pairs",
    "likely_grader_miss",
]

RELEVANT_AT = 0.5  # a grade at or above this is "graded relevant" (also the viewer's colour split)


def _items(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def context_grades(trace: dict[str, Any]) -> list[float | None]:
    """The evaluator's grade of each context item the generator saw (None when not graded).

    Context items are strips; their grades are in ``trace["strips"]``, matched by text and
    source. Plain-RAG traces and LLM-compressed context have no grade.
    """
    graded: dict[tuple[str, str], float] = {}
    for s in _items(trace.get("strips")):
        if isinstance(s.get("score"), (int, float)) and isinstance(s.get("text"), str):
            graded.setdefault((s["text"], str(s.get("source") or "")), float(s["score"]))
    return [graded.get((str(c.get("text") or ""), str(c.get("source") or ""))) for c in _items(trace.get("context"))]


def likely_grader_miss(trace: dict[str, Any], rating: str | None) -> bool:
    """True for a 👎 on an answer (not an abstention) whose context was all graded relevant."""
    if rating != "down" or trace.get("refused") or trace.get("abstained"):
        return False
    grades = context_grades(trace)
    return bool(grades) and all(g is not None and g >= RELEVANT_AT for g in grades)


def feedback_pairs(trace: dict[str, Any], rating: str, comment: str | None = None) -> list[dict[str, Any]]:
    """The (query, passage, label) pairs one rated trace gives (see the module docstring)."""
    question = str(trace.get("question") or "").strip()
    if not question or rating not in ("up", "down"):
        return []
    refused = bool(trace.get("refused") or trace.get("abstained"))
    context = _items(trace.get("context"))
    grades = context_grades(trace)
    miss = likely_grader_miss(trace, rating)
    chosen: list[tuple[dict[str, Any], float | None, int, str]] = []
    if rating == "up" and not refused:
        by_text = {str(c.get("text") or ""): g for c, g in zip(context, grades, strict=True)}
        for c in _items(trace.get("citations")):
            chosen.append((c, by_text.get(str(c.get("text") or "")), 1, "cited in an answer rated up"))
    elif rating == "up":
        chosen = [(c, g, 0, "shown in an abstention rated up") for c, g in zip(context, grades, strict=True)]
    elif not refused:
        chosen = [
            (c, g, 0, "graded relevant, answer rated down")
            for c, g in zip(context, grades, strict=True)
            if g is not None and g >= RELEVANT_AT
        ]
    pairs = []
    evidence = evidence_for(trace) if rating == "down" and not refused else {}
    for item, grade, label, why in chosen:
        text = str(item.get("text") or "").strip()
        if not text:
            continue
        pair: dict[str, Any] = {
            "query": question,
            "passage": graded_text(text, str(item.get("title") or "")),
            "label": label,
            "lang": str(trace.get("language") or ""),
            "trace_id": str(trace.get("id") or ""),
            "rating": rating,
            "grade": None if grade is None else round(grade, 4),
            "source": str(item.get("source") or ""),
            "why": why,
            "likely_grader_miss": miss,
            # why the evidence contradicts this label ("" when it does not): such a pair is reviewed, not exported
            "review": evidence.get(text, ""),
        }
        if comment:
            pair["comment"] = comment
        pairs.append(pair)
    return pairs


def evidence_for(trace: dict[str, Any]) -> dict[str, str]:
    """Passages (by text) the evidence shows relevant, with why: cited and holding the
    sentences that cite them, or holding a gold answer the trace records (``gold``)."""
    answer = str(trace.get("answer") or "")
    question = str(trace.get("question") or "")
    golds = [str(g) for g in trace.get("gold") or [] if str(g).strip()]
    out: dict[str, str] = {}
    for c in _items(trace.get("citations")):
        text = str(c.get("text") or "").strip()
        spans = [s for s in c.get("spans") or [] if isinstance(s, (list, tuple)) and len(s) == 2]
        said = " ".join(answer[int(a) : int(b)] for a, b in spans) or answer
        if text and said.strip() and grounded(said, question, [text]):
            out[text] = "cited, and it holds the sentence that cites it"
    for item in _items(trace.get("context")):
        text = str(item.get("text") or "").strip()
        if text and text not in out and any(g.lower() in text.lower() for g in golds):
            out[text] = "it holds a gold answer"
    return out


@dataclass
class ExportReport:
    """What an export found: rated traces, pairs by label (``pairs``: exported), pairs the
    evidence contradicts (``review``: not exported), flags and skipped traces."""

    pairs: list[dict[str, Any]] = field(default_factory=list)
    review: list[dict[str, Any]] = field(default_factory=list)
    ratings: Counter[str] = field(default_factory=Counter)
    likely_grader_misses: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # trace id -> why no pair came from it

    def count(self, label: int) -> int:
        return sum(1 for p in self.pairs if p["label"] == label)


def export_feedback(store: Any, *, limit: int = 100_000) -> ExportReport:
    """Pairs from every rated trace of ``store`` (a TraceStore), newest rating first.

    The same (query, passage) rated in two traces keeps the newest rating's label.
    """
    report = ExportReport()
    seen: set[tuple[str, str]] = set()
    for fb in store.feedback(limit=limit):
        tid, rating = fb["trace_id"], fb["rating"]
        report.ratings[rating] += 1
        try:
            trace = store.get(tid)
        except KeyError:  # TraceNotFoundError: the trace was deleted after it was rated
            report.skipped[tid] = "trace no longer stored"
            continue
        pairs = feedback_pairs(trace, rating, fb.get("comment"))
        if likely_grader_miss(trace, rating):
            report.likely_grader_misses += 1
        if not pairs:
            report.skipped[tid] = _why_none(trace, rating)
        for p in pairs:
            key = (p["query"], p["passage"])
            if key not in seen:
                seen.add(key)
                (report.review if p["review"] else report.pairs).append(p)
    return report


def _why_none(trace: dict[str, Any], rating: str) -> str:
    if not str(trace.get("question") or "").strip():
        return "the trace has no question"
    if rating == "down" and (trace.get("refused") or trace.get("abstained")):
        return "a refusal rated down: no passage is certainly relevant or irrelevant"
    if rating == "down":
        return f"no context passage was graded relevant (>= {RELEVANT_AT})"
    return "the answer cited no passage"
