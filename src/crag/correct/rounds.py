"""Multi-round correction: evaluate → search for what is missing → re-evaluate, until confident.

The article (4.3, 多轮纠正): "设计迭代流程：评估 → 纠正（搜索）→ 再评估 → 再纠正，直到达到高置信度".
Each round builds new queries from what is *still* missing (the question's terms absent
from the strips judged relevant so far), never repeats a query, and stops when the best
strip reaches ``upper``, the round cap is hit, nothing new is left to ask, a search
fails, or the request deadline passes. Still at or below ``lower`` after all that, the
honest answer is to abstain: :data:`ABSTAIN_TEXT` says so and lists what was found.

This module is pure control flow over callables, so the pipeline plugs in its real
evaluator and search, and tests plug in fakes.

>>> from crag.types import Query, Strip
>>> def evaluate(q, strips):
...     return [0.9 if "1889" in s.text else 0.1 for s in strips]
>>> def search_round(queries):
...     return [Strip("The tower opened in 1889.", "https://e.org", "web")]
>>> r = correct_until_confident(Query.of("When did the Eiffel Tower open?"), [], evaluate, search_round,
...                             upper=0.6, lower=0.35, max_rounds=3)
>>> r.rounds, r.searches, r.confident, r.abstain, r.strips[0].text
(1, 1, True, False, 'The tower opened in 1889.')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from crag.correct.rewrite import keyword_queries
from crag.deadline import Deadline
from crag.errors import CragError
from crag.types import Query, Strip

ABSTAIN_TEXT = {
    "en": "I could not find a reliable answer; here is what I found, with sources:",
    "zh": "我没能找到可靠的答案；以下是我找到的信息及其来源：",
}

Evaluate = Callable[[Query, Sequence[Strip]], Sequence[float]]
SearchRound = Callable[[Sequence[str]], Sequence[Strip]]
MakeQueries = Callable[[Query, Sequence[str]], list[str]]


@dataclass
class RoundsResult:
    """What the correction loop did and what it ended with.

    ``strips`` is every distinct strip seen (initial and found), best first, with
    ``scores`` parallel to it; ``history`` is the best score after each evaluation
    (index 0 = the initial documents); ``stopped`` says why the loop ended;
    ``degradations`` what the loop gave up on (a failed rewrite or search, the deadline).
    """

    strips: list[Strip]
    scores: list[float]
    best: float
    rounds: int
    searches: int
    confident: bool
    abstain: bool
    stopped: str
    queries: list[list[str]] = field(default_factory=list)
    history: list[float] = field(default_factory=list)
    degradations: list[str] = field(default_factory=list)


def abstain_text(lang: str) -> str:
    """The abstention opener in ``lang`` (English for anything but ``"zh"``)."""
    return ABSTAIN_TEXT.get(lang, ABSTAIN_TEXT["en"])


def correct_until_confident(
    question: Query,
    initial_docs: Sequence[Strip],
    evaluate: Evaluate,
    search_round: SearchRound,
    *,
    upper: float,
    lower: float,
    max_rounds: int,
    max_queries: int = 2,
    make_queries: MakeQueries | None = None,
    deadline: Deadline | None = None,
) -> RoundsResult:
    """Correct until the best strip scores ≥ ``upper`` or ``max_rounds`` searches rounds ran.

    * ``evaluate(question, strips)`` returns one score in [0, 1] per strip; only new
      strips are evaluated each round.
    * ``search_round(queries)`` searches and refines, returning new strips (its own
      failures should degrade to ``[]``; a ``CragError`` it raises stops the loop and is
      returned in ``degradations``).
    * ``make_queries(question, relevant_texts)`` proposes queries; the default is
      :func:`~crag.correct.rewrite.keyword_queries` (gap-directed). The verbatim question
      is the last resort when every proposal was already searched.

    ``abstain`` is true when, after the loop, the best score is still ≤ ``lower``.
    """
    if max_rounds < 0:
        raise ValueError("max_rounds must be >= 0")
    propose = make_queries or (lambda q, docs: keyword_queries(q, docs, max_queries=max_queries))
    state = _Loop(question, evaluate)
    state.add(initial_docs)
    stopped = "confident" if state.best >= upper else "max_rounds"
    while state.best < upper and len(state.per_round) < max_rounds:
        if deadline is not None and deadline.expired():
            state.degradations.append("request deadline reached; stopped correcting")
            stopped = "deadline"
            break
        failed = _search_once(state, search_round, propose, lower=lower, max_queries=max_queries)
        if failed:
            stopped = failed
            break
        stopped = "confident" if state.best >= upper else "max_rounds"
    return state.result(upper=upper, lower=lower, stopped=stopped)


@dataclass
class _Loop:
    """The loop's state: every distinct strip seen with its score, and what was asked so far."""

    question: Query
    evaluate: Evaluate
    strips: list[Strip] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    history: list[float] = field(default_factory=list)
    issued: set[str] = field(default_factory=set)
    per_round: list[list[str]] = field(default_factory=list)
    degradations: list[str] = field(default_factory=list)
    searches: int = 0

    @property
    def best(self) -> float:
        return self.history[-1]

    def add(self, found: Sequence[Strip]) -> None:
        """Evaluate the strips not seen yet, keep them, and note the best score so far."""
        _add(self.question, found, self.evaluate, self.strips, self.scores, self.seen)
        self.history.append(max(self.scores, default=0.0))

    def relevant(self, lower: float) -> list[str]:
        """The texts of the strips judged relevant so far (scored above ``lower``)."""
        return [s.text for s, sc in zip(self.strips, self.scores, strict=True) if sc > lower]

    def result(self, *, upper: float, lower: float, stopped: str) -> RoundsResult:
        """Every strip seen, best first (ties in the order seen), and what the loop did."""
        order = sorted(range(len(self.strips)), key=lambda i: (-self.scores[i], i))
        return RoundsResult(
            strips=[self.strips[i] for i in order],
            scores=[self.scores[i] for i in order],
            best=self.best,
            rounds=len(self.per_round),
            searches=self.searches,
            confident=self.best >= upper,
            abstain=self.best <= lower,
            stopped=stopped,
            queries=self.per_round,
            history=self.history,
            degradations=self.degradations,
        )


def _search_once(
    state: _Loop, search_round: SearchRound, propose: MakeQueries, *, lower: float, max_queries: int
) -> str | None:
    """One round: ask for what is still missing and evaluate what comes back.

    Returns why the loop must stop (``no_new_queries``, ``search_failed``), or None.
    """
    relevant = state.relevant(lower)
    queries = _next_queries(state.question, relevant, propose, state.issued, max_queries, state.degradations)
    if not queries:
        return "no_new_queries"
    state.issued.update(queries)
    state.per_round.append(queries)
    state.searches += len(queries)
    try:
        found = search_round(queries)
    except CragError as exc:
        state.degradations.append(f"correction round {len(state.per_round)} search failed: {exc}")
        return "search_failed"
    state.add(found)
    return None


def _next_queries(
    question: Query,
    relevant: list[str],
    propose: MakeQueries,
    issued: set[str],
    max_queries: int,
    degradations: list[str],
) -> list[str]:
    """The next round's queries: proposals not searched yet, else the question as asked."""
    try:
        proposals = propose(question, relevant)
    except CragError as exc:
        degradations.append(f"query rewrite failed ({exc}); used keyword rewrite")
        proposals = keyword_queries(question, relevant, max_queries=max_queries)
    queries = [q for q in dict.fromkeys(proposals) if q and q not in issued][:max_queries]
    if not queries and question.text not in issued:
        queries = [question.text]  # every rewrite was searched already: try the question as asked
    return queries


def _add(
    question: Query,
    new: Sequence[Strip],
    evaluate: Evaluate,
    strips: list[Strip],
    scores: list[float],
    seen: set[str],
) -> None:
    fresh = []
    for s in new:
        key = " ".join(s.text.split())
        if key and key not in seen:
            seen.add(key)
            fresh.append(s)
    if not fresh:
        return
    graded = list(evaluate(question, fresh))
    if len(graded) != len(fresh):
        raise ValueError("evaluate must return one score per strip")
    for s, sc in zip(fresh, graded, strict=True):
        strips.append(replace(s, score=float(sc)))
        scores.append(float(sc))
