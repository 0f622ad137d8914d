"""``crag ask``: answer one question, as a person reads it or as one JSON object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from crag.cli._common import ConfigOpt, KbOpt, engine, err, friendly, out, stdout
from crag.errors import InputError
from crag.ingest.load import is_utf8_path
from crag.redact import redact, redact_text

if TYPE_CHECKING:
    from crag.types import Answer

__all__ = ["ask", "print_answer"]

ACTION_STYLE = {"correct": "green", "ambiguous": "yellow", "incorrect": "red", "rag": "blue"}


@friendly
def ask(
    question: Annotated[str, typer.Argument(help="The question, in Chinese or English.")],
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
) -> None:
    """Answer a question from the knowledge base, correcting retrieval when needed."""
    if not is_utf8_path(question):  # argv bytes that are not UTF-8 arrive as lone surrogates, as in paths
        raise InputError("the question is not valid UTF-8 text; check the terminal's encoding (LANG, LC_ALL)")
    extra: dict[str, Any] = {}
    if evaluator:
        extra["evaluator"] = {"backend": evaluator}
    rag = engine(config, kb, **extra)
    kw: dict[str, Any] = {
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


def print_answer(answer: Answer) -> None:
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
