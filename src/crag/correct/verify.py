"""Verify the Correct action: does the model read the answer in the strips graded relevant?

The evaluator grades how well a passage matches a question. On real retrieval the
costliest mistake it makes is an on-topic passage that does not answer: another
paragraph of the right article, graded ≥ τ_high, so the Correct action skips external
search and the generator answers from the wrong paragraph (measured on ``data/hard``:
every question whose gold was only external but that was graded Correct was answered
wrongly). A wrong Correct costs the answer; a wrong Ambiguous costs one search. So before
trusting Correct, the pipeline asks the LLM one yes/no question over the kept strips —
"does this text state the answer?" — and reads P(yes) from its first answer token
(``yes_probability``: no text is generated, nothing can fail to parse). Below
``correction.verify_threshold`` the question takes the Ambiguous path instead.

Backends without token probabilities (OpenAI-compatible servers) are not asked: the
Correct action stands and the trace says why (``note``). An LLM error also keeps Correct
(a degradation): verification adds evidence, it never stops an answer.

### Usage example
>>> from crag.types import Strip
>>> class Sure:
...     model_id = "sure"
...     def yes_probability(self, messages): return 0.9
>>> v = verify_correct("When did the museum open?", [Strip("It opened in 1901.", "a", "internal")], Sure(), "en")
>>> v.confirmed, v.probability
(True, 0.9)
>>> verify_correct("When?", [Strip("x", "a", "internal")], object(), "en").checked
False
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from crag.errors import CragError
from crag.types import Strip

DEFAULT_THRESHOLD = 0.7
VERIFY_CHARS = 1500  # the strips the generator would read first, cut to keep the call short
_ASK = {
    "en": "Passage:\n{p}\n\nQuestion: {q}\nDoes the passage state the answer to the question? Answer yes or no.",
    "zh": "段落：\n{p}\n\n问题：{q}\n这段文字是否写明了这个问题的答案？只用 yes 或 no 回答。",
}


@dataclass
class Verification:
    """The check of one Correct decision: P(yes) that the strips state the answer.

    ``probability`` is None when the model was not asked (no token probabilities, or the
    call failed: ``degradations`` says which); such a decision stands.
    """

    probability: float | None
    threshold: float
    note: str = ""  # why the model was not asked (not a fault: the backend cannot score)
    degradations: list[str] = field(default_factory=list)

    @property
    def checked(self) -> bool:
        return self.probability is not None

    @property
    def confirmed(self) -> bool:
        return self.probability is None or self.probability >= self.threshold


def verify_messages(
    question: str, texts: Sequence[str], lang: str, *, limit: int = VERIFY_CHARS
) -> list[dict[str, str]]:
    """The yes/no prompt over the strips, best first, cut to ``limit`` characters."""
    passage = "\n".join(" ".join(t.split()) for t in texts)
    if len(passage) > limit:
        passage = passage[: limit - 1] + "…"
    return [{"role": "user", "content": _ASK.get(lang, _ASK["en"]).format(p=passage, q=question.strip())}]


def verify_correct(
    question: str,
    strips: Sequence[Strip],
    llm: Any,
    lang: str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    max_strips: int = 5,
) -> Verification:
    """Ask ``llm`` whether the best ``max_strips`` strips state the answer to ``question``."""
    yes_probability = getattr(llm, "yes_probability", None)
    if yes_probability is None:
        note = f"not verified: {getattr(llm, 'model_id', 'the LLM')} gives no token probabilities"
        return Verification(None, threshold, note)
    best = sorted(strips, key=lambda s: -s.score)[:max_strips]
    if not best:
        return Verification(0.0, threshold)
    try:
        p = float(yes_probability(verify_messages(question, [s.text for s in best], lang)))
    except CragError as exc:
        return Verification(None, threshold, "not verified: the LLM call failed", [f"Correct not verified: {exc}"])
    return Verification(round(p, 4), threshold)
