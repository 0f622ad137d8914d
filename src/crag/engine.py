"""The Python API: ``CRAG.from_config(...)``, ``.ingest(paths)``, ``.ask(question)``.

Components are created on first use, so opening a CRAG to list traces loads no model.

>>> from crag import CRAG
>>> rag = CRAG.from_config(kb={"path": "kb"}, search={"corpus_path": "data/sample/external"})  # doctest: +SKIP
>>> rag.ingest(["data/sample/internal"]).chunks_written                                        # doctest: +SKIP
51
>>> a = rag.ask("天津犹太会堂是什么时候建成的？")                                                 # doctest: +SKIP
>>> a.action.value, a.answer                                                                   # doctest: +SKIP
('correct', '天津犹太会堂建成于1940年[1]。')
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import httpx

from crag.config import CragSettings, load_settings, merge
from crag.embed.cache import make_embedder
from crag.errors import CragError, InputError, RequestCancelled
from crag.ingest.limits import InputLimits
from crag.kb import DocName, IngestReport, KnowledgeBase, Progress, exists, index_corpus
from crag.metadata import check_metadata
from crag.paths import is_disk_full
from crag.pipeline import CorrectedContext, Deps, OnStep, run_crag, run_crag_context, run_rag
from crag.pipeline.answer_cache import answer_cache_for
from crag.pipeline.live import AnswerStream
from crag.protocols import LLM, Embedder, Evaluator, WebSearch
from crag.redact import install_log_redaction, register, register_env, url_secrets
from crag.registry import EVALUATORS, LLMS, SEARCHES, BackendDeps
from crag.request import Request, RequestOptions
from crag.state import MANIFEST, TRACES, StateDB, state_for
from crag.trace.otel import export_trace
from crag.trace.spans import Tracer
from crag.trace.store import TraceStore
from crag.types import Answer

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from Python 3.11

log = logging.getLogger("crag")


class _Result(Protocol):
    """What a run returns (an Answer, a CorrectedContext): a trace note joins its degradations."""

    degradations: list[str]


R = TypeVar("R", bound=_Result)


class CRAG:
    """A CRAG engine over one knowledge base folder."""

    def __init__(self, settings: CragSettings) -> None:
        self.settings = settings
        # Secrets may sit in variables of any name the settings point at; logs of this
        # process (ours, uvicorn's, httpx's) are redacted from here on.
        register_env(
            settings.llm.api_key_env,
            settings.embedder.api_key_env,
            settings.search.tavily_api_key_env,
            settings.search.brave_api_key_env,
        )
        urls = (settings.llm.base_url, settings.embedder.base_url, settings.kb.store_uri, settings.kb.state_uri)
        search = (settings.search.tavily_url, settings.search.searxng_url, settings.search.brave_url)
        register(secret for url in (*urls, *search) for secret in url_secrets(url))  # https://TOKEN@host
        install_log_redaction()
        self._lock = threading.RLock()
        self._embedder: Embedder | None = None
        self._kb: KnowledgeBase | None = None
        self._evaluator: Evaluator | None = None
        self._llm: LLM | None = None
        self._searches: dict[tuple[str, str], WebSearch | None] = {}
        self._traces: TraceStore | None = None
        self._http: httpx.Client | None = None  # page fetching's (search.fetch_pages), made once
        self._noted_recovery: Path | None = None  # a corrupt trace database already reported
        self._shares: CRAG | None = None  # the engine whose models this one uses (see for_kb)

    @classmethod
    def from_config(cls, path: str | Path | None = None, **overrides: Any) -> CRAG:
        """Settings from a TOML file (or ./crag.toml), the environment, then ``overrides``."""
        return cls(load_settings(path, **overrides))

    def for_kb(self, path: str | Path) -> CRAG:
        """A CRAG over another knowledge base folder that shares this one's models.

        A server holding several collections loads the embedder, evaluator and LLM once;
        each knowledge base keeps its own traces beside it (``<path>/traces.sqlite``), or
        under its folder's name in a shared ``kb.state_uri``.

        >>> handbook = rag.for_kb("kb/handbook")   # doctest: +SKIP
        """
        s = self.settings
        settings = s.model_copy(
            update={
                "kb": s.kb.model_copy(update={"path": Path(path), "name": ""}),
                "trace": s.trace.model_copy(update={"path": None}),
            }
        )
        sibling = CRAG(settings)
        sibling._shares = self._shares or self
        return sibling

    # -- components (lazy) ---------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._shares is not None:
            return self._shares.embedder
        with self._lock:
            if self._embedder is None:
                self._embedder = make_embedder(self.settings)
            return self._embedder

    def knowledge_base(self, *, create: bool = False) -> KnowledgeBase:
        with self._lock:
            if self._kb is None:
                kw: dict[str, Any] = {
                    "chunking": self.settings.chunking,
                    "retrieval": self.settings.retrieval,
                    "store_uri": self.settings.kb.store_uri,
                    "keyword_index": self.settings.kb.keyword_index,
                    "commit_chunks": self.settings.kb.commit_chunks,
                    "limits": InputLimits(
                        max_unpacked_bytes=self.settings.ingest.max_unpacked_mb * 1_000_000,
                        max_elements=self.settings.ingest.max_elements,
                    ),
                    "state": self.manifest_state(),
                }
                path = self.settings.kb.path
                self._kb = (
                    KnowledgeBase(path, self.embedder, **kw)
                    if create
                    else KnowledgeBase.open(path, self.embedder, **kw)
                )
            return self._kb

    def manifest_state(self) -> StateDB | None:
        """Where the knowledge base's documents and chunk texts live when not in its folder's
        ``manifest.sqlite``: the shared ``kb.state_uri``, under ``kb.name`` (None when unset)."""
        return state_for(self.settings, MANIFEST) if self.settings.kb.state_uri else None

    def kb_exists(self) -> bool:
        """True once the knowledge base has been created (something was ingested into it), in its
        folder or, with ``kb.state_uri``, in the shared database. Creates nothing."""
        return exists(self.settings.kb.path, self.manifest_state())

    @property
    def evaluator(self) -> Evaluator:
        if self._shares is not None:
            return self._shares.evaluator
        with self._lock:
            if self._evaluator is None:
                self._evaluator = EVALUATORS.create(
                    self.settings.evaluator.backend,
                    self.settings,
                    BackendDeps(embedder=self.embedder, llm_factory=lambda: self.llm),
                )
            return self._evaluator

    @property
    def llm(self) -> LLM:
        if self._shares is not None:
            return self._shares.llm
        with self._lock:
            if self._llm is None:
                self._llm = LLMS.create(self.settings.llm.backend, self.settings)
            return self._llm

    def search_provider(
        self,
        name: str | None = None,
        corpus: str | Path | None = None,
        *,
        record: str | Path | None = None,
        replay: str | Path | None = None,
    ) -> WebSearch | None:
        """The external source, by name (default from settings); ``none`` disables it.

        ``record`` saves every provider response to a cassette file; ``replay`` answers
        from one instead of searching, so evaluations and bug reports are reproducible.
        """
        if record or replay:
            from crag.search.replay import wrap_search

            inner = None if replay else self.search_provider(name, corpus)
            return wrap_search(inner, Path(record) if record else None, Path(replay) if replay else None)
        s = self.settings
        # --search-corpus alone means "search this corpus".
        name = name or ("corpus" if corpus else s.search.provider)
        corpus_path = Path(corpus) if corpus else s.search.corpus_path
        key = (name, str(corpus_path))
        with self._lock:
            if key not in self._searches:
                if name == "none":
                    self._searches[key] = None
                else:
                    cfg = s.model_copy(update={"search": s.search.model_copy(update={"corpus_path": corpus_path})})
                    index = functools.partial(
                        index_corpus, index_root=s.kb.path / "corpora", embedder=self.embedder, chunking=s.chunking
                    )
                    deps = BackendDeps(embedder=self.embedder, corpus_index=index)
                    self._searches[key] = SEARCHES.create(name, cfg, deps)
            return self._searches[key]

    def http_client(self) -> httpx.Client | None:
        """The client that fetches result pages (``search.fetch_pages``; None when off)."""
        if not self.settings.search.fetch_pages:
            return None
        with self._lock:
            if self._http is None:
                # Redirects are followed by the fetcher itself, each hop checked against SSRF.
                self._http = httpx.Client(follow_redirects=False)
            return self._http

    @property
    def traces(self) -> TraceStore:
        with self._lock:
            if self._traces is None:
                self._traces = TraceStore(state_for(self.settings, TRACES, sqlite_path=self.settings.trace_path))
            return self._traces

    def check_state(self) -> None:
        """Raise :class:`~crag.errors.StateUnavailableError` when the shared state database
        (``kb.state_uri``) does not answer now; nothing to check for SQLite files.

        The server calls it before a question, so a request fails at once with a 503
        instead of answering without recording (and the trace viewer, feedback and budgets
        of every replica missing it)."""
        if self.settings.kb.state_uri:
            state_for(self.settings, TRACES).ping()

    # -- operations ------------------------------------------------------------------------
    def ingest(
        self,
        paths: Sequence[str | Path],
        *,
        prune: bool = False,
        progress: Progress | None = None,
        workers: int = 1,
        metadata: dict[str, Any] | None = None,
        clear_metadata: bool = False,
        names: Mapping[str, DocName] | None = None,
    ) -> IngestReport:
        """Add files and folders to the knowledge base (created if needed).

        ``workers > 1`` embeds in that many processes (worth it on many-core machines).
        ``metadata`` becomes the metadata of every document of the run, e.g. ``{"team": "产品"}``;
        without it (or with ``{}``) each document keeps the metadata it had, and
        ``clear_metadata=True`` removes it. A document's own fields (Markdown front matter,
        JSONL) win a clash (:mod:`crag.metadata`). ``names`` gives files their document id and
        name (the server's uploads).
        """
        if not paths:
            raise InputError("no paths given to ingest; pass files or folders")
        if workers < 1:
            raise InputError(f"workers must be at least 1, got {workers}")
        meta = check_metadata(metadata)
        if meta and clear_metadata:
            raise InputError("metadata and clear_metadata together: give new metadata, or clear it, not both")
        kb = self.knowledge_base(create=True)
        return kb.ingest(
            paths,
            prune=prune,
            progress=progress,
            workers=workers,
            metadata=meta or None,
            clear_metadata=clear_metadata,
            names=names,
        )

    def remove(self, paths: Sequence[str | Path]) -> list[Any]:
        """Remove files (or everything under folders) from the knowledge base."""
        return self.knowledge_base().remove(paths)

    def ask(self, request: str | Request, /, **options: Unpack[RequestOptions]) -> Answer:
        """Answer a question: a :class:`~crag.request.Request`, or its text and the request's
        options as keywords (``Request.of``'s). ``mode='rag'`` runs the plain baseline with the same parts.

        ``history`` is the conversation before it, as OpenAI-style messages
        (``{"role": "user" | "assistant", "content": ...}``): the question is condensed into
        a standalone one first ("Who designed it?" → "Who designed the Bell Rock
        Lighthouse?"), and that is what is retrieved and answered (one LLM call at most).
        ``filters`` scope retrieval to documents whose metadata match, e.g. ``{"lang": "zh"}`` or
        ``{"team": ["产品", "support"]}`` (:mod:`crag.metadata`). ``no_cache`` answers anew, neither reading
        nor writing the answer cache (``correction.answer_cache_ttl``). The trace records the
        request (``request``), so a replay asks it the same way (``Request.from_trace``).

        >>> rag.ask("它哪一年全线通车？", history=[{"role": "user", "content": "京张铁路是什么时候开工的？"},
        ...                                   {"role": "assistant", "content": "1905年。"}])  # doctest: +SKIP
        >>> rag.ask(Request.of("What is CRAG?", mode="rag"))  # doctest: +SKIP
        """
        req = Request.coerce(request, options)
        return self._run(self._prepare(req), Tracer(), req, None)

    def ask_stream(self, request: str | Request, /, **options: Unpack[RequestOptions]) -> AnswerStream:
        """Answer a question as it happens: iterate the events (:class:`~crag.pipeline.live.AnswerStream`).

        The request as for :meth:`ask` (a ``condense`` event comes first when it has a history).
        Step events (:mod:`crag.pipeline.events`) carry their values and a JSON summary
        (``data``), then ``token`` events as the model writes, then ``answer`` (its ``value``
        is the :class:`Answer`). Bad input and a missing knowledge base raise here, before
        anything runs; a failure of the run is raised from ``next()``. Closing the stream (or
        leaving its ``with``) stops the model between two tokens; the trace is recorded once
        either way. An answer from the cache comes as a ``cache`` event, one ``token``, ``answer``.

        >>> with rag.ask_stream("What is CRAG?") as events:      # doctest: +SKIP
        ...     for e in events:
        ...         if isinstance(e, TokenEvent):  # from crag.pipeline.events
        ...             print(e.value, end="", flush=True)
        """
        req = Request.coerce(request, options)
        run = self._prepare(req)
        tracer = Tracer()
        return AnswerStream(lambda on_step: self._run(run, tracer, req, on_step), trace_id=tracer.id)

    def retrieve_context(self, request: str | Request, /, **options: Unpack[RequestOptions]) -> CorrectedContext:
        """Retrieve, grade and correct without generating: the decision and the corrected context.

        The steps of :meth:`ask` up to generation (:func:`crag.pipeline.run_crag_context`),
        for a caller that writes the answer itself (the LangChain and LlamaIndex retrievers).
        The trace is saved, with the status ``retrieved``. The request as for :meth:`ask`,
        in ``crag`` mode and without a history (nothing condenses it).

        >>> got = rag.retrieve_context("天津犹太会堂是什么时候建成的？")      # doctest: +SKIP
        >>> got.action.value, [(s.score, s.text[:12]) for s in got.strips]    # doctest: +SKIP
        ('correct', [(0.93, '天津犹太会堂建成于1940')])
        """
        req = Request.coerce(request, options)
        if req.mode != "crag" or req.history:
            raise InputError("retrieve_context runs the crag steps on one question: give no history and mode 'crag'")
        run = functools.partial(run_crag_context, req.question, self._deps(req), self.settings)
        return self._run(lambda tracer, on_step: run(tracer), Tracer(), req, None)

    def _deps(self, request: Request, cache: bool = False) -> Deps:
        """The components a request runs through; a missing knowledge base raises here.
        ``cache``: with the answer cache, unless searches are recorded or replayed."""
        kb = self.knowledge_base()
        kb.require_chunks()
        scope = kb.scope(request.filters) if request.filters else {}  # known keys, and some document matching
        r = request
        search = self.search_provider(r.search, r.search_corpus, record=r.search_record, replay=r.search_replay)
        deps = Deps(
            kb=kb,
            evaluator=self.evaluator,
            llm=self.llm,
            search=search if r.mode == "crag" else None,
            http=self.http_client(),
            filters=scope,
        )
        if cache and not (r.search_record or r.search_replay):
            deps.answers = answer_cache_for(self.settings, kb, deps.llm, deps.evaluator, deps.search, r.search_corpus)
        return deps

    def _prepare(self, request: Request) -> Callable[[Tracer, OnStep | None], Answer]:
        """The request's components, built; the run, ready to start."""
        deps = self._deps(request, not request.no_cache)
        pipeline = run_crag if request.mode == "crag" else run_rag
        question, turns = request.question, list(request.history)
        return lambda tracer, on_step: pipeline(question, deps, self.settings, tracer, history=turns, on_step=on_step)

    def _run(
        self,
        run: Callable[[Tracer, OnStep | None], R],
        tracer: Tracer,
        request: Request,
        on_step: OnStep | None,
    ) -> R:
        """Run with ``tracer`` (the request's recorder: the pipeline writes, nothing reads it
        back) and save the trace once, whether the run answered, failed or was cancelled."""
        tracer.record("request", request.to_dict())  # how it was asked: a replay rebuilds it
        try:
            answer = run(tracer, on_step)
        except BaseException as exc:
            if isinstance(exc, RequestCancelled):  # the reader left (Ctrl-C, a closed tab): no failure
                tracer.record("cancelled", str(exc))
            elif isinstance(exc, CragError):
                tracer.append("errors", str(exc))
            self._record(tracer)
            raise
        note = self._record(tracer)
        if note:
            answer.degradations.append(note)
        return answer

    def _record(self, tracer: Tracer) -> str:
        """Save and export the trace. Tracing never takes an answer down: a failure comes
        back as a warning for the answer's degradations (and the log)."""
        note = ""
        store: TraceStore | None = None
        if self.settings.trace.enabled:
            try:
                store = self.traces
            except (CragError, OSError, sqlite3.Error) as exc:
                note = self._not_saved(exc)
            if store is not None and store.recovered is not None and store.recovered != self._noted_recovery:
                note = self._recovery_note(store.recovered)  # found corrupt on open: say so in this trace too
                tracer.append("degradations", note)
        trace = tracer.to_dict() | {"settings": _public_settings(self.settings)}
        if store is not None:
            try:
                store.save(trace)
                if store.recovered is not None and store.recovered != self._noted_recovery:  # corrupt since opened
                    note = self._recovery_note(store.recovered)
            except (CragError, OSError, sqlite3.Error) as exc:
                note = self._not_saved(exc)
        if note.startswith("trace not saved"):
            log.warning("%s", note)
        export_trace(trace)  # OpenTelemetry, only when an OTLP endpoint is configured; never raises
        return note

    def _not_saved(self, exc: BaseException) -> str:
        folder = self.settings.trace_path.parent
        local = not self.settings.kb.state_uri  # a shared database's failure says nothing of this disk
        if local and is_disk_full(folder, exc):  # the answer stands; reads work while writes fail
            return f"trace not saved: disk full at {folder}; free space to record traces again"
        return f"trace not saved ({exc})"

    def _recovery_note(self, moved_to: Path) -> str:
        self._noted_recovery = moved_to
        return f"trace database was corrupt; moved it to {moved_to.name} beside it and started a new one"


def _public_settings(s: CragSettings) -> dict[str, Any]:
    # Settings hold only env-var *names* for secrets, never the values; paths become text.
    # The server's own settings (every collection, the keys' scopes) say nothing about how a
    # question was answered, and a trace is shown to clients that may see one collection only.
    return merge({}, s.model_dump(mode="json", exclude={"server"}))
