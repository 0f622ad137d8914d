"""``crag chat``: a conversation with the knowledge base, the model loaded once.

Each line is a question; follow-ups may point back ("Who designed it?", "那雌鱼呢？"):
the conversation so far is the history the engine condenses them with
(:mod:`crag.correct.condense`). One engine serves every turn, so the model is loaded
once, at the start, not per question as ``crag ask`` does. Commands: ``/sources`` (the
last answer's citations), ``/trace`` (its decision path), ``/new`` (forget the
conversation), ``/exit``. Reads stdin, so it can be driven from a pipe::

    printf 'Who was Harvard president from 1933 to 1953?\\nWhat did he ask the faculty for?\\n' | crag chat --kb kb
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from crag.cli._common import (
    ConfigOpt,
    KbOpt,
    answer_stream,
    assemble_model,
    engine,
    err,
    friendly,
    out,
    stdin_closed,
    stdout,
    warm_search,
)
from crag.cli.ask import show_stream
from crag.errors import CragError, InputError
from crag.redact import redact_text

if TYPE_CHECKING:
    from crag.engine import CRAG
    from crag.types import Answer

__all__ = ["chat"]

HELP = "/sources: the last answer's citations · /trace: its decision path · /new: a new conversation · /exit"
MAX_HISTORY_MESSAGES = 20  # the condenser reads the last few; older turns only cost memory


@friendly(interrupted="the chat was stopped")
def chat(
    kb: KbOpt = None,
    config: ConfigOpt = None,
    search: Annotated[str | None, typer.Option(help="External source: corpus, tavily, none.")] = None,
    search_corpus: Annotated[Path | None, typer.Option(help="Folder or .jsonl for --search corpus.")] = None,
    evaluator: Annotated[str | None, typer.Option(help="Evaluator: heuristic, trained, llm, ensemble.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what crag does to stderr.")] = False,
) -> None:
    """Talk with the knowledge base: follow-up questions keep the conversation, the model stays loaded."""
    if stdin_closed():  # nothing to read: say so before the model loads
        raise InputError("crag chat reads questions from stdin, which is closed; run it in a terminal or pipe them in")
    if verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    rag = engine(config, kb, **({"evaluator": {"backend": evaluator}} if evaluator else {}))
    rag.knowledge_base().require_chunks()  # no knowledge base: one line now, not after the first question
    assemble_model(rag)
    warm_search(rag, search, search_corpus)
    _load_model(rag)
    Session(rag, search=search, search_corpus=search_corpus).run()


def _load_model(rag: CRAG) -> None:
    """Load the model before the first question (the wait is here once, not in every answer)."""
    warm = getattr(rag.llm, "warm_up", None)
    if warm is None:
        return
    start = time.monotonic()
    with err.status(f"loading {rag.settings.llm.model}…"):
        warm()
    err.print(f"[dim]{escape(rag.settings.llm.model)} ready in {time.monotonic() - start:.1f} s. {HELP}[/]")


class Session:
    """The conversation: its history, the last answer, and the commands that read them."""

    def __init__(self, rag: CRAG, *, search: str | None = None, search_corpus: Path | None = None) -> None:
        self.rag = rag
        self.search, self.search_corpus = search, search_corpus
        self.history: list[dict[str, str]] = []
        self.last: Answer | None = None
        self.interactive = sys.stdin.isatty()

    def run(self) -> None:
        while (line := self._read()) is not None:
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not self.command(line):
                    return
                continue
            try:
                self.ask(line)
            except CragError as exc:  # one bad question (too long, a backend down) does not end the chat
                err.print(f"[bold red]error:[/] {escape(redact_text(str(exc)))}")

    def ask(self, question: str) -> None:
        from crag.request import Request  # loaded with the engine, not with the CLI

        asked = Request.of(
            question, history=self.history, search=self.search, search_corpus=self.search_corpus, via="cli"
        )
        with answer_stream(self.rag, asked) as events:
            answer = show_stream(events)
        for note in answer.degradations:
            err.print(f"[yellow]degraded:[/] {escape(redact_text(note))}")
        self.last = answer
        self.history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer.answer}]
        del self.history[:-MAX_HISTORY_MESSAGES]

    def command(self, line: str) -> bool:
        """Run a ``/command``; False ends the chat."""
        name = line.split()[0].lower()
        if name in ("/exit", "/quit"):
            return False
        if name == "/new":
            self.history, self.last = [], None
            err.print("[dim]new conversation[/]")
        elif self.last is None and name in ("/sources", "/trace"):
            err.print("[dim]no answer yet: ask a question first[/]")
        elif name == "/sources" and self.last is not None:
            show_citations(self.last)
        elif name == "/trace" and self.last is not None:
            from crag.cli.trace import print_trace

            print_trace(self.rag.traces.get(self.last.trace_id))
        else:
            err.print(f"[dim]unknown command {escape(name)}; {HELP}[/]")
        return True

    def _read(self) -> str | None:
        """The next line, or None at the end of input (Ctrl-D, the end of a pipe) or on Ctrl-C."""
        try:
            if self.interactive:
                return out.input("[bold cyan]you>[/] ")
            line = sys.stdin.readline()
            return line if line else None
        except (EOFError, KeyboardInterrupt):
            out.print()
            return None


def show_citations(answer: Answer) -> None:
    """``/sources``: each citation's title, where it is, and its text. On a terminal the text is
    cut to a few lines; in a pipe everything is whole, one line each, never wrapped or cut."""
    if not answer.citations:
        out.print("[dim]the last answer cites no source[/]")
        return
    for c in answer.citations:
        text = " ".join(c.text.split())
        if not out.is_terminal:
            stdout.write(f"[{c.id}] {c.title or ''}\t{c.url or c.source}\n\t{redact_text(text)}\n")
            continue
        out.print(f"  [bold]\\[{c.id}][/] {escape(c.title or '')} [dim]{escape(c.url or c.source)}[/]")
        out.print(f"      {escape(redact_text(text if len(text) <= 240 else text[:239] + '…'))}")
