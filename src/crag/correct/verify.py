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

The threshold belongs to the model: a small model's P(yes) has its own scale. Each bundled
model's is measured on the evaluator's held-out pairs (``benchmarks/verify_correct.py``):
the highest threshold that keeps ≥ 90 % of answering passages in each language. The 1.5B
model's check separates well (AUROC 0.91 in both languages: 0.7); the 0.5B model's does not
(AUROC 0.72–0.75, and its P(yes) stays below 0.4 for every passage), so it is not asked.
``correction.verify_threshold`` sets a threshold for any other model.

An OpenAI-compatible server is asked through its ``logprobs``: a bundled model served under
its own name (``llm.model = "qwen2.5-coder-1.5b"``) keeps its threshold; any other hosted
model is asked only once ``correction.verify_threshold`` is set for it. Backends without
token probabilities (a server that returns no logprobs), and models with no threshold, are
not asked: the Correct action stands and the trace says why (``note``, or a degradation). An
LLM error also keeps Correct (a degradation): verification adds evidence, it never stops
an answer.

### Usage example
>>> from crag.types import Strip
>>> class Sure:
...     model_id = "sure"
...     def complete(self, messages, **options): raise NotImplementedError
...     def yes_probability(self, messages): return 0.9
>>> v = verify_correct("When did the museum open?", [Strip("It opened in 1901.", "a", "internal")], Sure(), "en")
>>> v.confirmed, v.probability
(True, 0.9)
>>> from crag.testing.fakes import ScriptedLLM  # writes text, gives no token probabilities
>>> verify_correct("When?", [Strip("x", "a", "internal")], ScriptedLLM([]), "en").checked
False
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from crag.errors import CragError
from crag.protocols import LLM, YesNoLLM, offers
from crag.types import Strip

DEFAULT_THRESHOLD = 0.7
# Per bundled model, from benchmarks/verify_correct.py (None: the check is too weak to trust).
CALIBRATED: dict[str, float | None] = {"qwen2.5-coder-1.5b": 0.7, "qwen2.5-coder-0.5b": None}
VERIFY_CHARS = 1500  # the strips the generator would read first, cut to keep the call short
_ASK = {
    "en": "Passage:\n{p}\n\nQuestion: {q}\nDoes the passage state the answer to the question? Answer yes or no.",
    "zh": "段落：\n{p}\n\n问题：{q}\n这段文字是否写明了这个问题的答案？只用 yes 或 no 回答。",
}

_CLAIM = {
    "en": "Passage:\n{p}\n\nClaim: {c}\nDoes the passage state this claim? Answer yes or no.",
    "zh": "段落：\n{p}\n\n陈述：{c}\n这段文字是否写明了这个陈述？只用 yes 或 no 回答。",
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
    passage = _clip(texts, limit)
    return [{"role": "user", "content": _ASK.get(lang, _ASK["en"]).format(p=passage, q=question.strip())}]


def claim_messages(claim: str, passage: str, lang: str, *, limit: int = VERIFY_CHARS) -> list[dict[str, str]]:
    """The yes/no prompt asking whether ``passage`` states ``claim`` (entailment, not relevance)."""
    text = _clip([passage], limit)
    return [{"role": "user", "content": _CLAIM.get(lang, _CLAIM["en"]).format(p=text, c=claim.strip())}]


def _clip(texts: Sequence[str], limit: int) -> str:
    """The texts one per line, their whitespace collapsed, cut to ``limit`` characters."""
    passage = "\n".join(" ".join(t.split()) for t in texts)
    return passage if len(passage) <= limit else passage[: limit - 1] + "…"


def threshold_for(model_id: str, configured: float | None) -> float | None:
    """The configured threshold, else the bundled model's calibrated one (None: do not verify).

    >>> threshold_for("qwen2.5-coder-1.5b", None), threshold_for("qwen2.5-coder-0.5b", None)
    (0.7, None)
    >>> threshold_for("my-model", None), threshold_for("my-model", 0.6)
    (None, 0.6)
    >>> threshold_for("openai:qwen2.5-coder-1.5b", None)  # the same weights behind a server
    0.7
    """
    if configured is not None:
        return configured
    return CALIBRATED.get(model_id.removeprefix("openai:"))


def verify_correct(
    question: str,
    strips: Sequence[Strip],
    llm: LLM,
    lang: str,
    *,
    threshold: float | None = DEFAULT_THRESHOLD,
    max_strips: int = 5,
) -> Verification:
    """Ask ``llm`` whether the best ``max_strips`` strips state the answer to ``question``.

    ``threshold`` None: the model is not asked (no calibrated threshold for it).
    """
    model = llm.model_id
    if not offers(llm, YesNoLLM):
        return Verification(None, threshold or 0.0, f"not verified: {model} gives no token probabilities")
    assert isinstance(llm, YesNoLLM)  # offers() said so (a guard implements every method)
    if threshold is None:
        note = f"not verified: no calibrated threshold for {model} (set correction.verify_threshold)"
        return Verification(None, 0.0, note)
    best = sorted(strips, key=lambda s: -s.score)[:max_strips]
    if not best:
        return Verification(0.0, threshold)
    try:
        p = float(llm.yes_probability(verify_messages(question, [s.text for s in best], lang)))
    except CragError as exc:
        return Verification(None, threshold, "not verified: the LLM call failed", [f"Correct not verified: {exc}"])
    return Verification(round(p, 4), threshold)
