"""Record and replay web search, so runs with live providers can be repeated offline.

``crag ask --search-record FILE`` wraps the provider in :class:`RecordingSearch`, which
appends every ``(provider, query, k) -> results`` to a JSON cassette; ``--search-replay
FILE`` answers from the cassette with :class:`ReplaySearch` and never calls a provider.
Results are keyed by ``(query, k)`` only, so a cassette recorded with Tavily replays
whatever provider is configured.

Cassette format (``version`` 1)::

    {"version": 1, "entries": [
        {"provider": "tavily", "query": "...", "k": 5, "results": [{"title": ..., "url": ...}]}
    ]}
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from crag.atomic import write_atomic
from crag.errors import ConfigError, SearchError
from crag.protocols import WebSearch
from crag.redact import redact
from crag.types import WebResult

VERSION = 1
_FIELDS = frozenset(f.name for f in fields(WebResult))


def _load(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read search cassette {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise ConfigError(f"search cassette {path} is not valid JSON; re-record it with --search-record") from None
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(
        isinstance(e, dict)
        and isinstance(e.get("query"), str)
        and isinstance(e.get("k"), int)
        and isinstance(e.get("results"), list)
        for e in entries
    ):
        raise ConfigError(f"search cassette {path} has no valid 'entries' list; re-record it with --search-record")
    return entries


def _to_result(item: Any, path: Path) -> WebResult:
    if not isinstance(item, dict) or not isinstance(item.get("url"), str):
        raise SearchError(
            f"replay: a result in cassette {path} is malformed; re-record with --search-record",
            backend_id="replay",
            step="search",
        )
    # Unknown keys are ignored so cassettes survive new WebResult fields in either direction.
    return WebResult(
        **{k: v for k, v in item.items() if k in _FIELDS}
        | {"title": item.get("title") or "", "content": item.get("content") or ""}
    )


class RecordingSearch:
    """Pass searches through to ``inner`` and append each answer to the cassette at ``path``.

    The file is rewritten atomically (temp file + rename) after every search, so an
    interrupted run leaves the previous, valid cassette. Failed searches are not recorded.
    An existing cassette is extended, not replaced.

    ### Usage example
    >>> from crag.types import WebResult
    >>> class Static:
    ...     name = "static"
    ...     def search(self, query, *, k):
    ...         return [WebResult("Paris", "https://example.org/paris", "Paris is the capital.")]
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "search.json"
    >>> RecordingSearch(Static(), path).search("capital of France", k=3)[0].title
    'Paris'
    >>> ReplaySearch(path).search("capital of France", k=3)[0].url
    'https://example.org/paris'
    """

    def __init__(self, inner: WebSearch, path: str | Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self.name = getattr(inner, "name", "search")
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = _load(self.path) if self.path.exists() else []

    def search(self, query: str, *, k: int) -> list[WebResult]:
        """Search with the inner provider and record the results."""
        results = self.inner.search(query, k=k)
        # Saved redacted: a provider that echoes its key must not write it into a file users share.
        entry = {"provider": self.name, "query": query, "k": k, "results": redact([asdict(r) for r in results])}
        with self._lock:
            self._entries.append(entry)
            self._write()
        return results

    def _write(self) -> None:
        payload = json.dumps({"version": VERSION, "entries": self._entries}, ensure_ascii=False, indent=1)
        write_atomic(self.path, payload)

    def __repr__(self) -> str:
        return f"RecordingSearch({self.inner!r}, {str(self.path)!r})"


class ReplaySearch:
    """Answer searches from a cassette written by :class:`RecordingSearch`; never goes online.

    Matches ``(query, k)`` exactly; when a query was recorded more than once the latest
    recording wins. A miss raises ``SearchError`` naming the file.

    ### Usage example
    >>> ReplaySearch("search.json").search("capital of France", k=3)   # doctest: +SKIP
    [WebResult(title='Paris', url='https://example.org/paris', ...)]
    """

    name = "replay"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ConfigError(f"search cassette {self.path} not found; record one with --search-record FILE")
        self._index: dict[tuple[str, int], list[Any]] = {}
        self.providers: set[str] = set()
        for entry in _load(self.path):
            self._index[(entry["query"], entry["k"])] = entry["results"]
            self.providers.add(str(entry.get("provider", "")))

    def search(self, query: str, *, k: int) -> list[WebResult]:
        """The recorded results of ``(query, k)``."""
        if k < 1:
            raise ValueError("k must be >= 1")
        try:
            items = self._index[(query, k)]
        except KeyError:
            raise SearchError(
                f"replay: query {query[:80]!r} (k={k}) not in cassette {self.path}; re-record with --search-record",
                backend_id="replay",
                step="search",
            ) from None
        return [_to_result(item, self.path) for item in items]

    def __repr__(self) -> str:
        return f"ReplaySearch({str(self.path)!r})"


def wrap_search(search: WebSearch | None, record: Path | None = None, replay: Path | None = None) -> WebSearch:
    """What the engine uses for ``--search-record FILE`` / ``--search-replay FILE``.

    ``replay`` ignores ``search`` (it may be ``None``); ``record`` wraps it; neither returns
    it unchanged. Both at once is a ``ConfigError``.

    >>> wrap_search(None, replay=None, record=None)
    Traceback (most recent call last):
    crag.errors.ConfigError: no search provider to use: configure search.provider or pass --search-replay FILE
    """
    if record is not None and replay is not None:
        raise ConfigError("--search-record and --search-replay cannot be used together; pick one")
    if replay is not None:
        return ReplaySearch(replay)
    if search is None:
        raise ConfigError("no search provider to use: configure search.provider or pass --search-replay FILE")
    if record is not None:
        return RecordingSearch(search, record)
    return search
