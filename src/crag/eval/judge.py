"""A blind LLM judge: 1–5 scores for accuracy, completeness, clarity and faithfulness.

The design article's experiment (section 5.1) has a judge score both systems' answers
"without knowing" which produced them. Here the judge sees, for one question, the gold
answers and every mode's answer under a neutral label ("Answer 1", "Answer 2") in an
order shuffled with a seeded RNG; the mode names never reach the prompt. Each answer is
shown with the context it was generated from, so faithfulness (are its claims supported
by that context?) is judged per answer.

Two ways of asking, chosen by ``mode`` (``auto`` picks the first the model supports):

- ``logprob``: each answer alone, one prompt per criterion ending in "reply with one digit";
  the score is the expectation of the model's distribution over the digits 1-5
  (``LLM.choice_probabilities``, the embedded llama.cpp backend). Small local models print the
  same digit for everything when asked for JSON (the 1.5B default gave "all 1" for 19 of 24
  questions); their digit distribution still ranks answers. The four prompts of one answer
  share everything up to the criterion, so llama.cpp's prefix cache evaluates it once.
- ``json``: one call per question, every answer in shuffled order, requested as JSON through
  ``json_schema`` and parsed tolerantly (code fences, prose around the object, numbers as
  strings) — the right mode for a strong hosted judge.

Every call goes through a :class:`~crag.llm.guard.GuardedLLM`, a fresh one per question
(``guard``, e.g. :class:`crag.pipeline.guard.RequestGuard`: the deadline and token budget of
settings, as for a request). A reply that cannot be read, or a call the guard stops (timed out,
budget spent), is recorded as a failure with its reason, never as a score.

>>> from crag.testing.fakes import ScriptedLLM
>>> from crag.types import Query
>>> reply = '{"answer_1": {"accuracy": 5, "completeness": 4, "clarity": 5, "faithfulness": 5}}'
>>> judge = LLMJudge(ScriptedLLM([reply]), seed=0)
>>> verdict = judge.judge(Query.of("Capital of France?"), ["Paris"], {"crag": ("Paris [1].", ["Paris."])})
>>> verdict.scores["crag"]["accuracy"], verdict.error
(5, None)
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from crag.errors import ConfigError, CragError
from crag.llm.guard import GuardedLLM
from crag.protocols import LLM, ScoringLLM, offers
from crag.redact import clip
from crag.types import Query

__all__ = ["CRITERIA", "JudgeVerdict", "LLMJudge", "parse_scores"]

CRITERIA = ("accuracy", "completeness", "clarity", "faithfulness")

SYSTEM = (
    "You are a strict, impartial grader of question-answering systems. For each numbered "
    "answer give integer scores from 1 (very poor) to 5 (excellent):\n"
    "- accuracy: does the answer state the gold answer (or an equivalent) correctly?\n"
    "- completeness: does it give everything the question asks for?\n"
    "- clarity: is it direct, well formed and easy to read?\n"
    "- faithfulness: is every claim supported by that answer's own context?\n"
    "A refusal scores 1 for accuracy and completeness. The answers are in random order; "
    "judge each on its own merits. Reply with JSON only."
)


RUBRIC = {
    "accuracy": "does the answer state the gold answer (or an equivalent) correctly? A refusal scores 1.",
    "completeness": "does it give everything the question asks for? A refusal scores 1.",
    "clarity": "is it direct, well formed and easy to read?",
    "faithfulness": "is every claim in the answer supported by the context it was given?",
}
SINGLE_SYSTEM = (
    "You are a strict, impartial grader of a question-answering system. You will see a question, "
    "its gold answer, the context the system was given and the system's answer, then one "
    "criterion. Rate the answer on that criterion from 1 (very poor) to 5 (excellent). "
    "Reply with one digit only."
)
DIGITS = ("1", "2", "3", "4", "5")
JudgeMode = Literal["auto", "json", "logprob"]


@dataclass
class JudgeVerdict:
    """The judge's scores for one question: ``scores[mode][criterion]`` in 1..5.

    ``error`` is set (and ``scores`` empty) when the judge failed or its reply was
    unreadable; ``order`` is the shuffled mode order the judge saw.
    """

    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    error: str | None = None
    raw: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class LLMJudge:
    """Blind, order-randomised LLM grading of several answers to the same question.

    ### Usage example
    >>> from crag.testing.fakes import ScriptedLLM
    >>> reply = json.dumps({f"answer_{i}": dict.fromkeys(CRITERIA, 3) for i in (1, 2)})
    >>> judge = LLMJudge(ScriptedLLM([reply]), seed=7)
    >>> v = judge.judge(Query.of("Q?"), ["A"], {"rag": ("A [1].", ["A."]), "crag": ("B [1].", ["B."])})
    >>> sorted(v.scores), v.scores["rag"]["clarity"]
    (['crag', 'rag'], 3)
    """

    def __init__(
        self,
        llm: LLM,
        *,
        seed: int = 0,
        context_chars: int = 700,
        max_tokens: int = 200,
        mode: JudgeMode = "auto",
        guard: Callable[[LLM], GuardedLLM] = GuardedLLM,
    ) -> None:
        self.llm = llm
        self.guard = guard  # one guard per judged question: its deadline, its token budget
        self.seed = seed
        has_probs = offers(llm, ScoringLLM)
        if mode == "logprob" and not has_probs:
            raise ConfigError(
                f"judge mode 'logprob' needs token probabilities, which {llm.model_id} does not offer; "
                "use the embedded llama-cpp backend or judge mode 'json'"
            )
        if mode == "auto":
            mode = "logprob" if has_probs else "json"
        self.mode: Literal["json", "logprob"] = mode
        # Contexts are truncated so two answers with their sources fit a 4k-token window.
        self.context_chars = context_chars
        self.max_tokens = max_tokens

    @property
    def label(self) -> str:
        """Model and mode, recorded with a run: verdicts of another judge are not comparable."""
        return f"{self.llm.model_id} ({self.mode})"

    def judge(
        self, question: Query, gold: Sequence[str], answers: Mapping[str, tuple[str, Sequence[str]]]
    ) -> JudgeVerdict:
        """Score ``answers`` (mode -> (answer text, context texts)) against ``gold``."""
        modes = sorted(answers)
        # Seeded per question, so a resumed run shows the judge the same order again.
        rng = random.Random(f"{self.seed}\x00{question.text}")
        rng.shuffle(modes)
        llm = self.guard(self.llm)
        if self.mode == "logprob":
            return self._judge_by_probabilities(llm, question, gold, answers, modes)
        messages = self._messages(question, gold, [answers[m] for m in modes])
        try:
            reply = llm.complete(messages, max_tokens=self.max_tokens, temperature=0.0, json_schema=_schema(len(modes)))
        except CragError as exc:
            return JudgeVerdict(order=modes, error=f"judge call failed: {exc}")
        parsed, problem = parse_scores(reply.text, len(modes))
        if parsed is None:
            return JudgeVerdict(order=modes, error=problem, raw=clip(reply.text, 500))
        scores: dict[str, dict[str, float]] = {m: dict(parsed[i]) for i, m in enumerate(modes)}
        return JudgeVerdict(scores, modes, None, clip(reply.text, 500))

    def _judge_by_probabilities(
        self,
        llm: GuardedLLM,
        question: Query,
        gold: Sequence[str],
        answers: Mapping[str, tuple[str, Sequence[str]]],
        modes: list[str],
    ) -> JudgeVerdict:
        probs = llm.choice_probabilities  # __init__ chose logprob mode for a ScoringLLM only
        scores: dict[str, dict[str, float]] = {}
        for m in modes:  # each answer alone: no answer label or mode name can leak
            answer, context = answers[m]
            head = self._single_prompt(question, gold, answer, context)
            scores[m] = {}
            for c in CRITERIA:
                messages = [
                    {"role": "system", "content": SINGLE_SYSTEM},
                    {"role": "user", "content": f"{head}\n\nCriterion: {c} - {RUBRIC[c]}\nScore (1-5):"},
                ]
                try:
                    dist = probs(messages, DIGITS)
                except CragError as exc:
                    return JudgeVerdict(order=modes, error=f"judge call failed: {exc}")
                scores[m][c] = round(sum((i + 1) * p for i, p in enumerate(dist)), 3)
        return JudgeVerdict(scores, modes, None, "expected score over the digits 1-5")

    def _clip(self, context: Sequence[str]) -> str:
        ctx = "\n".join(context)
        return ctx[: self.context_chars] + " …" if len(ctx) > self.context_chars else ctx

    def _single_prompt(self, question: Query, gold: Sequence[str], answer: str, context: Sequence[str]) -> str:
        ctx = self._clip(context)
        lang = " (The question is in Chinese.)" if question.language == "zh" else ""
        return (
            f"Question: {question.text}{lang}\nGold answer(s): {' | '.join(gold)}\n"
            f"Context given to the system:\n{ctx or '(none)'}\nThe system's answer: {answer}"
        )

    def _messages(
        self, question: Query, gold: Sequence[str], shown: Sequence[tuple[str, Sequence[str]]]
    ) -> list[dict[str, str]]:
        parts = [f"Question: {question.text}", "Gold answer(s): " + " | ".join(gold)]
        for i, (answer, context) in enumerate(shown, 1):
            ctx = self._clip(context)
            parts.append(f"--- Answer {i} ---\nContext given to answer {i}:\n{ctx or '(none)'}\nAnswer {i}: {answer}")
        keys = ", ".join(f'"answer_{i}"' for i in range(1, len(shown) + 1))
        lang_hint = " The question is in Chinese; judge the Chinese answers." if question.language == "zh" else ""
        parts.append(
            f"Return a JSON object with keys {keys}, each mapping to "
            '{"accuracy": n, "completeness": n, "clarity": n, "faithfulness": n}.' + lang_hint
        )
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _schema(n: int) -> dict[str, Any]:
    one = {
        "type": "object",
        "properties": {c: {"type": "integer", "minimum": 1, "maximum": 5} for c in CRITERIA},
        "required": list(CRITERIA),
    }
    keys = [f"answer_{i}" for i in range(1, n + 1)]
    return {"type": "object", "properties": dict.fromkeys(keys, one), "required": keys}


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_scores(text: str, n: int) -> tuple[list[dict[str, int]] | None, str]:
    """Scores of ``n`` answers from a judge reply, tolerant of fences and stray prose.

    Returns ``(scores, "")`` or ``(None, reason)``.

    >>> parse_scores('Sure! ```json\\n{"answer_1": {"accuracy": "4", "completeness": 3, '
    ...              '"clarity": 5.0, "faithfulness": 2}}\\n```', 1)
    ([{'accuracy': 4, 'completeness': 3, 'clarity': 5, 'faithfulness': 2}], '')
    >>> parse_scores("I think both are fine.", 2)[1]
    'judge reply has no JSON object'
    """
    obj = _first_object(text)
    if obj is None:
        return None, "judge reply has no JSON object"
    # A single answer may come back without the "answer_1" wrapper.
    if n == 1 and "answer_1" not in obj and any(c in obj for c in CRITERIA):
        obj = {"answer_1": obj}
    out: list[dict[str, int]] = []
    for i in range(1, n + 1):
        block = obj.get(f"answer_{i}", obj.get(f"Answer {i}", obj.get(str(i))))
        if not isinstance(block, dict):
            return None, f"judge reply lacks scores for answer {i}"
        scores: dict[str, int] = {}
        for c in CRITERIA:
            value = _score(block.get(c, block.get(c.capitalize())))
            if value is None:
                return None, f"judge reply has no valid 1-5 {c} score for answer {i}"
            scores[c] = value
        out.append(scores)
    return out, ""


def _first_object(text: str) -> dict[str, Any] | None:
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for cand in candidates:
        start = cand.find("{")
        while start != -1:
            try:
                obj, _ = json.JSONDecoder().raw_decode(cand[start:])
            except ValueError:
                start = cand.find("{", start + 1)
                continue
            if isinstance(obj, dict):
                return obj
            start = cand.find("{", start + 1)
    return None


def _score(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(str(value).strip().split("/")[0])
    except ValueError:
        return None
    score = round(number)
    return score if 1 <= score <= 5 else None
