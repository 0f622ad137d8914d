"""``crag worker``: take the ingest jobs that ``POST /v1/ingest`` queued (``kb.state_uri`` in PostgreSQL)."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer

from crag.cli._common import ConfigOpt, engine, err, friendly

__all__ = ["worker"]


@friendly(interrupted="worker stopped; a job it was running is taken over by another worker")
def worker(
    kb: Annotated[
        list[str] | None,
        typer.Option(
            "--kb",
            help="Knowledge base folder, or NAME=PATH for one of several collections (repeatable), as for "
            "crag serve: the worker takes the jobs of these knowledge bases.",
        ),
    ] = None,
    config: ConfigOpt = None,
    heartbeat: Annotated[
        float, typer.Option(min=0.1, help="Seconds between two signs of life sent to the database.")
    ] = 10.0,
    stalled_after: Annotated[
        float,
        typer.Option(
            min=1,
            help="Seconds without a sign of life after which another worker's job is run again "
            "(more than twice --heartbeat).",
        ),
    ] = 30.0,
) -> None:
    """Run queued ingest jobs until stopped (Ctrl-C); needs kb.state_uri = postgresql://..."""
    from crag.cli.serve import parse_kb_options
    from crag.extras import require

    require("procrastinate", "postgres", "crag worker")
    from crag.errors import ConfigError
    from crag.jobs.tasks import engines_by_kb, run_worker
    from crag.server.collections import Collections

    bare, extra = parse_kb_options(kb or [])
    rag = engine(config, bare, **extra)
    if not rag.settings.kb.state_uri:
        raise ConfigError(
            "crag worker takes queued ingest jobs, which need kb.state_uri = postgresql://user@host:5432/db "
            "(in crag.toml or CRAG_KB__STATE_URI)"
        )
    engines = engines_by_kb([c.engine for c in Collections.from_settings(rag.settings, rag)])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    err.print(f"crag worker: taking ingest jobs of {', '.join(sorted(engines))}")
    asyncio.run(run_worker(engines, heartbeat=heartbeat, stalled_after=stalled_after))
