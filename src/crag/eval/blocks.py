"""The report as a list of blocks (headings, paragraphs, tables, figures), rendered twice.

``report.md`` and the self-contained ``report.html`` come from the same blocks, so they
say the same thing; the HTML embeds its figures as base64 PNG so it can be mailed as one
file, the Markdown links the PNGs written beside it.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Block", "Report", "fmt"]


@dataclass
class Block:
    """One piece of the report: kind is h1/h2/h3/p/table/img."""

    kind: str
    text: str = ""
    headers: Sequence[str] = ()
    rows: Sequence[Sequence[str]] = ()
    png: bytes = b""
    name: str = ""


@dataclass
class Report:
    """The rendered report, before it is written: blocks plus a JSON summary.

    ### Usage example
    >>> r = Report([Block("h1", "Eval"), Block("table", headers=["a"], rows=[["1"]])], {})
    >>> print(r.markdown().splitlines()[2])
    | a |
    """

    blocks: list[Block]
    summary: dict[str, Any]

    def markdown(self) -> str:
        out: list[str] = []
        for b in self.blocks:
            if b.kind in ("h1", "h2", "h3"):
                out += ["#" * int(b.kind[1]) + " " + b.text, ""]
            elif b.kind == "p":
                out += [b.text, ""]
            elif b.kind == "table":
                out.append("| " + " | ".join(_md_cell(h) for h in b.headers) + " |")
                out.append("|" + "|".join("---" for _ in b.headers) + "|")
                out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
                out.append("")
            elif b.kind == "img":
                out += [f"![{b.text}](plots/{b.name})", ""]
        return "\n".join(out)

    def html(self) -> str:
        body: list[str] = []
        for b in self.blocks:
            if b.kind in ("h1", "h2", "h3"):
                body.append(f"<{b.kind}>{html.escape(b.text)}</{b.kind}>")
            elif b.kind == "p":
                cls = ' class="warn"' if b.text.startswith("**PARTIAL") else ""
                body.append(f"<p{cls}>{_inline(b.text)}</p>")
            elif b.kind == "table":
                head = "".join(f"<th>{html.escape(h)}</th>" for h in b.headers)
                rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in b.rows)
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif b.kind == "img":
                data = base64.b64encode(b.png).decode("ascii")
                body.append(
                    f'<figure><img alt="{html.escape(b.text)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(b.text)}</figcaption></figure>"
                )
        return (
            "<!doctype html><html><head><meta charset='utf-8'><title>crag eval report</title><style>"
            "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
            "table{border-collapse:collapse;margin:1em 0;font-size:14px}"
            "th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}"
            "th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}"
            "img{max-width:100%}.warn{background:#fff3cd;padding:.5em;border:1px solid #e0c000}"
            "</style></head><body>" + "\n".join(body) + "</body></html>"
        )


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _inline(text: str) -> str:
    # Only **bold** and `code` are used in paragraphs.
    t = html.escape(text)
    t = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", t)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", t)


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"
