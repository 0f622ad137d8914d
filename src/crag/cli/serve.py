"""``crag serve``: the HTTP API and the trace viewer."""

from __future__ import annotations

from typing import Annotated

import typer

from crag.cli._common import ConfigOpt, KbOpt, engine, friendly

__all__ = ["serve"]


@friendly
def serve(
    kb: KbOpt = None,
    config: ConfigOpt = None,
    host: Annotated[str, typer.Option(help="Interface to bind; non-loopback needs CRAG_API_KEYS.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes (each loads its own models).")] = 1,
    rate_limit: Annotated[int | None, typer.Option(help="Requests per minute per API key.")] = None,
) -> None:
    """Run the HTTP API (/v1/ask, /v1/chat/completions, ...) and the trace viewer at /ui."""
    from crag.extras import require

    for module in ("fastapi", "uvicorn", "multipart", "prometheus_client"):
        require(module, "server", "crag serve")
    from crag.server.app import serve as run_server

    rag = engine(config, kb)
    run_server(rag.settings, host=host, port=port, workers=workers, rate_limit_per_minute=rate_limit)
