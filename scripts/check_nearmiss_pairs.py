"""Check the near-miss training pairs (``data/nearmiss/pairs_train.jsonl``): labels, languages, split.

A pair's ``answer`` is the asked value as its passage writes it, under ``field`` (a column, an
attribute label, a job or a role; "" when the answer is a whole sentence of a handbook). A passage
*states* the answer when, in a table (any ``table_form``, parsed back into cells), the cell at the
entity's row and the field's column (or the other way round, a table with one column per entity)
holds it; in prose, when it names the entity and holds the field and the answer. Then:

* every positive states its answer, every near miss does not;
* a question's language is its ``lang`` (Chinese characters or none), a passage's its ``passage_lang``;
* no company or entity of ``pairs_test.jsonl`` is in the training pairs, nor its name in their text.

Prints the counts (per language, cross-language share, table forms, kinds of near miss) and every
problem; exits 1 if there is one::

    python scripts/check_nearmiss_pairs.py [--set data/nearmiss]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

_CJK = re.compile(r"[\u3400-\u9fff]")


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def table_cells(text: str, form: str) -> set[tuple[str, str, str]]:
    """The ``(row key, column, value)`` cells of a table passage in ``form`` (pipe, markdown, rows)."""
    cells: set[tuple[str, str, str]] = set()
    if form == "rows":
        for line in text.split("\n\n"):
            key, *items = line.strip().split(" | ")
            for item in items:
                column, sep, value = item.partition(": ")
                if sep:
                    cells.add((key, column, value))
        return cells
    lines = [ln.strip() for ln in text.split("\n") if " | " in ln]
    grid = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    grid = [row for row in grid if not all(set(c) <= set("-: ") for c in row)]  # the |---| line
    for row in grid[1:]:
        cells |= {(row[0], column, value) for column, value in zip(grid[0][1:], row[1:], strict=True)}
    return cells


def states(p: dict[str, Any]) -> bool:
    """The passage states ``answer`` for the pair's entity (see the module docstring)."""
    name = p["entity"].split(" (")[0]  # "David Sato (finance manager)": a namesake's job is the field
    answer, field = p["answer"], p["field"]
    if p["table_form"]:
        cells = table_cells(p["passage"], p["table_form"])
        return (name, field, answer) in cells or (field, name, answer) in cells
    text = p["passage"].lower()
    return all(x.lower() in text for x in (name, field, answer) if x)


def problems(train: list[dict[str, Any]], test: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for n, p in enumerate(train, 1):
        where = f"pairs_train line {n} ({p['lang']}, {p['miss'] or 'positive'}): {p['query']}"
        said = states(p)
        if said != bool(p["label"]):
            out.append(f"{where}: label {p['label']} but the passage {'states' if said else 'lacks'} {p['answer']!r}")
        if bool(_CJK.search(p["query"])) != (p["lang"] == "zh"):
            out.append(f"{where}: the question is not in {p['lang']}")
        if bool(_CJK.search(p["passage"])) != (p["passage_lang"] == "zh"):
            out.append(f"{where}: the passage is not in {p['passage_lang']}")
    for key in ("title", "entity"):
        shared = {p[key] for p in train} & {p[key] for p in test}
        if shared:
            out.append(f"a {key} of the test pairs is in the training pairs: {sorted(shared)}")
    text = "\n".join(p["query"] + "\n" + p["passage"] for p in train)
    out += [f"the test company {t!r} is named in the training pairs" for t in sorted({p["title"] for p in test})
            if t.split()[0] in text]  # fmt: skip
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    tables = [p for p in rows if p["table_form"]]
    return {
        "pairs (lang/label)": Counter(f"{p['lang']}/{p['label']}" for p in rows),
        "question/passage language": Counter(f"{p['lang']}/{p['passage_lang']}" for p in rows),
        "table passages (form/label)": Counter(f"{p['table_form']}/{p['label']}" for p in tables),
        "near misses (miss)": Counter(p["miss"] for p in rows if not p["label"]),
        "near misses holding the answer string elsewhere (miss)": Counter(
            p["miss"] for p in rows if not p["label"] and p["answer"] in p["passage"]
        ),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "nearmiss")
    args = ap.parse_args()
    train, test = read(args.set / "pairs_train.jsonl"), read(args.set / "pairs_test.jsonl")
    for name, counts in summary(train).items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    cross = sum(p["lang"] != p["passage_lang"] for p in train)
    tables = sum(bool(p["table_form"]) for p in train)
    rows = sum(p["table_form"] == "rows" for p in train)
    print(f"{len(train)} pairs; cross-language {cross / len(train):.1%}; table passages {tables / len(train):.1%}, "
          f"of which row form {rows / max(1, tables):.1%}")  # fmt: skip
    found = problems(train, test)
    for line in found:
        print(line)
    print(f"{len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
