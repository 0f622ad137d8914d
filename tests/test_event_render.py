"""``render``: each event kind as its server-sent event, its OpenAI chunks and its trace record.

The values are built by hand (one per kind); that the pipeline sends them, and that the
server, the CLI and the integrations read them, is proven in test_streaming.py, the server's
streaming tests and test_streaming_real.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from crag.correct.bearers import Bearers
from crag.correct.condense import Condensed
from crag.correct.rounds import RoundsResult
from crag.correct.verify import Verification
from crag.event_names import EVENT_NAMES
from crag.generate import Generation, Replace
from crag.pipeline.answer_cache import CacheHit
from crag.pipeline.correction import Correction, Refinement, Rewrite, Search
from crag.pipeline.events import (
    AnswerEvent,
    DoneEvent,
    ErrorEvent,
    Event,
    StartedEvent,
    TokenEvent,
    event_for,
    render,
)
from crag.pipeline.recorder import TraceRecorder
from crag.pipeline.reducer import AnswerText
from crag.pipeline.steps import Context, CorrectedContext, Decision
from crag.protocols import Completion
from crag.trace.spans import Tracer
from crag.types import (
    REJECTED_SHARED_NAME,
    REJECTED_UNVERIFIED,
    Action,
    Answer,
    Bearer,
    Chunk,
    Citation,
    Evaluation,
    Grade,
    Hit,
    Query,
    Retrieval,
    Strip,
    Usage,
    WebResult,
)

pytestmark = pytest.mark.unit

STRIP = Strip("The museum opened in 1901.", "/kb/museum.md", "internal", "Museum", score=0.9)
WEB = Strip("It has a café.", "https://example.org/m", "web", "M", "https://example.org/m", score=0.7)
QUERY = Query("When did the museum open?", "en", "fact", 0.6, 0.35)
CITED = Citation(1, "/kb/museum.md", "Museum", "", "The museum opened in 1901.", quote="The museum opened in 1901.",
                 spans=[(0, 22)])  # fmt: skip
ANSWER = Answer("When did the museum open?", "It opened in 1901[1].", Action.CORRECT, 0.9, [CITED], [STRIP], "t1",
                {"total": 1.0}, usage=Usage(prompt_tokens=10, completion_tokens=4))  # fmt: skip
GENERATION = Generation("It opened in 1901[1].", [CITED], [STRIP], completions=[Completion("It opened in 1901 [1].")])
TWO = [Bearer("John Carter", "painter", cites=[1]), Bearer("John Carter", "footballer", cites=[2])]

# One value per step event, and the keys its trace record sets (None: it sets none).
VALUES: dict[str, tuple[Any, list[str] | None]] = {
    "condense": (Condensed("and then?", "When did the museum open?", 2, "llm", 1), ["conversation"]),
    "query": (QUERY, ["question", "mode", "language", "query_type", "thresholds"]),
    "cache": (CacheHit(ANSWER, "k1", "t0", 3.5), ["cache", "action", "confidence", "context"]),
    "retrieve": (Retrieval([Hit(Chunk("c1", STRIP.text, STRIP.source, "Museum"), 0.8, 0.7, 2.1, 1)]), ["retrieved"]),
    "evaluate": (Evaluation([Grade("c1", 0.9)], 0.9, "one relevant", "trained"),
                 ["evaluator", "grades", "confidence", "evaluation_reason"]),
    "decide": (Decision(Action.CORRECT, 0.9), ["action"]),
    "verify": (Verification(0.2, 0.7, degradations=["verify: slow"]), ["verification", "degradations"]),
    "escalate": (Decision(Action.AMBIGUOUS, 0.9, unverified=Verification(0.2, 0.7)), ["escalated", "action"]),
    "refine": (Refinement([STRIP], [STRIP]), None),
    "rewrite": (Rewrite(["museum opening year"], ["museum", "opening"]), ["subqueries", "queries"]),
    "search": (Search([("museum opening year", WebResult("M", WEB.url, WEB.text, provider="corpus"))], filtered=1),
               ["filtered_results", "external"]),
    "refine_external": (Refinement([WEB], [WEB]), None),
    "rounds": (RoundsResult([WEB], [0.7], 0.7, 1, 1, True, False, "confident", [["q"]], [0.5, 0.7]), ["rounds"]),
    "correct": (Correction([STRIP], [WEB], [STRIP, WEB], degradations=["search: slow"]), ["strips"]),
    "fuse": (Context([STRIP, WEB], duplicates=1, support=[2, 1]), ["duplicates_removed", "support", "conflicts"]),
    "compress": (Context([STRIP]), None),
    "bearers": (Bearers("John Carter", TWO), ["bearers"]),
    "abstain": (Generation("Nothing reliable was found.", [], [STRIP], refused=True, abstained=True),
                ["abstained", "context"]),
    "token": ("It opened in 1901[1].", None),
    "replace": (Replace("escalated", "It opened in 1902[1]."), None),
    "generate": (GENERATION, ["context"]),
    "answer": (ANSWER, ["answer", "refused", "citations"]),
    "context": (CorrectedContext(QUERY, Decision(Action.CORRECT, 0.9), Context([STRIP]), [], [], "t1"),
                ["context", "context_only"]),
}  # fmt: skip


def frames(sse: bytes) -> list[tuple[str, Any]]:
    """``(event, data)`` per server-sent event."""
    out = []
    for block in sse.decode().split("\n\n")[:-1]:
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        out.append((name[7:], json.loads(data[6:])))
    return out


def js(data: Any) -> Any:
    """``data`` as JSON reads it back (tuples become lists)."""
    return json.loads(json.dumps(data))


def test_every_kind_has_a_value_here() -> None:
    assert set(VALUES) == set(EVENT_NAMES)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_a_step_event_is_one_frame_of_its_data_and_its_trace_record(name: str) -> None:
    value, keys = VALUES[name]
    event = event_for(name, value)  # type: ignore[arg-type]  # the names of VALUES are EventNames
    assert event.value is value
    out = render(event)
    json.dumps(event.data)  # JSON-ready
    if isinstance(event, TokenEvent):
        assert frames(out.sse) == [("token", {"delta": value})] and event.data == {"delta": value}
    elif isinstance(event, AnswerEvent):
        assert frames(out.sse) == [("done", js(ANSWER.to_dict()))]  # the wire's name for the answer
    else:
        assert frames(out.sse) == [(name, js(event.data))]
    assert sorted(out.record) == sorted(keys or [])
    tracer = Tracer()
    TraceRecorder(tracer)(name, value)  # type: ignore[arg-type]
    assert sorted(tracer.events) == sorted(keys or [])


@pytest.mark.parametrize("name", sorted(set(VALUES) - {"token", "answer"}))
def test_a_step_event_has_no_chat_chunk(name: str) -> None:
    assert render(event_for(name, VALUES[name][0]), AnswerText()).chunks == ()  # type: ignore[arg-type]


def test_degradations_are_sent_and_recorded_once() -> None:
    verify = render(event_for("verify", VALUES["verify"][0]))
    assert verify.event.data["degradations"] == ["verify: slow"] and verify.record["degradations"] == ["verify: slow"]
    tracer = Tracer()
    TraceRecorder(tracer)("verify", VALUES["verify"][0])
    assert tracer.events["degradations"] == ["verify: slow"]
    correct = render(event_for("correct", VALUES["correct"][0]))  # repeats its parts' degradations: not again
    assert "degradations" not in correct.event.data and "degradations" not in correct.record


def test_the_escalation_reason_is_the_shared_constant() -> None:
    unverified = event_for("escalate", VALUES["escalate"][0])
    assert unverified.data["rejected"] == REJECTED_UNVERIFIED
    assert render(unverified).record["escalated"] == {
        "from": "correct", "reply": "", "rejected": REJECTED_UNVERIFIED, "llm_calls": 0,
        "probability": 0.2, "threshold": 0.7,
    }  # fmt: skip
    shared = event_for("escalate", Decision(Action.AMBIGUOUS, 0.9, shared=Bearers("John Carter", TWO)))
    assert (shared.data["rejected"], shared.data["name"], shared.data["bearers"]) == (REJECTED_SHARED_NAME,
                                                                                      "John Carter", 2)  # fmt: skip
    refused = Generation("", [], [STRIP], refused=True, rejected="refused", completions=[Completion("I don't know")])
    reply = render(event_for("escalate", Decision(Action.AMBIGUOUS, 0.9, escalated_from=refused))).record
    assert reply["escalated"] == {"from": "correct", "reply": "I don't know", "rejected": "refused", "llm_calls": 1}


def test_tokens_go_through_the_reducer_and_the_answer_completes_them() -> None:
    text = AnswerText()
    first = render(event_for("token", "It opened in 1901[1]."), text)
    assert first.text == "It opened in 1901[1]."
    assert first.chunks == ({"choices": [{"index": 0, "delta": {"content": "It opened in 1901[1]."},
                                          "finish_reason": None, "logprobs": None}]},)  # fmt: skip
    key = "sk-" + "a" * 40  # a secret the model wrote: redacted on every path
    leaked = render(event_for("token", f" Key {key}."), text)
    assert key not in leaked.text and key not in leaked.sse.decode()
    last = render(AnswerEvent(ANSWER), AnswerText(), include_usage=True)  # a run whose text came only at the end
    assert [name for name, _ in frames(last.sse)] == ["token", "done"]
    content, stop, usage = last.chunks
    assert content["choices"][0]["delta"] == {"content": ANSWER.answer}
    assert stop["choices"][0]["finish_reason"] == "stop" and stop["crag"]["trace_id"] == "t1"
    assert stop["choices"][0]["delta"]["annotations"][0]["url_citation"]["end_index"] == 22
    assert usage == {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}}
    assert len(render(AnswerEvent(ANSWER), AnswerText()).chunks) == 2  # no usage unless asked


def test_a_replacement_voids_the_text_so_far() -> None:
    text = AnswerText()
    render(event_for("token", "It opened in 1901[1]."), text)
    out = render(event_for("replace", VALUES["replace"][0]), text)
    assert out.text == "" and text.replaced and text.shown == ""
    assert frames(out.sse) == [("replace", {"reason": "escalated", "text": "It opened in 1902[1]."})]


@pytest.mark.parametrize(
    ("event", "sse", "chunk"),
    [
        (StartedEvent("Q?", "crag", "t1"), {"question": "Q?", "mode": "crag", "trace_id": "t1"},
         {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None,
                       "logprobs": None}]}),
        (ErrorEvent(503, "llm_unavailable", "down"), {"status": 503, "error": {"type": "llm_unavailable",
                                                                               "message": "down"}},
         {"choices": [{"index": 0, "delta": {}, "finish_reason": "error", "logprobs": None}],
          "error": {"status": 503, "type": "llm_unavailable", "message": "down"}}),
    ],
)  # fmt: skip
def test_wire_events(event: Event, sse: dict[str, Any], chunk: dict[str, Any]) -> None:
    out = render(event)
    assert frames(out.sse) == [(event.name, sse)] and out.chunks == (chunk,) and out.record == {}


def test_done_is_the_answer_as_the_wire_sends_it() -> None:
    done = render(DoneEvent(ANSWER), include_usage=True)
    assert frames(done.sse) == [("done", js(ANSWER.to_dict()))] and done.record == {}
    assert done.chunks == render(AnswerEvent(ANSWER), include_usage=True).chunks  # no reducer: no text
    base = {"id": "chatcmpl-t1", "object": "chat.completion.chunk", "created": 1, "model": "crag"}
    sent = [json.loads(line[6:]) for line in done.chat_frames(base).decode().split("\n\n") if line]
    assert [list(c)[:4] for c in sent] == [list(base)] * 2 and sent[0]["crag"]["action"] == "correct"


def test_publish_cleans_what_leaves() -> None:
    out = render(event_for("fuse", VALUES["fuse"][0]), publish=lambda data: {"published": True})
    assert frames(out.sse) == [("fuse", {"published": True})]
