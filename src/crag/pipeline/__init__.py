"""The CRAG data flow, top to bottom: retrieve → evaluate → decide → correct → generate.

``run_crag`` is the whole algorithm; ``run_rag`` is the plain baseline with the same
components (retrieve → generate) that the article compares against. Each step is a
function that returns a value (:mod:`crag.pipeline.steps`, :mod:`crag.pipeline.correction`);
the run functions compose them and read no global state.

Step events
-----------
As each step finishes, its value is handed to the observers, in this order (a step that
does not run on a path sends nothing):

==================  ============================  ==============================================
event               value                         when
==================  ============================  ==============================================
``condense``        ``Condensed``                 first, in a conversation only: the last message
                                                  made standalone from the history (at most one
                                                  LLM call)
``query``           :class:`~crag.types.Query`    the question, language, type, thresholds
``cache``           ``CacheHit``                  the answer cache held a valid answer to the
                                                  question (:mod:`crag.pipeline.answer_cache`):
                                                  ``token`` (its text, when watched) and
                                                  ``answer`` follow, nothing else runs
``retrieve``        :class:`~crag.types.Retrieval`  documents found (hits, best first)
``evaluate``        :class:`~crag.types.Evaluation` grades and the set's confidence (CRAG)
``decide``          ``Decision``                  action + confidence (``rag`` in plain RAG)
``refine``          ``Refinement``                internal strips kept (Correct, Ambiguous, or
                                                  Incorrect's fallback when nothing was found)
``rewrite``         ``Rewrite``                   search queries (+ sub-queries) (Ambiguous, Incorrect)
``search``          ``Search``                    external results with their queries
``refine_external`` ``Refinement``                external strips kept
``rounds``          ``RoundsResult``              multi-round correction (``correction.max_rounds`` > 1)
``correct``         ``Correction``                all strips by origin, every strip graded (CRAG)
``verify``          ``Verification``              Correct only: P(yes) that the kept strips state
                                                  the answer (``correction.verify_correct``); when
                                                  below the threshold, ``escalate`` (``unverified``)
                                                  and ``correct`` follow
``fuse``            ``Context``                   what the generator will see, conflicts (CRAG)
``compress``        ``Context``                   the Correct path's LLM compression (opt-in)
``bearers``         ``Bearers``                   the people the generator's sources describe
                                                  under the question's name (CRAG)
``abstain``         ``Generation``                nothing reliable found: titles and links, no guess
``token``           ``str``                       a verified piece of the answer: a sentence as it
                                                  passes the gate, or the final refusal (only
                                                  when ``on_step`` is given); joined, the answer
``replace``         ``Replace``                   an escalation swaps a verified answer for a
                                                  better one (never sent by an ordinary answer)
``generate``        ``Generation``                the model's answer, citations, re-ask
``escalate``        ``Decision``                  Correct, but the answer was a refusal: Ambiguous
                                                  now (``escalated_from``: that generation);
                                                  ``correct``, ``fuse``, ``generate`` follow again
``answer``          :class:`~crag.types.Answer`   last: what the caller gets
``context``         ``CorrectedContext``          last of :func:`run_crag_context` (no answer):
                                                  the decision and the corrected context
==================  ============================  ==============================================

With an ``on_step`` observer the model streams: ``token`` events arrive while
``generate`` runs, before its own event, one per sentence that passed the sentence gate
(:mod:`crag.generate.gate`): nothing is shown that is later taken back. A refusal is sent
once it is final (after ``generate``, or after ``abstain``). Without an observer the model
is called once and no ``token`` event is sent; the answer is the same. An exception
raised by ``on_step`` (a cancelled request) ends the run there; between tokens it also
stops the model.

Every value carries ``degradations``: what that step gave up on, with the reason. The
Answer's degradations are the steps' own, gathered in order. The tracer is one observer
(:class:`~crag.pipeline.recorder.TraceRecorder`); ``on_step`` adds another (a stream of
server-sent events, say). Observers watch and never steer. What each observer takes from
each value is written in one place, :mod:`crag.pipeline.events`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from crag.config import CragSettings
from crag.correct.bearers import Bearers
from crag.correct.condense import Condensed, condense
from crag.correct.reread import reread
from crag.deadline import Deadline
from crag.generate import Generation
from crag.kb import KnowledgeBase
from crag.llm.guard import GuardedLLM
from crag.metadata import Filters
from crag.pipeline.answer_cache import AnswerCache, Lookup
from crag.pipeline.correction import Correction, Corrector, Refinement, Rewrite, Search
from crag.pipeline.guard import Guarded, guard
from crag.pipeline.recorder import TraceRecorder
from crag.pipeline.steps import (
    Context,
    CorrectedContext,
    Decision,
    OnStep,
    Steps,
    abstain,
    can_escalate,
    can_verify,
    compose_answer,
    compress_context,
    decide_action,
    fuse,
    generate_answer,
    grade,
    make_query,
    name_bearers,
    retrieve,
    shared_name,
    usage,
    verify,
)
from crag.protocols import LLM, Evaluator, WebSearch
from crag.trace.spans import Tracer
from crag.types import Action, Answer, Evaluation, Hit, Query, Retrieval, Strip

__all__ = [
    "Condensed",
    "Context",
    "CorrectedContext",
    "Correction",
    "Decision",
    "Deps",
    "OnStep",
    "Refinement",
    "Rewrite",
    "Search",
    "make_query",
    "run_crag",
    "run_crag_context",
    "run_rag",
]


@dataclass
class Deps:
    """The components one question runs through (``http``: the client page fetching uses,
    ``search.fetch_pages``; the engine owns it), the metadata ``filters`` that scope its
    retrieval (:mod:`crag.metadata`; the query carries them from the first event on), and
    the answer cache (:mod:`crag.pipeline.answer_cache`; None: off, or bypassed)."""

    kb: KnowledgeBase
    evaluator: Evaluator
    llm: LLM
    search: WebSearch | None
    http: httpx.Client | None = None
    filters: Filters = field(default_factory=dict)
    answers: AnswerCache | None = None


History = Sequence[Mapping[str, Any]]
"""A conversation before the question: ``{"role": "user" | "assistant", "content": text}`` messages."""


@dataclass
class _Started:
    """A request before retrieval: its guarded components, deadline and standalone question."""

    guarded: Guarded
    deadline: Deadline
    condensed: Condensed
    query: Query


def _start(steps: Steps, question: str, deps: Deps, cfg: CragSettings, history: History | None) -> _Started:
    """Guards, then step 0: in a conversation, the last message made standalone (at most one LLM call)."""
    deadline = Deadline(cfg.correction.deadline_seconds)
    # One budget and one deadline for every LLM call of the request (grading included) and every search.
    guarded = guard(deps.kb, deps.llm, deps.search, deps.evaluator, cfg, deadline, steps.watched())
    condensed = _condense(steps, question, history, guarded.llm)
    query = steps.emit("query", make_query(condensed.question, cfg, mode="crag", filters=deps.filters))
    return _Started(guarded, deadline, condensed, query)


@dataclass
class _Corrected:
    """Where :func:`run_crag` and :func:`run_crag_context` part: every step up to the fused context.

    ``early`` holds the degradations of the steps that never run again (condense, retrieve,
    evaluate, verify); an escalation replaces ``correction`` and ``context``.
    """

    steps: Steps
    query: Query
    retrieval: Retrieval
    grading: Evaluation
    decision: Decision
    corrector: Corrector
    correction: Correction
    context: Context
    llm: GuardedLLM
    search: WebSearch | None
    deadline: Deadline
    early: list[str]


def _correct(steps: Steps, start: _Started, deps: Deps, cfg: CragSettings) -> _Corrected:
    """Steps 1–4 of CRAG, the same for an answer and for a retriever's context."""
    (llm, search, evaluator), deadline, condensed, query = start.guarded, start.deadline, start.condensed, start.query

    # 1. Retrieve: hybrid dense + keyword top-k from the knowledge base.
    retrieval = steps.run("retrieve", lambda: retrieve(query, deps.kb, cfg), k=cfg.retrieval.top_k)

    # 2. Evaluate: a relevance grade per document and a confidence for the set. When every
    #    grade says "discard", the model first reads the top passages: one it reads the
    #    answer in is kept, between the thresholds (Ambiguous: kept, and still searched).
    graded = lambda: reread(query, retrieval, grade(query, retrieval, evaluator), llm, cfg)  # noqa: E731
    grading = steps.run("evaluate", graded, evaluator=evaluator.name)

    # 3. Decide: Correct / Ambiguous / Incorrect from the grades and two thresholds,
    #    chosen per kind of question when classification is on (article 3.2.3).
    decision = steps.emit("decide", decide_action(query, grading))

    # 4. Correct: refine what the internal documents offer (Correct, Ambiguous); search the
    #    external source with rewritten queries, in rounds until confident (Ambiguous, Incorrect).
    corrector = Corrector(query, evaluator, llm, search, cfg, deadline, steps, http=deps.http)
    correction = steps.emit("correct", corrector.correct(decision, retrieval, grading))

    # 4a. A shared name: the kept strips describe several people of the asked name and the
    #     question does not say which. The one it means may be described only outside, so
    #     search as the Ambiguous action does (no model call: the names are read from the strips).
    shared = shared_name(query, decision, correction.internal, search, cfg)
    if shared is not None:
        decision = steps.emit("escalate", Decision(Action.AMBIGUOUS, decision.confidence, shared=shared))
        correction = steps.emit("correct", corrector.correct(decision, retrieval, grading))

    # 4b. Verify: Correct skips the search on the evaluator's word, and its costliest mistake
    #     is an on-topic passage that does not answer. One yes/no token from the LLM checks
    #     that the kept strips state the answer; if not, search as the Ambiguous action does.
    checked: list[str] = []  # the verification's degradations (an LLM error keeps Correct)
    if can_verify(decision, search, cfg):
        check = steps.run("verify", lambda: verify(query, correction.internal, llm, cfg))
        checked = check.degradations
        if not check.confirmed:
            decision = steps.emit("escalate", Decision(Action.AMBIGUOUS, decision.confidence, unverified=check))
            correction = steps.emit("correct", corrector.correct(decision, retrieval, grading))

    # Fuse: flag instruction-like strips, dedupe, rank by grade and cross-source support,
    # diversify, fit the budget; optionally compress on the Correct path.
    context = _fuse(steps, correction, cfg, query)
    if decision.action is Action.CORRECT and cfg.correction.compress_with_llm:
        context = steps.run("compress", lambda: compress_context(query, context, llm))
    early = condensed.degradations + retrieval.degradations + grading.degradations + checked
    return _Corrected(
        steps, query, retrieval, grading, decision, corrector, correction, context, llm, search, deadline, early
    )


def run_crag(question: str, deps: Deps, cfg: CragSettings, tracer: Tracer, *, history: History | None = None,
             on_step: OnStep | None = None) -> Answer:  # fmt: skip
    """Answer ``question`` with corrective retrieval; every step's value is recorded as it finishes."""
    steps = _steps(tracer, on_step)
    # 0. Condense: in a conversation, the last message made standalone.
    start = _start(steps, question, deps, cfg, history)
    # Cached: this collection answered the same question (filters, mode, settings) before,
    # and no document that answer used has changed since: the verified answer, at once.
    cached = _cached(steps, start.query, deps)
    if cached.answer is not None:
        return cached.answer
    # 1.–4. Retrieve, evaluate, decide, correct (and verify), fuse: :func:`_correct`.
    c = _correct(steps, start, deps, cfg)
    query, decision, correction, context, llm = c.query, c.decision, c.correction, c.context, c.llm

    escalation = can_escalate(decision, c.search, cfg)
    # Abstain honestly when correction found nothing reliable (best grade still ≤ tau_low).
    if cfg.correction.abstain and decision.action is not Action.CORRECT and correction.best() <= query.lower:
        generation = steps.emit("abstain", abstain(query, context))
    else:
        # 5. Generate from the corrected context, citing it (and told about any conflict);
        #    a refusal despite a source graded >= tau_high is asked again once (unless step 6
        #    will ask again with more evidence). When the sources describe several people of
        #    the asked name, the answer names each and answers for each from its own sources.
        named = _bearers(steps, query, context, cfg)
        generation = _generate(steps, query, context, llm, cfg, named, reask=not escalation)

    # 6. Escalate: the documents were graded Correct, yet the generator found no answer in
    #    them. That refusal is evidence the grade was wrong (an on-topic passage that does
    #    not answer), so search as the Ambiguous action would, once, and answer again.
    #    The refusal was never shown (the sentence gate holds refusals back), so nothing is withdrawn.
    if escalation and generation.refused and not c.deadline.expired():
        decision = steps.emit("escalate", Decision(Action.AMBIGUOUS, decision.confidence, escalated_from=generation))
        correction = steps.emit("correct", c.corrector.correct(decision, c.retrieval, c.grading))
        context = _fuse(steps, correction, cfg, query)
        generation = _generate(steps, query, context, llm, cfg, _bearers(steps, query, context, cfg))
    steps.show(generation)  # a refusal is final now: the reader sees it
    degradations = c.early + correction.degradations + context.degradations
    # usage: every LLM call of the request, grading and verification included
    answer = compose_answer(
        query,
        decision,
        generation,
        degradations=degradations,
        queries=correction.queries,
        tracer=tracer,
        usage=llm.usage,
    )
    _remember(steps, deps, cached, answer, context, c.search)  # for the next ask of the question
    return steps.emit("answer", answer)


def run_rag(question: str, deps: Deps, cfg: CragSettings, tracer: Tracer, *, history: History | None = None,
            on_step: OnStep | None = None) -> Answer:  # fmt: skip
    """The baseline: retrieve top-k and generate from the chunks as they are."""
    steps = _steps(tracer, on_step)
    deadline = Deadline(cfg.correction.deadline_seconds)
    llm = guard(deps.kb, deps.llm, None, deps.evaluator, cfg, deadline, steps.watched()).llm
    condensed = _condense(steps, question, history, llm)
    query = steps.emit("query", make_query(condensed.question, cfg, mode="rag", filters=deps.filters))
    cached = _cached(steps, query, deps)
    if cached.answer is not None:
        return cached.answer
    retrieval = steps.run("retrieve", lambda: retrieve(query, deps.kb, cfg), k=cfg.retrieval.top_k)
    decision = steps.emit("decide", Decision(Action.RAG, None))
    context = Context([_strip(h) for h in retrieval.hits])
    # Plain RAG reads its top-k chunks as retrieved, however few strips a CRAG answer prompt holds.
    reads_all = cfg.generation.model_copy(update={"max_sources": max(1, len(context.strips))})
    generation = steps.show(_generate(steps, query, context, llm, cfg.model_copy(update={"generation": reads_all})))
    degradations = condensed.degradations + retrieval.degradations
    answer = compose_answer(
        query, decision, generation, degradations=degradations, queries=[], tracer=tracer, usage=llm.usage
    )
    _remember(steps, deps, cached, answer, context, None)
    return steps.emit("answer", answer)


def _condense(steps: Steps, question: str, history: History | None, llm: LLM) -> Condensed:
    """The ``condense`` step when there is a conversation; a first turn passes as asked, with no event."""
    if not history:
        return Condensed(question, question, 0, "kept")
    return steps.run("condense", lambda: condense(question, history, llm), tags_from=_condense_tags)


def _condense_tags(c: Condensed) -> dict[str, Any]:
    return {"llm_calls": c.llm_calls, "method": c.method, "history": c.history}


def run_crag_context(
    question: str, deps: Deps, cfg: CragSettings, tracer: Tracer, *, history: History | None = None
) -> CorrectedContext:
    """CRAG up to generation, for retrievers: retrieve → evaluate → decide → correct → fuse, then stop.

    The same steps as :func:`run_crag` before it generates (verification and compression
    included, when configured), so the strips returned are those an answer would be written
    from. No answer means no refusal to escalate from (step 6). The ``context`` event ends
    the trace.
    """
    steps = _steps(tracer, None)
    c = _correct(steps, _start(steps, question, deps, cfg, history), deps, cfg)
    degradations = c.early + c.correction.degradations + c.context.degradations
    read = replace(c.context, strips=c.context.prompt_strips())  # what an answer prompt holds
    corrected = CorrectedContext(c.query, c.decision, read, c.correction.queries, degradations, tracer.id, c.llm.usage)
    return c.steps.emit("context", corrected)


def _cached(steps: Steps, query: Query, deps: Deps) -> Lookup:
    """The cache's entry for ``query``. On a hit its ``answer`` is this request's: sent as a
    ``cache`` event, its text as one ``token`` (when watched live), then the ``answer`` event."""
    if deps.answers is None:
        return Lookup("", reason="off")
    with steps.tracer.span("cache"):  # the lookup and the document checks, timed like a step
        found = deps.answers.lookup(query)
    if found.entry is None:
        steps.tracer.record("cache", found.record())
        return found
    hit = steps.emit("cache", deps.answers.hit(found, query, steps.tracer))
    steps.replay(hit.answer.answer)
    found.answer = steps.emit("answer", hit.answer)
    return found


def _remember(steps: Steps, deps: Deps, cached: Lookup, answer: Answer, context: Context,
              search: WebSearch | None) -> None:  # fmt: skip
    """Keep a verified answer for the next ask of its question (:mod:`crag.pipeline.answer_cache`)."""
    if deps.answers is None:
        return
    stored = deps.answers.store(cached, answer, context.strips, getattr(search, "fetched", None))
    answer.cache = cached.record() | {"stored": stored}
    steps.tracer.record("cache", answer.cache)


def _fuse(steps: Steps, correction: Correction, cfg: CragSettings, query: Query) -> Context:
    """The ``fuse`` step over what correction kept, internal and external."""
    return steps.run("fuse", lambda: fuse([correction.internal, correction.external], cfg, query.language))


def _bearers(steps: Steps, query: Query, context: Context, cfg: CragSettings) -> Bearers:
    """The ``bearers`` step: who the generator's sources describe under the question's name."""
    return steps.run("bearers", lambda: name_bearers(query, context, cfg))


def _generate(
    steps: Steps,
    query: Query,
    context: Context,
    llm: LLM,
    cfg: CragSettings,
    bearers: Bearers | None = None,
    *,
    reask: bool = True,
) -> Generation:
    """The ``generate`` step, streamed when the run is watched, its cost in the span's tags."""
    return steps.run(
        "generate",
        lambda: generate_answer(query, context, llm, cfg, steps.streaming(), reask=reask, bearers=bearers),
        tags_from=usage,
        model=llm.model_id,
        context_items=len(context.strips),
    )


def _steps(tracer: Tracer, on_step: OnStep | None) -> Steps:
    """The one place a request's observers are set: the tracer's recorder, then ``on_step``."""
    return Steps(tracer, TraceRecorder(tracer), *([on_step] if on_step else []), live=on_step is not None)


def _strip(h: Hit) -> Strip:
    c = h.chunk
    return Strip(c.text, c.source, "internal", c.title, c.url, c.id, h.score)
