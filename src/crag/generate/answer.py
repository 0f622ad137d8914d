"""Write the answer from the corrected context: best sources first, one call, one re-ask at most.

Refusal is decided from the evidence, not from a sentence the model copies:

1. the sources come best-first (fusion's ranking, or retrieval's in plain RAG) and are
   capped: a small model reads the first few;
2. the model answers from them, citing ``[n]``;
3. a reply is no answer when it says the sources lack one (:mod:`~crag.generate.refusal`),
   when it only restates the question, or when its new content is not in the sources
   (:mod:`~crag.generate.grounding`: an invented figure or name). A reply whose first
   sentences the sources support and whose later ones they do not is cut to those first
   sentences (``trimmed``): small models answer, then add an explanation of their own;
4. if so although the evaluator graded a source at or above τ_high, the model is asked
   once more, pointed at that source (``refusal_overridden`` when that yields an answer);
5. otherwise the answer is a refusal (``refused``): the model's own words when it
   declined, a plain statement when its answer was unsupported. An empty context is a
   refusal too. Honest abstention when correction found nothing reliable happens before
   generation, in the pipeline.

Streaming (``on_token``): the reply's text is handed on as the model writes it, before
the verdict above, which needs the whole reply. When what was handed on is not the
answer, ``on_replace`` says so with a :class:`Replace`: before a re-ask (its text follows
as tokens) and, at the end, when the answer differs from the last reply streamed (a
statement instead of an unsupported reply, inferred citation markers). A client shows
``Replace.text`` in place of what it has.

>>> from crag.testing.fakes import ScriptedLLM
>>> from crag.types import Strip
>>> ctx = [Strip("Corser was an Australian politician.", "a.txt", "web", score=0.9)]
>>> g = generate("What was Corser's job?", ctx, ScriptedLLM(["The sources do not say.", "A politician [1]."]),
...              reask_above=0.8)
>>> g.text, g.refused, g.refusal_overridden, len(g.completions)
('A politician [1].', False, True, 2)
>>> seen = []
>>> g = generate("What was Corser's job?", ctx, ScriptedLLM(["The sources do not say.", "A politician [1]."]),
...              reask_above=0.8, on_token=seen.append, on_replace=seen.append)
>>> seen
['The ', 'sources ', 'do ', 'not ', 'say.', Replace(reason='reask', text=''), 'A ', 'politician ', '[1].']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crag.generate.citations import CITE, attach_citations, citations_for, fence_markers, trail_lead_markers
from crag.generate.grounding import adds_nothing, grounded, unsupported_terms
from crag.generate.prompts import build_messages
from crag.generate.refusal import NO_CONTEXT, is_refusal
from crag.protocols import LLM, Completion, TokenStream, stream_completion
from crag.text import detect_language, join_sentences, split_sentences
from crag.types import Citation, Strip

DEFAULT_MAX_SOURCES = 5
_CONTENT = re.compile(r"\w")
# Said instead of an answer whose content the sources do not contain.
NOT_IN_SOURCES = {
    "en": "The sources found do not answer this question.",
    "zh": "找到的资料没有回答这个问题。",
}


@dataclass
class Generation:
    """What generation produced: the text, its citations, and how it got there."""

    text: str
    citations: list[Citation]
    sources: list[Strip]  # exactly what the model was shown, in its order ([n] = sources[n-1])
    refused: bool = False
    refusal_overridden: bool = False  # the model refused, was re-asked, and answered
    citations_inferred: bool = False  # the model cited nothing; markers were matched by overlap
    completions: list[Completion] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)  # new words of a rejected reply no source has
    # Why the last reply was not taken as the answer: "" (it was), "declined", "empty" (only
    # markers or punctuation), "restates the question", or "not in the sources".
    rejected: str = ""
    trimmed: str = ""  # the reply's later sentences the sources do not support, cut from the answer


@dataclass(frozen=True)
class Replace:
    """The text streamed so far is not the answer; ``text`` replaces it.

    ``reason``: ``reask`` (the model is asked again; ``text`` is empty and the new reply
    streams next), ``escalate`` (the same, after a search for more evidence: the pipeline's
    step 6), ``refused`` (the reply declines to answer), ``unsupported`` (a
    statement replaces a reply the sources do not support), ``trimmed`` (the reply's
    first sentences, without the later ones the sources do not support), ``citations`` (the same
    answer with citation markers matched by overlap, or with echoed ``<source id="n">``
    tags as ``[n]``).
    """

    reason: str
    text: str = ""


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
    on_replace: Callable[[Replace], None] | None = None,
) -> Generation:
    """Answer ``question`` from ``context`` (best first); see the module docstring for the refusal rule.

    ``reask_above`` is τ_high on the Correct/Ambiguous/Incorrect paths (strip scores are
    evaluator grades there); leave it ``None`` when scores are not grades (plain RAG).
    With ``on_token`` the model streams and each text delta is passed to it; an exception
    it raises (a cancelled request) stops the model and propagates.
    """
    lang = lang or detect_language(question)
    sources = list(context[: max(1, max_sources)])
    if not sources:
        return Generation(NO_CONTEXT.get(lang, NO_CONTEXT["en"]), [], [], refused=True)
    texts = [s.text for s in sources]

    def ask(directive: int | None = None) -> Completion:
        messages = build_messages(question, sources, lang, extra_instruction, directive=directive)
        if on_token is None:
            return llm.complete(messages, max_tokens=max_tokens, temperature=temperature)
        return _pass_on(stream_completion(llm, messages, max_tokens=max_tokens, temperature=temperature), on_token)

    def replace(reason: str, new: str = "") -> None:
        if on_token is not None and on_replace is not None:
            on_replace(Replace(reason, new))

    def verdict(reply: str) -> str:
        if not _CONTENT.search(CITE.sub("", reply)):
            return "empty"  # only markers or punctuation ("[1]"): says nothing
        if is_refusal(reply, texts):
            return "declined"
        if adds_nothing(reply, question):
            return "restates the question"  # an answer-shaped reply that says nothing
        return "answer" if grounded(reply, question, texts) else "not in the sources"

    def supported(reply: str) -> tuple[str, str, str]:
        """The reply or its supported lead, the verdict, and the sentences cut."""
        outcome = verdict(reply)
        if outcome == "not in the sources":
            lead, cut = _supported_lead(reply, verdict)
            if lead:
                return lead, "answer", cut
        return reply, outcome, ""

    calls = [ask()]
    text, outcome, trimmed = supported(_tidy(calls[0]))
    overridden = False
    if outcome != "answer" and reask_above is not None:
        best = next((n for n, s in enumerate(sources, 1) if s.score >= reask_above), None)
        if best is not None:
            replace("reask")
            calls.append(ask(directive=best))
            again, again_outcome, again_cut = supported(_tidy(calls[-1]))
            if again_outcome == "answer":
                text, outcome, overridden, trimmed = again, "answer", True, again_cut
    unsupported: list[str] = []
    if outcome not in ("answer", "declined"):
        unsupported = unsupported_terms(text, question, texts)
        text = NOT_IN_SOURCES.get(lang, NOT_IN_SOURCES["en"])
    refused = outcome != "answer"
    inferred = False
    if not refused and not CITE.search(text):
        # Small models often state the fact but forget the marker: cite the source that
        # supports each sentence best, so every answer stays traceable.
        cited = attach_citations(text, sources)
        inferred = cited != text
        text = cited
    if text != calls[-1].text.strip():  # what was streamed last is not the answer
        if refused:
            replace("refused" if outcome == "declined" else "unsupported", text)
        else:
            replace("trimmed" if trimmed else "citations", text)
    return Generation(
        text,
        [] if refused else citations_for(text, sources),
        sources,
        refused=refused,
        refusal_overridden=overridden,
        citations_inferred=inferred,
        completions=calls,
        unsupported=unsupported,
        rejected="" if outcome == "answer" else outcome,
        trimmed=trimmed,
    )


def _supported_lead(reply: str, verdict: Callable[[str], str]) -> tuple[str, str]:
    """The longest run of the reply's first sentences that is an answer by itself, and the rest.

    ("", "") when the first sentence is not one, or the reply is a single sentence. A
    sentence of markers only ("[1]") belongs to the one before it.

    >>> ok = lambda s: "answer" if "565" in s and "safely" not in s else "not in the sources"
    >>> _supported_lead("It is 565 °C [1]. It runs safely there. [1]", ok)
    ('It is 565 °C [1].', 'It runs safely there. [1]')
    """
    sentences: list[str] = []
    for part in split_sentences(reply):
        if sentences and not _CONTENT.search(CITE.sub("", part)):
            sentences[-1] = join_sentences([sentences[-1], part])
        else:
            sentences.append(part)
    kept = 0
    for k in range(1, len(sentences)):
        if verdict(join_sentences(sentences[:k])) != "answer":
            break
        kept = k
    if not kept:
        return "", ""
    return join_sentences(sentences[:kept]), join_sentences(sentences[kept:])


def _tidy(reply: Completion) -> str:
    """A reply's text with echoed fence tags as ``[n]`` and opening markers moved to its first sentence's end."""
    return trail_lead_markers(fence_markers(reply.text).strip())


def _pass_on(stream: TokenStream, on_token: Callable[[str], None]) -> Completion:
    """Hand each delta of ``stream`` to ``on_token``; return the Completion. The stream is
    closed on the way out, so an exception from ``on_token`` stops the model at once."""
    try:
        while True:
            try:
                piece = next(stream)
            except StopIteration as end:
                done: Completion = end.value
                return done
            on_token(piece)
    finally:
        stream.close()
