"""Event names are checked, listed once, and never matched as raw strings outside the event module.

- ``static/events.js`` is :func:`crag.event_names.js_table` (regenerate with
  ``python scripts/gen_events_js.py``);
- no code in ``src/`` (Python, the UI's scripts) compares with a raw event name or re-types an
  escalation reason (``crag.types.REJECTED_*``), outside the event modules and the table;
- mypy --strict rejects an event name that is not one.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from crag import event_names
from crag.event_names import ALL_NAMES, EVENT_NAMES, WIRE_NAMES, js_table
from crag.pipeline.events import STEP_EVENTS, event_for
from crag.types import REJECTED_SHARED_NAME, REJECTED_UNVERIFIED

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[1] / "src"
CRAG = SRC / "crag"
STATIC = CRAG / "server" / "static"
# Where the names and the reasons are spelled out: the event modules and the generated table.
EVENT_MODULES = {
    CRAG / "event_names.py",
    CRAG / "types.py",
    CRAG / "pipeline" / "events.py",
    CRAG / "pipeline" / "event_shapes.py",
    STATIC / "events.js",
}
REASONS = (REJECTED_UNVERIFIED, REJECTED_SHARED_NAME)
_NAMES = "|".join(re.escape(n) for n in ALL_NAMES)
_REASONS = "|".join(re.escape(r) for r in REASONS)
# JS: a name/event/phase variable compared with a quoted event name (either side), a switch
# case on one, or a quoted escalation reason anywhere.
_JS_RAW = [
    re.compile(rf"\b\w*(?:name|event|phase)\w*\s*[!=]==?\s*[\"'`](?:{_NAMES})[\"'`]", re.I),
    re.compile(rf"[\"'`](?:{_NAMES})[\"'`]\s*[!=]==?\s*\w*(?:name|event|phase)\w*\b", re.I),
    re.compile(rf"\bcase\s+[\"'`](?:{_NAMES})[\"'`]\s*:"),
    re.compile(rf"[\"'`](?:{_REASONS})[\"'`]"),
]


def _is_name_like(node: ast.expr) -> bool:
    """An operand that holds an event's (or a span's) name: ``name``, ``event``, ``e.name``, ``kind``…"""
    text = ast.unparse(node).lower()
    return any(word in text for word in ("name", "event", "phase"))


def _raw_constants(node: ast.expr) -> list[str]:
    """The event names a comparison operand spells out: a string, or a tuple/list/set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in ALL_NAMES else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in node.elts for n in _raw_constants(e)]
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("frozenset", "set") and node.args:
        return _raw_constants(node.args[0])
    return []


def python_offences(source: str) -> list[int]:
    """Lines of ``source`` that compare an event's name with a raw name, or spell out a reason."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, operand in enumerate(operands):
                others = operands[:i] + operands[i + 1 :]
                if _raw_constants(operand) and any(_is_name_like(o) for o in others):
                    lines.append(node.lineno)
        elif isinstance(node, ast.match_case) and _raw_constants(getattr(node.pattern, "value", ast.Pass())):
            lines.append(node.pattern.lineno)
        elif isinstance(node, ast.Constant) and node.value in REASONS:
            lines.append(node.lineno)
    return sorted(set(lines))


def js_offences(source: str) -> list[int]:
    return [n for n, line in enumerate(source.splitlines(), 1) if any(p.search(line) for p in _JS_RAW)]


def test_the_checks_catch_what_they_look_for() -> None:
    assert python_offences('if event.name == "token":\n    pass\n') == [1]
    assert python_offences('x = "answer" != e.name\n') == [1]
    assert python_offences('if name in ("decide", "cache"):\n    pass\n') == [1]
    assert python_offences('if name == "generate":\n    pass\n') == [1]
    assert python_offences('match name:\n    case "token":\n        pass\n') == [2]
    assert python_offences('if e.data.get("rejected") == "not verified":\n    pass\n') == [1]
    assert python_offences('if kind == "query":\n    pass\nif isinstance(e, TokenEvent):\n    pass\n') == []
    assert js_offences('if (name === "token") {}\n} else if (name !== "started") {') == [1, 2]
    assert js_offences('  case "query": return 1;\nif (e.rejected === "shared name") {}') == [1, 2]
    assert js_offences('if (name === EVENT.TOKEN) {}\nif (choice.finish_reason === "error") {}') == []


def test_no_raw_event_name_is_compared_outside_the_event_modules() -> None:
    found = []
    for path in sorted(CRAG.rglob("*.py")):
        if path not in EVENT_MODULES:
            found += [f"{path.relative_to(SRC)}:{n}" for n in python_offences(path.read_text("utf-8"))]
    for path in sorted(STATIC.glob("*.js")):
        if path not in EVENT_MODULES:
            found += [f"{path.relative_to(SRC)}:{n}" for n in js_offences(path.read_text("utf-8"))]
    assert found == [], "compare with crag.event_names / the event classes (Python) or EVENT.* / REJECTED.* (JS)"


def test_the_ui_table_is_generated_from_the_names() -> None:
    table = (STATIC / "events.js").read_text("utf-8")
    assert table == js_table(), "run: python scripts/gen_events_js.py"
    listed = dict(re.findall(r'"([A-Z_]+)": "([^"]+)"', table))
    assert {v for k, v in listed.items() if k not in ("UNVERIFIED", "SHARED_NAME")} == set(ALL_NAMES)
    for page in ("index.html", "trace.html"):  # loaded before the scripts that read it
        html = (STATIC / page).read_text("utf-8")
        assert html.index("/ui/static/events.js") < html.index("/ui/static/common.js")


def test_every_name_has_its_constant_and_its_class() -> None:
    assert set(EVENT_NAMES).isdisjoint(WIRE_NAMES)
    assert {n: getattr(event_names, n.upper()) for n in ALL_NAMES} == {n: n for n in ALL_NAMES}
    assert set(STEP_EVENTS) == set(EVENT_NAMES)
    assert all(cls.name == name and event_for(name, None).name == name for name, cls in STEP_EVENTS.items())


@pytest.mark.slow
def test_mypy_rejects_an_event_name_that_is_not_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mypy import api

    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from crag.pipeline.steps import Steps\n"
        "from crag.trace.spans import Tracer\n"
        "\n"
        "steps = Steps(Tracer())\n"
        'steps.emit("query", 1)\n'
        'steps.run("retrieve", lambda: 1)\n'
        'steps.emit("qurey", 1)\n'
        'steps.run("retreive", lambda: 1)\n',
        "utf-8",
    )
    monkeypatch.setenv("MYPYPATH", str(SRC))  # this checkout's crag, not an installed one
    monkeypatch.chdir(tmp_path)
    out, err, status = api.run(
        [str(snippet), "--strict", "--follow-imports=silent", "--config-file", os.devnull,
         "--cache-dir", str(tmp_path / ".mypy_cache"), "--python-version", "3.10", "--no-error-summary"]
    )  # fmt: skip
    assert status == 1, out + err
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["7", "8"], out  # the two misspelt names, nothing else
    assert all('"Literal[' in line and "arg-type" in line for line in errors), out
