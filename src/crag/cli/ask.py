"""``crag ask``: answer one question, as a person reads it or as one JSON object.

For a person the answer streams: the decision line as soon as it is known, then the
answer as the model writes it (a rich ``Live`` view on a terminal, plain incremental
output otherwise), then the sources. ``--json`` prints one object at the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
    read_stdin,
    stdout,
    warm_search,
)
from crag.errors import InputError
from crag.ingest.load import is_utf8_path
from crag.metadata import parse_pairs
from crag.redact import redact, redact_text
from crag.types import REJECTED_UNVERIFIED

if TYPE_CHECKING:
    from crag.engine import CRAG
    from crag.pipeline.live import AnswerStream
    from crag.request import Request
    from crag.types import Answer

__all__ = ["ask", "print_answer"]

ACTION_STYLE = {"correct": "green", "ambiguous": "yellow", "incorrect": "red", "rag": "blue"}


@friendly(interrupted="the question was stopped")
def ask(
    question: Annotated[str, typer.Argument(help="The question, in Chinese or English; - reads it from stdin.")],
    kb: KbOpt = None,
    config: ConfigOpt = None,
    mode: Annotated[str, typer.Option(help="crag, or rag for the plain baseline.")] = "crag",
    search: Annotated[str | None, typer.Option(help="External source: corpus, tavily, none.")] = None,
    search_corpus: Annotated[Path | None, typer.Option(help="Folder or .jsonl for --search corpus.")] = None,
    evaluator: Annotated[str | None, typer.Option(help="Evaluator: heuristic, trained, llm, ensemble.")] = None,
    search_record: Annotated[
        Path | None, typer.Option(help="Save every search response to this cassette file.")
    ] = None,
    search_replay: Annotated[Path | None, typer.Option(help="Answer searches from this cassette file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Answer anew even when the answer cache holds a valid answer.")
    ] = False,
    filter_: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            help="KEY=VALUE: only documents whose metadata match (repeatable: keys AND, one key repeated: any).",
        ),
    ] = None,
) -> None:
    """Answer a question from the knowledge base, correcting retrieval when needed."""
    question = _question_text(question)
    from crag.request import Request  # the pipeline's checks load with the engine, not with the CLI

    filters = parse_pairs(filter_ or [], option="--filter")
    req = Request.of(
        question,
        mode=mode,
        search=search,
        search_corpus=search_corpus,
        search_record=search_record,
        search_replay=search_replay,
        filters=filters,
        no_cache=no_cache,
        via="cli",
    )
    rag = _ready_engine(config, kb, evaluator, req)
    if as_json:
        answer = rag.ask(req)
        stdout.write(json.dumps(redact(answer.to_dict()), ensure_ascii=False) + "\n")
        return
    with answer_stream(rag, req) as events:  # leaving early (Ctrl-C) stops the model
        answer = show_stream(events)
    print_sources(answer)


def _question_text(question: str) -> str:
    """The question as given, or read from stdin for ``-``; refused when it is not UTF-8 text."""
    if question == "-":  # echo "What is CRAG?" | crag ask -
        question = read_stdin("the question")
    if not is_utf8_path(question):  # argv bytes that are not UTF-8 arrive as lone surrogates, as in paths
        raise InputError("the question is not valid UTF-8 text; check the terminal's encoding (LANG, LC_ALL)")
    return question


def _ready_engine(config: Path | None, kb: Path | None, evaluator: str | None, req: Request) -> CRAG:
    """The engine for ``req``, its model assembled and its search warmed before the question runs."""
    extra: dict[str, Any] = {}
    if evaluator:
        extra["evaluator"] = {"backend": evaluator}
    rag = engine(config, kb, **extra)
    assemble_model(rag)  # the first run's ~40 s, with a progress bar on a terminal
    if req.mode == "crag" and not (req.search_record or req.search_replay):
        warm_search(rag, req.search, req.search_corpus)
    return rag


def show_stream(events: AnswerStream) -> Answer:
    """Print the decision line when it is known, then the answer as it streams; return the Answer.

    The answer arrives a verified sentence at a time (the pipeline's sentence gate) and is
    shown through the one reducer every client uses (:class:`~crag.pipeline.reducer.AnswerText`):
    what is printed is the saved answer, to its last character.
    """
    from crag.pipeline.events import (  # loaded with the engine, not with the CLI
        AnswerEvent,
        CacheEvent,
        DecideEvent,
        EscalateEvent,
        RewriteEvent,
        render,
    )

    view = _AnswerView()
    status = err.status("thinking…")
    status.start()
    answer: Answer | None = None
    try:
        for event in events:
            if isinstance(event, (DecideEvent, CacheEvent)):
                status.stop()
                out.print(_decision_line(event.data["action"], event.data["confidence"], events.trace_id))
                if isinstance(event, CacheEvent):  # answered before, nothing it used has changed since
                    out.print(f"[dim]from the answer cache (first answered in trace {event.value.from_trace})[/]")
            elif isinstance(event, EscalateEvent) and (check := event.value.unverified) is not None:
                p, t = check.probability, check.threshold
                out.print(f"[dim]{REJECTED_UNVERIFIED}: the model did not read the answer in the documents graded "
                          f"relevant (P {p:.2f} < {t:.2f}); searching as Ambiguous[/]")  # fmt: skip
            elif isinstance(event, RewriteEvent) and event.value.queries:
                out.print("[dim]searching:[/] " + "; ".join(escape(q) for q in event.value.queries))
            if piece := render(event, view.text).text:
                status.stop()
                view.show(piece)
            if isinstance(event, AnswerEvent):
                answer = event.value
    finally:
        status.stop()
        view.close()
    assert answer is not None  # the stream ends with its answer or raises
    view.finish()
    return answer


class _AnswerView:
    """The answer as it streams: a rich Live view on a terminal, plain writes otherwise."""

    def __init__(self) -> None:
        from crag.pipeline.reducer import AnswerText  # the pipeline loads with the engine, not with the CLI

        self.text = AnswerText()
        self.live: Any = None
        if out.is_terminal:
            from rich.live import Live
            from rich.text import Text

            self._text = Text
            # No stdout redirection: the console writes through sys.stdout (RedactingStream).
            self.live = Live(Text(""), console=out, refresh_per_second=12, redirect_stdout=False, redirect_stderr=False)
        self.started = False

    def show(self, piece: str) -> None:
        if not self.started:
            self.started = True
            out.print()
            if self.live is not None:
                self.live.start()
        if self.live is not None:
            self.live.update(self._text(self.text.shown))
        else:
            stdout.write(piece)
            stdout.flush()

    def finish(self) -> None:
        """The last text is on screen (the live view's final frame), then a newline."""
        if self.live is not None and self.live.is_started:
            self.live.update(self._text(self.text.shown), refresh=True)
        self.close()
        if self.live is None and self.started:
            stdout.write("\n")
            stdout.flush()

    def close(self) -> None:
        if self.live is not None and self.live.is_started:
            self.live.stop()


def _decision_line(action: str, confidence: float | None, trace_id: str) -> str:
    style = ACTION_STYLE.get(action, "white")
    conf = "—" if confidence is None else f"{confidence:.2f}"
    return f"[bold {style}]{action.upper()}[/]  confidence {conf}  trace {trace_id}"


def print_answer(answer: Answer) -> None:
    """Answer, action, confidence, citations and timings as a person reads them."""
    out.print(_decision_line(answer.action.value, answer.confidence, answer.trace_id))
    if answer.queries:
        out.print("[dim]searched:[/] " + "; ".join(escape(q) for q in answer.queries))
    out.print()
    out.print(escape(redact_text(answer.answer)))  # whole, before rich wraps it into lines
    print_sources(answer)


def print_sources(answer: Answer) -> None:
    """Citations, degradations and timings, after the answer."""
    if answer.citations:
        out.print()
        for c in answer.citations:
            where = c.url or c.source
            out.print(f"  [bold][{c.id}][/] {escape(c.title or '')} [dim]{escape(where)}[/]")
            if c.quote:  # the source's own sentence that holds the claim: the reader can check it
                quote = " ".join(c.quote.split())
                if out.is_terminal and len(quote) > 160:  # a pipe gets it whole
                    quote = quote[:159] + "…"
                out.print(f"      [dim italic]“{escape(redact_text(quote))}”[/]")
    for d in answer.degradations:
        err.print(f"[yellow]degraded:[/] {escape(redact_text(d))}")
    t = answer.timings
    stages = "  ".join(f"{k} {v:.2f}s" for k, v in t.items() if k != "total")
    out.print(f"\n[dim]{stages}  total {t.get('total', 0):.2f}s[/]")
