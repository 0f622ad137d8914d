"""Fakes that implement the real protocols, for unit tests of control flow only.

Capabilities are proven with the real components; these make branches reachable
(a search that fails, an LLM that replies a fixed text) without models or network.

>>> llm = ScriptedLLM(["Paris [1]."])
>>> llm.complete([{"role": "user", "content": "capital of France?"}]).text
'Paris [1].'
>>> list(ScriptedLLM(["It is Paris [1]."]).stream([{"role": "user", "content": "capital of France?"}]))
['It ', 'is ', 'Paris ', '[1].']
>>> [g.score for g in MarkerEvaluator().grade(Query.of("q"), [Passage("a", "gold"), Passage("b", "noise")]).grades]
[0.9, 0.1]
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from crag.errors import SearchError
from crag.grade.heuristic import set_confidence
from crag.protocols import Completion, EmbedKind, TokenStream
from crag.text import tokenize
from crag.types import Evaluation, Grade, Passage, Query, WebResult


class HashEmbedder:
    """Bag-of-words vectors from hashed tokens: similar texts share dimensions."""

    model_id = "hash-embedder"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls: list[list[str]] = []  # the texts of every embed call

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for tok in tokenize(text) or ["_"]:
                h = int(hashlib.sha256(tok.encode()).hexdigest()[:8], 16)
                out[row, h % self.dim] += 1.0
            out[row] /= np.linalg.norm(out[row]) or 1.0
        return out


class CrashingEmbedder(HashEmbedder):
    """Embeds ``calls`` batches, then fails like a process dying mid-ingest (KeyboardInterrupt).

    >>> emb = CrashingEmbedder(calls=1)
    >>> emb.embed(["a", "b"], kind="passage").shape, emb.texts
    ((2, 256), 2)
    """

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.budget, self.texts = calls, 0

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
        if self.budget == 0:
            raise KeyboardInterrupt("interrupted")
        self.budget -= 1
        self.texts += len(texts)
        return super().embed(texts, kind=kind)


class ScriptedLLM:
    """Replies from a queue (the last reply repeats); records every prompt and schema it got.

    A reply that is an exception is raised instead, to script an outage or a bad backend.
    ``stream`` hands the reply over word by word, ``token_delay`` seconds apart; ``streamed``
    counts the words handed over and ``stopped`` the streams closed before their end.
    """

    model_id = "scripted"

    def __init__(self, replies: Sequence[str | BaseException], *, token_delay: float = 0.0) -> None:
        self.replies = deque(replies)
        self.prompts: list[Sequence[dict[str, str]]] = []
        self.schemas: list[dict[str, Any] | None] = []
        self.token_delay = token_delay
        self.streamed = 0
        self.stopped = 0
        self.lock = threading.Lock()  # held while a stream runs, as a local model's is

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        self.prompts.append(messages)
        self.schemas.append(json_schema)
        return Completion(text=self.reply(messages), prompt_tokens=10, completion_tokens=5, model=self.model_id)

    def stream(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int = 512, temperature: float = 0.0
    ) -> TokenStream:
        self.prompts.append(messages)
        text = self.reply(messages)
        words = re.findall(r"\S+\s*", text) or [text]
        with self.lock:
            sent = 0
            try:
                for word in words:
                    if self.token_delay:
                        time.sleep(self.token_delay)
                    self.streamed += 1
                    sent += 1
                    yield word
            finally:
                self.stopped += sent < len(words)
        return Completion(text=text, prompt_tokens=10, completion_tokens=len(words), model=self.model_id)

    def reply(self, messages: Sequence[dict[str, str]]) -> str:
        """The next scripted reply (subclasses compute one from the prompt instead)."""
        reply = self.replies.popleft() if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, BaseException):
            raise reply
        return reply


class JudgingLLM(ScriptedLLM):
    """A ScriptedLLM with token probabilities: ``yes_probability`` returns ``yes`` in turn
    (the last repeats; an exception is raised), and records the prompts it scored.

    >>> llm = JudgingLLM(["Stripes [1]."], yes=[0.2, 0.9])
    >>> llm.yes_probability([{"role": "user", "content": "?"}]), llm.yes_probability([])
    (0.2, 0.9)
    """

    model_id = "judging"

    def __init__(self, replies: Sequence[str | BaseException], *, yes: Sequence[float | BaseException]) -> None:
        super().__init__(replies)
        self.yes = deque(yes)
        self.scored: list[Sequence[dict[str, str]]] = []

    def yes_probability(self, messages: Sequence[dict[str, str]]) -> float:
        self.scored.append(messages)
        p = self.yes.popleft() if len(self.yes) > 1 else self.yes[0]
        if isinstance(p, BaseException):
            raise p
        return p


class EchoLLM(ScriptedLLM):
    """Answers like a faithful extractive model: the first sentence of source [1], cited.

    For control-flow tests whose reply must stay grounded in whatever context the
    pipeline built (a fixed scripted reply would be refused as unsupported).

    >>> EchoLLM().complete([{"role": "user", "content": '<source id="1">Ann wrote it. Bob read it.</source>'}]).text
    'Ann wrote it [1].'
    """

    model_id = "echo"

    def __init__(self) -> None:
        super().__init__([])

    def reply(self, messages: Sequence[dict[str, str]]) -> str:
        from crag.text import split_sentences

        user = messages[-1]["content"]
        start = user.find(">", user.find("<source")) + 1
        first = (split_sentences(user[start : user.find("</source>", start)]) or ["(no sources)"])[0]
        body = first.rstrip("。.!！?？")
        return f"{body} [1]{first[len(body) :] or '.'}" if body != first else f"{first} [1]."


class QuoteLLM:
    r"""Answers with the first sentence of source [1], cited; a prompt without sources (a yes/no
    check) gets "Yes.". For tests of where citations point, not of what the model reads.

    >>> prompt = '<source id="1">\nAnn wrote it. Bob read it.\n</source>'
    >>> QuoteLLM().complete([{"role": "user", "content": prompt}]).text
    'Ann wrote it [1].'
    >>> QuoteLLM().complete([{"role": "user", "content": "Does the passage state the answer?"}]).text
    'Yes.'
    """

    model_id = "quote"

    def complete(self, messages: Sequence[dict[str, str]], **options: Any) -> Completion:
        found = re.search(r'<source id="1"[^>]*>\n(.*?)\n</source>', messages[-1]["content"], re.S)
        if found is None:
            return Completion("Yes.", prompt_tokens=5, completion_tokens=1)
        first = re.split(r"(?<=[.。])\s+", found.group(1).strip())[0].rstrip(".。")
        return Completion(f"{first} [1].", prompt_tokens=5, completion_tokens=8)


class StaticWebSearch:
    """Returns fixed results, or raises ``SearchError`` when ``fail`` is set."""

    name = "static"

    def __init__(self, results: Sequence[WebResult] = (), *, fail: bool = False) -> None:
        self.results = list(results)
        self.fail = fail
        self.queries: list[str] = []

    def search(self, query: str, *, k: int) -> list[WebResult]:
        self.queries.append(query)
        if self.fail:
            raise SearchError("static: simulated outage", backend_id="static", step="search")
        return self.results[:k]


class MarkerEvaluator:
    """Grades by marker words, so a test picks the branch with its text.

    The default: ``"gold"`` 0.9 (Correct), ``"partial"`` 0.5 (Ambiguous), anything else
    0.1 (Incorrect); the first marker found wins.
    """

    name = "marker"

    def __init__(self, markers: dict[str, float] | None = None, default: float = 0.1) -> None:
        self.markers = markers if markers is not None else {"gold": 0.9, "partial": 0.5}
        self.default = default
        self.queries: list[str] = []  # the text of every query graded
        self.languages: list[str] = []  # and its language, as the caller carried it
        self.graded: list[str] = []  # every passage text, as the evaluator saw it

    def grade(self, query: Query, passages: Sequence[Passage]) -> Evaluation:
        self.queries.append(query.text)
        self.languages.append(query.language)
        self.graded += [p.text for p in passages]
        grades = [Grade(p.id, self._score(p.text), "marker") for p in passages]
        return Evaluation(grades, set_confidence(grades), "marker words", self.name)

    def _score(self, text: str) -> float:
        return next((v for k, v in self.markers.items() if k in text), self.default)


class FixedEvaluator:
    """Returns fixed scores in passage order (and ``degraded``, to test a fallback)."""

    def __init__(self, name: str, scores: Sequence[float], degraded: str = "") -> None:
        self.name = name
        self.scores = list(scores)
        self.degraded = degraded

    def grade(self, query: Query, passages: Sequence[Passage]) -> Evaluation:
        grades = [Grade(p.id, s, f"{self.name} says {s}") for p, s in zip(passages, self.scores, strict=True)]
        return Evaluation(grades, set_confidence(grades), "fixed", self.name, self.degraded)
