"""Context and cost budgets: what fits in the prompt, and what a request or a day may spend.

* :func:`fit_budget` picks strips by score and diversity (MMR) until a token budget is
  full — the article's 上下文管理: "精选出最相关、最不冗余的部分".
* :func:`compress` asks the LLM to cut strips down to what answers the question (the
  article's Correct path, 2.2: "去噪和压缩"); on any failure the strips pass unchanged.
* :class:`Budget` caps LLM tokens and search calls per request and per day (the day's
  totals persist in SQLite under the knowledge-base folder), raising
  :class:`BudgetExceeded`, which the pipeline turns into a degradation.

>>> from crag.types import Strip
>>> strips = [Strip("A long strip " * 20, "a", "web", score=0.9), Strip("Short.", "b", "web", score=0.5)]
>>> [s.source for s in fit_budget(strips, [s.score for s in strips], max_tokens=10)]
['a']
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from crag.correct.diversity import mmr, trigrams
from crag.errors import BudgetExceeded, CragError, LLMBudgetExceeded, LLMReplyError, SearchBudgetExceeded
from crag.protocols import LLM, Completion, CompletionOptions, Messages, TokenStream, WebSearch, stream_completion
from crag.redact import clip
from crag.text import approx_tokens, detect_language, split_sentences
from crag.types import Strip, WebResult

if TYPE_CHECKING:  # Unpack of a TypedDict for **options (typing.Unpack from 3.11)
    from typing_extensions import Unpack

# ---------------------------------------------------------------- context budget


def fit_budget(
    strips: Sequence[Strip],
    scores: Sequence[float],
    max_tokens: int,
    diversity: bool = True,
    *,
    vectors: Any = None,
    query_vector: Any = None,
    lambda_: float = 0.7,
) -> list[Strip]:
    """Strips in selection order whose ``approx_tokens`` sum fits ``max_tokens``.

    Selection order is MMR over ``scores`` when ``diversity`` (so a near-copy of a chosen
    strip waits behind a strip saying something new), else plain score order. A strip
    that does not fit is skipped and smaller ones further down may still fit; the best
    strip is always kept, even alone over budget, so the generator never gets nothing.
    """
    if len(scores) != len(strips):
        raise ValueError("scores must have one value per strip")
    if max_tokens <= 0:
        raise ValueError("max_tokens must be > 0")
    if not strips:
        return []
    if diversity:
        order = mmr(strips, vectors, query_vector, lambda_, relevance=scores)
    else:
        order = sorted(range(len(strips)), key=lambda i: (-scores[i], i))
    out: list[Strip] = []
    used = 0
    for i in order:
        cost = approx_tokens(strips[i].text)
        if used + cost > max_tokens and out:
            continue
        out.append(strips[i])
        used += cost
    return out


_COMPRESS_PROMPT = {
    "en": (
        "Question: {q}\n\nNumbered passages:\n{passages}\n\n"
        "For each passage, copy only the sentences needed to answer the question, word for word; "
        "use an empty string for a passage that does not help. Keep at most about {n} tokens in total. "
        'Reply as JSON: {{"passages": ["...", "..."]}} with one entry per passage, in order.'
    ),
    "zh": (
        "问题：{q}\n\n编号的段落：\n{passages}\n\n"
        "对每个段落，只逐字摘抄回答问题所需的句子；对回答没有帮助的段落给出空字符串。总长度不超过约{n}个词元。"
        '以JSON格式回复：{{"passages": ["...", "..."]}}，每个段落一项，顺序不变。'
    ),
}
# A compressed sentence must be (nearly) copied from its passage: this blocks the model
# from slipping new, unsupported facts into the context.
_COPY_OVERLAP = 0.7


class Compressed(NamedTuple):
    """The compressed strips, and why compression was skipped (if it was)."""

    strips: list[Strip]
    degradations: list[str]


def compress(
    question: str, strips: Sequence[Strip], llm: LLM, max_tokens: int, *, lang: str | None = None
) -> Compressed:
    """LLM compression of ``strips`` for ``question``; the strips unchanged on any failure.

    Each strip keeps its provenance (source, origin, url, score); only its text shrinks.
    A reply that is not JSON, has the wrong number of entries, invents sentences not in
    the passage, or keeps nothing is a failure, returned in ``degradations``. ``lang`` is
    the question's language when the caller knows it (detected otherwise).

    >>> from crag.testing.fakes import ScriptedLLM
    >>> s = [Strip("Paris is the capital. It rains a lot.", "a", "web")]
    >>> out = compress("capital?", s, ScriptedLLM(['{"passages": ["Paris is the capital."]}']), 50)
    >>> [x.text for x in out.strips], out.degradations
    (['Paris is the capital.'], [])
    """
    if not strips:
        return Compressed([], [])
    lang = "zh" if (lang or detect_language(question)) == "zh" else "en"
    passages = "\n".join(f"[{i + 1}] {s.text}" for i, s in enumerate(strips))
    prompt = _COMPRESS_PROMPT[lang].format(q=question, passages=passages, n=max_tokens)
    try:
        out = llm.complete(
            [{"role": "user", "content": prompt}],
            max_tokens=max(64, min(max_tokens + 64, 2048)),
            json_schema={
                "type": "object",
                "properties": {"passages": {"type": "array", "items": {"type": "string"}}},
            },
        )
        texts = _parse_passages(out.text, len(strips), llm.model_id)
        result: list[Strip] = []
        for strip, text in zip(strips, texts, strict=True):
            if not text:
                continue  # the model judged the passage unhelpful
            _check_copied(text, strip.text, llm.model_id)
            result.append(replace(strip, text=text))
        if not result:
            raise LLMReplyError("compression kept nothing", backend_id=llm.model_id, step="compress")
        return Compressed(result, [])
    except CragError as exc:
        return Compressed(list(strips), [f"LLM compression failed ({exc}); used uncompressed strips"])


def _parse_passages(text: str, n: int, model: str = "") -> list[str]:
    m = re.search(r"\{.*\}", text, re.S)
    try:
        data = json.loads(m.group(0)) if m else None
    except json.JSONDecodeError:
        data = None
    if data is None:
        raise LLMReplyError(f"reply is not JSON: {clip(text, 60)!r}", backend_id=model, step="compress")
    items = data.get("passages") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != n or not all(isinstance(x, str) for x in items):
        raise LLMReplyError(f"reply needs a 'passages' list of {n} strings", backend_id=model, step="compress")
    return [x.strip() for x in items]


def _check_copied(compressed: str, original: str, model: str = "") -> None:
    source = trigrams(original)
    for sent in split_sentences(compressed):
        grams = trigrams(sent)
        if grams and len(grams & source) / len(grams) < _COPY_OVERLAP:
            raise LLMReplyError(
                f"compressed text is not copied from its passage: {clip(sent, 60)!r}", backend_id=model, step="compress"
            )


# ---------------------------------------------------------------- cost budget


_SCHEMA = """
CREATE TABLE IF NOT EXISTS budget_usage (
    day TEXT NOT NULL,
    kind TEXT NOT NULL,
    used INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, kind)
)
"""


class Budget:
    """Limits on LLM tokens and search calls for one request, and for the day (UTC).

    Build one per request: the per-request counters live in the object; the per-day
    totals live in the SQLite file at ``path`` (e.g. ``<kb>/budget.sqlite``), shared by
    processes. ``None`` disables a limit; with every limit ``None`` no file is touched.
    A charge that would pass a limit raises and charges nothing.

    ### Usage example
    >>> import tempfile, pathlib
    >>> b = Budget(pathlib.Path(tempfile.mkdtemp()) / "budget.sqlite", per_request_searches=1)
    >>> b.charge_search()
    >>> try:
    ...     b.charge_search()
    ... except BudgetExceeded as exc:
    ...     print(exc)
    search budget exceeded: 1 of 1 searches per request already used
    """

    def __init__(
        self,
        path: str | Path | None,
        per_request_tokens: int | None = None,
        per_day_tokens: int | None = None,
        per_request_searches: int | None = None,
        per_day_searches: int | None = None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.limits = {
            ("tokens", "request"): per_request_tokens,
            ("tokens", "day"): per_day_tokens,
            ("searches", "request"): per_request_searches,
            ("searches", "day"): per_day_searches,
        }
        if (per_day_tokens is not None or per_day_searches is not None) and self.path is None:
            raise ValueError("per-day limits need a path for the usage database")
        self.used = {"tokens": 0, "searches": 0}
        self._clock = clock
        self._lock = threading.Lock()

    def charge_tokens(self, n: int, *, force: bool = False) -> None:
        """Charge ``n`` LLM tokens; ``force`` records tokens already spent even past a limit."""
        self._charge("tokens", max(0, int(n)), force=force)

    def charge_search(self) -> None:
        """Charge one search call (before making it)."""
        self._charge("searches", 1, force=False)

    def used_today(self, kind: str) -> int:
        """Today's total for ``kind`` (``"tokens"`` or ``"searches"``) from the database."""
        if self.path is None or not self.path.exists():
            return 0
        with self._connect() as db:
            row = db.execute("SELECT used FROM budget_usage WHERE day = ? AND kind = ?", (self._day(), kind)).fetchone()
        return int(row[0]) if row else 0

    def _charge(self, kind: str, n: int, *, force: bool) -> None:
        error = SearchBudgetExceeded if kind == "searches" else LLMBudgetExceeded
        unit = "searches" if kind == "searches" else "LLM tokens"
        what = "search" if kind == "searches" else "LLM token"
        with self._lock:
            per_request = self.limits[(kind, "request")]
            if not force and per_request is not None and self.used[kind] + n > per_request:
                raise error(
                    f"{what} budget exceeded: {self.used[kind]} of {per_request} {unit} per request already used",
                    backend_id="budget",
                    step=kind,
                )
            per_day = self.limits[(kind, "day")]
            if per_day is not None:
                self._charge_day(kind, n, per_day, force, error, f"{what} budget exceeded", unit)
            self.used[kind] += n

    def _charge_day(
        self, kind: str, n: int, limit: int, force: bool, error: type[BudgetExceeded], head: str, unit: str
    ) -> None:
        day = self._day()
        with self._connect() as db:
            # BEGIN IMMEDIATE takes the write lock first, so two processes cannot both pass the check.
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT used FROM budget_usage WHERE day = ? AND kind = ?", (day, kind)).fetchone()
            used = int(row[0]) if row else 0
            if not force and used + n > limit:
                db.execute("ROLLBACK")
                raise error(f"{head}: {used} of {limit} {unit} per day already used", backend_id="budget", step=kind)
            db.execute(
                "INSERT INTO budget_usage (day, kind, used) VALUES (?, ?, ?) "
                "ON CONFLICT(day, kind) DO UPDATE SET used = used + excluded.used",
                (day, kind, n),
            )
            db.execute("COMMIT")

    def _connect(self) -> _Closing:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        db.execute(_SCHEMA)
        return _Closing(db)

    def _day(self) -> str:
        return self._clock().astimezone(timezone.utc).strftime("%Y-%m-%d")


class _Closing:
    """``with`` closes the connection (sqlite3's own context manager only commits)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        return self.db

    def __exit__(self, *exc: object) -> None:
        self.db.close()


class BudgetedSearch:
    """A ``WebSearch`` that charges ``budget`` before each call (``SearchBudgetExceeded``).

    >>> from crag.errors import SearchError
    >>> from crag.testing.fakes import StaticWebSearch
    >>> s = BudgetedSearch(StaticWebSearch(), Budget(None, per_request_searches=0))
    >>> try:
    ...     s.search("q", k=1)
    ... except SearchError as exc:  # a SearchError, so the pipeline degrades as for an outage
    ...     print(type(exc).__name__)
    SearchBudgetExceeded
    """

    def __init__(self, inner: WebSearch, budget: Budget) -> None:
        self.inner = inner
        self.budget = budget
        self.name: str = getattr(inner, "name", "search")

    def search(self, query: str, *, k: int) -> list[WebResult]:
        self.budget.charge_search()
        return self.inner.search(query, k=k)


class BudgetedLLM:
    """An ``LLM`` that refuses a call the token budget cannot cover and charges what it used.

    Before the call, the prompt's estimated tokens must fit (``LLMBudgetExceeded``
    otherwise); afterwards the reported usage (or the estimate) is charged even if it
    overshoots, since those tokens are already spent.
    """

    def __init__(self, inner: LLM, budget: Budget) -> None:
        self.inner = inner
        self.budget = budget
        self.model_id = inner.model_id

    def complete(self, messages: Messages, **options: Unpack[CompletionOptions]) -> Completion:
        estimate = sum(approx_tokens(m.get("content", "")) for m in messages)
        self.budget.charge_tokens(estimate)
        out = self.inner.complete(messages, **options)
        spent = (out.prompt_tokens + out.completion_tokens) or (estimate + approx_tokens(out.text))
        self.budget.charge_tokens(max(0, spent - estimate), force=True)
        return out

    def __getattr__(self, name: str) -> Any:
        # An optional capability of the inner model (yes_probability: Correct-path verification)
        # is charged its prompt, like a completion of one token.
        if name.startswith("__") or name == "inner":  # copy/pickle before __init__: no recursion
            raise AttributeError(name)
        attr = getattr(self.inner, name)
        if name != "yes_probability":
            return attr

        def charged(messages: Messages, *args: Any, **kwargs: Any) -> Any:
            self.budget.charge_tokens(sum(approx_tokens(m.get("content", "")) for m in messages) + 1)
            return attr(messages, *args, **kwargs)

        return charged

    def stream(self, messages: Messages, *, max_tokens: int = 512, temperature: float = 0.0) -> TokenStream:
        """As ``complete``, token by token; a reply stopped early is charged for what it wrote."""
        estimate = sum(approx_tokens(m.get("content", "")) for m in messages)
        self.budget.charge_tokens(estimate)
        pieces: list[str] = []
        out: Completion | None = None
        gen = stream_completion(self.inner, messages, max_tokens=max_tokens, temperature=temperature)
        try:
            while True:
                try:
                    piece = next(gen)
                except StopIteration as end:
                    out = end.value
                    break
                pieces.append(piece)
                yield piece
        finally:
            gen.close()  # a caller that stopped early stops the model too
            if out is None:
                spent = estimate + approx_tokens("".join(pieces))
            else:  # servers that send no usage count 0 prompt tokens: use the estimate for those
                spent = (out.prompt_tokens or estimate) + (out.completion_tokens or approx_tokens(out.text))
            self.budget.charge_tokens(max(0, spent - estimate), force=True)
        return out
