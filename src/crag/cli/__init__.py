"""The ``crag`` command line: one Typer app, one module per command group.

==========================  ===============================================
module                      commands
==========================  ===============================================
:mod:`crag.cli.ingest`      ``ingest``, ``remove``
:mod:`crag.cli.documents`   ``documents``
:mod:`crag.cli.ask`         ``ask``
:mod:`crag.cli.chat`        ``chat``
:mod:`crag.cli.serve`       ``serve``
:mod:`crag.cli.worker`      ``worker``
:mod:`crag.cli.trace`       ``trace list``, ``trace show``
:mod:`crag.cli.grade`       ``grade``, ``calibrate``, ``evaluator label|train``
:mod:`crag.cli.eval`        ``eval``
:mod:`crag.cli._common`     consoles, ``--kb``/``--config``, one-line errors
==========================  ===============================================

Every error a user can cause prints one line naming the input and what to do, and
exits non-zero; tracebacks are for bugs only. No step package imports this one: the CLI
sits on top of the engine, beside the server and the eval harness.
"""

from __future__ import annotations

from typing import Annotated

import typer

from crag._version import __version__
from crag.cli._common import RedactingStream, err, friendly, out, stdout
from crag.cli.ask import ask, print_answer
from crag.cli.chat import chat
from crag.cli.documents import documents
from crag.cli.eval import eval_command
from crag.cli.feedback import feedback_app
from crag.cli.grade import calibrate, evaluator_app, grade
from crag.cli.ingest import ingest, remove
from crag.cli.serve import serve
from crag.cli.trace import trace_app
from crag.cli.worker import worker

__all__ = ["RedactingStream", "app", "err", "friendly", "out", "print_answer"]

app = typer.Typer(help="Corrective Retrieval-Augmented Generation.", no_args_is_help=True, add_completion=False)


def _print_version(value: bool) -> None:
    if value:
        stdout.write(f"crag {__version__}\n")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Corrective Retrieval-Augmented Generation."""


# Registration order is the order of `crag --help`.
app.add_typer(trace_app, name="trace")
app.command()(ingest)
app.command()(remove)
app.command()(documents)
app.command()(ask)
app.command()(chat)
app.command()(serve)
app.command()(worker)
app.add_typer(evaluator_app, name="evaluator")
app.add_typer(feedback_app, name="feedback")
app.command()(grade)
app.command()(calibrate)
app.command("eval")(eval_command)

if __name__ == "__main__":  # pragma: no cover
    app()
