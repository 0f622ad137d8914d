"""Small CLI options: ``--version``, ``trace list --json/--grep``, help texts, a chosen provider's extra."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crag._version import __version__
from crag.cli import app
from crag.trace.store import TraceStore

pytestmark = pytest.mark.unit


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"crag {__version__}\n"


def test_eval_help_keeps_square_brackets() -> None:
    # Rich markup used to swallow "[llm]": "TOML config whose  is the judge".
    result = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    assert "whose [llm] is the judge" in result.output and "whose  is" not in result.output
    result = CliRunner().invoke(app, ["ask", "--help"], env={"COLUMNS": "250"})
    assert "a collection's name from [server.collections]" in result.output


def test_trace_list_json_and_grep(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    store = TraceStore(kb / "traces.sqlite")
    rows = [
        ("t1", "When was the Royal University of Warsaw established?", "In 1816 [1].", "correct"),
        ("t2", "天津犹太会堂是哪一年建成的？", "1940年[1]。", "correct"),
        ("t3", "Who designed the Bell Rock Lighthouse?", "Robert Stevenson.", "ambiguous"),
    ]
    for n, (trace_id, question, answer, action) in enumerate(rows):
        store.save({"id": trace_id, "question": question, "answer": answer, "action": action,
                    "created_at": f"2026-12-04T10:00:0{n}.000+00:00", "timings": {"total": 1.5}})  # fmt: skip
    runner = CliRunner()
    result = runner.invoke(app, ["trace", "list", "--kb", str(kb), "--json"])
    assert result.exit_code == 0, result.output
    listed = [json.loads(line) for line in result.output.splitlines()]
    assert [r["id"] for r in listed] == ["t3", "t2", "t1"] and listed[0]["latency_ms"] == 1500.0
    for needle, ids in (("warsaw", ["t1"]), ("1940", ["t2"]), ("犹太会堂", ["t2"]), ("Stevenson", ["t3"]), ("zz", [])):
        result = runner.invoke(app, ["trace", "list", "--kb", str(kb), "--json", "--grep", needle])
        assert [json.loads(line)["id"] for line in result.output.splitlines()] == ids, needle
    table = runner.invoke(app, ["trace", "list", "--kb", str(kb), "--grep", "Lighthouse"], env={"COLUMNS": "200"})
    assert "t3" in table.output and "t1" not in table.output


def test_a_chosen_provider_without_its_extra_exits_2_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ddgs", None)  # as if the web extra were not installed
    result = CliRunner().invoke(app, ["ask", "Who?", "--kb", str(tmp_path / "kb"), "--search", "duckduckgo"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: the duckduckgo search provider needs ddgs from the 'web' extra: pip install 'crag[web]'"
    )


def test_chat_without_a_knowledge_base_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["chat", "--kb", str(tmp_path / "kb")], input="Who?\n")
    assert result.exit_code == 2 and result.output.startswith("error: ") and result.output.count("\n") == 1


@pytest.mark.parametrize(
    "command",
    [["trace", "list"], ["trace", "show", "abcdef"], ["feedback", "rate", "abcdef", "up"], ["feedback", "export"]],
)
def test_traces_of_a_missing_knowledge_base_are_an_error_not_a_new_folder(tmp_path: Path, command: list[str]) -> None:
    # A mistyped --kb used to create the folder with an empty trace database: `trace list`
    # printed an empty table and exited 0, `trace show` said the id was unknown.
    typo = tmp_path / "kbb"
    result = CliRunner().invoke(app, [*command, "--kb", str(typo)], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: no knowledge base at {typo}; create it with `crag ingest")
    assert not typo.exists()
