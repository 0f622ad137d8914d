"""``crag serve``: the HTTP API and the trace viewer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from crag.cli._common import ConfigOpt, engine, friendly, warm_search
from crag.errors import ConfigError, InputError

if TYPE_CHECKING:
    from crag.engine import CRAG

__all__ = ["check_worker", "parse_kb_options", "serve", "warm_collections"]


@friendly
def serve(
    kb: Annotated[
        list[str] | None,
        typer.Option(
            "--kb",
            help="Knowledge base folder, or NAME=PATH for one of several collections (repeatable); "
            "a request picks one by model or collection.",
        ),
    ] = None,
    config: ConfigOpt = None,
    host: Annotated[str, typer.Option(help="Interface to bind; non-loopback needs API keys.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes (each loads its own models).")] = 1,
    shared: Annotated[
        bool,
        typer.Option(
            "--shared",
            help="One of several replicas of the same knowledge bases: refuse state, vectors or keywords "
            "kept in this machine's folder ([server] shared).",
        ),
    ] = False,
    worker: Annotated[bool, typer.Option("--worker", help="Also run queued ingest jobs, as crag worker does.")] = False,
    rate_limit: Annotated[int | None, typer.Option(help="Requests per minute per API key.")] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            help="Web origin whose pages may call the API from a browser, e.g. http://localhost:3000, "
            "or * for any (repeatable).",
        ),
    ] = None,
) -> None:
    """Run the HTTP API (/v1/ask, /v1/chat/completions, ...) and the trace viewer at /ui."""
    _require_server_extra()
    from crag.server.app import serve as run_server
    from crag.server.jobs import WorkerOptions

    rag = _serving_engine(config, kb, shared=shared)
    check_worker(rag, worker)
    warm_collections(rag)
    run_server(
        rag.settings,
        host=host,
        port=port,
        workers=workers,
        rate_limit_per_minute=rate_limit,
        cors_origins=cors_origin or (),
        worker=WorkerOptions() if worker else None,
    )


# The modules of the ``server`` extra that ``crag serve`` needs before it starts.
_SERVER_MODULES = ("fastapi", "uvicorn", "multipart", "prometheus_client")


def _require_server_extra() -> None:
    """A one-line error naming the ``server`` extra when one of its modules is missing."""
    from crag.extras import require

    for module in _SERVER_MODULES:
        require(module, "server", "crag serve")


def _serving_engine(config: Path | None, kb: list[str] | None, *, shared: bool) -> CRAG:
    """The engine for ``--config``, ``--kb`` and ``--shared``; a shared one is checked first."""
    from crag.config import merge

    bare, extra = parse_kb_options(kb or [])
    if shared:
        extra = merge(extra, {"server": {"shared": True}})
    rag = engine(config, bare, **extra)
    if rag.settings.server.shared:  # before warming anything: the refusal is the first thing said
        from crag.server.replicas import check_shareable

        check_shareable(rag.settings)
    return rag


def check_worker(rag: CRAG, worker: bool) -> None:
    """Refuse ``--worker`` without a shared state database, before any model is loaded."""
    if worker and not rag.settings.kb.state_uri:
        raise ConfigError(
            "crag serve --worker takes queued ingest jobs, which need kb.state_uri = postgresql://...; "
            "without it an upload is ingested at once"
        )


def warm_collections(rag: CRAG) -> None:
    """Index the search corpus of each collection that exists, before the first request.

    A corpus search indexes its corpus on first use; inside a request that would spend the
    search timeout and degrade the first answers. The index is kept on disk under each
    knowledge base, so every worker then loads it instead of building it. A knowledge base
    that does not exist yet is left alone (its first search indexes the corpus).
    """
    from crag.server.collections import Collections

    for collection in Collections.from_settings(rag.settings, rag):
        if collection.path.is_dir():
            warm_search(collection.engine, None, None)


def parse_kb_options(values: list[str]) -> tuple[Path | None, dict[str, Any]]:
    """``--kb`` values as (the bare folder, settings overrides for the named collections).

    ``NAME=PATH`` adds a collection; one bare ``PATH`` is ``kb.path``, which beside named
    collections is the default one, called ``crag``.

    >>> parse_kb_options(["handbook=kb/h", "catalogue=kb/c"])
    (None, {'server': {'collections': {'handbook': 'kb/h', 'catalogue': 'kb/c'}}})
    >>> parse_kb_options(["kb", "手册=kb/z"])
    (PosixPath('kb'), {'server': {'collections': {'手册': 'kb/z', 'crag': 'kb'}, 'default_collection': 'crag'}})
    """
    from crag.collection_names import COLLECTION_NAME, SINGLE_COLLECTION, check_collection_name

    named: dict[str, str] = {}
    bare: list[str] = []
    for value in values:
        name, sep, path = value.partition("=")
        if sep and COLLECTION_NAME.fullmatch(name):
            try:
                check_collection_name(name)
            except ValueError as exc:
                raise InputError(f"--kb {value}: {exc}") from None
            if not path.strip():
                raise InputError(f"--kb {value}: give the folder after '=', e.g. --kb {name}=kb/{name}")
            if name in named:
                raise InputError(f"--kb names the collection {name!r} twice; give each name once")
            named[name] = path
        else:
            bare.append(value)
    if len(bare) > 1:
        raise InputError(f"--kb takes one bare folder, got {len(bare)}; name the others as NAME=PATH")
    folder = Path(bare[0]) if bare else None
    if not named:
        return folder, {}
    server: dict[str, Any] = {"collections": named}
    if folder is not None:
        if SINGLE_COLLECTION in named:
            raise InputError(f"--kb {SINGLE_COLLECTION}=... and a bare --kb folder both name the collection 'crag'")
        named[SINGLE_COLLECTION] = str(folder)
        server["default_collection"] = SINGLE_COLLECTION
    return folder, {"server": server}
