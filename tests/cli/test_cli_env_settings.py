"""A bad ``CRAG_*`` environment variable is named in the one-line error, not blamed on the TOML file."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from crag.cli import app

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("variable", "value", "needles"),
    [
        ("CRAG_RETRIEVAL__TOP_K", "abc", ("retrieval.top_k from the environment variable CRAG_RETRIEVAL__TOP_K",)),
        ("CRAG_EVALUATOR__UPPER", "0.05", ("from the environment variable CRAG_EVALUATOR__UPPER", "tau_low")),
        # Lists, tables and sections are JSON: this used to be "cannot read config None: error
        # parsing value for field "search" from source "EnvSettingsSource"".
        ("CRAG_SEARCH__ALLOW_DOMAINS", "example.com", ("environment variable CRAG_SEARCH__ALLOW_DOMAINS", "JSON")),
        ("CRAG_LLM", "qwen", ("environment variable CRAG_LLM", "JSON")),
    ],
)
def test_bad_environment_variable_is_named(tmp_path: Path, variable: str, value: str, needles: tuple[str, ...]) -> None:
    config = tmp_path / "crag.toml"
    config.write_text("[retrieval]\ntop_k = 3\n", "utf-8")  # valid: the file is not to blame
    result = CliRunner().invoke(
        app, ["trace", "list", "--kb", str(tmp_path / "kb"), "-c", str(config)], env={variable: value, "COLUMNS": "300"}
    )
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert line.startswith("error: ") and "\n" not in line, line
    assert str(config) not in line and "None" not in line, line
    for needle in needles:
        assert needle in line, line


def test_bad_value_in_the_file_still_names_the_file(tmp_path: Path) -> None:
    config = tmp_path / "crag.toml"
    config.write_text('[retrieval]\ntop_k = "three"\n', "utf-8")
    result = CliRunner().invoke(app, ["trace", "list", "--kb", str(tmp_path / "kb"), "-c", str(config)])
    assert result.exit_code == 2
    assert f"invalid setting retrieval.top_k in {config}" in " ".join(result.output.split())
