"""Plain data that moves between the CRAG steps.

>>> q = Query("Who designed the Eiffel Tower?", "en", upper=0.6, lower=0.35)
>>> q.language, q.mode, q.thresholds()
('en', 'crag', {'upper': 0.6, 'lower': 0.35, 'rule': 'paper'})
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from crag.text import detect_language


class Action(str, enum.Enum):
    """The three corrective actions of CRAG (plus the plain-RAG baseline)."""

    CORRECT = "correct"
    AMBIGUOUS = "ambiguous"
    INCORRECT = "incorrect"
    RAG = "rag"  # no evaluation: the baseline pipeline


# Why a first Correct was left before any answer was generated: the ``rejected`` value of
# an escalation (its trace record and its ``escalate`` event), read by the trace viewer and the CLI.
REJECTED_UNVERIFIED = "not verified"  # the model did not read the answer in the strips graded relevant
REJECTED_SHARED_NAME = "shared name"  # several people of the asked name; the question says not which


@dataclass(frozen=True)
class Query:
    """The question as asked, with what is known about it before retrieval.

    Made once per request (``crag.pipeline.make_query``) and carried through every step,
    so the language is detected and the question classified in one place.
    ``query_type`` is ``""`` when classification is off (or in plain RAG).
    """

    text: str
    language: str  # "en" or "zh" (crag.text.detect_language)
    query_type: str = ""
    upper: float = 0.6  # τ_high: at or above, a document is trusted (Correct)
    lower: float = 0.35  # τ_low: at or below, a document is discarded (Incorrect)
    rule: str = "paper"  # how the grades are turned into an action (crag.decide)
    mode: str = "crag"  # "crag", or "rag" for the plain baseline
    # Metadata the retrieved documents must match (crag.metadata.Filters): key -> allowed values.
    filters: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def thresholds(self) -> dict[str, float | str]:
        """The decision thresholds as the trace records them."""
        return {"upper": self.upper, "lower": self.lower, "rule": self.rule}

    @classmethod
    def of(cls, text: str) -> Query:
        """A Query for a text that arrives alone (a grading pair, a sub-query): its language
        detected here, default thresholds. Requests get theirs from ``crag.pipeline.make_query``.

        >>> Query.of("北京是哪个国家的首都？").language
        'zh'
        """
        return cls(text, detect_language(text))


@dataclass
class Chunk:
    """A piece of a source document as stored in the knowledge base."""

    id: str
    text: str
    source: str
    title: str = ""
    url: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Hit:
    """A retrieved chunk with the scores that found it (kept for the evaluator)."""

    chunk: Chunk
    score: float  # fused score used for ranking
    dense: float | None = None  # cosine similarity of query and chunk vectors
    keyword: float | None = None  # raw BM25 score (None when the keyword index missed it)
    rank: int = 0
    vector: Any = None  # numpy vector of the chunk when the store returned it


@dataclass
class Retrieval:
    """What retrieval found for a question, best first, and how it degraded (if it did)."""

    hits: list[Hit]
    degradations: list[str] = field(default_factory=list)


@dataclass
class Passage:
    """What an evaluator grades: a text with whatever signals are already known."""

    id: str
    text: str
    vector: Any = None
    dense: float | None = None
    keyword: float | None = None


@dataclass
class Grade:
    """An evaluator's relevance judgement of one passage."""

    id: str
    score: float  # in [0, 1]
    reason: str = ""
    signals: dict[str, float] = field(default_factory=dict)


@dataclass
class Evaluation:
    """Per-passage grades plus the set-level confidence of the retrieved set."""

    grades: list[Grade]
    confidence: float
    reason: str
    evaluator: str
    degraded: str = ""  # set when the evaluator fell back (e.g. LLM parse failure)

    @property
    def degradations(self) -> list[str]:
        """The fallback as a list, like every other step's value."""
        return [self.degraded] if self.degraded else []


@dataclass
class WebResult:
    """A normalised result from an external knowledge source."""

    title: str
    url: str
    content: str
    snippet: str = ""
    published: str = ""
    score: float | None = None
    provider: str = ""


@dataclass
class Strip:
    """A unit of knowledge in the final context, with its provenance."""

    text: str
    source: str
    origin: str  # "internal" or "web"
    title: str = ""
    url: str = ""
    doc_id: str = ""
    score: float = 0.0


@dataclass
class Citation:
    """A numbered source the answer cites as ``[id]``.

    ``quote`` is the source's sentence that supports the (first) answer sentence citing it,
    for a reader to check; ``spans`` are the ``(start, end)`` offsets in the answer text of the
    sentences that cite it; ``inferred`` is True when the model gave no marker (or a wrong
    one) and the engine matched the source by support.
    """

    id: int
    source: str
    title: str
    url: str
    text: str
    quote: str = ""
    inferred: bool = False
    spans: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class Claim:
    """One sentence of an answer, where it sits in the answer text, and the sources that hold it.

    ``cites`` are source numbers (``[n]``), ``quotes`` the supporting sentence of each;
    ``how`` says how the markers were settled: ``kept`` (the model's own, checked),
    ``repaired`` (moved to the source that supports the sentence), ``inferred`` (the model
    gave none), or ``none`` (nothing to check, e.g. "Yes." to a yes/no question).
    """

    text: str
    start: int
    end: int
    cites: list[int] = field(default_factory=list)
    quotes: list[str] = field(default_factory=list)
    how: str = "kept"


@dataclass
class Bearer:
    """One of several people the sources describe under the name a question asks about.

    ``cites`` are the numbers of the sources about this person (the answer's ``[n]``);
    ``disambiguator`` comes from a title ("composer" of "Richard Harris (composer)"),
    ``description`` and ``life`` from the defining sentence ``quote`` ("an Irish actor and
    singer", "1930–2002"); ``score`` is the best grade of its sources (its support).

    >>> Bearer("John Carter", "painter", "a Welsh painter", "1884–1951", [1]).label("en")
    'a Welsh painter (1884–1951)'
    """

    name: str
    disambiguator: str = ""
    description: str = ""
    life: str = ""
    cites: list[int] = field(default_factory=list)
    score: float = 0.0
    quote: str = ""

    def label(self, lang: str) -> str:
        """Who this bearer is, in a few words: the description (with the life years), else the disambiguator."""
        what = self.description or self.disambiguator or self.name
        if self.life:
            return f"{what}（{self.life}）" if lang == "zh" else f"{what} ({self.life})"
        return what


@dataclass
class Usage:
    """What a request's LLM calls cost: tokens (as the model reported them, else estimated)
    and the number of calls, every call of the request counted (grading, verification,
    rewriting, compression, generation).

    >>> Usage(120, 30, 2).total_tokens
    150
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Answer:
    """The result of one question: answer, decision, sources, timings and token usage."""

    question: str
    answer: str
    action: Action
    confidence: float | None
    citations: list[Citation]
    context: list[Strip]
    trace_id: str
    timings: dict[str, float]
    mode: str = "crag"
    degradations: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    refused: bool = False  # no answer given: the sources found do not hold one
    usage: Usage = field(default_factory=Usage)  # not in to_dict: the keys of `crag ask --json` stay
    abstained: bool = False  # correction found nothing reliable: no model call, titles and links only
    bearers: list[Bearer] = field(default_factory=list)  # the people of the shared name the answer is about
    # The answer cache (crag.pipeline.answer_cache), when it was asked: {"hit": True, "key",
    # "from_trace", "age_s"} for an answer reused from an earlier run, else {"hit": False, ...}.
    cache: dict[str, Any] | None = None

    @property
    def status(self) -> str:
        """How the question ended: ``answered``, ``degraded`` (answered, something given up on
        the way), ``refused`` or ``abstained`` (a failed request raises instead)."""
        if self.abstained:
            return "abstained"
        if self.refused:
            return "refused"
        return "degraded" if self.degradations else "answered"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``crag ask --json``."""
        return {
            "answer": self.answer,
            "action": self.action.value,
            "confidence": self.confidence,
            "citations": [asdict(c) for c in self.citations],
            "context": [
                {"text": s.text, "source": s.source, "origin": s.origin, "title": s.title, "url": s.url}
                for s in self.context
            ],
            "trace_id": self.trace_id,
            "timings": self.timings,
            "mode": self.mode,
            "queries": self.queries,
            "degradations": self.degradations,
            "refused": self.refused,
            "bearers": [asdict(b) for b in self.bearers],
        } | ({"cache": self.cache} if self.cache is not None else {})
