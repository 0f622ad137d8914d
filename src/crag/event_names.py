"""The names of a run's events: the one list every client reads them from.

A run sends one event per step as it finishes (:mod:`crag.pipeline.events` holds their
typed values); a streamed HTTP answer adds three that exist only on the wire: ``started``
first, ``done`` with the whole answer (the pipeline's ``answer`` event), or ``error``.
Python code compares with the constants and event classes, never with a raw string; the
web UI's scripts read the same names from ``static/events.js``, generated from this module
by ``scripts/gen_events_js.py`` (:func:`js_table`; a test fails when the two disagree).
The names live in the lowest layer because spans are named by them too (the OpenTelemetry
export reads the ``generate`` span).

>>> TOKEN, "token" in EVENT_NAMES, "done" in WIRE_NAMES
('token', True, True)
"""

from __future__ import annotations

import json
from typing import Final, Literal, get_args

from crag.types import REJECTED_SHARED_NAME, REJECTED_UNVERIFIED

__all__ = ["ALL_NAMES", "EVENT_NAMES", "WIRE_NAMES", "EventName", "WireName", "js_table"]

EventName = Literal[
    "condense",
    "query",
    "cache",
    "retrieve",
    "evaluate",
    "decide",
    "verify",
    "escalate",
    "refine",
    "rewrite",
    "search",
    "refine_external",
    "rounds",
    "correct",
    "fuse",
    "compress",
    "bearers",
    "abstain",
    "token",
    "replace",
    "generate",
    "answer",
    "context",
]
"""Every event a run sends, in the order they can come (see :mod:`crag.pipeline`); ``context``
ends a run that stops before generation (:func:`crag.pipeline.run_crag_context`)."""

WireName = Literal["started", "done", "error"]
"""The events only a streamed HTTP answer sends (``POST /v1/ask`` with ``stream=true``)."""

EVENT_NAMES: Final[tuple[EventName, ...]] = get_args(EventName)
WIRE_NAMES: Final[tuple[WireName, ...]] = get_args(WireName)
ALL_NAMES: Final[tuple[str, ...]] = EVENT_NAMES + WIRE_NAMES

# One constant per name, for the code that names a span or an event outside the event module.
CONDENSE: Final = "condense"
QUERY: Final = "query"
CACHE: Final = "cache"
RETRIEVE: Final = "retrieve"
EVALUATE: Final = "evaluate"
DECIDE: Final = "decide"
VERIFY: Final = "verify"
ESCALATE: Final = "escalate"
REFINE: Final = "refine"
REWRITE: Final = "rewrite"
SEARCH: Final = "search"
REFINE_EXTERNAL: Final = "refine_external"
ROUNDS: Final = "rounds"
CORRECT: Final = "correct"
FUSE: Final = "fuse"
COMPRESS: Final = "compress"
BEARERS: Final = "bearers"
ABSTAIN: Final = "abstain"
TOKEN: Final = "token"
REPLACE: Final = "replace"
GENERATE: Final = "generate"
ANSWER: Final = "answer"
CONTEXT: Final = "context"
STARTED: Final = "started"
DONE: Final = "done"
ERROR: Final = "error"


def js_table() -> str:
    """``static/events.js``: the names as ``EVENT.<NAME>`` and the escalation reasons as
    ``REJECTED.<REASON>``, for the web UI's scripts (a plain script: the pages load it first)."""
    names = {name.upper(): name for name in ALL_NAMES}
    rejected = {"UNVERIFIED": REJECTED_UNVERIFIED, "SHARED_NAME": REJECTED_SHARED_NAME}
    return (
        "// Generated from crag.event_names by scripts/gen_events_js.py: do not edit.\n"
        "// The names of a run's events and the reasons an escalation gives, for the other scripts.\n"
        '"use strict";\n\n'
        f"const EVENT = Object.freeze({json.dumps(names, indent=2)});\n\n"
        f"const REJECTED = Object.freeze({json.dumps(rejected, indent=2, ensure_ascii=False)});\n"
    )
