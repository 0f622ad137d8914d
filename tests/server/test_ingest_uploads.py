"""``POST /v1/ingest`` with awkward uploads: a long name keeps its suffix, and a skipped file's
reason names the upload, never the server's folders.

The summary's ``path`` was already relative to the knowledge base, but each reason and JSONL
warning began with the file's absolute server path ("/srv/kb/uploads/…/bin.txt: binary
content"); and a name longer than 120 characters was cut before its suffix, so a valid
``….md`` was refused as an unsupported file type.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.server.app import create_app
from crag.server.uploads import safe_filename

pytestmark = pytest.mark.integration


@pytest.mark.unit
def test_a_long_upload_name_keeps_its_suffix() -> None:
    name = safe_filename("报告" * 100 + ".md")
    assert len(name) == 120 and name.startswith("报告") and name.endswith(".md")
    assert safe_filename("x" * 200) == "x" * 120  # no suffix: cut as before


def test_skip_reasons_and_warnings_hold_no_server_path(tmp_path: Path) -> None:
    engine = CRAG(CragSettings(kb={"path": tmp_path / "kb"}, search={"provider": "none"}))
    with TestClient(create_app(engine), client=("127.0.0.1", 50000)) as client:
        files = [
            ("files", ("bin.txt", bytes(range(256)) * 4, "text/plain")),
            ("files", ("rows.jsonl", b'{"text": "Zorblax river"}\n{"text": 5}\n', "application/jsonl")),
            ("files", ("n" * 200 + ".md", b"# Long\n\nThe Zorblax river is long.", "text/markdown")),
        ]
        r = client.post("/v1/ingest", files=files)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["added"], body["skipped"]) == (2, 1)
    skipped = next(f for f in body["files"] if f["status"] == "skipped")
    assert skipped["reason"].startswith("uploads/") and "binary content" in skipped["reason"]
    assert body["warnings"] and all(w.startswith("uploads/") for w in body["warnings"])
    assert str(tmp_path) not in r.text
