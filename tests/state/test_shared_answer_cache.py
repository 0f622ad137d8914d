"""The answer cache shared by replicas: a question answered by one ``crag`` engine is a hit
on another that shares its PostgreSQL state database (``kb.state_uri``), with every real
component. Each replica has its own working folder; until documents live in the state
database too, each holds the same documents (ingested from the same files, so the same
document ids and versions).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crag.types import Action

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_an_answer_from_one_replica_is_a_hit_on_another(pg_url: str, tmp_path: Path) -> None:
    from test_answer_cache_e2e import QUESTION, engine, write_docs

    docs = write_docs(tmp_path / "docs")
    one = engine(tmp_path / "replica1" / "kb", state_uri=pg_url, name="handbook")
    two = engine(tmp_path / "replica2" / "kb", state_uri=pg_url, name="handbook")
    one.ingest([docs])
    two.ingest([docs])

    first = one.ask(QUESTION)
    assert first.action is Action.CORRECT and first.cache is not None and first.cache["stored"] == "stored"
    hit = two.ask(QUESTION)
    assert hit.cache is not None and hit.cache["hit"] and hit.cache["from_trace"] == first.trace_id
    assert hit.answer == first.answer and hit.usage.calls == 0
    assert [(c.id, c.quote) for c in hit.citations] == [(c.id, c.quote) for c in first.citations]
    assert one.traces.get(hit.trace_id)["cache"]["hit"] is True  # replica 1 sees replica 2's trace

    other = engine(tmp_path / "replica3" / "kb", state_uri=pg_url, name="catalogue")  # another collection
    other.ingest([docs])
    names = []
    with other.ask_stream(QUESTION) as events:
        for event in events:  # the first steps show it is no hit; closing the stream stops the run
            names.append(event.name)
            if event.name == "retrieve":
                break
    assert names == ["query", "retrieve"]
