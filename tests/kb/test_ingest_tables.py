"""Tables become rows that carry their headers; headings become sections; each reads as clean sentences."""

from __future__ import annotations

import zlib
from pathlib import Path

import docx
import pytest

from crag.ingest import pdf_tables, stream
from crag.ingest.chunk import chunk_section
from crag.ingest.limits import InputLimits
from crag.ingest.load import load_file
from crag.ingest.markdown import text_title
from crag.ingest.stream import file_chunks, scan
from crag.ingest.tables import ROW_CHARS, Cell, expand, table_rows
from crag.testing.documents import write_table_pdf
from crag.text import split_sentences, table_cells

pytestmark = pytest.mark.unit

EN_ROWS = [
    ["Product", "Q1 2023 shipments", "Q3 2023 shipments", "Note"],
    ["Yunque S5", "7,200", "8,640", "Best seller. Ships worldwide"],
    ["Yunque S6", "1,200", "900", "Discontinued; replaced by S7"],
]
ZH_ROWS = [
    ["产品", "2023年第一季度出货量", "2023年第三季度出货量", "备注"],
    ["云雀S5", "7,200", "8,640", "畅销。全球发货"],
    ["云雀S6", "1,200", "900", "停产；由S7替代"],
]
EN_LINE = "Yunque S5 | Q1 2023 shipments: 7,200 | Q3 2023 shipments: 8,640 | Note: Best seller. Ships worldwide"
ZH_LINE = "云雀S5 | 2023年第一季度出货量: 7,200 | 2023年第三季度出货量: 8,640 | 备注: 畅销。全球发货"


def pipe_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join([lines[0], "|" + "---|" * len(rows[0]), *lines[1:]])


def texts(path: Path) -> list[tuple[str, str]]:
    docs, _ = load_file(path)
    return [(d.section, d.text) for d in docs]


# --- the row form --------------------------------------------------------------------------


def test_a_row_keeps_each_cell_beside_its_key_and_column_and_is_one_sentence() -> None:
    cells = [[Cell(t, header=r == 0) for t in row] for r, row in enumerate(EN_ROWS + ZH_ROWS[1:])]
    lines = table_rows(expand(cells) or [], header_rows=1)
    assert lines[0] == EN_LINE
    assert lines[2] == "云雀S5 | Q1 2023 shipments: 7,200 | Q3 2023 shipments: 8,640 | Note: 畅销。全球发货"
    # Terminators inside cells do not cut a row: its sentence (a quote's unit) is the whole row.
    assert split_sentences("\n\n".join(lines)) == lines
    assert split_sentences(ZH_LINE + "\n\n后面一句。") == [ZH_LINE, "后面一句。"]


def test_a_row_reads_back_as_its_key_and_its_cells_under_their_headers() -> None:
    # What "7,200" measures is its cell's header: not a battery's capacity.
    assert table_cells(EN_LINE) == (
        "Yunque S5",
        [("Q1 2023 shipments", "7,200"), ("Q3 2023 shipments", "8,640"), ("Note", "Best seller. Ships worldwide")],
    )
    assert table_cells(ZH_LINE) == (
        "云雀S5",
        [("2023年第一季度出货量", "7,200"), ("2023年第三季度出货量", "8,640"), ("备注", "畅销。全球发货")],
    )
    assert table_cells("The language {xx | x is a binary string} is regular.") is None


def test_merged_cells_repeat_their_key_and_join_their_headers() -> None:
    head = [Cell("产品", rowspan=2, header=True), Cell("2023年", colspan=2, header=True)]
    sub = [Cell("第一季度出货量", header=True), Cell("第三季度出货量", header=True)]
    body = [
        [Cell("云雀S5", rowspan=2), Cell("7,200"), Cell("8,640")],
        [Cell("停产", colspan=2)],
    ]
    grid = expand([head, sub, *body])
    assert table_rows(grid or [], header_rows=2) == [
        "云雀S5 | 2023年第一季度出货量: 7,200 | 2023年第三季度出货量: 8,640",
        "云雀S5 | 2023年第一季度出货量 / 2023年第三季度出货量: 停产",
    ]
    assert expand([[Cell("x", colspan=300)]]) is None  # laid out as plain lines by the readers


def test_a_wide_row_continues_on_lines_that_repeat_its_key() -> None:
    head = [Cell("Product", header=True)] + [Cell(f"Week {w} 2023 shipments", header=True) for w in range(1, 30)]
    body = [Cell("Yunque S5")] + [Cell(f"{w * 100:,}") for w in range(1, 30)]
    lines = table_rows(expand([head, body]) or [], header_rows=1)
    assert len(lines) > 2 and all(len(line) <= ROW_CHARS and line.startswith("Yunque S5 | Week ") for line in lines)
    assert sum(line.count(":") for line in lines) == 29  # every cell once, beside its header


def test_a_long_table_spans_chunks_of_whole_self_describing_rows() -> None:
    rows = [f"Yunque S{n} | Q1 2023 shipments: {n * 97:,} | Note: Batch {n}. Checked" for n in range(60)]
    for size in (400, 200):
        chunks = chunk_section("\n\n".join(rows), "Kestrel catalogue > Shipments", size=size, overlap=60)
        assert len(chunks) > 5
        seen = []
        for chunk in chunks:
            head, *body = chunk.split("\n\n")
            assert head == "Kestrel catalogue > Shipments" and len(chunk) <= size
            assert all(line in rows for line in body)  # never a row cut in two
            seen += body
        assert seen == rows  # a row break is a paragraph break: no overlap is repeated


# --- each format ---------------------------------------------------------------------------


def test_markdown_tables_and_headings_zh_en(tmp_path: Path) -> None:
    md = tmp_path / "catalogue.md"
    md.write_text(
        f"# Kestrel catalogue\n\nIntro.\n\n## Shipments\n{pipe_table(EN_ROWS)}\n\n## 出货量\n\n{pipe_table(ZH_ROWS)}\n"
        "\n```\n# not a heading\n```\n",
        "utf-8",
    )
    assert texts(md) == [
        ("", "Intro."),
        ("Shipments", EN_LINE + "\n\nYunque S6 | Q1 2023 shipments: 1,200 | Q3 2023 shipments: 900 | "
         "Note: Discontinued; replaced by S7"),
        ("出货量", ZH_LINE + "\n\n云雀S6 | 2023年第一季度出货量: 1,200 | 2023年第三季度出货量: 900 | "
         "备注: 停产；由S7替代\n\n```\n# not a heading\n```"),
    ]  # fmt: skip
    chunks = [c.text for c, _ in file_chunks(md, scan(md), size=400, overlap=60)]
    assert chunks[1].startswith("Shipments\n\n" + EN_LINE) and chunks[2].startswith("出货量\n\n" + ZH_LINE)


def test_markdown_setext_headings_and_titles(tmp_path: Path) -> None:
    md = tmp_path / "people.md"
    md.write_text(
        "王磊（工程师）\n=======\n王磊（1984年生）是一名工程师。\n\nCareer\n------\nHe joined in 2010.\n", "utf-8"
    )
    (doc, career), _ = load_file(md)
    assert (doc.title, doc.section, doc.text) == ("王磊（工程师）", "", "王磊（1984年生）是一名工程师。")
    assert (career.section, career.text) == ("Career", "He joined in 2010.")


def test_html_tables_with_thead_row_headers_spans_and_captions(tmp_path: Path) -> None:
    page = tmp_path / "shipments.html"
    page.write_text(
        "<html><head><title>Catalogue 目录</title></head><body><h1>Catalogue 目录</h1><p>Intro.</p>"
        "<h2>Shipments</h2><table><thead><tr><th>Product</th><th>Q1 2023 shipments</th><th>Q3 2023 shipments</th>"
        "<th>Note</th></tr></thead><tbody><tr><td>Yunque S5</td><td>7,200</td><td>8,640</td>"
        "<td>Best seller. Ships worldwide</td></tr></tbody></table>"
        "<h2>出货量</h2><table><caption>2023年</caption><tr><th rowspan=2>产品</th><th colspan=2>2023年</th></tr>"
        "<tr><th>第一季度出货量</th><th>第三季度出货量</th></tr><tr><th>云雀S5</th><td>7,200</td><td>8,640</td></tr>"
        "</table><p>表后。</p><table><tr><td>Battery</td><td>5200 mAh</td></tr><tr><td>Weight</td><td>180 g</td></tr>"
        "</table></body></html>",
        "utf-8",
    )
    assert texts(page) == [
        ("", "Intro."),
        ("Shipments", EN_LINE),
        ("出货量 > 2023年", "云雀S5 | 2023年第一季度出货量: 7,200 | 2023年第三季度出货量: 8,640"),
        ("出货量", "表后。\n\nBattery | 5200 mAh\n\nWeight | 180 g"),  # no header row: names beside values
    ]


def test_docx_tables_and_heading_styles_zh_en(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_heading("Kestrel catalogue", level=1)
    document.add_paragraph("Intro.")
    for heading, rows in (("Shipments", EN_ROWS), ("出货量", ZH_ROWS)):
        document.add_heading(heading, level=2)
        table = document.add_table(rows=len(rows), cols=len(rows[0]))
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                table.cell(r, c).text = value
    spec = document.add_table(rows=2, cols=2)  # two columns, bold first row: a header
    for r, row in enumerate([["Model", "Battery"], ["Yunque S5", "5200 mAh"]]):
        for c, value in enumerate(row):
            spec.cell(r, c).paragraphs[0].add_run(value).bold = r == 0
    path = tmp_path / "catalogue.docx"
    document.save(str(path))
    docs, _ = load_file(path)
    assert {d.title for d in docs} == {"Kestrel catalogue"}  # no core title: the first heading
    assert [(d.section, d.text.split("\n\n")[0]) for d in docs] == [
        ("", "Intro."),
        ("Shipments", EN_LINE),
        ("出货量", ZH_LINE),
    ]
    assert docs[-1].text.endswith("Yunque S5 | Battery: 5200 mAh")


@pytest.mark.parametrize(("rows", "line"), [(EN_ROWS, EN_LINE), (ZH_ROWS, ZH_LINE)])
def test_pdf_ruled_tables_become_rows_between_the_page_text(tmp_path: Path, rows: list[list[str]], line: str) -> None:
    path = write_table_pdf(tmp_path / "report.pdf", "Shipments report. 出货量报告。", rows, "Units shipped.")
    (doc,), _ = load_file(path)
    assert doc.text.split("\n\n")[:2] == ["Shipments report. 出货量报告。", line]
    assert doc.text.endswith("Units shipped.")


def test_pdf_tables_are_not_read_past_a_font_that_decodes_beyond_the_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pdfplumber (pdfminer) decodes embedded fonts without pypdf's limits: a page whose font
    # program inflates past them keeps pypdf's text, and pdfminer never opens the file.
    bomb = b"\0" * 3_000_000
    assert len(zlib.compress(bomb)) < 10_000
    path = write_table_pdf(tmp_path / "bomb.pdf", "Shipments report.", EN_ROWS, "Units shipped.", font_file=bomb)
    opened: list[Path] = []
    real = pdf_tables.open_regular
    monkeypatch.setattr(pdf_tables, "open_regular", lambda p: opened.append(p) or real(p))
    (doc,), _ = load_file(path, InputLimits(max_unpacked_bytes=1_000_000))
    assert opened == [] and "Yunque S5 7,200 8,640" in doc.text
    (doc,), _ = load_file(path)  # within the default 50 MB: the table is read
    assert opened and EN_LINE in doc.text


# --- plain text titles and large Markdown ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Wang Lei (engineer)\nWang Lei (born 1984) is an engineer.", "Wang Lei (engineer)"),
        ("王磊（工程师）\n\n王磊（1984年生）是一名工程师。", "王磊（工程师）"),
        ("Quarterly notes\n\nrevenue rose.", "Quarterly notes"),
        ("The company was founded in 1990 by two engineers who\nlater sold it.", ""),  # a wrapped line
        ("It was founded by\nWang Lei in 1990.", ""),
        ("Revenue rose in 2023.\nIt fell in 2024.", ""),  # a sentence
        ("公司成立于1990年，由两位工程师\n创办。", ""),
        ("Only one line", ""),
    ],
)
def test_a_text_file_title_is_a_first_line_that_reads_as_one(text: str, title: str) -> None:
    got, rest = text_title(text)
    assert got == title and (rest.strip() != text.strip()) == bool(title)


def test_large_markdown_keeps_its_sections_across_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 4096)
    parts = []
    for n in range(120):
        parts.append(f"## Policy {n}\n\nPolicy {n} applies to every team. It was set in {1990 + n}.\n")
        parts.append(pipe_table([["Team", "Days"], [f"Team {n}", str(n)]]) + "\n")
    md = tmp_path / "handbook.md"
    md.write_text("# Handbook\n\n" + "\n".join(parts), "utf-8")
    assert md.stat().st_size > 3 * 4096
    chunks = [c for c, _ in file_chunks(md, scan(md), size=400, overlap=60)]
    assert {c.title for c in chunks} == {"Handbook"}
    rows = 0
    for c in chunks:  # a block may end inside a section: the rest heads its chunks the same way
        n = c.metadata["section"].removeprefix("Policy ")
        assert c.text.startswith(f"Policy {n}\n\n") and c.text.count(" | Days: ") == c.text.count(f"Team {n} | ")
        rows += c.text.count(f"Team {n} | Days: {n}")
    assert rows == 120
