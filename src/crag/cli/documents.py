"""``crag documents``: the documents of a knowledge base, with their metadata, chunks and versions.

A table on a terminal; in a pipe one tab-separated line per document under a header, whole
(no column is cut to fit a width); ``--json`` one JSON object per line. The same records as
``GET /v1/documents`` (:mod:`crag.store.documents`), plus the file's path on this machine.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from crag.cli._common import ConfigOpt, KbOpt, engine, err, friendly, out, stdout

if TYPE_CHECKING:
    from crag.store.documents import DocumentRecord

__all__ = ["documents"]

COLUMNS = ("id", "name", "title", "version", "chunks", "ingested_at", "metadata", "path")


@friendly
def documents(
    kb: KbOpt = None,
    config: ConfigOpt = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many (by name); default: all.")] = None,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many first.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per line.")] = False,
) -> None:
    """List the documents of the knowledge base: id, name, version, chunks, metadata.

    Remove one with `crag remove ID` (or its path).
    """
    rag = engine(config, kb)
    base = rag.knowledge_base()  # a missing knowledge base is one line, not an empty list
    docs, total = base.documents(offset=offset, limit=limit if limit is not None else -1)
    rows = [_row(d) for d in docs]
    if as_json:
        stdout.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    elif out.is_terminal:
        out.print(_table(rows, total, offset))
    else:
        stdout.write("\t".join(COLUMNS) + "\n")
        stdout.write("".join("\t".join(_cell(r[c]) for c in COLUMNS) + "\n" for r in rows))
    if not rows and not as_json:
        err.print(f"no documents{' from offset ' + str(offset) if offset else ''}; add some with `crag ingest PATH`")


def _row(d: DocumentRecord) -> dict[str, Any]:
    return {**d.public(), "path": d.file}


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        value = " ".join(f"{k}={v}" for k, v in value.items())
    # One line per document and one cell per tab: a tab or newline inside a value becomes a space.
    return " ".join(str(value).split("\t")).replace("\r", " ").replace("\n", " ")


def _table(rows: list[dict[str, Any]], total: int, offset: int) -> Table:
    shown = f"{offset + 1}–{offset + len(rows)} of {total}" if rows else f"0 of {total}"
    table = Table(title=f"Documents ({shown})")
    for name in ("id", "name", "title", "ver", "chunks", "ingested", "metadata"):
        numeric, whole = name in ("ver", "chunks"), name in ("id", "ver", "chunks")
        wide = {"name": 10, "metadata": 8, "ingested": 10}.get(name)  # the title gives way first
        table.add_column(name, justify="right" if numeric else "left", overflow="fold", no_wrap=whole, min_width=wide)
    for r in rows:
        table.add_row(
            escape(r["id"]),
            escape(r["name"]),
            escape(r["title"]),
            str(r["version"]),
            str(r["chunks"]),
            escape(r["ingested_at"][:16].replace("T", " ")),  # to the minute, UTC
            escape(_cell(r["metadata"])),
        )
    return table
