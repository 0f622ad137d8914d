"""The settings of where a knowledge base's state lives (:mod:`crag.state`) and of replicas.

Kept beside :mod:`crag.config` (which uses them as the types of ``kb.state_uri``,
``kb.name``, ``kb.state_timeout`` and ``server.shared``) so that file stays small.

>>> check_state_uri(" postgresql://crag@db:5432/crag ")
'postgresql://crag@db:5432/crag'
>>> try:
...     check_state_uri("mysql://root:hunter2@db/crag")
... except ValueError as exc:
...     print(str(exc)[:45])
mysql://... is not a PostgreSQL URL: use post
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

__all__ = ["STATE_SCHEMES", "KBName", "Shared", "StateTimeout", "StateUri", "check_state_uri"]

STATE_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")  # kb.state_uri values besides unset


def check_state_uri(value: str) -> str:
    """``value`` stripped, when it is unset or a PostgreSQL URL; else ``ValueError`` (without the password)."""
    uri = value.strip()
    scheme = uri.partition("://")[0].lower() if "://" in uri else ""
    if uri and scheme not in STATE_SCHEMES:
        shown = f"{scheme}://..." if scheme else repr(uri[:40])  # never the rest: it may hold a password
        raise ValueError(
            f"{shown} is not a PostgreSQL URL: use postgresql://user@host:5432/dbname, "
            "or leave it unset for SQLite files beside the knowledge base"
        )
    return uri


StateUri = Annotated[
    str,
    Field(
        description="Where the documents and chunk texts, traces, feedback, budgets and the search caches live. "
        "Unset: SQLite files beside the knowledge base (manifest.sqlite, traces.sqlite, budget.sqlite, "
        "search_cache.sqlite; writers queue on write.lock). postgresql://user@host:5432/db: one PostgreSQL database "
        "that several `crag serve` replicas share, writers queuing on an advisory lock there and POST /v1/ingest "
        "queuing jobs for `crag worker` (password in the URL or $PGPASSWORD; needs crag[postgres]). Tables are "
        "created and upgraded on first use."
    ),
    AfterValidator(check_state_uri),
]
KBName = Annotated[
    str,
    Field(
        max_length=200,
        description="This knowledge base's name in a shared state database (kb.state_uri): its documents, traces, "
        "budgets and cache entries carry it, so several knowledge bases can share one database, and replicas with "
        "the same name serve the same documents. Default: the folder's name.",
    ),
]
StateTimeout = Annotated[
    float,
    Field(
        gt=0,
        le=300,
        description="Seconds to connect to the state database (kb.state_uri) and for each statement: past them "
        "a request fails at once (HTTP 503) instead of waiting for the database.",
    ),
]
Shared = Annotated[
    bool,
    Field(
        description="This server is one of several `crag serve` replicas of the same knowledge bases (also "
        "`crag serve --shared`): it refuses to start, in one line, while state, vectors or keywords would stay in "
        "its own folder (kb.state_uri unset, Chroma, a Milvus Lite file, kb.keyword_index = 'local')."
    ),
]
