"""One question as a value: what is asked, how, and where it came from.

Every way in (the CLI, ``/v1/ask``, OpenAI chat completions, LangChain, LlamaIndex, the
eval runner, a trace replay) builds one :class:`Request`, checked once, and the engine
takes it whole. The trace records ``to_dict()`` under ``request``; :meth:`Request.from_trace`
rebuilds the same value, so a replay asks the same question the same way.

>>> req = Request.of("  What is CRAG? ", mode="rag", filters={"lang": "en"})
>>> req.question, req.mode, req.filters
('What is CRAG?', 'rag', {'lang': 'en'})
>>> Request.from_dict(req.to_dict()) == req
True
>>> Request.of("")
Traceback (most recent call last):
crag.errors.InputError: the question is empty; ask something, e.g. crag ask "What is CRAG?"
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast

from crag.errors import InputError
from crag.metadata import parse_filters
from crag.pipeline.inputs import check_history, check_question

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from Python 3.11; pydantic depends on it

__all__ = ["MODES", "Mode", "Request", "RequestOptions"]

Mode = Literal["crag", "rag"]
MODES: tuple[Mode, ...] = ("crag", "rag")


class RequestOptions(TypedDict, total=False):
    """The keyword form of a :class:`Request` (``CRAG.ask("…", mode="rag")``): its fields but the question."""

    history: Sequence[Mapping[str, Any]] | None
    mode: str
    search: str | None
    search_corpus: str | Path | None
    search_record: str | Path | None
    search_replay: str | Path | None
    filters: Mapping[str, Any] | None
    collection: str | None
    no_cache: bool
    via: str
    replay_of: str | None


@dataclass(frozen=True)
class Request:
    """A question and how to answer it; build it with :meth:`of` (which checks it), not directly.

    ``history`` is the conversation before the question (OpenAI-style messages, the question is
    condensed with it); ``mode`` ``crag`` or ``rag`` (the plain baseline); ``search`` the external
    source by name, ``search_corpus`` its corpus, ``search_record``/``search_replay`` a cassette
    file its responses are saved to or answered from; ``filters`` scope retrieval by metadata;
    ``collection`` the server's collection; ``no_cache`` answers anew. ``via`` says where it came
    from (``python``, ``cli``, ``http``, ``langchain``, ``llamaindex``, ``eval``) and ``replay_of``
    which trace it replays. Nothing secret is held: the whole value goes into the trace.

    >>> Request.of("它哪一年全线通车？", history=[{"role": "user", "content": "京张铁路是什么时候开工的？"},
    ...                                        {"role": "assistant", "content": "1905年。"}]).history[1]
    {'role': 'assistant', 'content': '1905年。'}
    """

    question: str
    history: tuple[dict[str, str], ...] = ()
    mode: Mode = "crag"
    search: str | None = None
    search_corpus: Path | None = None
    search_record: Path | None = None
    search_replay: Path | None = None
    filters: dict[str, Any] | None = None
    collection: str | None = None
    no_cache: bool = False
    via: str = "python"
    replay_of: str | None = None

    @classmethod
    def of(cls, question: str, **options: Unpack[RequestOptions]) -> Request:
        """The one place a request is checked: an ``InputError`` names the bad input."""
        unknown = set(options) - set(RequestOptions.__annotations__)
        if unknown:
            raise InputError(f"unknown request option(s) {', '.join(sorted(unknown))}; use {_option_names()}")
        text = check_question(question)
        history = tuple(check_history(options.get("history")))
        mode = options.get("mode", "crag")
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; use 'crag' or 'rag'")
        filters = options.get("filters")
        parse_filters(filters, what="filter")  # its size and shape, before anything opens
        return cls(
            question=text,
            history=history,
            mode=mode,
            search=options.get("search"),
            search_corpus=_path(options.get("search_corpus")),
            search_record=_path(options.get("search_record")),
            search_replay=_path(options.get("search_replay")),
            filters=dict(filters) if filters else None,
            collection=options.get("collection"),
            no_cache=bool(options.get("no_cache", False)),
            via=options.get("via", "python"),
            replay_of=options.get("replay_of"),
        )

    @classmethod
    def coerce(cls, request: str | Request, options: RequestOptions) -> Request:
        """``request`` itself, or a Request of a question and keyword options (``CRAG.ask``'s two forms)."""
        if isinstance(request, Request):
            if options:
                raise InputError(
                    f"give options inside the Request, not beside it ({', '.join(sorted(options))}); "
                    "e.g. dataclasses.replace(request, mode='rag')"
                )
            return request
        return cls.of(request, **options)

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON (the trace's ``request``); :meth:`from_dict` reads it back."""
        out = dataclasses.asdict(self)
        out["history"] = [dict(turn) for turn in self.history]
        for name in ("search_corpus", "search_record", "search_replay"):
            out[name] = None if out[name] is None else str(out[name])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Request:
        """The request :meth:`to_dict` wrote, checked again (a trace is read from disk);
        keys it does not know are ignored, so older and newer traces still read."""
        known = {k: v for k, v in data.items() if k in RequestOptions.__annotations__}
        return cls.of(data.get("question", ""), **cast(RequestOptions, known))

    @classmethod
    def from_trace(cls, trace: Mapping[str, Any]) -> Request:
        """The request a trace recorded. A trace without a whole one (written before requests
        were recorded whole) gives its question, mode, filters and search name."""
        recorded = trace.get("request")
        if isinstance(recorded, Mapping) and "question" in recorded:
            return cls.from_dict(recorded)
        info = recorded if isinstance(recorded, Mapping) else {}
        search = info.get("search")
        filters = trace.get("filters")
        return cls.of(
            str(trace.get("question") or ""),
            mode=str(trace.get("mode")) if trace.get("mode") in MODES else "crag",
            search=search if isinstance(search, str) else None,
            filters=filters if isinstance(filters, dict) else None,
        )


def _path(value: str | Path | None) -> Path | None:
    return Path(value) if value else None


def _option_names() -> str:
    return ", ".join(RequestOptions.__annotations__)
