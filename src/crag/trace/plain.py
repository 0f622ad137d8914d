"""Plain views of traces, for ``crag trace list`` and ``crag trace show`` in a pipe.

A terminal gets the rich views of :mod:`crag.trace.render`, fitted to its width. A pipe has
no width: the rich views would wrap at 80 columns and cut every long cell with "…", so
``crag trace list | cut -f7`` or ``crag trace show ID | grep`` read half the text. Here every
value is whole, on one line (its own whitespace folded to single spaces), and tabular parts
are tab-separated with a header row.

>>> tsv = render_list_tsv([{"id": "t1", "created_at": "2025-01-01T12:00:00", "status": "answered",
...                         "action": "correct", "confidence": 0.9, "latency_ms": 812.4,
...                         "question": "What is CRAG?"}])
>>> [line.split(chr(9)) for line in tsv.splitlines()]  # doctest: +NORMALIZE_WHITESPACE
[['id', 'time', 'status', 'action', 'confidence', 'latency_ms', 'question'],
 ['t1', '2025-01-01 12:00:00', 'answered', 'correct', '0.90', '812', 'What is CRAG?']]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from crag.trace.render import _dicts, _fmt, _fnum, _time, header_rows

__all__ = ["render_list_tsv", "render_trace_text"]

LIST_COLUMNS = ("id", "time", "status", "action", "confidence", "latency_ms", "question")


def cell(value: Any) -> str:
    """A value as one TSV cell: whole, its tabs and line breaks folded to single spaces."""
    return " ".join(str("" if value is None else value).split())


def _row(*values: Any) -> str:
    return "\t".join(cell(v) for v in values) + "\n"


def render_list_tsv(rows: Iterable[Mapping[str, Any]]) -> str:
    """Trace summaries (as ``TraceStore.list`` returns them) as TSV with a header row."""
    out = [_row(*LIST_COLUMNS)]
    for r in rows:
        latency = _fnum(r.get("latency_ms"))
        out.append(
            _row(
                r.get("id"),
                _time(r.get("created_at")),
                r.get("status") or "",
                r.get("action") or "",
                _fmt(r.get("confidence")),
                "" if latency is None else f"{latency:.0f}",
                r.get("question"),
            )
        )
    return "".join(out)


def render_trace_text(data: Mapping[str, Any]) -> str:
    """The decision path of one trace as plain text: a header of ``label<TAB>value`` lines,
    then one section per part (a title line, then TSV or text), every value whole."""
    head = [_row("trace", data.get("id") or "?", _time(data.get("created_at")))]
    head += [_row(label, value.plain) for label, value in header_rows(data, clip=False)]
    sections = ["".join(head)]
    for build in (_retrieved, _queries, _external, _strips, _cut, _context, _answer, _timings, _problems):
        text = build(data)
        if text:
            sections.append(text)
    return "\n".join(sections)


def _retrieved(data: Mapping[str, Any]) -> str:
    hits = _dicts(data.get("retrieved"))
    if not hits:
        return ""
    grades = {str(g.get("id")): g for g in _dicts(data.get("grades"))}
    out = ["retrieved\n", _row("rank", "source", "score", "dense", "bm25", "grade", "text", "reason")]
    for i, hit in enumerate(hits, 1):
        grade = grades.get(str(hit.get("id")), {})
        out.append(
            _row(
                hit.get("rank") or i,
                hit.get("title") or hit.get("source") or hit.get("id") or "",
                _fmt(hit.get("score")),
                _fmt(hit.get("dense")),
                _fmt(hit.get("keyword")),
                _fmt(grade.get("score")),
                hit.get("text"),
                grade.get("reason"),
            )
        )
    return "".join(out)


def _queries(data: Mapping[str, Any]) -> str:
    queries = [q for q in data.get("queries") or [] if q] if isinstance(data.get("queries"), list) else []
    return "web queries\n" + "".join(_row(q) for q in queries) if queries else ""


def _external(data: Mapping[str, Any]) -> str:
    results = _dicts(data.get("external"))
    if not results:
        return ""
    rows = [_row(r.get("provider"), r.get("title"), r.get("url"), r.get("content")) for r in results]
    return "external results\n" + _row("provider", "title", "url", "content") + "".join(rows)


def _strips(data: Mapping[str, Any]) -> str:
    strips = _dicts(data.get("strips"))
    if not strips:
        return ""
    rows = [
        _row(_kept(s.get("kept")), _fmt(s.get("score")), s.get("origin"), s.get("source"), s.get("text"))
        for s in strips
    ]
    return "knowledge strips\n" + _row("kept", "score", "origin", "source", "text") + "".join(rows)


def _cut(data: Mapping[str, Any]) -> str:
    rows = [
        _row(f.get("source"), c.get("reason"), c.get("text"))
        for f in _dicts(data.get("instruction_like_strips"))
        for c in _dicts(f.get("cut"))
    ]
    return "cut as instructions\n" + _row("source", "why", "text") + "".join(rows) if rows else ""


def _kept(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else ""


def _context(data: Mapping[str, Any]) -> str:
    context = _dicts(data.get("context"))
    if not context:
        return ""
    rows = [_row(i, c.get("origin") or "?", c.get("source"), c.get("text")) for i, c in enumerate(context, 1)]
    return "context given to the generator\n" + _row("#", "origin", "source", "text") + "".join(rows)


def _answer(data: Mapping[str, Any]) -> str:
    answer, citations = data.get("answer"), _dicts(data.get("citations"))
    if not answer and not citations:
        return ""
    out = ["answer\n", str(answer or "").rstrip() + "\n"]
    if citations:
        out.append("sources\n")
        out += [_row(f"[{c.get('id', '?')}]", c.get("title") or c.get("source"), c.get("url") or c.get("source"))
                for c in citations]  # fmt: skip
    return "".join(out)


def _timings(data: Mapping[str, Any]) -> str:
    timings = data.get("timings")
    if not isinstance(timings, Mapping):
        return ""
    rows = [_row(k, f"{(_fnum(v) or 0.0) * 1000:.0f} ms") for k, v in timings.items() if _fnum(v) is not None]
    return "timings\n" + "".join(rows) if rows else ""


def _problems(data: Mapping[str, Any]) -> str:
    out: list[str] = []
    for key in ("degradations", "errors"):
        items = data.get(key)
        out += [f"{key[:-1]}: {cell(item)}\n" for item in (items if isinstance(items, list) else [])]
    if data.get("cancelled"):
        out.append(f"cancelled: {cell(data['cancelled'])}\n")
    return "".join(out)
