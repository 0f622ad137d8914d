"""``crag feedback rate`` and ``crag feedback export``: ratings that become evaluator training pairs.

``export`` writes the pairs of :func:`crag.grade.feedback.export_feedback` as JSONL that
``crag evaluator train --pairs FILE --with-builtin`` reads (see docs/feedback.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from crag.cli._common import ConfigOpt, KbOpt, engine, err, friendly, out, traces
from crag.errors import InputError

__all__ = ["feedback_app"]

feedback_app = typer.Typer(
    help="Rate answers and turn the ratings into evaluator training pairs.", no_args_is_help=True
)


@feedback_app.command("rate")
@friendly
def rate(
    trace_id: Annotated[str, typer.Argument(help="Trace id (or a unique prefix of 6+ characters).")],
    rating: Annotated[str, typer.Argument(help="up or down.")],
    comment: Annotated[str | None, typer.Option(help="Why (kept with the rating).")] = None,
    kb: KbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Rate the answer of a trace, as the 👍/👎 buttons of the viewer do."""
    if rating not in ("up", "down"):
        raise InputError(f"rating {rating!r} is not 'up' or 'down'")
    rag = engine(config, kb)
    row = traces(rag).rate(trace_id, rating, comment)
    out.print(f"rated {row['trace_id']} {rating}")


@feedback_app.command("export")
@friendly
def export(
    output: Annotated[Path, typer.Option("--output", "-o", help="Pairs JSONL to write.")] = Path(
        "feedback-pairs.jsonl"
    ),
    kb: KbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write (query, passage, label) pairs from rated traces (see docs/feedback.md)."""
    from crag.atomic import write_atomic
    from crag.grade.feedback import export_feedback

    rag = engine(config, kb)
    report = export_feedback(traces(rag))
    if not report.ratings:
        raise InputError(
            f"no rated traces in {rag.settings.trace_path}; rate answers in the viewer (/ui) "
            "or with `crag feedback rate TRACE_ID up|down`"
        )
    write_atomic(output, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in report.pairs))
    rated = ", ".join(f"{n} {r}" for r, n in sorted(report.ratings.items()))
    out.print(
        f"wrote {len(report.pairs)} pairs ({report.count(1)} relevant, {report.count(0)} not) "
        f"from rated traces ({rated}) to {output}"
    )
    if report.review:
        queue = output.with_name(output.stem + ".review.jsonl")
        write_atomic(queue, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in report.review))
        out.print(
            f"{len(report.review)} pairs held for review in {queue}: 👎 on answers whose cited passage holds "
            "what it is cited for (not exported as 'not relevant')"
        )
    if report.likely_grader_misses:
        out.print(f"{report.likely_grader_misses} likely grader misses (👎 with every passage graded relevant)")
    for tid, why in list(report.skipped.items())[:10]:
        err.print(f"[dim]no pair from {tid}: {why}[/]")
