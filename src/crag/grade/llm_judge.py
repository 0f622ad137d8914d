"""The ``llm`` evaluator: an LLM grades each retrieved passage (the article's 方案二).

Three modes (``evaluator.llm_mode``):

* ``logprob`` (default): one short yes/no relevance prompt per passage; the score is the
  model's P(yes) for the first answer token (``LLM.yes_probability``), calibrated with a
  logistic map. No text is generated, so nothing can fail to parse. A backend without
  ``yes_probability`` (an OpenAI-compatible server) is graded in ``per-doc`` mode.
* ``batch``: ONE call grades all passages on the article's four criteria (相关性 relevance,
  覆盖度 coverage, 准确性 accuracy, 支持度 support), asking for JSON through the backend's
  ``json_schema`` support: a score in [0, 1] and a one-line reason per passage plus a
  set score.
* ``per-doc``: the same prompt, one call per passage.

Replies are read by the tolerant parser in :mod:`crag.grade.parse`. A passage whose
grade cannot be read (or an LLM call that fails) is graded by the fallback evaluator
(``evaluator.fallback``, default ``heuristic``) and ``Evaluation.degraded`` says so: a
judge never silently returns a neutral 0.5. ``calls`` and ``parse_failures`` count what
happened so a benchmark can report the failure rate.

Calibration of the logprob score
--------------------------------
Raw P(yes) of a small model is not centred at 0.5: qwen2.5-coder-0.5b gives P(yes)
around 0.25–0.45 to almost every passage, relevant or not. The score is therefore
``sigmoid(a * logit(p) + b)``, with ``(a, b)`` fitted by :func:`fit_calibration`
(logistic regression on logit(P(yes)), Newton's method) on a small labelled set built
from the sample data: questions of ``data/sample/questions.jsonl`` (zh and en, internal
and external gold; random.Random(7) picks 6 per language × location), each paired with
its gold passage (relevant), another passage of the same article (hard negative) and a
random passage in the same language (irrelevant), graded with the prompt below on
``qwen2.5-coder-0.5b``. Positives are a third of the pairs, so the fitted 0.5 crossing
assumes roughly one relevant passage in three, as in a top-k list.

Measured (72 pairs, 24 relevant): the first prompt tried (system instruction, question
before passage, 1,200 chars) had AUROC 0.556, almost no signal; the prompt used now (no
system prompt, passage first, question last, 600 chars) has AUROC 0.691 (zh 0.785,
en 0.698), and the fit on it is ``DEFAULT_CALIBRATION`` = (2.31, 0.03). Mean calibrated
score: gold 0.41, same-article 0.34, random 0.26; accuracy at 0.5 is 0.71 raw and
calibrated. ``CALIBRATION_AUROC`` records the AUROC; the calibration is monotone, so it
stretches the scores without changing the ranking. The signal is weak for a 0.5B model
(accuracy 0.71 is barely above the 0.67 of "always no"): use the 1.5B model, batch mode
or the ensemble where quality matters. Other models should set
``evaluator.llm_calibration = [a, b]`` from their own fit (``[1, 0]`` = raw P(yes)).

### Usage example
>>> from crag.grade.llm_judge import LLMJudgeEvaluator
>>> from crag.llm.llama_cpp import LlamaCppLLM
>>> from crag.types import Passage, Query
>>> judge = LLMJudgeEvaluator(LlamaCppLLM("qwen2.5-coder-0.5b"), mode="logprob")  # doctest: +SKIP
>>> passages = [Passage("a", "Hamlet is a tragedy by Shakespeare.")]
>>> ev = judge.grade(Query.of("Who wrote Hamlet?"), passages)                 # doctest: +SKIP
>>> ev.grades[0].score > 0.5                                                  # doctest: +SKIP
True
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

from crag.config import CragSettings
from crag.errors import ConfigError, CragError
from crag.grade.heuristic import set_confidence
from crag.grade.parse import Judgement, parse_batch, parse_judgement
from crag.protocols import LLM, Evaluator, ScoringLLM, offers
from crag.redact import clip
from crag.registry import EVALUATORS, BackendDeps, Registries
from crag.types import Evaluation, Grade, Passage, Query

Mode = Literal["logprob", "batch", "per-doc"]
MODES: tuple[str, ...] = ("logprob", "batch", "per-doc")

# Fitted on the sample set described in the module docstring (qwen2.5-coder-0.5b).
DEFAULT_CALIBRATION: tuple[float, float] = (2.31, 0.03)
CALIBRATION_AUROC = 0.691
PASSAGE_CHARS = 1200
# The yes/no prompt is read once per passage: a shorter cut halves its cost.
LOGPROB_CHARS = 600
# A batch prompt carries every passage; this bounds the total so k=5 long Chinese chunks
# still fit a 4096-token window with room for the JSON reply.
BATCH_CHARS = 4000
_EPS = 1e-6

# -- prompts -----------------------------------------------------------------------------
# No system prompt and the question AFTER the passage: on the calibration set this
# ordering ranked passages far better for the 0.5B model than instructions-first.
_YESNO = {
    "en": "Passage: {p}\n\nQuestion: {q}\n\n"
    "Does the passage contain information that answers the question? Answer yes or no.",
    "zh": "段落：{p}\n\n问题：{q}\n\n"
    "这段文字是否包含能回答该问题的信息？只用 yes 或 no 回答。"
    "(Does the passage contain information that answers the question? Answer yes or no.)",
}
_CRITERIA = {
    "en": (
        "You are an expert in judging information quality. Judge how well retrieved documents "
        "answer the user's question on four criteria:\n"
        "1. Relevance: is the document directly about the core of the question?\n"
        "2. Coverage: does it contain the key information needed to answer?\n"
        "3. Accuracy: are its statements reliable, without obvious contradictions or errors?\n"
        "4. Support: would an answer based on it be firmly grounded in facts?"
    ),
    "zh": (
        "你是一个信息质量评估专家。请根据用户的问题评估检索到的文档能否充分、准确地回答问题，考虑以下维度：\n"
        "1. 相关性：文档内容与用户问题的核心主题是否直接相关？\n"
        "2. 覆盖度：文档是否涵盖了回答问题所需的关键信息点？\n"
        "3. 准确性：文档本身的事实陈述是否可靠，有无明显矛盾或错误？\n"
        "4. 支持度：如果基于文档生成答案，其事实依据是否扎实？"
    ),
}
_ONE_ASK = {
    "en": "Question: {q}\n\nDocument:\n{p}\n\nGive a score between 0 and 1 and a one-sentence reason.\n"
    'Output JSON: {{"score": <0-1>, "reason": "<one sentence>"}}',
    "zh": "用户问题：{q}\n\n检索到的文档：\n{p}\n\n请输出一个介于0到1之间的分数以及一句简要的理由。\n"
    '输出 JSON：{{"score": <0到1>, "reason": "<一句话理由>"}}',
}
_BATCH_ASK = {
    "en": "Question: {q}\n\nRetrieved documents:\n{docs}\n\nGrade EVERY document (ids 1 to {n}) with a "
    "score between 0 and 1 and a one-sentence reason, then give an overall score for the set.\n"
    'Output JSON: {{"documents": [{{"id": 1, "score": <0-1>, "reason": "..."}}, ...], '
    '"score": <0-1>, "reason": "<one sentence>"}}',
    "zh": "用户问题：{q}\n\n检索到的文档：\n{docs}\n\n"
    "请为每一篇文档（编号 1 到 {n}）给出一个介于0到1之间的分数和一句理由，"
    "再给出这组文档的总体分数。\n"
    '输出 JSON：{{"documents": [{{"id": 1, "score": <0到1>, "reason": "..."}}, ...], '
    '"score": <0到1>, "reason": "<一句话理由>"}}',
}
ONE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number"}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
}


def batch_schema(n: int) -> dict[str, Any]:
    """JSON schema of a batch reply grading ``n`` documents."""
    return {
        "type": "object",
        "properties": {
            "documents": {
                "type": "array",
                "minItems": n,
                "maxItems": n,
                "items": ONE_SCHEMA
                | {
                    "properties": {"id": {"type": "integer"}, **ONE_SCHEMA["properties"]},
                    "required": ["id", "score", "reason"],
                },
            },
            "score": {"type": "number"},
            "reason": {"type": "string"},
        },
        "required": ["documents", "score", "reason"],
    }


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def yes_no_messages(question: Query, passage: str, *, limit: int = LOGPROB_CHARS) -> list[dict[str, str]]:
    """The short yes/no relevance prompt of logprob mode, in the question's language."""
    user = _YESNO[_lang(question)]
    return [{"role": "user", "content": user.format(q=question.text.strip(), p=_cut(passage, limit))}]


def per_doc_messages(question: Query, passage: str, *, limit: int = PASSAGE_CHARS) -> list[dict[str, str]]:
    """The four-criteria prompt for one passage."""
    lang = _lang(question)
    return [
        {"role": "system", "content": _CRITERIA[lang]},
        {"role": "user", "content": _ONE_ASK[lang].format(q=question.text.strip(), p=_cut(passage, limit))},
    ]


def batch_messages(question: Query, passages: Sequence[str], *, limit: int = PASSAGE_CHARS) -> list[dict[str, str]]:
    """The four-criteria prompt grading all passages in one call."""
    lang = _lang(question)
    each = min(limit, BATCH_CHARS // max(1, len(passages)))
    docs = "\n---\n".join(f"[{i}] {_cut(p, each)}" for i, p in enumerate(passages, 1))
    return [
        {"role": "system", "content": _CRITERIA[lang]},
        {"role": "user", "content": _BATCH_ASK[lang].format(q=question.text.strip(), docs=docs, n=len(passages))},
    ]


def _lang(question: Query) -> str:
    return "zh" if question.language == "zh" else "en"


def calibrate(p: float, a: float, b: float) -> float:
    """``sigmoid(a * logit(p) + b)``, with p clipped away from 0 and 1."""
    p = min(1.0 - _EPS, max(_EPS, p))
    z = a * math.log(p / (1.0 - p)) + b
    return 1.0 / (1.0 + math.exp(-max(-700.0, min(700.0, z))))


def fit_calibration(p_yes: Sequence[float], labels: Sequence[int], *, iters: int = 50) -> tuple[float, float]:
    """Fit ``(a, b)`` of :func:`calibrate` by logistic regression on logit(P(yes)).

    ``labels`` are 1 for relevant pairs, 0 for irrelevant ones; Newton's method with a
    tiny ridge term so a perfectly separated small set still gives finite values.
    """
    import numpy as np

    if len(p_yes) != len(labels) or len(set(labels)) < 2:
        raise ValueError("fit_calibration needs paired scores and labels with both classes present")
    p = np.clip(np.asarray(p_yes, dtype=np.float64), _EPS, 1.0 - _EPS)
    x = np.stack([np.log(p / (1.0 - p)), np.ones_like(p)], axis=1)
    y = np.asarray(labels, dtype=np.float64)
    w = np.zeros(2)
    for _ in range(iters):
        q = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (q - y) + 1e-3 * w
        hess = (x * (q * (1.0 - q))[:, None]).T @ x + 1e-3 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    return round(float(w[0]), 4), round(float(w[1]), 4)


class LLMJudgeEvaluator:
    """Grades passages with an LLM; unreadable replies fall back to another evaluator.

    ``llm`` may be the model itself or a zero-argument factory, so building the
    evaluator never loads a model.

    ### Usage example
    >>> from crag.grade.heuristic import HeuristicEvaluator
    >>> judge = LLMJudgeEvaluator(lambda: my_llm, HeuristicEvaluator(), mode="batch")  # doctest: +SKIP
    >>> ev = judge.grade(Query.of("谁写了《哈姆雷特》？"), passages)                    # doctest: +SKIP
    >>> ev.degraded, judge.parse_failures, judge.calls                            # doctest: +SKIP
    ('', 0, 1)
    """

    name = "llm"

    def __init__(
        self,
        llm: LLM | Callable[[], LLM],
        fallback: Evaluator | None = None,
        *,
        mode: Mode = "logprob",
        calibration: tuple[float, float] | None = None,
        passage_chars: int = PASSAGE_CHARS,
        max_tokens: int = 96,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown llm judge mode {mode!r}; use one of {', '.join(MODES)}")
        if passage_chars < 50:
            raise ValueError("passage_chars must be >= 50")
        self._llm_or_factory = llm
        self._llm: LLM | None = llm if isinstance(llm, LLM) else None
        self.fallback = fallback
        self.mode: Mode = mode
        self.calibration = tuple(calibration) if calibration is not None else DEFAULT_CALIBRATION
        self.passage_chars = passage_chars
        self.max_tokens = max_tokens
        self.calls = 0
        self.parse_failures = 0
        self._count_lock = threading.Lock()

    @property
    def llm(self) -> LLM:
        if self._llm is None:
            factory = self._llm_or_factory
            assert callable(factory)
            self._llm = factory()
        return self._llm

    def with_llm(self, llm: LLM) -> LLMJudgeEvaluator:
        """This judge asking ``llm`` (a request's guarded model); settings and fallback shared."""
        bound = copy.copy(self)
        bound._llm_or_factory = bound._llm = llm
        bound._count_lock = threading.Lock()
        return bound

    @property
    def parse_failure_rate(self) -> float:
        """Share of LLM calls whose reply could not be (fully) read; 0.0 before any call."""
        return self.parse_failures / self.calls if self.calls else 0.0

    def grade(self, query: Query, passages: Sequence[Passage]) -> Evaluation:
        if not passages:
            return Evaluation([], 0.0, "nothing was retrieved", self.name)
        mode: str = self.mode
        grades: dict[int, Grade] = {}
        set_score: float | None = None
        set_reason = ""
        problem = ""
        try:
            if mode == "logprob" and not offers(self.llm, ScoringLLM):
                mode = "per-doc"  # e.g. an OpenAI-compatible server: no token probabilities
            if mode == "logprob":
                grades = self._logprob(query, passages)
            elif mode == "per-doc":
                grades = self._per_doc(query, passages)
            else:
                grades, set_score, set_reason = self._batch(query, passages)
        except CragError as exc:  # a failing judge degrades to the fallback, it doesn't stop the answer
            problem = f"llm judge failed ({_short(exc)})"
        missing = [i for i in range(len(passages)) if i not in grades]
        if missing and not problem:
            problem = (
                "llm judge reply unparseable"
                if len(missing) == len(passages)
                else (f"llm judge reply unparseable for {len(missing)} of {len(passages)} passages")
            )
        degraded = ""
        if missing:
            grades.update(self._fall_back(query, passages, missing))
            used = getattr(self.fallback, "name", "") or "no fallback"
            degraded = f"{problem}; used {used}"
        ordered = [grades[i] for i in range(len(passages))]
        confidence = set_score if set_score is not None and not missing else set_confidence(ordered)
        reason = set_reason or _set_reason(ordered, mode)
        return Evaluation(ordered, round(confidence, 4), reason, self.name, degraded)

    # -- modes -----------------------------------------------------------------------------
    def _logprob(self, query: Query, passages: Sequence[Passage]) -> dict[int, Grade]:
        llm = self.llm
        assert isinstance(llm, ScoringLLM)  # grade() chose this mode for a ScoringLLM only
        yes_probability = llm.yes_probability
        a, b = self.calibration
        out: dict[int, Grade] = {}
        for i, p in enumerate(passages):
            self._count()
            raw = float(yes_probability(yes_no_messages(query, p.text, limit=min(self.passage_chars, LOGPROB_CHARS))))
            score = calibrate(raw, a, b)
            verdict = "answers the question" if score >= 0.5 else "does not answer the question"
            out[i] = Grade(p.id, round(score, 4), f"LLM: {verdict} (P(yes)={raw:.2f})", {"p_yes": round(raw, 4)})
        return out

    def _per_doc(self, query: Query, passages: Sequence[Passage]) -> dict[int, Grade]:
        out: dict[int, Grade] = {}
        for i, p in enumerate(passages):
            self._count()
            reply = self.llm.complete(
                per_doc_messages(query, p.text, limit=self.passage_chars),
                max_tokens=self.max_tokens,
                temperature=0.0,
                json_schema=ONE_SCHEMA,
            )
            j = parse_judgement(reply.text)
            if j is None:
                self._failed()
                continue
            out[i] = _grade(p, j)
        return out

    def _batch(self, query: Query, passages: Sequence[Passage]) -> tuple[dict[int, Grade], float | None, str]:
        self._count()
        reply = self.llm.complete(
            batch_messages(query, [p.text for p in passages], limit=self.passage_chars),
            max_tokens=self.max_tokens * len(passages) + 64,
            temperature=0.0,
            json_schema=batch_schema(len(passages)),
        )
        parsed = parse_batch(reply.text, len(passages))
        if parsed is None or len(parsed.documents) != len(passages):
            self._failed()
        if parsed is None:
            return {}, None, ""
        grades = {i: _grade(passages[i], j) for i, j in parsed.documents.items()}
        return grades, parsed.score, parsed.reason

    def _fall_back(self, query: Query, passages: Sequence[Passage], missing: list[int]) -> dict[int, Grade]:
        if self.fallback is None:
            raise ConfigError(
                "the llm evaluator could not grade some passages and has no fallback; "
                "set evaluator.fallback (e.g. heuristic)"
            )
        ev = self.fallback.grade(query, [passages[i] for i in missing])
        out = {}
        for i, g in zip(missing, ev.grades, strict=True):
            out[i] = Grade(g.id, g.score, f"{self.fallback.name} fallback: {g.reason}", dict(g.signals))
        return out

    def _count(self) -> None:
        with self._count_lock:
            self.calls += 1

    def _failed(self) -> None:
        with self._count_lock:
            self.parse_failures += 1


def _grade(p: Passage, j: Judgement) -> Grade:
    return Grade(p.id, round(j.score, 4), j.reason or "graded by the LLM judge", {"llm": round(j.score, 4)})


def _set_reason(grades: Sequence[Grade], mode: str) -> str:
    best = max(grades, key=lambda g: g.score)
    strong = sum(1 for g in grades if g.score >= 0.5)
    return f"LLM judge ({mode}): best passage {best.score:.2f} ({best.reason}); {strong} of {len(grades)} look relevant"


def _short(exc: Exception) -> str:
    return clip(" ".join(str(exc).split()), 160) or type(exc).__name__


def _make(settings: CragSettings, deps: BackendDeps) -> LLMJudgeEvaluator:
    ev = settings.evaluator
    if deps.llm_factory is None:
        raise ConfigError("the llm evaluator needs an LLM (llm_factory); configure [llm]")
    name = ev.fallback
    if name in ("llm", "llm-judge", "ensemble"):
        raise ConfigError(f"evaluator.fallback must be a non-LLM evaluator such as heuristic, not {name!r}")
    fallback = EVALUATORS.create(name, settings, deps)
    cal = (float(ev.llm_calibration[0]), float(ev.llm_calibration[1])) if ev.llm_calibration else None
    return LLMJudgeEvaluator(deps.llm_factory, fallback, mode=ev.llm_mode, calibration=cal)


def register(registries: Registries) -> None:
    """Plugin entry point: the ``llm`` (``llm-judge``) evaluator."""
    registries.evaluators.register("llm", _make, aliases=("llm-judge",))
