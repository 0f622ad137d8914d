"""Ingest jobs are scoped like the other routes: by collection, and by what the API key may use.

No worker runs here: the jobs stay ``queued``, which is all these checks need. The app is the
real one (FastAPI's test client), its state in a real PostgreSQL database.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.server.app import create_app
from crag.server.auth import ApiKey
from crag.server.collections import Collections

pytestmark = pytest.mark.integration

HANDBOOK_WRITE, HANDBOOK_READ, CATALOGUE = "hb-write-key-0001", "hb-read-key-0002", "cat-write-key-0003"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_job_is_read_within_its_collection_by_keys_that_may_read_it(pg_url: str, tmp_path: Path) -> None:
    settings = CragSettings(kb={"path": tmp_path / "handbook", "state_uri": pg_url}, search={"provider": "none"})
    root = CRAG(settings)
    collections = Collections({"handbook": root, "catalogue": root.for_kb(tmp_path / "catalogue")})
    keys = [
        ApiKey(HANDBOOK_WRITE, collections=frozenset({"handbook"})),
        ApiKey(HANDBOOK_READ, collections=frozenset({"handbook"}), write=False),
        ApiKey(CATALOGUE, collections=frozenset({"catalogue"})),
    ]
    with TestClient(create_app(collections, api_keys=keys), client=("127.0.0.1", 50000)) as client:
        body = {"collection": "handbook", "documents": [{"text": "员工手册：年假十五天。"}], "id": "leave"}
        refused = client.post("/v1/ingest", json=body, headers=auth(HANDBOOK_READ))
        assert refused.status_code == 403  # a read-only key queues nothing
        r = client.post("/v1/ingest", json=body, headers=auth(HANDBOOK_WRITE))
        assert r.status_code == 202, r.text
        job = r.json()["job"]

        got = client.get(f"/v1/jobs/{job}", params={"collection": "handbook"}, headers=auth(HANDBOOK_READ))
        assert got.status_code == 200 and got.json()["status"] == "queued"
        assert got.json()["progress"]["files"] == 1 and got.json()["result"] is None

        # Another collection's key, or the right key naming another collection: no such job.
        other = client.get(f"/v1/jobs/{job}", params={"collection": "catalogue"}, headers=auth(CATALOGUE))
        assert other.status_code == 404 and other.json()["error"]["type"] == "job_not_found"
        hidden = client.get(f"/v1/jobs/{job}", params={"collection": "catalogue"}, headers=auth(HANDBOOK_READ))
        assert hidden.status_code == 404
        assert client.get(f"/v1/jobs/{job}", params={"collection": "handbook"}).status_code == 401
