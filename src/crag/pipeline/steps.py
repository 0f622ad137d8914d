"""The steps ``run_crag`` composes, each a function from values to a value, and the runner.

:class:`Steps` runs a step inside a timed span of the request's tracer and hands the
value it returns to every observer *as the step finishes* (the tracer's recorder first,
then an optional ``on_step`` callback, e.g. a stream of server-sent events). Observers
only watch: nothing the pipeline decides is read back from them.

>>> from crag.trace.spans import Tracer
>>> seen = []
>>> steps = Steps(Tracer(), lambda name, value: seen.append(name))
>>> steps.run("fuse", lambda: 42, items=3)
42
>>> seen
['fuse']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypedDict, TypeVar, runtime_checkable

from crag.config import CragSettings
from crag.correct.bearers import Bearers, find_bearers, namesakes_of
from crag.correct.compress import compress
from crag.correct.contradict import Conflict, conflict_instruction, detect_conflicts
from crag.correct.fuse import fuse_ranked
from crag.correct.injection import flag_instructions
from crag.correct.rounds import abstain_text
from crag.correct.verify import Verification, threshold_for, verify_correct
from crag.decide import decide
from crag.event_names import EventName
from crag.generate import NO_CONTEXT, Generation, generate
from crag.generate.namesakes import answer_bearers
from crag.generate.relation import Judge, judge_threshold, model_judge
from crag.grade.classify import query_for
from crag.grade.heuristic import set_confidence
from crag.kb import KnowledgeBase
from crag.llm.guard import GuardedLLM
from crag.protocols import LLM, Evaluator, WebSearch
from crag.text import approx_tokens
from crag.trace.spans import Tracer
from crag.types import Action, Answer, Citation, Evaluation, Passage, Query, Retrieval, Strip, Usage

T = TypeVar("T")

ALWAYS_SHOWN = 3  # strips an answer prompt holds whatever their length (sources_shown)
OnStep = Callable[[EventName, Any], None]
"""An observer: called with a step's name and its value as soon as the step finishes."""


class Streaming(TypedDict, total=False):
    """``generate``'s callbacks while a run is watched live (:meth:`Steps.streaming`)."""

    on_token: Callable[[str], None]
    on_piece: Callable[[str], None]


@runtime_checkable
class Heartbeat(Protocol):
    """An observer that may stop a run between two pieces of the model's reply (a closed stream)."""

    def heartbeat(self) -> None: ...


class Steps:
    """Runs steps in the tracer's spans and hands each value to the observers, in order.

    ``crag.pipeline`` makes one per request, with the tracer's recorder
    (:class:`crag.pipeline.events.TraceRecorder`) first and the caller's ``on_step`` after.
    """

    def __init__(self, tracer: Tracer, *observers: OnStep, live: bool = False) -> None:
        self.tracer = tracer
        self.observers = list(observers)
        self.live = live  # someone watches as it happens: the answer streams as ``token`` events

    def streaming(self) -> Streaming:
        """``generate``'s streaming callbacks when the run is watched live, else none (one call):
        each verified sentence becomes a ``token`` event as it passes the sentence gate, and
        every piece the model writes is a heartbeat, so a watcher that stopped watching stops
        the model between two pieces even while a sentence is still being checked."""
        if not self.live:
            return {}
        return {"on_token": self._token, "on_piece": self._piece}

    def _token(self, delta: str) -> None:
        self._first("first_shown_s")
        self.emit("token", delta)

    def _first(self, key: str) -> None:
        """When the model's first piece, and the first verified text, came (seconds into the request):
        what the sentence gate costs a reader is the gap between the two."""
        stream = self.tracer.events.setdefault("stream", {})
        if isinstance(stream, dict) and key not in stream:
            stream[key] = round(self.tracer.elapsed(), 4)

    def _piece(self, piece: str) -> None:
        """Each piece the model writes; ``""`` while it still reads the prompt (no first token yet)."""
        if piece:
            self._first("first_token_s")
        self.heartbeat()

    def watched(self) -> Callable[[], None] | None:
        """The heartbeat for the request's LLM guard when the run is watched live, else ``None``."""
        return self.heartbeat if self.live else None

    def heartbeat(self) -> None:
        """Let observers that watch live (:class:`Heartbeat`) stop the run: they raise to do so."""
        for observe in self.observers:
            watcher: object = observe  # an OnStep; some are Heartbeats too
            if isinstance(watcher, Heartbeat):
                watcher.heartbeat()

    def replay(self, text: str) -> None:
        """A cached answer's text (already verified when it was written): one ``token`` when watched live."""
        if self.live and text:
            self._token(text)

    def show(self, generation: Generation) -> Generation:
        """A final refusal or abstention is the answer's text: stream it now (nothing else showed it)."""
        if self.live and generation.refused and generation.text:
            self._token(generation.text)
        return generation

    def run(self, name: EventName, step: Callable[[], T], *, tags_from: Callable[[T], dict[str, Any]] | None = None,
            **tags: Any) -> T:  # fmt: skip
        """Run ``step()`` in a span called ``name`` (with ``tags``, plus ``tags_from(value)``), then emit its value."""
        with self.tracer.span(name, **tags) as span:
            value = step()
            if tags_from is not None:
                span.tags.update(tags_from(value))
        return self.emit(name, value)

    def emit(self, name: EventName, value: T) -> T:
        """Hand ``value`` to every observer as the event ``name``; return it."""
        for observe in self.observers:
            observe(name, value)
        return value


# -- values -----------------------------------------------------------------------------
@dataclass
class Decision:
    """The corrective action and the confidence it was decided from (None in plain RAG).

    ``escalated_from`` is the refused generation that turned Correct into Ambiguous
    (:func:`can_escalate`), ``unverified`` the verification that did so before generation
    (:func:`can_verify`), ``shared`` the bearers of a shared name that did so
    (:func:`shared_name`); all ``None`` for the first decision.
    """

    action: Action
    confidence: float | None
    escalated_from: Generation | None = None
    unverified: Verification | None = None  # the failed check that turned Correct into Ambiguous
    shared: Bearers | None = None  # the people of the asked name the internal strips describe


@dataclass
class Context:
    """What the generator is shown: fused strips, best first, and what fusion found."""

    strips: list[Strip]
    duplicates: int = 0
    support: list[int] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    instruction: str = ""  # told to the generator when sources disagree
    suspicious: list[dict[str, object]] = field(default_factory=list)  # instruction-like strips, ranked lower
    budget_tokens: int = 0
    degradations: list[str] = field(default_factory=list)
    source_tokens: int | None = None  # the answer prompt's source budget (generation.source_tokens)

    def prompt_strips(self) -> list[Strip]:
        """The strips an answer prompt holds (:func:`sources_shown`); all of them are seen for namesakes."""
        return self.strips[: sources_shown(self.strips, self.source_tokens)]


# -- steps ------------------------------------------------------------------------------
def make_query(
    question: str, cfg: CragSettings, *, mode: str = "crag", filters: dict[str, tuple[str, ...]] | None = None
) -> Query:
    """The question with its language, metadata filters and, in CRAG mode, its type and thresholds."""
    return query_for(question, cfg, mode=mode, filters=filters)


def retrieve(query: Query, kb: KnowledgeBase, cfg: CragSettings) -> Retrieval:
    """1. Hybrid dense + keyword top-k from the knowledge base (only documents the filters admit)."""
    return kb.retrieve(query.text, k=cfg.retrieval.top_k, filters=query.filters)


def grade(query: Query, retrieval: Retrieval, evaluator: Evaluator) -> Evaluation:
    """2. A relevance grade per retrieved document and a confidence for the set.

    A question that singles out one bearer of a shared name ("the Welsh painter John Carter")
    makes documents about the name's other bearers irrelevant: graded at most τ_low.
    """
    passages = [
        Passage(h.chunk.id, h.chunk.text, vector=h.vector, dense=h.dense, keyword=h.keyword) for h in retrieval.hits
    ]
    graded = evaluator.grade(query, passages)
    titled = [Strip(h.chunk.text, h.chunk.source, "internal", h.chunk.title) for h in retrieval.hits]
    others = namesakes_of(query, titled)
    if not others:
        return graded
    grades = [
        replace(g, score=min(g.score, query.lower), reason=others[i], signals=g.signals | {"namesake": 1.0})
        if i in others
        else g
        for i, g in enumerate(graded.grades)
    ]
    return replace(graded, grades=grades, confidence=set_confidence(grades))


def decide_action(query: Query, grading: Evaluation) -> Decision:
    """3. Correct / Ambiguous / Incorrect from the grades and the question's thresholds."""
    action = decide(
        grading.grades, confidence=grading.confidence, upper=query.upper, lower=query.lower, rule=query.rule
    )
    return Decision(action, grading.confidence)


def fuse(groups: Sequence[Sequence[Strip]], cfg: CragSettings, lang: str) -> Context:
    """Dedupe, rank by grade and cross-source support, diversify, fit the token budget.

    Retrieved text is data: strips that address the assistant are flagged and ranked
    lower first. The generator sees fusion's ranking, capped; conflicts are numbered as
    it sees them.
    """
    fix = cfg.correction
    suspicious = flag_instructions([s for g in groups for s in g])
    groups = [[s for s in g if s.text.strip()] for g in groups]  # a strip that was all instruction is gone
    budget_tokens = fix.context_tokens or cfg.generation.max_context_chars // 2
    fused = fuse_ranked(
        groups,
        max_tokens=budget_tokens,
        diversity=fix.diversity,
        mmr_lambda=fix.mmr_lambda,
        detect_contradictions=False,
    )
    gen = cfg.generation
    strips = fused.context[: gen.max_sources]
    conflicts = detect_conflicts(strips[: sources_shown(strips, gen.source_tokens)])  # as the prompt numbers them
    instruction = conflict_instruction(conflicts, lang)
    return Context(
        strips, fused.duplicates, fused.support, conflicts, instruction, suspicious, budget_tokens,
        source_tokens=gen.source_tokens,
    )  # fmt: skip


def sources_shown(strips: Sequence[Strip], max_tokens: int | None) -> int:
    """How many of ``strips`` an answer prompt holds: the first ``ALWAYS_SHOWN``, then the next
    while all fit ``max_tokens``. Every source token is read before the first word; measured on
    data/hard, the answer sits in the first three for nearly every question, and English strips
    are short enough that four or five still fit (Chinese ones, ~3x the tokens, rarely)."""
    used = 0
    for n, strip in enumerate(strips):
        used += approx_tokens(strip.text)
        if n >= ALWAYS_SHOWN and max_tokens is not None and used > max_tokens:
            return n
    return len(strips)


def compress_context(query: Query, context: Context, llm: LLM) -> Context:
    """The Correct path's optional LLM compression (article 2.2: 去噪和压缩)."""
    out = compress(query, context.strips, llm, context.budget_tokens)
    return replace(context, strips=out.strips, degradations=out.degradations)


def name_bearers(query: Query, context: Context, cfg: CragSettings) -> Bearers:
    """5a. The people the sources the generator will read describe under the question's name."""
    return find_bearers(query, context.strips[: cfg.generation.max_sources])


def generate_answer(
    query: Query,
    context: Context,
    llm: LLM,
    cfg: CragSettings,
    streaming: Streaming | None = None,
    *,
    reask: bool = True,
    bearers: Bearers | None = None,
) -> Generation:
    """5. Generate from the context, citing it; in CRAG a refusal despite a source graded
    at or above τ_high is asked again once (plain RAG's scores are not grades: no re-ask;
    ``reask=False`` when escalation will ask again instead).
    ``streaming``: ``on_token`` and ``on_piece`` (:meth:`Steps.streaming`).

    ``bearers``: when the context describes several people of the asked name, each is named
    and answered for (:func:`crag.generate.namesakes.answer_bearers`); when the question
    singles one out, the others' sources are left out and it gets one answer."""
    if bearers is not None and bearers.several:
        return answer_bearers(
            query.text,
            context.strips[: cfg.generation.max_sources],
            bearers.bearers,
            llm,
            lang=query.language,
            max_tokens=cfg.llm.max_tokens,
            temperature=cfg.llm.temperature,
            answer_each=not bearers.asks_who,  # "who is X?": the list of who they are answers it
            **(streaming or {}),  # on_token, on_piece
        )
    if bearers is not None and bearers.listed():
        return _answer_chosen(query, context, llm, cfg, streaming, bearers, reask=reask)
    judge, threshold = claim_judge(query, llm, cfg)
    return generate(
        query.text,
        context.prompt_strips(),
        llm,
        lang=query.language,
        max_tokens=cfg.llm.max_tokens,
        temperature=cfg.llm.temperature,
        extra_instruction=context.instruction,
        max_sources=cfg.generation.max_sources,
        reask_above=query.upper if query.mode == "crag" and reask else None,
        judge=judge,
        judge_threshold=threshold,
        check_relation=cfg.generation.check_claims,
        **(streaming or {}),  # on_token, on_piece
    )


def claim_judge(query: Query, llm: LLM, cfg: CragSettings) -> tuple[Judge | None, float]:
    """The model reading of claims whose words differ from their source's, and its threshold.

    It runs in a second context of the model when it has one (``GuardedLLM.session``): the
    answer is still streaming when a sentence is checked. None when the check is off, the
    model gives no token probabilities or has no threshold (plain RAG checks its claims too:
    the generator is the same, only the evidence differs).
    """
    threshold = judge_threshold(llm.model_id, cfg.generation.claim_threshold)
    if not cfg.generation.check_claims or threshold is None:
        return None, 0.5
    side = llm.session() if isinstance(llm, GuardedLLM) else llm
    return model_judge(side, query.language), threshold


def _answer_chosen(
    query: Query,
    context: Context,
    llm: LLM,
    cfg: CragSettings,
    streaming: Streaming | None,
    bearers: Bearers,
    *,
    reask: bool,
) -> Generation:
    """The one bearer the question names, answered from the sources that are not about the others."""
    shown = context.strips[: cfg.generation.max_sources]
    others = bearers.others()
    kept = [s for n, s in enumerate(shown, 1) if n not in others]
    renumber = {n: i for i, n in enumerate((n for n in range(1, len(shown) + 1) if n not in others), 1)}
    gen = generate_answer(query, replace(context, strips=kept), llm, cfg, streaming, reask=reask)
    if bearers.chosen is not None and not gen.refused:
        seen = len(gen.sources)  # the strips the answer prompt held (Context.prompt_strips)
        gen.bearers = [
            replace(bearers.chosen, cites=[renumber[n] for n in bearers.chosen.cites if renumber[n] <= seen])
        ]
    return gen


def can_escalate(decision: Decision, search: WebSearch | None, cfg: CragSettings) -> bool:
    """6. Whether a refusal on this path would send the question to external search.

    Correct only (an escalated decision is Ambiguous, so it happens once), and only with a
    search configured. The pipeline then skips the re-ask of the first reply: the answer
    is asked for again anyway, with more evidence (measured on data/hard: the re-ask over
    the same internal strips turned none of the Correct path's refusals into an answer).
    """
    return cfg.correction.escalate_on_refusal and decision.action is Action.CORRECT and search is not None


def shared_name(query: Query, decision: Decision, strips: Sequence[Strip], search: WebSearch | None,
                cfg: CragSettings) -> Bearers | None:  # fmt: skip
    """4a. The bearers of the asked name the Correct path's strips describe, when there are
    several and the question does not say which: the one it means may be only outside."""
    if not cfg.correction.search_shared_names or decision.action is not Action.CORRECT or search is None:
        return None
    found = find_bearers(query, strips)
    return found if found.several else None


def can_verify(decision: Decision, search: WebSearch | None, cfg: CragSettings) -> bool:
    """4b. Whether the Correct action is checked by the LLM before it is trusted.

    Correct only, with a search to turn to when the check fails (without one there is
    nothing to do but answer from the internal strips anyway).
    """
    return cfg.correction.verify_correct and decision.action is Action.CORRECT and search is not None


def verify(query: Query, strips: Sequence[Strip], llm: LLM, cfg: CragSettings) -> Verification:
    """4b. Does the LLM read the answer in the Correct path's strips? (:mod:`crag.correct.verify`)"""
    return verify_correct(
        query.text,
        strips,
        llm,
        query.language,
        threshold=threshold_for(llm.model_id, cfg.correction.verify_threshold),
        max_strips=cfg.generation.max_sources,
    )


def usage(gen: Generation) -> dict[str, int]:
    """The generate span's tags: what the answer cost."""
    return {
        "prompt_tokens": sum(c.prompt_tokens for c in gen.completions),
        "completion_tokens": sum(c.completion_tokens for c in gen.completions),
        "llm_calls": len(gen.completions),
    }


def abstain(query: Query, context: Context) -> Generation:
    """No guess: say so, and list what was found by title and link.

    Titles and links only: quoting raw retrieved text back to the user would also
    repeat whatever instructions a page planted in it.
    """
    shown = context.strips[:3]
    if not shown:  # nothing found at all: say so, rather than promise a list and end in a colon
        return Generation(NO_CONTEXT.get(query.language, NO_CONTEXT["en"]), [], [], refused=True, abstained=True)
    lines = [abstain_text(query.language)]
    lines += [f"[{n}] {s.title or s.source} {s.url}".rstrip() for n, s in enumerate(shown, 1)]
    citations = [Citation(n, s.source, s.title, s.url, s.text) for n, s in enumerate(shown, 1)]
    return Generation("\n".join(lines), citations, shown, refused=True, abstained=True)


def compose_answer(
    query: Query,
    decision: Decision,
    gen: Generation,
    *,
    degradations: list[str],
    queries: list[str],
    tracer: Tracer,
    usage: Usage | None = None,
) -> Answer:
    """The Answer, from the step values (the tracer gives only its id and its clock)."""
    return Answer(
        question=query.text,
        answer=gen.text,
        action=decision.action,
        confidence=decision.confidence,
        citations=gen.citations,
        context=gen.sources,
        trace_id=tracer.id,
        timings={k: round(v, 4) for k, v in tracer.timings().items()},
        mode=query.mode,
        degradations=degradations,
        queries=queries,
        refused=gen.refused,
        abstained=gen.abstained,
        usage=usage or Usage(),
        bearers=gen.bearers,
    )


# -- stopping before generation ------------------------------------------------------------
@dataclass
class CorrectedContext:
    """What CRAG hands its generator, without generating: the decision and the corrected context.

    The result of :func:`crag.pipeline.run_crag_context` (``CRAG.retrieve_context``): the
    same steps as an answer up to generation, so ``context.strips`` are the strips an answer
    to ``query`` would be written from, each with its grade (``Strip.score``) and origin.

    >>> from crag.types import Action, Query
    >>> got = CorrectedContext(Query("Who?", "en"), Decision(Action.CORRECT, 0.8), Context([]), [], [], "t1")
    >>> got.action.value, got.confidence, got.strips
    ('correct', 0.8, [])
    """

    query: Query
    decision: Decision
    context: Context
    queries: list[str]  # the external search queries (Ambiguous, Incorrect)
    degradations: list[str]
    trace_id: str
    usage: Usage = field(default_factory=Usage)  # LLM calls made on the way (grading, verification, rewrite)

    @property
    def strips(self) -> list[Strip]:
        return self.context.strips

    @property
    def action(self) -> Action:
        return self.decision.action

    @property
    def confidence(self) -> float | None:
        return self.decision.confidence
