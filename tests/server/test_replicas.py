"""``crag serve --shared``: a replica refuses, in one line, state kept in its own folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from crag.cli import app
from crag.config import CragSettings
from crag.errors import ConfigError
from crag.server.replicas import check_shareable

pytestmark = pytest.mark.unit

SHAREABLE = {
    "state_uri": "postgresql://crag@db.internal:5432/crag",
    "store_uri": "milvus://milvus.internal:19530?collection=handbook",
    "keyword_index": "store",
}


def test_the_default_configuration_is_refused_naming_each_piece(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", "--shared", "--kb", str(tmp_path / "kb")])
    assert result.exit_code == 2
    line = result.output.strip()
    assert line.startswith("error: crag serve --shared: these cannot be shared between replicas:") and "\n" not in line
    for piece in ("kb.state_uri = postgresql://", "Chroma", 'kb.keyword_index = "store"'):
        assert piece in line, line
    assert not (tmp_path / "kb").exists()  # refused before anything was created


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ({"state_uri": ""}, "SQLite files"),
        ({"store_uri": ""}, "Chroma"),
        ({"store_uri": "milvus.db"}, "Milvus Lite file milvus.db"),
        ({"keyword_index": "local"}, "BM25 index is in the folder"),
    ],
)
def test_each_unshareable_piece_alone_is_refused(override: dict[str, str], named: str) -> None:
    settings = CragSettings(kb={**SHAREABLE, **override}, server={"shared": True})
    with pytest.raises(ConfigError, match=named) as info:
        check_shareable(settings)
    assert str(info.value).count(";") == 0  # only that one is named


def test_postgres_state_and_a_milvus_server_are_shareable() -> None:
    check_shareable(CragSettings(kb=SHAREABLE, server={"shared": True}))  # no error


def test_shared_is_also_a_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CRAG_SERVER__SHARED", "true")
    monkeypatch.setenv("CRAG_KB__STATE_URI", SHAREABLE["state_uri"])
    result = CliRunner().invoke(app, ["serve", "--kb", str(tmp_path / "kb")])
    assert result.exit_code == 2 and "SQLite" not in result.output and "Chroma" in result.output, result.output
