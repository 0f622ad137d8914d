"""The documents name what exists: modules, source files, links and anchors, closed code fences.

A reader who follows ``crag.pipeline.events`` or ``src/crag/generate/gate.py`` from a page must
find it; a link into ``docs/`` or ``benchmarks/README.md#…`` must land on a file and a heading;
and a code fence left open turns the rest of a page into code.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PAGES = sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")])
LINKED = [*PAGES, ROOT / "CHANGELOG.md", ROOT / "data" / "README.md"]
# Dotted names that are not modules: the entry-point group plugins register under.
NOT_MODULES = {"crag.plugins"}
FILE_SUFFIXES = {"toml", "sqlite", "db", "md", "py", "json", "jsonl", "txt", "npz", "log"}

FENCE = re.compile(r"^\s*(```+|~~~+)(.*)$")
DOTTED = re.compile(r"(?<![\w/.-])crag(?:\.[A-Za-z_]\w*)+")
PY_PATH = re.compile(r"`([\w./-]+\.py)`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def fence_errors(text: str) -> list[str]:
    """Unclosed fences, and a closing fence with text after it (which does not close)."""
    errors, opened = [], 0
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if not m:
            continue
        if not opened:
            opened = n
        elif m.group(2).strip():
            errors.append(f"line {n}: a fence with text after it inside the block opened on line {opened}")
        else:
            opened = 0
    if opened:
        errors.append(f"line {opened}: code fence never closed")
    return errors


def prose(text: str) -> str:
    """The text outside code fences (links and headings there are not links or headings)."""
    keep, inside = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            keep.append(line)
    return "\n".join(keep)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: plain text, lower case, punctuation gone, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(page.read_text("utf-8")).splitlines():
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def module_path(parts: list[str]) -> Path | None:
    rel_path = SRC.joinpath(*parts)
    for candidate in (rel_path.with_suffix(".py"), rel_path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def top_level_names(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def dotted_exists(name: str) -> bool:
    """``crag.a.b`` is a module, or a module followed by a name that module defines."""
    parts = name.split(".")
    found = None
    for i in range(len(parts), 0, -1):
        found = module_path(parts[:i])
        if found:
            break
    if found is None:
        return False
    rest = parts[i:]
    return not rest or rest[0] in top_level_names(found)


@cache
def basenames() -> frozenset[str]:
    files = (p for d in ("src", "tests", "benchmarks", "scripts") for p in (ROOT / d).rglob("*.py"))
    return frozenset(p.name for p in files)


def py_path_exists(path: str) -> bool:
    path = path.removeprefix("./")
    if "/" not in path:
        return path in basenames()
    return any((base / path).is_file() for base in (ROOT, SRC, SRC / "crag"))


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_modules_named_exist(page: Path) -> None:
    text = page.read_text("utf-8")
    missing = sorted(
        {
            name
            for name in DOTTED.findall(text)
            if name not in NOT_MODULES and name.rsplit(".", 1)[1] not in FILE_SUFFIXES and not dotted_exists(name)
        }
    )
    assert not missing, f"{rel(page)} names modules that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_source_files_named_exist(page: Path) -> None:
    text = page.read_text("utf-8")
    missing = sorted({p for p in PY_PATH.findall(text) if not py_path_exists(p)})
    assert not missing, f"{rel(page)} names files that do not exist: {missing}"


@pytest.mark.parametrize("page", LINKED, ids=rel)
def test_code_fences_closed(page: Path) -> None:
    assert fence_errors(page.read_text("utf-8")) == []


@pytest.mark.parametrize("page", LINKED, ids=rel)
def test_relative_links_land(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page.read_text("utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto: are not files in the repository
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{rel(page)}: {broken}"


def test_checks_catch_what_they_look_for() -> None:
    # The checks themselves: each rejects the mistake it exists for.
    assert not dotted_exists("crag.pipeline.record")
    assert dotted_exists("crag.pipeline.recorder.TraceRecorder")
    assert not dotted_exists("crag.pipeline.events.NoSuchName")
    assert not py_path_exists("src/crag/pipeline/record.py") and py_path_exists("src/crag/pipeline/live.py")
    assert fence_errors("```\ncode\n``` text after\n") != []
    assert fence_errors("```python\ncode\n```\n") == []
    assert fence_errors("```\nnever closed\n") != []
    assert slug("Install footprint (`fresh_install.py`)") == "install-footprint-fresh_installpy"
    assert slug("`[server]`") == "server"


def diagram_rows() -> dict[str, str]:
    """The layer diagram of docs/architecture.md: each layer's label and its text, joined."""
    text = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    block = next(b for b in text.split("```") if "┌" in b)
    rows: dict[str, str] = {}
    label = ""
    for line in block.splitlines():
        m = re.match(r"\s*│ (\S*)\s+(.*?)\s*│$", line) or re.match(r"\s*│\s+(.*?)\s*│$", line)
        if not m:
            continue
        if m.re.groups == 2 and m.group(1):
            label = m.group(1)
            rows[label] = m.group(2)
        elif label:
            rows[label] += " " + m.groups()[-1]
    return rows


def test_architecture_diagram_names_modules_that_exist() -> None:
    rows = diagram_rows()
    assert {"base", "backends", "knowledge", "steps", "pipeline", "engine", "interfaces"} <= set(rows)
    packages = {w for row in rows.values() for w in re.findall(r"\b([a-z_]+)/", row)}
    assert sorted(p for p in packages if not (SRC / "crag" / p).is_dir()) == []
    base = [w.rstrip("/") for w in rows["base"].split()]
    assert sorted(w for w in base if not module_path(["crag", w])) == []
    # The pipeline row lists its modules: a word followed by ",", " (" or the row's end.
    pipeline = rows["pipeline"].split(":", 1)[1]
    named = set(re.findall(r"\b([a-z_]+)(?=,| \(|$)", pipeline))
    assert sorted(n for n in named if not module_path(["crag", "pipeline", n])) == []
    modules = {p.stem for p in (SRC / "crag" / "pipeline").glob("*.py")} - {"__init__"}
    assert sorted(modules - named) == [], "modules of crag.pipeline the diagram leaves out"
