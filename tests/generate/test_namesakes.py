"""An answer for each bearer of a shared name: the list, each bearer's checked answer, the pipeline's step.

Control flow with a scripted model; the real bundled model is in tests/test_namesakes_e2e.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from crag.config import CragSettings, RetrievalSettings
from crag.generate.namesakes import answer_bearers, header
from crag.grade.heuristic import set_confidence
from crag.kb import KnowledgeBase
from crag.pipeline import Deps, run_crag, run_rag
from crag.pipeline.events import event_for
from crag.testing.fakes import HashEmbedder, ScriptedLLM
from crag.trace.spans import Tracer
from crag.types import Bearer, Evaluation, Grade, Passage, Query, Strip

pytestmark = pytest.mark.unit

SOURCES = [
    Strip("Richard Hadley (1898–1971) was an English composer. He was organist of Wells Cathedral.", "a", "web"),
    Strip("Richard Hadley (born 1962) is an Irish actor. He trained at the Gaiety School of Acting.", "b", "web"),
    Strip("The Gaiety School of Acting is in Dublin.", "c", "web"),
]
PEOPLE = [
    Bearer("Richard Hadley", "composer", "an English composer", "1898–1971", [1], 0.9, SOURCES[0].text[:51]),
    Bearer("Richard Hadley", "actor", "an Irish actor", "born 1962", [2, 3], 0.7, SOURCES[1].text[:46]),
]


def test_the_list_names_each_bearer_with_its_source() -> None:
    assert header("Richard Hadley", PEOPLE, [1, 2], "en") == (
        "Two people named Richard Hadley appear in the sources: "
        "an English composer (1898–1971) [1] and an Irish actor (born 1962) [2]."
    )
    three = [Bearer("Tom Ash", "MP"), Bearer("Tom Ash", "cricketer"), Bearer("Tom Ash", "", "the mayor of Leeds")]
    assert header("Tom Ash", three, [1, 2, 4], "en") == (
        "Three people named Tom Ash appear in the sources: an MP [1], a cricketer [2] and the mayor of Leeds [4]."
    )
    zh = [Bearer("陈家远", "作曲家", "中国作曲家", "1931年—2006年"), Bearer("陈家远", "外交官")]
    assert (
        header("陈家远", zh, [2, 1], "zh") == "资料中有两位名叫陈家远的人：中国作曲家（1931年—2006年）[2]；外交官[1]。"
    )


def test_each_bearer_is_answered_from_its_own_sources_and_renumbered() -> None:
    llm = ScriptedLLM(
        [
            "Richard Hadley was an English composer [1]. He was organist of Wells Cathedral [1].",
            "He trained at the Gaiety School of Acting [1], which is in Dublin [2]. He won an Oscar in 1990 [1].",
        ]
    )
    seen: list[str] = []
    g = answer_bearers("Where did Richard Hadley work?", SOURCES, PEOPLE, llm, lang="en", on_token=seen.append)
    lines = g.text.split("\n")
    assert lines[0].startswith("Two people named Richard Hadley appear in the sources:")
    # The composer's first sentence only repeats the list: left out.
    assert lines[1] == "- An English composer (1898–1971): He was organist of Wells Cathedral [1]."
    # The actor's sources are [2] and [3] of the whole context; the invented Oscar never shows.
    assert lines[2].startswith("- An Irish actor (born 1962): He trained at the Gaiety School of Acting")
    assert "[2]" in lines[2] and "[3]" in lines[2] and "Oscar" not in g.text
    assert "".join(seen) == g.text  # what streamed is the answer, nothing taken back
    assert seen[0] == lines[0]  # the list is shown before any model call
    for claim in g.claims:
        assert g.text[claim.start : claim.end] == claim.text and len(claim.cites) == len(claim.quotes)
    assert [c.id for c in g.citations] == [1, 2, 3] and g.citations[0].quote.startswith("Richard Hadley (1898–1971)")
    assert g.bearers == PEOPLE and len(g.completions) == 2 and not g.refused
    # Each call saw only its bearer's sources.
    assert "Irish actor" not in llm.prompts[0][1]["content"] and "English composer" not in llm.prompts[1][1]["content"]


def test_a_who_question_is_answered_by_the_list_alone() -> None:
    llm = ScriptedLLM(["never asked"])
    g = answer_bearers("Who is Richard Hadley?", SOURCES, PEOPLE, llm, lang="en", answer_each=False)
    assert g.text.count("\n") == 0 and "an Irish actor (born 1962) [2]" in g.text
    assert llm.prompts == [] and g.completions == [] and [c.id for c in g.citations] == [1, 2]


class TitleEvaluator:
    """Every passage relevant: the branch under test is generation's."""

    name = "flat"

    def grade(self, query: Query, passages: Sequence[Passage]) -> Evaluation:
        grades = [Grade(p.id, 0.7, "scripted") for p in passages]
        return Evaluation(grades, set_confidence(grades), "scripted", self.name)


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        '{"id": "1", "title": "Richard Hadley (composer)", "text": "Richard Hadley (1898–1971) was an English '
        'composer. He was organist of Wells Cathedral."}\n'
        '{"id": "2", "title": "Richard Hadley (actor)", "text": "Richard Hadley (born 1962) is an Irish actor. '
        'He trained at the Gaiety School of Acting."}\n'
        '{"id": "3", "title": "Bread", "text": "Bread is baked from flour and water."}\n',
        "utf-8",
    )
    base = KnowledgeBase(tmp_path / "kb", HashEmbedder(), retrieval=RetrievalSettings(top_k=3))
    base.ingest([docs])
    return base


def ask(kb: KnowledgeBase, question: str, replies: list[str], mode: str = "crag") -> tuple[Any, dict, list, Any]:
    tracer, events, llm = Tracer(), [], ScriptedLLM(replies)
    run = run_crag if mode == "crag" else run_rag
    deps = Deps(kb, TitleEvaluator(), llm, None)
    answer = run(
        question, deps, CragSettings(retrieval={"top_k": 3}), tracer, on_step=lambda n, v: events.append((n, v))
    )
    return answer, tracer.to_dict(), events, llm


def test_the_pipeline_lists_the_bearers_in_answer_trace_and_events(kb: KnowledgeBase) -> None:
    answer, trace, events, llm = ask(kb, "What is Richard Hadley's occupation?", ["unused"])
    assert len(answer.bearers) == 2 and answer.answer.startswith("Two people named Richard Hadley")
    assert llm.prompts == []  # an occupation question: the list answers it
    data = answer.to_dict()
    assert {"answer", "action", "citations", "context", "trace_id", "refused"} < set(data)
    assert [b["disambiguator"] for b in data["bearers"]] == [b.disambiguator for b in answer.bearers]
    assert trace["bearers"]["several"] and len(trace["bearers"]["bearers"]) == 2
    names = [n for n, _ in events]
    assert names.index("fuse") < names.index("bearers") < names.index("generate")
    step = event_for("bearers", next(v for n, v in events if n == "bearers")).data
    assert step["name"] == "Richard Hadley" and step["several"] and step["chosen"] is None
    tokens = "".join(v for n, v in events if n == "token")
    assert tokens == answer.answer


def test_a_question_naming_one_bearer_gets_one_answer_from_its_sources(kb: KnowledgeBase) -> None:
    answer, trace, _, llm = ask(kb, "Which cathedral employed the composer Richard Hadley?", ["Wells Cathedral [1]."])
    assert answer.answer == "Wells Cathedral [1]."
    prompt = llm.prompts[-1][1]["content"]
    assert "Wells Cathedral" in prompt and "Irish actor" not in prompt  # the actor's document was left out
    # Graded with the question's qualifier: the actor's document at most τ_low, and why.
    actor = next(h["id"] for h in trace["retrieved"] if "actor" in h["title"])
    grade = next(g for g in trace["grades"] if g["id"] == actor)
    assert grade["score"] <= trace["thresholds"]["lower"] and "not the composer" in grade["reason"]
    assert not any(s["kept"] for s in trace["strips"] if "Irish actor" in s["text"])
    assert answer.bearers == []  # only the composer's sources were left to read: nothing to tell apart


def test_plain_rag_and_unshared_names_take_the_ordinary_path(kb: KnowledgeBase) -> None:
    answer, trace, _, _ = ask(kb, "What is Richard Hadley's occupation?", ["A composer [1]."], mode="rag")
    assert answer.bearers == [] and "bearers" not in trace and answer.answer == "A composer [1]."
    answer, trace, _, _ = ask(kb, "What is bread baked from?", ["Flour and water [1]."])
    assert answer.bearers == [] and "bearers" not in trace and answer.to_dict()["bearers"] == []
    assert answer.answer == "Flour and water [1]."


def test_the_chosen_bearer_is_answered_without_the_others_sources() -> None:
    from crag.correct.bearers import find_bearers
    from crag.pipeline.steps import Context, generate_answer

    titled = [
        Strip(SOURCES[1].text, "b", "web", "Richard Hadley (actor)", score=0.9),
        Strip(SOURCES[0].text, "a", "web", "Richard Hadley (composer)", score=0.6),
        Strip(SOURCES[2].text, "c", "web", "Dublin", score=0.5),
    ]
    query = Query.of("Which cathedral employed the composer Richard Hadley?")
    found = find_bearers(query, titled)
    assert found.chosen is not None and found.chosen.cites == [2]
    llm = ScriptedLLM(["He was organist of Wells Cathedral [1]."])
    g = generate_answer(query, Context(titled), llm, CragSettings(), bearers=found)
    assert [s.source for s in g.sources] == ["a", "c"] and g.text == "He was organist of Wells Cathedral [1]."
    assert [(b.disambiguator, b.cites) for b in g.bearers] == [("composer", [1])]  # renumbered: [2] is now [1]
