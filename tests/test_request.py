"""The Request value: checked once, recorded whole in the trace, rebuilt from it for a replay."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from crag.errors import InputError
from crag.pipeline.inputs import MAX_QUESTION_CHARS
from crag.request import Request

pytestmark = pytest.mark.unit

HISTORY = [{"role": "user", "content": "京张铁路是什么时候开工的？"}, {"role": "assistant", "content": "1905年。"}]


def test_of_checks_and_normalises_every_field() -> None:
    req = Request.of(
        "  它哪一年全线通车？ ",
        history=HISTORY,
        mode="rag",
        search="corpus",
        search_corpus="data/sample/external",
        filters={"lang": "zh", "team": ["产品", "support"]},
        no_cache=True,
    )
    assert req.question == "它哪一年全线通车？" and req.history == tuple(HISTORY)
    assert req.mode == "rag" and req.search_corpus == Path("data/sample/external") and req.search_record is None
    assert req.filters == {"lang": "zh", "team": ["产品", "support"]} and req.no_cache and req.via == "python"
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.mode = "crag"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("question", "options", "message"),
    [
        ("", {}, "the question is empty"),
        ("x" * (MAX_QUESTION_CHARS + 1), {}, f"the limit is {MAX_QUESTION_CHARS:,}"),
        ("a\x00b", {}, "NUL bytes"),
        ("Why?", {"mode": "both"}, "unknown mode 'both'; use 'crag' or 'rag'"),
        ("Why?", {"history": "not a list"}, "history must be a list of messages"),
        ("Why?", {"filters": ["lang", "zh"]}, "filter"),
        ("Why?", {"modes": "rag"}, "unknown request option(s) modes"),
    ],
)
def test_bad_input_gives_the_same_one_line_errors(question: str, options: dict, message: str) -> None:
    with pytest.raises(InputError, match=None) as got:
        Request.of(question, **options)
    assert message in str(got.value) and "\n" not in str(got.value)


def test_round_trip_through_the_trace_dict_is_json() -> None:
    req = Request.of(
        "What is CRAG?",
        history=HISTORY,
        search="corpus",
        search_corpus=Path("corpus"),
        search_record="out/cassette.json",
        filters={"team": {"$in": ["产品", "support"]}, "year": 2024},
        collection="handbook",
        via="http",
        replay_of="20260101000000-abcdef",
    )
    data = json.loads(json.dumps(req.to_dict(), ensure_ascii=False))  # what the trace store keeps
    assert data["search_record"] == "out/cassette.json" and data["history"] == HISTORY
    assert Request.from_dict(data) == req
    assert Request.from_trace({"question": "ignored", "request": data}) == req
    assert Request.from_dict({**data, "added_later": 1}) == req  # a newer trace still reads


def test_from_dict_checks_what_it_reads() -> None:
    with pytest.raises(InputError, match="unknown mode"):
        Request.from_dict({"question": "Why?", "mode": "bogus"})
    with pytest.raises(InputError, match="the question is empty"):
        Request.from_dict({"mode": "rag"})


def test_a_trace_without_a_whole_request_gives_its_question_and_options() -> None:
    older = {"question": "Why?", "mode": "rag", "filters": {"lang": "en"}, "request": {"via": "http", "search": "none"}}
    assert Request.from_trace(older) == Request.of("Why?", mode="rag", search="none", filters={"lang": "en"})


def test_coerce_takes_a_request_or_a_question_with_options_never_both() -> None:
    req = Request.of("Why?", mode="rag")
    assert Request.coerce(req, {}) is req
    assert Request.coerce("Why?", {"mode": "rag"}) == req
    with pytest.raises(InputError, match="give options inside the Request"):
        Request.coerce(req, {"mode": "crag"})


def test_an_answer_s_trace_rebuilds_the_request_it_was_asked_with(tmp_path: Path) -> None:
    from crag.engine import CRAG
    from crag.testing.fakes import HashEmbedder, ScriptedLLM

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tianjin.md").write_text("---\nlang: zh\n---\n天津犹太会堂于1937年开始筹建，1940年建成。", "utf-8")
    rag = CRAG.from_config(
        kb={"path": str(tmp_path / "kb")}, search={"provider": "none"}, evaluator={"backend": "heuristic"}
    )
    rag._embedder = HashEmbedder()  # control flow only: no model loads
    rag._llm = ScriptedLLM(["天津犹太会堂建成于1940年[1]。"])
    rag.ingest([docs])
    asked = Request.of("  它是什么时候建成的？", history=HISTORY, mode="rag", filters={"lang": "zh"}, no_cache=True)
    answer = rag.ask(asked)
    trace = rag.traces.get(answer.trace_id)
    assert Request.from_trace(trace) == asked
    # The keyword form builds the same value, and records it the same way.
    again = rag.ask("  它是什么时候建成的？", history=HISTORY, mode="rag", filters={"lang": "zh"}, no_cache=True)
    assert Request.from_trace(rag.traces.get(again.trace_id)) == asked
