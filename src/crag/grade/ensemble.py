"""The ``ensemble`` evaluator: several evaluators vote (the article's 挑战一, 集成评估).

Each passage's score is the weighted mean of the members' scores, and the set
confidence is :func:`set_confidence` of those means, as for a single evaluator.

The agreement rule (``evaluator.ensemble_agree``, on by default): the strong correction
(Incorrect: discard the internal documents, rely on external search) is taken only when
ALL members would take it on their own, i.e. when ``decide()`` on each member's own
evaluation returns Incorrect with the question's thresholds (under ``rule = "set"`` that
is exactly "every member's set confidence ≤ lower"). When the averaged grades would
decide Incorrect but some member disagrees, the ensemble lifts its best passage's score
and the set confidence to ``lift = min(lower + 0.01, (lower + upper) / 2)``: just above
``lower`` and still below ``upper``, so ``decide()`` returns Ambiguous under both rules
(keep the internal documents AND search). Nothing else is changed, and the reason
says that the rule fired.

### Usage example
>>> from crag.grade.ensemble import EnsembleEvaluator
>>> ens = EnsembleEvaluator([trained, heuristic])                                     # doctest: +SKIP
>>> ens.grade(Query.of("Who wrote Hamlet?"), passages).reason                        # doctest: +SKIP
'trained 0.91 / heuristic 0.74 → 0.83; ...'
"""

from __future__ import annotations

from collections.abc import Sequence

from crag.config import CragSettings
from crag.decide import decide
from crag.errors import ConfigError, CragError
from crag.grade.heuristic import set_confidence
from crag.protocols import LLM, Evaluator, LLMEvaluator
from crag.redact import clip
from crag.registry import EVALUATORS, BackendDeps, Registries
from crag.types import Action, Evaluation, Grade, Passage, Query


class EnsembleEvaluator:
    """Averages member evaluators; Incorrect only when every member agrees (see module doc).

    The agreement rule decides with the thresholds and rule the ``Query`` carries (decided
    once per request by ``crag.grade.classify.query_for``), so it decides as the pipeline does.

    ### Usage example
    >>> from crag.grade.heuristic import HeuristicEvaluator
    >>> from crag.types import Passage, Query
    >>> ens = EnsembleEvaluator([HeuristicEvaluator(), HeuristicEvaluator()], weights=[2, 1])
    >>> ev = ens.grade(Query.of("capital of France"), [Passage("a", "Paris is the capital of France.", dense=0.9)])
    >>> ev.evaluator, len(ev.grades)
    ('ensemble', 1)
    """

    name = "ensemble"

    def __init__(
        self,
        members: Sequence[Evaluator],
        weights: Sequence[float] | None = None,
        *,
        agree: bool = True,
    ) -> None:
        if not members:
            raise ValueError("an ensemble needs at least one member evaluator")
        weights = [1.0] * len(members) if weights is None else [float(w) for w in weights]
        if len(weights) != len(members):
            raise ValueError(f"{len(weights)} weights for {len(members)} ensemble members")
        if any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError("ensemble weights must be >= 0 with a positive sum")
        self.members = list(members)
        self.weights = weights
        self.agree = agree

    def with_llm(self, llm: LLM) -> EnsembleEvaluator:
        """This ensemble with its LLM members asking ``llm`` (a request's guarded model)."""
        members = [m.with_llm(llm) if isinstance(m, LLMEvaluator) else m for m in self.members]
        return EnsembleEvaluator(members, self.weights, agree=self.agree)

    def grade(self, query: Query, passages: Sequence[Passage]) -> Evaluation:
        if not passages:
            return Evaluation([], 0.0, "nothing was retrieved", self.name)
        results: list[tuple[Evaluator, float, Evaluation]] = []
        degraded: list[str] = []
        for member, w in zip(self.members, self.weights, strict=True):
            try:
                ev = member.grade(query, passages)
            except CragError as exc:  # one broken member must not take the answer down
                degraded.append(f"ensemble member {member.name} failed ({_short(exc)}); left out")
                continue
            if len(ev.grades) != len(passages):
                degraded.append(f"ensemble member {member.name} graded {len(ev.grades)} of {len(passages)}; left out")
                continue
            if ev.degraded:
                degraded.append(f"{member.name}: {ev.degraded}")
            results.append((member, w, ev))
        if not results:
            raise CragError("every ensemble member failed: " + "; ".join(degraded))
        total = sum(w for _, w, _ in results) or 1.0
        grades = []
        for i, p in enumerate(passages):
            score = sum(w * ev.grades[i].score for _, w, ev in results) / total
            signals = {m.name: round(ev.grades[i].score, 4) for m, _, ev in results}
            reason = "; ".join(f"{m.name} {ev.grades[i].score:.2f} ({ev.grades[i].reason})" for m, _, ev in results)
            grades.append(Grade(p.id, round(score, 4), reason, signals))
        confidence = set_confidence(grades)
        summary = " / ".join(f"{m.name} {ev.confidence:.2f}" for m, _, ev in results) + f" → {confidence:.2f}"
        if self.agree and len(results) > 1:
            confidence, note = self._agreement(query, grades, confidence, [ev for _, _, ev in results])
            summary += note
        return Evaluation(grades, confidence, summary, self.name, "; ".join(degraded))

    def _agreement(
        self, query: Query, grades: list[Grade], confidence: float, members: list[Evaluation]
    ) -> tuple[float, str]:
        """Lift the ensemble out of Incorrect unless every member decides Incorrect alone."""
        upper, lower, rule = query.upper, query.lower, query.rule
        if decide(grades, confidence=confidence, upper=upper, lower=lower, rule=rule) is not Action.INCORRECT:
            return confidence, ""
        votes = [decide(ev.grades, confidence=ev.confidence, upper=upper, lower=lower, rule=rule) for ev in members]
        if all(v is Action.INCORRECT for v in votes):
            return confidence, "; all members agree the documents are irrelevant"
        lift = round(min(lower + 0.01, (lower + upper) / 2), 4)
        best = max(range(len(grades)), key=lambda i: grades[i].score)
        g = grades[best]
        g.signals["agreement_lift"] = round(lift - g.score, 4)
        g.score = max(g.score, lift)
        dissent = ", ".join(ev.evaluator for ev, v in zip(members, votes, strict=True) if v is not Action.INCORRECT)
        return max(confidence, lift), f"; members disagree ({dissent} not Incorrect), so no strong correction"


def _short(exc: Exception) -> str:
    return clip(" ".join(str(exc).split()), 160) or type(exc).__name__


def _make(settings: CragSettings, deps: BackendDeps) -> EnsembleEvaluator:
    ev = settings.evaluator
    names = list(ev.ensemble)
    if "ensemble" in names:
        raise ConfigError("evaluator.ensemble cannot contain 'ensemble' itself")
    unknown = set(ev.ensemble_weights) - set(names)
    if unknown:
        raise ConfigError(f"evaluator.ensemble_weights names {sorted(unknown)} that are not in evaluator.ensemble")
    members = [EVALUATORS.create(n, settings, deps) for n in names]
    weights = [ev.ensemble_weights.get(n, 1.0) for n in names]
    return EnsembleEvaluator(members, weights, agree=ev.ensemble_agree)


def register(registries: Registries) -> None:
    """Plugin entry point: the ``ensemble`` evaluator."""
    registries.evaluators.register("ensemble", _make)
