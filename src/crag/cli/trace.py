"""``crag trace list`` and ``crag trace show``: the decision path of past questions."""

from __future__ import annotations

import enum
import json
from typing import Annotated

import typer

from crag.cli._common import ConfigOpt, KbOpt, engine, friendly, out, stdout, traces
from crag.redact import redact
from crag.trace.store import STATUSES
from crag.types import Action

# The outcomes a trace can have, as a choice the CLI checks and lists in --help.
Status = enum.Enum("Status", {s.upper(): s for s in STATUSES}, type=str)  # type: ignore[misc]

__all__ = ["trace_app"]

trace_app = typer.Typer(help="Inspect the decision path of past questions.", no_args_is_help=True)


@trace_app.command("list")
@friendly
def trace_list(
    kb: KbOpt = None,
    config: ConfigOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 20,
    action: Annotated[Action | None, typer.Option(help="Only this action.")] = None,
    status: Annotated[
        Status | None, typer.Option(help="Only this outcome (failed: the request failed; degraded: a step fell back).")
    ] = None,
    grep: Annotated[str | None, typer.Option(help="Only questions or answers containing this text.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per line.")] = False,
) -> None:
    """Recent questions with their action, confidence and latency."""
    from crag.trace.render import render_list

    rag = engine(config, kb)
    rows = traces(rag).list(
        limit=limit, action=action.value if action else None, status=status.value if status else None, grep=grep
    )
    if as_json:
        stdout.write("".join(json.dumps(redact(row), ensure_ascii=False) + "\n" for row in rows))
    else:
        out.print(render_list(rows))


@trace_app.command("show")
@friendly
def trace_show(
    trace_id: Annotated[str, typer.Argument(help="Trace id (or a unique prefix of 6+ characters).")],
    kb: KbOpt = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw trace JSON.")] = False,
) -> None:
    """The full decision path of one question."""
    from crag.trace.render import render_trace

    rag = engine(config, kb)
    data = traces(rag).get(trace_id)
    if as_json:
        stdout.write(json.dumps(redact(data), ensure_ascii=False, indent=2) + "\n")
    else:
        out.print(render_trace(data))
