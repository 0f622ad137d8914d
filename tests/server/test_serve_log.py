"""``crag serve``'s log over many requests: every record formats, access lines intact, keys redacted.

Redaction once set ``record.args = None`` on every record, and uvicorn's access formatter
unpacks five arguments from it: each request wrote a "--- Logging error ---" traceback
and its access line was lost. This runs the real command as a separate process (its own
uvicorn, its own logging setup) and reads what it wrote.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from crag.testing.processes import crag_serve

pytest.importorskip("uvicorn", reason="needs crag[server]")
pytestmark = [pytest.mark.integration]

REQUESTS = 1_000
SECRET = "zq-canary-7f3e9c1d"  # an environment secret (its variable's name says TOKEN)
SHAPED = "sk-proj-0123456789abcdefABCDEF"  # a key shape the process never saw


def test_a_thousand_requests_leave_a_clean_log(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    env = {"CRAG_SEARCH__PROVIDER": "none", "CRAG_TRACE__ENABLED": "false", "DEMO_ACCESS_TOKEN": SECRET}
    with crag_serve(tmp_path / "kb", env=env, log=log) as url, httpx.Client(base_url=url, timeout=30) as client:
        statuses = [client.get("/healthz").status_code for _ in range(REQUESTS)]
        # Secrets in paths and query strings: the access line carries them as arguments.
        leaks = [client.get(f"/missing/{SECRET}"), client.get("/healthz", params={"api_key": SHAPED})]
        assert client.get("/ui").status_code == 200
    assert statuses == [200] * REQUESTS and [r.status_code for r in leaks] == [404, 200]
    text = log.read_text("utf-8", errors="replace")
    assert "Logging error" not in text and "Traceback" not in text, text[-3000:]
    access = re.findall(r'127\.0\.0\.1:\d+ - "GET /healthz HTTP/1\.1" 200', text)
    assert len(access) >= REQUESTS, f"{len(access)} access lines of {REQUESTS}"
    assert SECRET not in text and SHAPED not in text
    assert '"GET /missing/*** HTTP/1.1" 404' in text and "GET /healthz?api_key=*** HTTP/1.1" in text
