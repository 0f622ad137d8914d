"""``crag trace list`` and ``crag trace show``: the decision path of past questions.

On a terminal they print rich views fitted to its width; in a pipe, whole values with no
wrapping or "…" (``list``: TSV with a header row; ``show``: ``label<TAB>value`` lines and TSV
sections, :mod:`crag.trace.plain`). ``--json`` is the same either way.
"""

from __future__ import annotations

import enum
import json
from typing import Annotated, Any

import typer

from crag.cli._common import ConfigOpt, KbOpt, engine, friendly, out, stdout, traces
from crag.redact import redact
from crag.trace.store import STATUSES
from crag.types import Action

# The outcomes a trace can have, as a choice the CLI checks and lists in --help.
Status = enum.Enum("Status", {s.upper(): s for s in STATUSES}, type=str)  # type: ignore[misc]

__all__ = ["print_trace", "trace_app"]

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
    rag = engine(config, kb)
    rows = traces(rag).list(
        limit=limit, action=action.value if action else None, status=status.value if status else None, grep=grep
    )
    if as_json:
        stdout.write("".join(json.dumps(redact(row), ensure_ascii=False) + "\n" for row in rows))
    elif out.is_terminal:
        from crag.trace.render import render_list

        out.print(render_list(rows))
    else:
        from crag.trace.plain import render_list_tsv

        stdout.write(render_list_tsv(rows))


@trace_app.command("show")
@friendly
def trace_show(
    trace_id: Annotated[str, typer.Argument(help="Trace id (or a unique prefix of 6+ characters).")],
    kb: KbOpt = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw trace JSON.")] = False,
) -> None:
    """The full decision path of one question."""
    rag = engine(config, kb)
    data = traces(rag).get(trace_id)
    if as_json:
        stdout.write(json.dumps(redact(data), ensure_ascii=False, indent=2) + "\n")
    else:
        print_trace(data)


def print_trace(data: dict[str, Any]) -> None:
    """One trace for a person: the rich view on a terminal, whole plain text in a pipe."""
    if out.is_terminal:
        from crag.trace.render import render_trace

        out.print(render_trace(data))
    else:
        from crag.trace.plain import render_trace_text

        stdout.write(render_trace_text(redact(data)))
