"""Write the answer from the corrected context: best sources first, one call, one re-ask at most.

Refusal is decided from the evidence, not from a sentence the model copies:

1. the sources come best-first (fusion's ranking, or retrieval's in plain RAG) and are
   capped: a small model reads the first few;
2. the model answers from them, citing ``[n]``;
3. every sentence of the reply passes the :class:`~crag.generate.gate.SentenceGate`
   before anyone sees it: its new content words and figures must be in a source
   (:mod:`~crag.generate.grounding`), and its citation must point at a source that holds
   it (moved there when it does not, added when missing). A sentence no source supports is
   dropped (``trimmed``); one that declines is held back;
4. a reply with no verified sentence is no answer: it declined, said nothing new (only
   restated the question), or claimed what no source holds. If so although the evaluator
   graded a source at or above τ_high, the model is asked once more, pointed at that
   source (``refusal_overridden`` when that yields an answer);
5. otherwise the answer is a refusal (``refused``): the model's own words when it
   declined, a plain statement when its answer was unsupported. An empty context is a
   refusal too. Honest abstention when correction found nothing reliable happens before
   generation, in the pipeline.

Streaming (``on_token``): verified sentences are handed on as they pass the gate, so what a
reader sees is always the answer's beginning and is never taken back. A refusal is not
handed on: the pipeline shows it once it is final (an escalation may still replace it).

>>> from crag.testing.fakes import ScriptedLLM
>>> from crag.types import Strip
>>> ctx = [Strip("Corser was an Australian politician.", "a.txt", "web", score=0.9)]
>>> g = generate("What was Corser's job?", ctx, ScriptedLLM(["The sources do not say.", "A politician [1]."]),
...              reask_above=0.8)
>>> g.text, g.refused, g.refusal_overridden, len(g.completions)
('A politician [1].', False, True, 2)
>>> seen = []
>>> g = generate("What was Corser's job?", ctx, ScriptedLLM(["The sources do not say.", "A politician [1]."]),
...              reask_above=0.8, on_token=seen.append)
>>> seen
['A politician [1].']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crag.generate.gate import SentenceGate
from crag.generate.prompts import build_messages
from crag.generate.refusal import NO_CONTEXT
from crag.generate.relation import Judge, Verdict, missing_terms
from crag.protocols import LLM, Completion, TokenStream, stream_completion
from crag.text import detect_language
from crag.types import Bearer, Citation, Claim, Strip

DEFAULT_MAX_SOURCES = 5
# Said instead of an answer whose content the sources do not contain.
NOT_IN_SOURCES = {
    "en": "The sources found do not answer this question.",
    "zh": "找到的资料没有回答这个问题。",
}
# After a refusal: which of the question's words no source holds, and what the sources do cover.
_MISSING = {"en": "None of them mentions {terms}.", "zh": "资料中都没有提到{terms}。"}
_COVER = {"en": "They cover: {items}.", "zh": "资料涉及：{items}。"}
_QUOTE = {"en": ("“", "”", ", "), "zh": ("“", "”", "、")}


@dataclass
class Generation:
    """What generation produced: the text, its citations, and how it got there."""

    text: str
    citations: list[Citation]
    sources: list[Strip]  # exactly what the model was shown, in its order ([n] = sources[n-1])
    refused: bool = False
    refusal_overridden: bool = False  # the model refused, was re-asked, and answered
    citations_inferred: bool = False  # a sentence's marker was added or moved to the source that holds it
    completions: list[Completion] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)  # words of dropped sentences no source has
    # Why the last reply was not taken as the answer: "" (it was), "declined", "empty" (only
    # markers or punctuation), "restates the question", or "not in the sources".
    rejected: str = ""
    trimmed: str = ""  # the reply's sentences the sources do not support, never shown
    claims: list[Claim] = field(default_factory=list)  # the answer's sentences and what holds them
    abstained: bool = False  # no model call: correction found nothing reliable
    bearers: list[Bearer] = field(default_factory=list)  # people of a shared name it answers for (generate.namesakes)
    # The relation checks of the reply's sentences (crag.generate.relation): every judge call,
    # and each sentence dropped because its sources talk about the same thing without stating it.
    checks: list[dict[str, object]] = field(default_factory=list)


@dataclass(frozen=True)
class Replace:
    """The verified text shown so far is replaced by a better answer (``text`` follows as tokens).

    Only an escalation that swaps a verified answer for a better one sends it (``reason``
    ``escalate``); an ordinary answer never does: the sentence gate shows nothing that is
    taken back.
    """

    reason: str
    text: str = ""


@dataclass
class _Attempt:
    """One call of the model through a fresh sentence gate; what every attempt shares."""

    question: str
    sources: list[Strip]
    llm: LLM
    lang: str
    max_tokens: int
    temperature: float
    extra_instruction: str
    on_token: Callable[[str], None] | None
    on_piece: Callable[[str], None] | None
    judge: Judge | None
    judge_threshold: float
    check_relation: bool

    def __call__(self, directive: int | None = None) -> tuple[SentenceGate, Completion]:
        gate = SentenceGate(
            self.question,
            self.sources,
            on_text=self.on_token,
            judge=self.judge,
            judge_threshold=self.judge_threshold,
            relation=self.check_relation,
        )
        messages = build_messages(self.question, self.sources, self.lang, self.extra_instruction, directive=directive)
        if self.on_token is None:
            done = self.llm.complete(messages, max_tokens=self.max_tokens, temperature=self.temperature)
            gate.feed(done.text)
        else:
            stream = stream_completion(self.llm, messages, max_tokens=self.max_tokens, temperature=self.temperature)
            done = _pass_on(stream, gate.feed, self.on_piece)
        gate.finish()
        return gate, done


def generate(
    question: str,
    context: Sequence[Strip],
    llm: LLM,
    *,
    lang: str | None = None,
    max_tokens: int = 384,
    temperature: float = 0.0,
    extra_instruction: str = "",
    max_sources: int = DEFAULT_MAX_SOURCES,
    reask_above: float | None = None,
    on_token: Callable[[str], None] | None = None,
    on_piece: Callable[[str], None] | None = None,
    judge: Judge | None = None,
    judge_threshold: float = 0.5,
    check_relation: bool = True,
) -> Generation:
    """Answer ``question`` from ``context`` (best first); see the module docstring for the rules.

    ``reask_above`` is τ_high on the Correct/Ambiguous/Incorrect paths (strip scores are
    evaluator grades there); leave it ``None`` when scores are not grades (plain RAG).
    With ``on_token`` the model streams and each verified sentence is passed to it as it
    passes the gate. ``on_piece`` gets each piece the model writes, shown or not, and the empty
    pieces of a model still reading its prompt: an exception raised by either (a cancelled
    request) stops the model and propagates. ``judge`` reads claims no source states in their
    own words (:mod:`crag.generate.relation`); without one, their relation words must be in
    the source.
    """
    lang = lang or detect_language(question)
    sources = list(context[: max(1, max_sources)])
    if not sources:
        return Generation(NO_CONTEXT.get(lang, NO_CONTEXT["en"]), [], [], refused=True)
    attempt = _Attempt(
        question,
        sources,
        llm,
        lang,
        max_tokens=max_tokens,
        temperature=temperature,
        extra_instruction=extra_instruction,
        on_token=on_token,
        on_piece=on_piece,
        judge=judge,
        judge_threshold=judge_threshold,
        check_relation=check_relation,
    )
    gates, calls = _ask_then_reask(attempt, reask_above)
    return _generation(question, sources, lang, gates, calls)


def _ask_then_reask(attempt: _Attempt, reask_above: float | None) -> tuple[list[SentenceGate], list[Completion]]:
    """The first attempt; and when it did not answer though a source is graded at or above
    ``reask_above``, a second one pointed at that source. Each attempt's gate and completion."""
    first, call = attempt()
    gates, calls = [first], [call]
    if not first.answered and reask_above is not None:
        best = next((n for n, s in enumerate(attempt.sources, 1) if s.score >= reask_above), None)
        if best is not None:  # nothing was shown: the re-ask streams from a clean page
            again, call = attempt(directive=best)
            gates.append(again)
            calls.append(call)
    return gates, calls


def _generation(
    question: str, sources: list[Strip], lang: str, gates: list[SentenceGate], calls: list[Completion]
) -> Generation:
    """The answer of the last attempt that answered (else the first), or a refusal citing the sources."""
    first = gates[0]
    gate = gates[-1] if gates[-1].answered else first
    outcome = gate.verdict()
    refused = outcome != "answer"
    if not refused:
        text, citations = gate.text, claim_citations(gate.claims, sources)
    else:
        said = gate.declined_text() if outcome == "declined" else ""
        text, citations = not_stated(question, sources, lang, said)
    return Generation(
        text,
        citations,
        sources,
        refused=refused,
        refusal_overridden=not refused and gate is not first,
        citations_inferred=any(c.how in ("inferred", "repaired") for c in gate.claims),
        completions=calls,
        unsupported=[] if outcome == "answer" else first.unsupported,
        rejected="" if outcome == "answer" else outcome,
        trimmed=" ".join(gate.dropped) if not refused else "",
        claims=gate.claims if not refused else [],
        checks=[_check(v, held=True) for g in gates for v in g.judged if v.held]
        + [_check(v, held=False) for g in gates for v in g.unrelated],
    )


def not_stated(question: str, sources: Sequence[Strip], lang: str, said: str = "") -> tuple[str, list[Citation]]:
    """A refusal that says what is missing and what the sources do cover, citing them.

    ``said``: the model's own refusal, when its words hold (it replaces the plain opener).
    The question's words that no source holds are named ("None of them mentions “CEO”."),
    then the two best sources by title: a reader sees what was found, and can check it.

    >>> text, cites = not_stated("Who is the CEO of Kestrel Labs?",
    ...     [Strip("Wang Lei is the sales director.", "a.md", "internal", "Kestrel Labs sales team")], "en")
    >>> text.startswith("The sources found do not answer this question. None of them mentions “CEO”.")
    True
    >>> text.endswith("They cover: Kestrel Labs sales team [1].")
    True
    >>> [c.id for c in cites]
    [1]
    """
    lang = lang if lang in NOT_IN_SOURCES else "en"
    opener, close, sep = _QUOTE[lang]
    parts = [said or NOT_IN_SOURCES[lang]]
    missing = missing_terms(question, list(sources))[:3]
    if missing and sources:
        parts.append(_MISSING[lang].format(terms=sep.join(f"{opener}{m}{close}" for m in missing)))
    shown = [(n, s) for n, s in enumerate(sources[:2], 1) if (s.title or s.source).strip()]
    if shown:
        items = ("；" if lang == "zh" else "; ").join(
            f"{_label(s)}{'' if lang == 'zh' else ' '}[{n}]" for n, s in shown
        )
        parts.append(_COVER[lang].format(items=items))
    text = ("" if lang == "zh" else " ").join(parts)
    return text, [Citation(n, s.source, s.title, s.url, s.text) for n, s in shown]


def _label(source: Strip) -> str:
    """A source as a reader knows it: its title, else its link, else its file name (no folders)."""
    name = source.title or source.url
    if not name and "://" in source.source:
        name = source.source.split("://", 1)[1]
    name = name or source.source.replace("\\", "/").rsplit("/", 1)[-1]
    return " ".join(name.split())[:80]


def _check(v: Verdict, *, held: bool) -> dict[str, object]:
    return {"held": held, "how": v.how, "window": v.window, "missing": v.missing, "probability": v.probability}


def claim_citations(claims: Sequence[Claim], sources: Sequence[Strip]) -> list[Citation]:
    """One citation per source the answer's sentences cite, in order of first use, with its quote and spans."""
    out: dict[int, Citation] = {}
    for claim in claims:
        for n, quote in zip(claim.cites, claim.quotes, strict=True):
            if n not in out:
                s = sources[n - 1]
                out[n] = Citation(n, s.source, s.title, s.url, s.text, quote=quote)
            out[n].spans.append((claim.start, claim.end))
            out[n].inferred = out[n].inferred or claim.how in ("inferred", "repaired")
    return sorted(out.values(), key=lambda c: c.id)


def _pass_on(stream: TokenStream, feed: Callable[[str], None], on_piece: Callable[[str], None] | None) -> Completion:
    """Hand each delta of ``stream`` to ``feed``; return the Completion. The stream is closed
    on the way out, so an exception from ``on_piece`` or ``feed`` stops the model at once."""
    try:
        while True:
            try:
                piece = next(stream)
            except StopIteration as end:
                done: Completion = end.value
                return done
            if on_piece is not None:
                on_piece(piece)
            if piece:  # "": the model is still reading its prompt (a chance to stop it, no text)
                feed(piece)
    finally:
        stream.close()
