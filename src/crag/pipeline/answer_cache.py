"""The answer cache: a repeated question gets the verified answer of its first run, at once.

The article's second challenge says to cache the correction results of common queries
("对常见查询的纠正结果进行缓存"). The search cache saves the provider calls of a repeated
search; this cache saves the whole run: retrieval, grading, correction and generation.

**Repeated** means the same collection (``kb.name``, the ``kb`` column of the state
database), the same question once normalised (:func:`normalise`: full-width forms, invisible
characters, case, spacing and the closing question mark do not count), the same metadata
filters, the same mode, and the same answer-affecting configuration (:func:`fingerprint`:
crag's version, the retrieval, evaluator, correction, search, LLM and generation settings,
and the models and search provider the request runs with). In a conversation the
condensed, standalone question is the key, so "Who designed it?" after two different
questions is two entries.

**Stored** in the ``cache`` table of the state database (``search_cache.sqlite`` beside the
knowledge base, or the shared ``kb.state_uri``, so every replica reuses it): the answer text,
citations with their quotes, action, confidence, the context strips, the refused and
abstained flags, the search queries, the documents the answer used (id, version, content
hash) and when the entry expires. Only an answer that gave nothing up is stored (no
degradation: a timeout, a failed search, a spent budget are not remembered).

**Valid** at lookup while:

* its time has not passed: ``correction.answer_cache_ttl`` after it was written, and, when web
  results were used, ``correction.search_cache_ttl`` after the oldest of them was fetched (web
  results are not stored when the search cache is off, so neither is such an answer);
* every document it used is in the knowledge base at the same version and content
  (a re-ingest with a change, or a removal, makes it a miss);
* for a refusal, an abstention, or an answer that used no document (web only): the
  knowledge base has not changed at all since, as a document added since may hold the answer.

A cache that cannot be read or written is a miss, never a failure.

>>> normalise("  What is ＣＲＡＧ? ") == normalise("what is crag")
True
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from crag._version import __version__
from crag.config import CragSettings
from crag.errors import CragError
from crag.kb import KnowledgeBase
from crag.normalize import folded
from crag.protocols import LLM, Evaluator, WebSearch
from crag.redact import redact
from crag.state import CACHE, StateDB, state_for
from crag.state.schema import cache as cache_table
from crag.trace.spans import Tracer
from crag.types import Action, Answer, Bearer, Citation, Query, Strip, Usage

__all__ = ["AnswerCache", "CacheHit", "Lookup", "answer_cache_for", "fingerprint", "normalise"]

log = logging.getLogger("crag.cache")
NAMESPACE = "answer:"  # + mode, in the cache table beside the search and rewrite caches
FORMAT = 1  # the stored value's shape; an entry of another shape is a miss
# Settings that change what an answer is. The rest (paths, server, traces, ingest limits)
# does not; the knowledge base's content is checked document by document instead.
_ANSWER_SETTINGS: Any = {
    "chunking": True,
    "embedder": True,
    "retrieval": True,
    "evaluator": True,
    "correction": {"exclude": {"answer_cache_ttl"}},
    "search": True,
    "llm": True,
    "generation": True,
    "kb": {"keyword_index"},
}


def normalise(question: str) -> str:
    """The question as the key sees it: folded (NFKC, no invisible characters), case and
    spacing ignored, without a closing question mark or full stop."""
    return " ".join(folded(question).casefold().split()).rstrip(" ?？.。!！")


def fingerprint(settings: CragSettings, **parts: str) -> str:
    """A digest of what shapes an answer besides the question: crag's version, the settings
    that change answers and ``parts`` (the models and search provider a request runs with)."""
    conf = {
        name: getattr(settings, name).model_dump(mode="json", **({} if how is True else _pick(how)))
        for name, how in _ANSWER_SETTINGS.items()
    }
    data = {"crag": __version__, "settings": conf, **parts}
    return _digest(data)


def _pick(how: Any) -> dict[str, Any]:
    return how if isinstance(how, dict) else {"include": how}


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


@dataclass
class CacheHit:
    """A question answered from the cache: the answer, its key, and the run that wrote it."""

    answer: Answer
    key: str
    from_trace: str
    age_s: float

    def record(self) -> dict[str, Any]:
        """What the trace and the API say of it (``Answer.cache``)."""
        return {"hit": True, "key": self.key, "from_trace": self.from_trace, "age_s": self.age_s}


@dataclass
class Lookup:
    """What a lookup of ``query`` found: ``entry`` when valid, else ``reason`` says why not;
    ``answer`` is set once a valid entry has answered the request."""

    key: str
    namespace: str = ""  # "answer:<mode>"
    reason: str = ""
    entry: dict[str, Any] | None = None
    age_s: float = 0.0
    answer: Answer | None = None

    def record(self) -> dict[str, Any]:
        return {"hit": False, "key": self.key, "miss": self.reason}


@dataclass
class AnswerCache:
    """Verified answers of one knowledge base, keyed by question, filters, mode and configuration.

    ``ttl`` seconds per entry (``correction.answer_cache_ttl``); ``web_ttl`` how long web
    results stay valid (``correction.search_cache_ttl``); ``config`` the :func:`fingerprint`.

    ### Usage example
    >>> cache = answer_cache_for(settings, kb, llm, evaluator, search)      # doctest: +SKIP
    >>> found = cache.lookup(query)                                          # doctest: +SKIP
    >>> found.entry is None, found.reason                                    # doctest: +SKIP
    (True, 'new')
    """

    db: StateDB
    kb: KnowledgeBase
    ttl: float
    web_ttl: float
    config: str
    clock: Callable[[], float] = field(default=time.time)

    def key(self, query: Query) -> str:
        """The entry's key: the normalised question, its filters, mode and the configuration."""
        filters = {k: sorted(v) for k, v in sorted(query.filters.items())}
        return _digest([FORMAT, normalise(query.text), filters, query.mode, self.config])

    # -- lookup --------------------------------------------------------------------------
    def lookup(self, query: Query) -> Lookup:
        """The stored answer for ``query`` if it is still valid (see the module docstring)."""
        key, namespace = self.key(query), NAMESPACE + query.mode
        c = cache_table.c
        stmt = sa.select(c.value).where(c.kb == self.db.scope, c.namespace == namespace, c.key == key)
        try:
            with self.db.connect() as conn:
                row = conn.execute(stmt).first()
        except (CragError, OSError) as exc:  # a full disk, the database down: answer as if new
            log.warning("answer cache %s not read: %s", self.db.display, exc)
            return Lookup(key, namespace, f"not read: {exc}")
        if row is None:
            return Lookup(key, namespace, "new")
        entry: dict[str, Any] = json.loads(row.value)
        now = self.clock()
        reason = self._invalid(entry, now)
        if reason:
            return Lookup(key, namespace, reason)
        return Lookup(key, namespace, "", entry, round(now - float(entry["created"]), 3))

    def _invalid(self, entry: dict[str, Any], now: float) -> str:
        """Why ``entry`` may not be used now ("" when it may)."""
        if entry.get("format") != FORMAT:
            return "stored by another version"
        if now >= float(entry.get("expires", 0)):
            return "expired (web results)" if entry.get("web") and now < entry["created"] + self.ttl else "expired"
        manifest = self.kb.manifest
        for used in entry.get("documents", []):
            doc = manifest.document_by_id(used["id"])
            if doc is None:
                return f"document {used['id']} removed"
            if doc.partial or doc.version != used["version"] or (doc.content or "") != used["content"]:
                return f"document {used['id']} changed"
        generation = entry.get("generation")
        if generation is not None and manifest.generation != generation:
            return "knowledge base changed"
        return ""

    def hit(self, found: Lookup, query: Query, tracer: Tracer) -> CacheHit:
        """The stored answer of a valid lookup as this request's :class:`Answer`."""
        e = found.entry
        assert e is not None
        answer = Answer(
            question=query.text,
            answer=e["answer"],
            action=Action(e["action"]),
            confidence=e["confidence"],
            citations=[Citation(**c | {"spans": [tuple(s) for s in c["spans"]]}) for c in e["citations"]],
            context=[Strip(**s) for s in e["context"]],
            trace_id=tracer.id,
            timings={},  # the request's own, set when it ends (compose_answer's rule: the tracer's clock)
            mode=query.mode,
            queries=list(e["queries"]),
            refused=e["refused"],
            abstained=e["abstained"],
            usage=Usage(),  # no LLM call
            bearers=[Bearer(**b) for b in e["bearers"]],
        )
        hit = CacheHit(answer, found.key, str(e["trace_id"]), found.age_s)
        answer.cache = hit.record()
        answer.timings = {k: round(v, 4) for k, v in tracer.timings().items()}
        return hit

    # -- store ---------------------------------------------------------------------------
    def store(self, found: Lookup, answer: Answer, strips: Sequence[Strip], fetched: float | None) -> str:
        """Keep ``answer`` (written from ``strips``; web results fetched at ``fetched``) under
        the key ``found`` missed. Returns ``"stored"`` or why it was not."""
        if answer.degradations:
            return "not stored: degraded"
        used = list(strips) + answer.context
        web = any(s.origin != "internal" for s in used)
        now = self.clock()
        expires = now + self.ttl
        if web:
            if self.web_ttl <= 0:
                return "not stored: web results are not cached (correction.search_cache_ttl = 0)"
            expires = min(expires, (fetched or now) + self.web_ttl)
        documents = self._documents(s for s in used if s.origin == "internal")
        unanswered = answer.refused or answer.abstained
        if documents is None:
            return "not stored: a source is not a document of the knowledge base"
        entry = {
            "format": FORMAT,
            "question": answer.question,
            "answer": answer.answer,
            "action": answer.action.value,
            "confidence": answer.confidence,
            "citations": [asdict(c) for c in answer.citations],
            "context": [asdict(s) for s in answer.context],
            "queries": answer.queries,
            "refused": answer.refused,
            "abstained": answer.abstained,
            "bearers": [asdict(b) for b in answer.bearers],
            "trace_id": answer.trace_id,
            "created": now,
            "expires": expires,
            "web": web,
            "documents": documents,
            # A refusal, or an answer that rests on no document, holds until anything changes:
            # a document added since may hold the answer.
            "generation": None if documents and not unanswered else self.kb.manifest.generation,
        }
        return self._put(found.namespace, found.key, entry, now)

    def _documents(self, strips: Any) -> list[dict[str, Any]] | None:
        """Each document the internal ``strips`` come from, with its version (None: one is unknown)."""
        manifest = self.kb.manifest
        found: dict[str, dict[str, Any]] = {}
        for chunk_id in dict.fromkeys(s.doc_id for s in strips):
            file = manifest.chunk_file(chunk_id) if chunk_id else None
            doc = manifest.document(file) if file else None
            if doc is None:
                return None
            found[doc.id] = {"id": doc.id, "version": doc.version, "content": doc.content or ""}
        return sorted(found.values(), key=lambda d: str(d["id"]))

    def _put(self, namespace: str, key: str, entry: dict[str, Any], now: float) -> str:
        data = json.dumps(redact(entry), ensure_ascii=False)  # a secret an answer echoed is never stored
        row = {"kb": self.db.scope, "namespace": namespace, "key": key, "value": data, "created": now}
        stmt = self.db.insert(cache_table).values(row)
        stmt = stmt.on_conflict_do_update(
            index_elements=["kb", "namespace", "key"], set_={"value": stmt.excluded.value, "created": now}
        )
        try:
            with self.db.connect(write=True) as conn:
                conn.execute(stmt)
        except (CragError, OSError) as exc:  # a full disk: the answer stands, just not kept
            log.warning("answer cache %s not written: %s", self.db.display, exc)
            return f"not stored: {exc}"
        return "stored"


def answer_cache_for(
    settings: CragSettings,
    kb: KnowledgeBase,
    llm: LLM,
    evaluator: Evaluator,
    search: WebSearch | None,
    corpus: str | Path | None = None,
) -> AnswerCache | None:
    """The answer cache of ``kb`` for requests run with these components (their ids are part of
    the key), or None when ``correction.answer_cache_ttl`` is 0."""
    fix = settings.correction
    if fix.answer_cache_ttl <= 0:
        return None
    name = "none" if search is None else f"{getattr(search, 'name', '?')}:{corpus or ''}"
    config = fingerprint(settings, llm=llm.model_id, evaluator=evaluator.name, search=name)
    db = state_for(settings, CACHE, sqlite_path=kb.path / CACHE.file)
    return AnswerCache(db, kb, fix.answer_cache_ttl, fix.search_cache_ttl, config)
