"""Tables of the templated training companies, written the three ways an evaluator meets a table.

* ``pipe``: the caption, then the header and the rows as ``a | b`` lines (the dev set's table
  passages, ``nearmiss_render.table_text``);
* ``markdown``: the caption, a blank line, then a GFM pipe table (``| a | b |`` under a
  ``|---|---|`` line), as a ``.md`` file holds it;
* ``rows``: the way crag ingests a table (``crag.ingest.tables``): under the caption, one line per
  body row, its key (first cell) then each other cell as ``column: value``, rows separated by
  blank lines::

      星河 X2 | 2023年第一季度: 7,200 | 2023年第三季度: 8,640

A passage is the whole table or a piece of it (one or two neighbouring rows under the caption,
as a chunk of a long table holds them): :func:`piece` picks rows that hold a cell, for a
positive, or rows that do not, for a near miss from the same table.

>>> t = T(("Product", "Q1 2023", "Q3 2023"), (("Aria X2", "7,200", "8,640"), ("Aria M4", "910", "1,020")), "Units")
>>> render(t, "rows", [0])
'Units\\n\\nAria X2 | Q1 2023: 7,200 | Q3 2023: 8,640'
>>> holding(t, "Aria M4", "Q3 2023"), holding(t, "Aria M4", "Q2 2023")
([1], [])
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from nearmiss_render import T, table_text

FORMS = ("pipe", "markdown", "rows")
_WEIGHTS = (1, 1, 2)  # half of the tables the way crag ingests them, half as the raw text of a file
ROW_SEPARATOR = " | "  # crag.ingest.tables writes a row's cells with this between them


def pick_form(r: random.Random) -> str:
    return r.choices(FORMS, _WEIGHTS)[0]


def row_line(header: Sequence[str], row: Sequence[str]) -> str:
    """One body row as ingest writes it: the key, then ``column: value`` for each non-empty cell."""
    items = [f"{h}: {v}" if h and h != v else v for h, v in zip(header[1:], row[1:], strict=True) if v]
    return ROW_SEPARATOR.join([row[0], *items])


def render(t: T, form: str, rows: Sequence[int] | None = None) -> str:
    """``t`` (or its ``rows``, the header kept) as a passage in ``form``."""
    body = t.rows if rows is None else tuple(t.rows[i] for i in rows)
    head = [t.caption] if t.caption else []
    if form == "pipe":
        return table_text(t.header, body, t.caption)
    if form == "markdown":
        lines = ["| " + " | ".join(t.header) + " |", "|" + "|".join("---" for _ in t.header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n\n".join([*head, "\n".join(lines)])
    if form == "rows":
        return "\n\n".join([*head, *(row_line(t.header, r) for r in body)])
    raise ValueError(f"unknown table form {form!r}; one of {FORMS}")


def holding(t: T, key: str, column: str) -> list[int]:
    """Rows of ``t`` whose key is ``key`` and that have a ``column`` cell, or (a table turned the
    other way: one column per entity) whose key is ``column`` under a ``key`` column."""
    if column in t.header:
        return [i for i, r in enumerate(t.rows) if r[0] == key]
    if key in t.header:
        return [i for i, r in enumerate(t.rows) if r[0] == column]
    return []


def piece(r: random.Random, t: T, hits: Sequence[int], *, hold: bool) -> list[int]:
    """Rows for one passage of ``t``: with a row of ``hits`` (``hold``; half the time the whole
    table) or without any (one or two neighbouring rows; ``[]`` when every row is a hit)."""
    n = len(t.rows)
    if hold and (r.random() < 0.5 or n == 1):
        return list(range(n))
    for size in r.sample((1, 2), 2):
        starts = [s for s in range(n - size + 1) if bool(set(range(s, s + size)) & set(hits)) == hold]
        if starts:
            s = r.choice(starts)
            return list(range(s, s + size))
    if hold:
        raise ValueError(f"no row of {t.caption!r} holds the cell")
    return []
