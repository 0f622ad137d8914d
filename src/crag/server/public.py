"""What leaves the server names documents, never the server's folders.

The engine records where a passage came from as the file's path on this machine
(``/srv/kb/uploads/3f…/zenith.txt``): useful in ``crag ask`` on one's own machine, and
meaningless — or revealing — to an HTTP client. Every JSON body and server-sent event passes
through :func:`public` on its way out (after :func:`crag.redact.redact`), which uses the
request's :class:`Publisher`:

- a ``source`` that is a document's file becomes the document's name (``zenith.txt``,
  ``docs/hr/leave.md``; a JSONL line keeps its ``#id``); another server path its file name;
- a ``url`` that is a server path becomes the document's crag link
  (``/v1/documents/{id}``, with ``?collection=`` when the server holds several), or ``""``
  when no document has it; an object with a ``source`` and an empty ``url`` (a citation, a
  retrieved passage) gets its document's link, so a client can open every internal source;
- any other text has the server's folders taken out: a collection's folder becomes its name,
  a document's folder, the corpus, the model and the cache their last part.

The publisher is set per request by :class:`PublishMiddleware`; outside a request
:func:`public` only redacts.

>>> public({"source": "/srv/kb/a.md"})  # no publisher: only redaction
{'source': '/srv/kb/a.md'}
"""

from __future__ import annotations

import contextvars
import os
import re
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Protocol
from urllib.parse import quote

from crag.redact import redact

__all__ = ["PublishMiddleware", "Publisher", "document_link", "public"]

_current: contextvars.ContextVar[Publisher | None] = contextvars.ContextVar("crag_publisher", default=None)
_LINK_PREFIXES = ("/v1/", "/ui")  # a url that starts so is crag's own link, not a server path


class _Engine(Protocol):
    @property
    def settings(self) -> Any: ...


class _Collection(Protocol):
    """What the publisher reads of a collection (:class:`crag.server.collections.Collection`)."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> Path: ...

    @property
    def engine(self) -> _Engine: ...


def document_link(doc_id: str, collection: str | None = None) -> str:
    """The crag link of a document: ``/v1/documents/{id}`` (``?collection=`` when needed).

    >>> document_link("报告 v2.md", "手册")
    '/v1/documents/%E6%8A%A5%E5%91%8A%20v2.md?collection=%E6%89%8B%E5%86%8C'
    """
    link = f"/v1/documents/{quote(doc_id, safe='')}"
    return f"{link}?collection={quote(collection, safe='')}" if collection else link


@dataclass
class _Known:
    """One collection's documents as of a manifest generation: file -> (id, name), and folders."""

    generation: int = -1
    files: dict[str, tuple[str, str]] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)


class _Manifest:
    """A read-only view of a collection's manifest: no knowledge base is opened or created."""

    def __init__(self, path: Path) -> None:
        self.path = path / "manifest.sqlite"
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.known = _Known()

    def refresh(self) -> _Known:
        """The documents, re-read when the manifest's generation moved."""
        with self._lock:
            try:
                db = self._connect()
                if db is None:
                    return self.known
                row = db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
                generation = int(row[0]) if row else 0
                if generation != self.known.generation:
                    self.known = self._read(db, generation)
            except (sqlite3.Error, ValueError):
                pass  # a manifest being created or upgraded: the last view (or none) stands
            return self.known

    def _connect(self) -> sqlite3.Connection | None:
        if self._db is None and self.path.is_file():
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5, check_same_thread=False)
        return self._db

    @staticmethod
    def _read(db: sqlite3.Connection, generation: int) -> _Known:
        known = _Known(generation)
        try:
            rows = db.execute("SELECT f.path, d.id, d.name FROM files f LEFT JOIN documents d ON d.file = f.path")
            found = [(str(p), i, n) for p, i, n in rows]
        except sqlite3.OperationalError:  # a manifest from before documents
            found = [(str(p), None, None) for (p,) in db.execute("SELECT path FROM files")]
        for file, doc_id, name in found:
            if doc_id is not None:
                known.files[file] = (str(doc_id), str(name))
            known.folders.add(str(PurePath(file).parent))
        return known


class _SharedManifest(_Manifest):
    """The same view of a manifest in the shared state database (``kb.state_uri``): its files
    are other machines' paths too, mapped to the same document names on every replica."""

    def __init__(self, path: Path, state: Any) -> None:
        super().__init__(path)
        self.state = state  # crag.state.StateDB of the manifest group

    def refresh(self) -> _Known:
        from crag.errors import CragError
        from crag.store.manifest_db import ManifestDB

        with self._lock:
            try:
                manifest = ManifestDB.reader(self.state)
                generation = manifest.generation
                if generation != self.known.generation:
                    known = _Known(generation)
                    for file, doc_id, name in manifest.file_documents():
                        if doc_id is not None:
                            known.files[file] = (doc_id, str(name))
                        known.folders.add(str(PurePath(file).parent))
                    self.known = known
            except CragError:
                pass  # the database does not answer: the last view (or none) stands; /readyz says why
            return self.known


def _manifest_of(c: _Collection) -> _Manifest:
    settings = c.engine.settings
    if not settings.kb.state_uri:
        return _Manifest(c.path)
    from crag.state import MANIFEST, state_for

    return _SharedManifest(c.path, state_for(settings, MANIFEST))


class Publisher:
    """Maps server paths in a response to document names and links (see the module docstring).

    ### Usage example
    >>> pub = Publisher(collections)                           # doctest: +SKIP
    >>> pub.data({"source": "/srv/kb/uploads/3f/zenith.txt", "url": ""})   # doctest: +SKIP
    {'source': 'zenith.txt', 'url': '/v1/documents/zenith.txt'}
    """

    def __init__(self, collections: Iterable[_Collection], default: str | None = None) -> None:
        self._cols = [(c.name, c.path, _manifest_of(c)) for c in collections]
        self._default = default
        self._several = len(self._cols) > 1
        self._fixed = self._fixed_roots([c for c in collections])
        self._pattern: tuple[tuple[int, ...], re.Pattern[str] | None, dict[str, str]] = ((), None, {})

    # -- roots ---------------------------------------------------------------------------
    def _fixed_roots(self, collections: list[_Collection]) -> dict[str, str]:
        """Server folders that are not documents': collections (named), settings' paths, the cache."""
        roots: dict[str, str] = {}
        for c in collections:
            for p in {str(c.path), _resolved(c.path)}:
                if p.startswith("/") and len(p) > 1:
                    roots[p] = c.name
            for value in _strings(c.engine.settings.model_dump(mode="json")):
                if value.startswith("/") and len(value) > 1 and "://" not in value:
                    roots.setdefault(value.rstrip("/"), PurePath(value).name)
        # The cache (assembled models, embeddings) is named in model errors. Broader roots (the
        # home folder, the working directory) would rewrite documents' own text that names them.
        cache = os.environ.get("CRAG_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "crag")
        if cache.startswith("/") and len(cache) > 1:
            roots.setdefault(cache.rstrip("/"), "crag-cache")
        return roots

    def refresh(self) -> None:
        """Re-read the manifests that moved; rebuild the one pattern over every root (longest first)."""
        views = [m.refresh() for _, _, m in self._cols]
        generations = tuple(v.generation for v in views)
        if generations == self._pattern[0] and self._pattern[1] is not None:
            return
        roots = dict(self._fixed)
        for view in views:
            for folder in view.folders:
                if folder != "/" and not any(_inside(folder, r) for r in self._fixed):
                    roots.setdefault(folder, PurePath(folder).name)
        ordered = sorted(roots, key=len, reverse=True)
        regex = re.compile("(?:" + "|".join(re.escape(r) for r in ordered) + r")(?![\w.\-])") if ordered else None
        self._pattern = (generations, regex, roots)

    # -- mapping -------------------------------------------------------------------------
    def document(self, value: str) -> tuple[str, str, str, str] | None:
        """``(collection, id, name, "#fragment")`` of the document a source names, or None."""
        base, sep, frag = value.rpartition("#")
        for candidate, tail in ((value, ""), (base, f"#{frag}")):
            if candidate and (candidate == value or sep):
                for name, _, m in self._cols:
                    found = m.known.files.get(candidate)
                    if found is not None:
                        return name, found[0], found[1], tail
        return None

    def link(self, collection: str, doc_id: str) -> str:
        named = self._several or (self._default is not None and collection != self._default)
        return document_link(doc_id, collection if named else None)

    def text(self, value: str) -> str:
        """``value`` with every server folder replaced by its public name."""
        if "/" not in value:
            return value
        if self._pattern[1] is None:
            self.refresh()
        _, regex, roots = self._pattern
        return regex.sub(lambda m: roots[m.group(0)], value) if regex is not None else value

    def source(self, value: str) -> str:
        doc = self.document(value)
        if doc is not None:
            return doc[2] + doc[3]
        shown = self.text(value)
        if shown.startswith("/") and "://" not in shown:  # a path under no known folder
            return PurePath(shown.partition("#")[0]).name + (f"#{shown.partition('#')[2]}" if "#" in shown else "")
        return shown

    def url(self, value: str) -> str:
        path = value[len("file://") :] if value.startswith("file://") else value
        if not path.startswith("/") or path.startswith(_LINK_PREFIXES) or path.startswith("//"):
            return self.text(value) if value.startswith("file://") else value
        doc = self.document(path)
        return self.link(doc[0], doc[1]) if doc is not None else ""

    def data(self, obj: Any) -> Any:
        """``obj`` (JSON-like) with sources, urls and texts made public (a new object)."""
        self.refresh()  # once per response, not per string
        return self._walk(obj)

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, list | tuple):
            return [self._walk(v) for v in obj]
        if not isinstance(obj, dict):
            return obj
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if key == "source" and isinstance(value, str):
                out[key] = self.source(value)
            elif key == "url" and isinstance(value, str):
                out[key] = self.url(value)
            else:
                out[key] = self._walk(value)
        source = obj.get("source")
        if isinstance(source, str) and obj.get("url") == "":
            doc = self.document(source)
            if doc is not None:
                out["url"] = self.link(doc[0], doc[1])
        return out


def public(obj: Any) -> Any:
    """``obj`` redacted, then made public by the current request's publisher (if any)."""
    cleaned = redact(obj)
    publisher = _current.get()
    return publisher.data(cleaned) if publisher is not None else cleaned


Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class PublishMiddleware:
    """Sets the publisher for the request, so every body it sends is made public."""

    def __init__(self, app: ASGIApp, *, publisher: Publisher) -> None:
        self.app = app
        self.publisher = publisher

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        token = _current.set(self.publisher)
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)


def _resolved(path: Path) -> str:
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):
        return str(path)


def _inside(folder: str, root: str) -> bool:
    return folder == root or folder.startswith(root.rstrip("/") + "/")


def _strings(obj: Any) -> Iterable[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)
