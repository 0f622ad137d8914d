"""A second reading of internal documents the evaluator graded all irrelevant, before they are discarded.

The Incorrect action throws the internal documents away on the evaluator's word. Its costliest
mistake is the mirror of Correct's: a passage that does hold the answer, graded low because it
words it differently from the question ("work remotely up to three days a week" for "how many
days a week can employees work remotely"). On near-miss pairs of company documents the trained
evaluator grades 17 % (en) to 28 % (zh) of the passages that answer at or below τ_low.

So when every grade is at or below τ_low, the model reads the first few retrieved passages
(one yes/no token each, the claim check's prompt and threshold: :mod:`crag.generate.relation`).
A passage it reads the answer in is graded between the thresholds: the decision becomes
Ambiguous, so the passage is kept **and** the external source is still searched. The model's
reading never skips a search, and the claim check still decides what the answer may say.

Nothing changes without a calibrated reader (the 0.5B, or a server without token
probabilities), with an LLM evaluator (it already read them), or with
``correction.reread_incorrect = false``.
"""

from __future__ import annotations

from dataclasses import replace

from crag.config import CragSettings
from crag.correct.refine import graded_text
from crag.correct.verify import verify_messages
from crag.errors import CragError, LLMUnavailableError
from crag.generate.relation import judge_threshold
from crag.grade.heuristic import set_confidence
from crag.protocols import LLM, YesNoLLM, offers
from crag.types import Evaluation, Query, Retrieval

__all__ = ["READ", "reread"]

READ = 3  # passages read, in retrieval order: the answer is rarely lower when the evaluator missed it
_READERS = ("llm", "ensemble")  # evaluators that read the passages with the model already


def reread(query: Query, retrieval: Retrieval, grading: Evaluation, llm: LLM, cfg: CragSettings) -> Evaluation:
    """``grading``, with the passages the model reads the answer in graded between the thresholds.

    >>> from crag.types import Grade
    >>> from crag.config import CragSettings
    >>> g = Evaluation([Grade("a", 0.05)], 0.05, "", "trained")
    >>> reread(Query.of("Who?"), Retrieval([]), g, llm=None, cfg=CragSettings()) is g  # nothing retrieved
    True
    """
    if not _applies(query, retrieval, grading, cfg):
        return grading
    threshold = judge_threshold(llm.model_id, cfg.generation.claim_threshold)
    if threshold is None or not offers(llm, YesNoLLM):
        return grading
    assert isinstance(llm, YesNoLLM)  # offers() said so
    by_id = {g.id: i for i, g in enumerate(grading.grades)}
    grades = list(grading.grades)
    for hit in retrieval.hits[:READ]:
        i = by_id.get(hit.chunk.id)
        if i is None or grades[i].signals.get("namesake"):
            continue  # a page about another bearer of the name stays discarded
        passage = graded_text(hit.chunk.text, hit.chunk.title)
        try:
            p = float(llm.yes_probability(verify_messages(query.text, [passage], query.language)))
        except LLMUnavailableError:
            raise  # the model is down or out of time: no answer could be written either
        except CragError:
            break  # it cannot score yes/no (no logprobs, a bad reply): the evaluator's grades stand
        if p >= threshold:
            # between the thresholds, whatever p is: Ambiguous keeps it and still searches
            score = max(grades[i].score, min(p, (query.lower + query.upper) / 2))
            reason = f"graded {grades[i].score:.2f}, but the model reads the answer in it (P(yes) {p:.2f})"
            grades[i] = replace(grades[i], score=score, reason=reason, signals=grades[i].signals | {"reread": p})
    if grades == grading.grades:
        return grading
    return replace(grading, grades=grades, confidence=set_confidence(grades))


def _applies(query: Query, retrieval: Retrieval, grading: Evaluation, cfg: CragSettings) -> bool:
    return (
        cfg.correction.reread_incorrect
        and bool(retrieval.hits)
        and bool(grading.grades)
        and grading.evaluator not in _READERS
        and all(g.score <= query.lower for g in grading.grades)
    )
