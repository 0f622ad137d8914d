"""Questions from stdin: ``crag ask -`` reads the question there, a closed stdin is one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crag.cli import app


@pytest.mark.unit
def test_ask_dash_reads_the_question_from_stdin(tmp_path: Path) -> None:
    # "-" used to be the question itself: the model was asked to answer "-".
    runner = CliRunner()
    result = runner.invoke(app, ["ask", "-", "--kb", str(tmp_path / "kb")], input=" \n\t\n")
    assert result.exit_code == 2 and result.output.startswith("error: the question is empty"), result.output
    result = runner.invoke(app, ["ask", "-", "--kb", str(tmp_path / "kb")], input="Who?\n")
    assert result.exit_code == 2 and result.output.startswith("error: no knowledge base"), result.output


@pytest.mark.integration
@pytest.mark.parametrize(("args", "needle"), [(["ask", "-"], "stdin is closed"), (["chat"], "stdin, which is closed")])
def test_closed_stdin_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    # crag chat <&- used to load the model, then fail with a traceback (sys.stdin is None).
    proc = subprocess.run(
        [sys.executable, "-m", "crag.cli", *args, "--kb", str(tmp_path / "kb")],
        preexec_fn=lambda: os.close(0),  # the child starts with no stdin at all
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
