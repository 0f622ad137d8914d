"""Rich views of traces for ``crag trace list`` and ``crag trace show``.

Traces come from disk and from older versions, so every key is optional and every
value is treated as untrusted: user text goes in ``Text`` objects (never markup, so
``[1]`` or ``[bold]`` in a document prints as written).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich import box
from rich.console import Group, JustifyMethod, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from crag.types import REJECTED_SHARED_NAME, REJECTED_UNVERIFIED

__all__ = ["ACTION_STYLES", "header_rows", "render_list", "render_trace"]

ACTION_STYLES = {"correct": "green", "ambiguous": "yellow", "incorrect": "red", "rag": "blue"}
SNIPPET = 160  # characters of passage text shown in tables
BAR_WIDTH = 40


def render_list(rows: Iterable[Mapping[str, Any]]) -> Table:
    """A table of trace summaries (as returned by ``TraceStore.list``)."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("time", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("action", no_wrap=True)
    table.add_column("conf", justify="right")
    table.add_column("latency", justify="right")
    # Wrapable for width planning (so rich shrinks this column first), but the cell
    # Text itself is single-line with an ellipsis: one trace per line.
    table.add_column("question")
    for row in rows:
        table.add_row(
            Text(str(row.get("id") or "")),
            Text(_time(row.get("created_at"))),
            _status(row.get("status")),
            _action(row.get("action"), answered=row.get("status") in ("answered", "degraded", None)),
            _num(row.get("confidence")),
            _ms(row.get("latency_ms")),
            Text(_clip(row.get("question"), 80), no_wrap=True, overflow="ellipsis"),
        )
    return table


def render_trace(data: Mapping[str, Any]) -> Group:
    """The whole decision path of one trace: header, evidence, answer, timings, problems."""
    parts: list[RenderableType] = [_header(data)]
    for builder in (_retrieved, _queries, _external, _strips, _cut, _context, _answer, _timings, _problems):
        part = builder(data)
        if part is not None:
            parts.append(part)
    return Group(*parts)


def _header(data: Mapping[str, Any]) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for label, value in header_rows(data):
        grid.add_row(label, value)
    title = Text.assemble(("trace ", "bold"), (str(data.get("id") or "?"), "cyan"))
    return Panel(grid, title=title, subtitle=_time(data.get("created_at")) or None, title_align="left")


def header_rows(data: Mapping[str, Any], *, clip: bool = True) -> list[tuple[str, Text]]:
    """The trace's header as (label, value) rows: question, decision, escalation, verification,
    mode. The rich view lays them out in a panel, the plain view (:mod:`crag.trace.plain`) one per line."""
    rows: list[tuple[str, Text]] = [("question", Text(str(data.get("question") or "")))]
    turn = data.get("conversation")
    if isinstance(turn, Mapping):  # a follow-up: the question above is the condensed one
        how = f"  ({turn.get('method')}, {turn.get('history')} earlier messages)"
        rows.append(("asked", Text.assemble(str(turn.get("asked") or ""), (how, "dim"))))
    from crag.trace.store import trace_status

    status = trace_status(dict(data))
    decision = Text.assemble(
        _status(status), "  ", _action(data.get("action"), answered=status in ("answered", "degraded")),
        "  confidence ", _num(data.get("confidence")),
    )  # fmt: skip
    thresholds = data.get("thresholds")
    if isinstance(thresholds, Mapping):
        decision.append(
            f"  (upper {_fmt(thresholds.get('upper'))}, lower {_fmt(thresholds.get('lower'))}"
            + (f", {thresholds['rule']}" if thresholds.get("rule") else "")
            + ")",
            style="dim",
        )
    rows.append(("decision", decision))
    escalated = data.get("escalated")
    if isinstance(escalated, Mapping):  # Correct at first; the reply found no answer, so it searched
        why = f"from {escalated.get('from')}: the reply was {escalated.get('rejected') or 'refused'}"
        if escalated.get("rejected") == REJECTED_UNVERIFIED:  # before generation (correction.verify_correct)
            why = (f"from {escalated.get('from')}: not verified (P(yes) {escalated.get('probability')} < "
                   f"{escalated.get('threshold')}): the model did not read the answer in the documents graded "
                   "relevant")  # fmt: skip
        if escalated.get("rejected") == REJECTED_SHARED_NAME:  # before generation (correction.search_shared_names)
            why = (f"from {escalated.get('from')}: {escalated.get('bearers')} people named {escalated.get('name')} "
                   "in the documents and the question does not say which: searched outside too")  # fmt: skip
        reply = _clip(escalated.get("reply"), SNIPPET if clip else None)
        rows.append(("escalated", Text.assemble(why, (f" ({reply})" if reply else "", "dim"))))
    check = data.get("verification")
    if isinstance(check, Mapping) and check.get("confirmed"):  # Correct, checked by the LLM (or not askable)
        p = check.get("probability")
        said = f"P(yes) {p} ≥ {check.get('threshold')}" if p is not None else str(check.get("note") or "")
        rows.append(("verified", Text(said)))
    for key in ("mode", "query_type", "evaluator", "evaluation_reason"):
        if data.get(key) not in (None, ""):
            rows.append((key.replace("_", " "), Text(str(data[key]))))
    return rows


def _retrieved(data: Mapping[str, Any]) -> Table | None:
    hits = _dicts(data.get("retrieved"))
    if not hits:
        return None
    grades = {str(g.get("id")): g for g in _dicts(data.get("grades"))}
    table = Table(title="retrieved", title_justify="left", box=box.SIMPLE_HEAD, expand=True)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"),
        ("source", "left"),
        ("score", "right"),
        ("dense", "right"),
        ("bm25", "right"),
        ("grade", "right"),
        ("text / reason", "left"),
    )
    for name, justify in columns:
        table.add_column(name, justify=justify, ratio=1 if name == "text / reason" else None)
    for i, hit in enumerate(hits, 1):
        grade = grades.get(str(hit.get("id")), {})
        body = Text(_clip(hit.get("text"), SNIPPET))
        if grade.get("reason"):
            body.append("\n" + str(grade["reason"]), style="italic dim")
        table.add_row(
            str(hit.get("rank") or i),
            Text(str(hit.get("title") or hit.get("source") or hit.get("id") or "")),
            _num(hit.get("score")),
            _num(hit.get("dense")),
            _num(hit.get("keyword")),
            _grade(grade.get("score")),
            body,
        )
    return table


def _queries(data: Mapping[str, Any]) -> RenderableType | None:
    queries = [q for q in (data.get("queries") or []) if q] if isinstance(data.get("queries"), list) else []
    if not queries:
        return None
    text = Text("web queries\n", style="bold")
    for q in queries:
        text.append("  • ")
        text.append(str(q) + "\n")
    text.rstrip()
    return text


def _external(data: Mapping[str, Any]) -> Table | None:
    results = _dicts(data.get("external"))
    if not results:
        return None
    table = Table(title="external results", title_justify="left", box=box.SIMPLE_HEAD, expand=True)
    table.add_column("provider", no_wrap=True)
    table.add_column("title / url")
    table.add_column("content", ratio=1)
    for r in results:
        head = Text(str(r.get("title") or ""))
        if r.get("url"):
            head.append("\n" + str(r["url"]), style="blue underline")
        table.add_row(Text(str(r.get("provider") or "")), head, Text(_clip(r.get("content"), SNIPPET)))
    return table


def _strips(data: Mapping[str, Any]) -> Table | None:
    strips = _dicts(data.get("strips"))
    if not strips:
        return None
    table = Table(title="knowledge strips", title_justify="left", box=box.SIMPLE_HEAD, expand=True)
    table.add_column("kept", justify="center")
    table.add_column("score", justify="right")
    table.add_column("origin")
    table.add_column("text", ratio=1)
    for s in strips:
        kept = s.get("kept")
        mark = Text("✓", style="green") if kept else Text("✗", style="red") if kept is False else Text("")
        source = f"{s.get('origin') or ''} {s.get('source') or ''}".strip()
        table.add_row(mark, _num(s.get("score")), Text(source), Text(_clip(s.get("text"), SNIPPET)))
    return table


def _cut(data: Mapping[str, Any]) -> Table | None:
    """What was cut from instruction-like strips before the model read them, and why."""
    rows = [(f, c) for f in _dicts(data.get("instruction_like_strips")) for c in _dicts(f.get("cut"))]
    if not rows:
        return None
    table = Table(title="cut as instructions", title_justify="left", box=box.SIMPLE_HEAD, expand=True)
    table.add_column("source")
    table.add_column("why")
    table.add_column("text", ratio=1)
    for f, c in rows:
        table.add_row(Text(str(f.get("source") or "")), Text(str(c.get("reason") or "")),
                      Text(_clip(c.get("text"), SNIPPET)))  # fmt: skip
    return table


def _context(data: Mapping[str, Any]) -> RenderableType | None:
    context = _dicts(data.get("context"))
    if not context:
        return None
    text = Text()
    for i, c in enumerate(context, 1):
        text.append(f"{i}. ", style="bold")
        text.append(f"[{c.get('origin') or '?'}] {c.get('source') or ''}\n", style="cyan")
        text.append("   " + _clip(c.get("text"), SNIPPET * 2) + "\n")
    text.rstrip()
    return Panel(text, title="context given to the generator", title_align="left", box=box.ROUNDED)


def _answer(data: Mapping[str, Any]) -> Panel | None:
    answer, citations = data.get("answer"), _dicts(data.get("citations"))
    if not answer and not citations:
        return None
    body = Text(str(answer or ""))
    if citations:
        body.append("\n\nsources\n", style="bold")
        for c in citations:
            body.append(f"[{c.get('id', '?')}] ", style="bold cyan")
            body.append(str(c.get("title") or c.get("source") or ""))
            if c.get("url"):
                body.append(f"  {c['url']}", style="blue")
            elif c.get("source") and c.get("title"):
                body.append(f"  ({c['source']})", style="dim")
            body.append("\n")
    body.rstrip()
    return Panel(body, title="answer", title_align="left", border_style="green")


def _timings(data: Mapping[str, Any]) -> Table | None:
    timings = data.get("timings")
    if not isinstance(timings, Mapping):
        return None
    stages = {str(k): v for k, v in timings.items() if _fnum(v) is not None}
    if not stages:
        return None
    total = _fnum(stages.get("total")) or max(_fnum(v) or 0.0 for v in stages.values())
    table = Table(title="timings", title_justify="left", box=None, show_header=False, padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(no_wrap=True)
    for name, value in stages.items():
        seconds = _fnum(value) or 0.0
        width = round(BAR_WIDTH * seconds / total) if total > 0 else 0
        style = "bold" if name == "total" else "magenta"
        table.add_row(name, f"{seconds * 1000:.0f} ms", Text("█" * min(width, BAR_WIDTH), style=style))
    return table


def _problems(data: Mapping[str, Any]) -> RenderableType | None:
    text = Text()
    for key, style in (("degradations", "red"), ("errors", "bold red")):
        items = data.get(key)
        for item in items if isinstance(items, list) else []:
            text.append(f"{key[:-1]}: ", style=style)
            text.append(str(item) + "\n", style=style)
    if data.get("cancelled"):  # stopped by its reader: said plainly, not as an error
        text.append(f"cancelled: {data['cancelled']}\n", style="dim")
    text.rstrip()
    return text if text.plain else None


# --- small formatters; all tolerate None and wrong types -------------------------------


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _fnum(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _fmt(value: Any) -> str:
    f = _fnum(value)
    return "–" if f is None else f"{f:.2f}"


def _num(value: Any) -> Text:
    return Text(_fmt(value), style="dim" if _fnum(value) is None else "")


def _grade(value: Any) -> Text:
    f = _fnum(value)
    if f is None:
        return Text("–", style="dim")
    return Text(f"{f:.2f}", style="green" if f >= 0.5 else "red")


def _ms(value: Any) -> Text:
    f = _fnum(value)
    return Text("–", style="dim") if f is None else Text(f"{f:.0f} ms")


def _action(value: Any, *, answered: bool = True) -> Text:
    """The action in its colour when an answer was given; dim otherwise (a failed request's
    action is only how far it got, never a green "correct")."""
    name = str(getattr(value, "value", value) or "?")
    return Text(name, style=f"bold {ACTION_STYLES.get(name, 'white')}" if answered else "dim")


STATUS_STYLES = {"answered": "green", "degraded": "yellow", "refused": "magenta", "abstained": "magenta",
                 "failed": "bold red", "cancelled": "dim", "retrieved": "cyan"}  # fmt: skip


def _status(value: Any) -> Text:
    name = str(value or "?")
    return Text(name, style=STATUS_STYLES.get(name, "white"))


def _time(value: Any) -> str:
    # ISO-8601 '2025-01-01T12:00:00.000+00:00' -> '2025-01-01 12:00:00'
    return str(value or "")[:19].replace("T", " ")


def _clip(value: Any, limit: int | None) -> str:
    """``value`` on one line, cut to ``limit`` characters with "…" (``None``: whole)."""
    text = " ".join(str(value or "").split())
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"
