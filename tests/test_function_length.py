"""No function in ``src/crag`` is over 50 lines, measured with ``ast`` (``def`` line to last line).

A function that grows past the limit is reshaped into named steps (a helper per phase, a small
dataclass for the state passed around, a table instead of an if-chain), not squeezed under it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[1] / "src" / "crag"
MAX_LINES = 50


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """``(name, first line, length)`` of every function and method in ``source``, nested ones too."""
    return [
        (node.name, node.lineno, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_the_measure_counts_from_def_to_last_line() -> None:
    source = (
        "@decorator\n"
        "def f(\n"
        "    a,\n"
        "):\n"
        "    '''doc'''\n"
        "    return a\n"
        "\n"
        "\n"
        "class C:\n"
        "    async def g(self):\n"
        "        pass\n"
    )
    assert sorted(function_lengths(source)) == [("f", 2, 5), ("g", 10, 2)]


def test_no_function_in_src_is_over_50_lines() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 50  # the source tree was found
    long = [
        f"{path.relative_to(SRC.parent)}:{line} {name} ({length} lines)"
        for path in files
        for name, line, length in function_lengths(path.read_text(encoding="utf-8"))
        if length > MAX_LINES
    ]
    assert not long, f"functions over {MAX_LINES} lines; split them into named steps:\n" + "\n".join(long)
