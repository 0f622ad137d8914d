"""The answer cache's control flow: its key, what it stores, when an entry stops being valid.

Fakes pick the branch (scripted replies, marker grades, a settable clock); the real engine
and a shared PostgreSQL are in tests/test_answer_cache_e2e.py.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from crag.config import CragSettings, RetrievalSettings
from crag.errors import SearchError
from crag.kb import KnowledgeBase
from crag.pipeline import Deps, run_crag, run_rag
from crag.pipeline.answer_cache import AnswerCache, answer_cache_for, fingerprint, normalise
from crag.pipeline.steps import make_query
from crag.testing.fakes import HashEmbedder, MarkerEvaluator, ScriptedLLM, StaticWebSearch
from crag.trace.spans import Tracer
from crag.types import Action, Answer, WebResult

pytestmark = pytest.mark.unit

REPLY = "Zebras have stripes [1]."
WEB = [WebResult("Okapi", "https://example.org/okapi", "The okapi gold fact: okapis have striped legs.")]


class Clock:
    """Now, until moved on (it starts at the wall clock's time: the search cache dates results by it)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "zebra.txt").write_text("Zebras live in Africa. This gold fact says zebras have stripes.", "utf-8")
    (folder / "market.txt").write_text("The stock market closed higher on Friday.", "utf-8")
    return folder


@pytest.fixture
def kb(tmp_path: Path, docs: Path) -> KnowledgeBase:
    base = KnowledgeBase(tmp_path / "kb", HashEmbedder(), retrieval=RetrievalSettings(top_k=1))
    base.ingest([docs])
    return base


def settings(kb: KnowledgeBase, **correction: Any) -> CragSettings:
    return CragSettings(
        kb={"path": kb.path}, retrieval={"top_k": 1}, correction={"answer_cache_ttl": 600, **correction}
    )


def ask(
    kb: KnowledgeBase,
    question: str,
    *,
    cfg: CragSettings | None = None,
    replies: list[str] | None = None,
    search: StaticWebSearch | None = None,
    clock: Clock | None = None,
    history: list[dict[str, str]] | None = None,
    events: list[str] | None = None,
    mode: str = "crag",
) -> tuple[Answer, dict[str, Any], ScriptedLLM]:
    cfg = cfg or settings(kb)
    llm = ScriptedLLM(replies or [REPLY] * 3)
    evaluator = MarkerEvaluator()
    search = search if search is not None else StaticWebSearch([])
    answers = answer_cache_for(cfg, kb, llm, evaluator, search if mode == "crag" else None)
    if answers is not None and clock is not None:
        answers = replace(answers, clock=clock)
    deps = Deps(kb, evaluator, llm, search if mode == "crag" else None, answers=answers)
    tracer = Tracer()
    on_step = (lambda name, value: events.append(name)) if events is not None else None
    run = run_crag if mode == "crag" else run_rag
    answer = run(question, deps, cfg, tracer, history=history, on_step=on_step)
    return answer, tracer.to_dict(), llm


def test_the_key_ignores_spelling_but_not_filters_mode_or_settings(kb: KnowledgeBase) -> None:
    assert (
        normalise("  Do ＺＥＢＲＡＳ\u200b have   stripes？")
        == normalise("do zebras have stripes")
        == ("do zebras have stripes")
    )
    cfg = settings(kb)
    llm, evaluator = ScriptedLLM([]), MarkerEvaluator()
    cache = answer_cache_for(cfg, kb, llm, evaluator, None)
    assert isinstance(cache, AnswerCache)
    q = make_query("Do zebras have stripes?", cfg)
    assert cache.key(q) == cache.key(make_query("do zebras have  stripes", cfg))
    assert cache.key(q) != cache.key(make_query("Do zebras have spots?", cfg))
    assert cache.key(q) != cache.key(make_query("Do zebras have stripes?", cfg, filters={"lang": ("en",)}))
    assert cache.key(q) != cache.key(make_query("Do zebras have stripes?", cfg, mode="rag"))
    stricter = cfg.model_copy(update={"evaluator": cfg.evaluator.model_copy(update={"upper": 0.7})})
    assert fingerprint(cfg, llm="a") != fingerprint(stricter, llm="a")  # a threshold changes answers
    assert fingerprint(cfg, llm="a") != fingerprint(cfg, llm="b")  # so does the model
    longer = cfg.model_copy(update={"correction": cfg.correction.model_copy(update={"answer_cache_ttl": 9})})
    assert fingerprint(cfg, llm="a") == fingerprint(longer, llm="a")  # the cache's own ttl does not
    assert answer_cache_for(settings(kb, answer_cache_ttl=0), kb, llm, evaluator, None) is None  # off


def test_a_repeated_question_is_answered_from_the_cache(kb: KnowledgeBase) -> None:
    first, trace1, llm1 = ask(kb, "Do zebras have stripes?")
    assert first.action is Action.CORRECT and llm1.prompts and not first.degradations
    assert trace1["cache"]["hit"] is False and trace1["cache"]["stored"] == "stored"
    assert trace1["cache"]["miss"] == "new"

    events: list[str] = []
    again, trace2, llm2 = ask(kb, "do zebras have stripes", events=events)
    assert llm2.prompts == []  # no model call, no retrieval, no grading
    assert again.answer == first.answer and again.action is first.action and again.confidence == first.confidence
    assert [(c.id, c.source, c.quote, c.spans) for c in again.citations] == [
        (c.id, c.source, c.quote, c.spans) for c in first.citations
    ]
    assert again.citations[0].quote  # the quote a reader checks came back too
    assert [s.text for s in again.context] == [s.text for s in first.context]
    assert again.cache == {"hit": True, "key": trace1["cache"]["key"], "from_trace": first.trace_id,
                           "age_s": again.cache["age_s"]}  # fmt: skip
    assert again.trace_id != first.trace_id and again.to_dict()["cache"]["from_trace"] == first.trace_id
    assert trace2["cache"]["hit"] is True and trace2["action"] == "correct" and trace2["answer"] == first.answer
    assert "retrieve" not in trace2["timings"]
    assert events == ["query", "cache", "token", "answer"]  # watched live: the answer's text as one token


def test_a_changed_or_removed_document_invalidates_the_entry(kb: KnowledgeBase, docs: Path) -> None:
    ask(kb, "Do zebras have stripes?")
    (docs / "zebra.txt").write_text("Zebras live in Africa. This gold fact says zebras have black stripes.", "utf-8")
    kb.ingest([docs])
    again, trace, llm = ask(kb, "Do zebras have stripes?", replies=["Zebras have black stripes [1]."] * 3)
    assert trace["cache"]["hit"] is False and trace["cache"]["miss"].endswith("changed") and llm.prompts
    assert "black" in again.context[0].text

    third, trace, llm = ask(kb, "Do zebras have stripes?")
    assert third.cache and third.cache["hit"] and third.answer == again.answer and not llm.prompts  # the new one
    kb.remove([docs / "zebra.txt"])
    _, trace, _ = ask(kb, "Do zebras have stripes?", replies=["The sources do not say."] * 3)
    assert trace["cache"]["miss"].endswith("removed")


def test_an_answer_from_web_results_expires_with_them(kb: KnowledgeBase) -> None:
    clock = Clock()
    cfg = settings(kb, answer_cache_ttl=3600, search_cache_ttl=60)
    replies = ["Okapis have striped legs [1]."] * 3
    first, _, _ = ask(kb, "Do okapis have striped legs?", cfg=cfg, search=StaticWebSearch(WEB), replies=replies,
                      clock=clock)  # fmt: skip
    assert first.action is not Action.CORRECT and any(s.origin == "web" for s in first.context)
    clock.now += 30
    hit, _, _ = ask(kb, "Do okapis have striped legs?", cfg=cfg, clock=clock)
    assert hit.cache and hit.cache["hit"]
    clock.now += 31  # past the search cache's 60 s, well before the answer's 3600 s
    _, trace, _ = ask(kb, "Do okapis have striped legs?", cfg=cfg, search=StaticWebSearch(WEB), clock=clock)
    assert trace["cache"]["miss"] == "expired (web results)"

    off = settings(kb, search_cache_ttl=0)  # web results are not kept: neither is an answer from them
    _, trace, _ = ask(kb, "Do okapis have striped legs?", cfg=off, search=StaticWebSearch(WEB), replies=replies)
    assert trace["cache"]["stored"].startswith("not stored: web results")


def test_a_refusal_holds_only_until_the_knowledge_base_changes(kb: KnowledgeBase, docs: Path) -> None:
    refusal = ["The sources do not say."] * 3
    first, _, _ = ask(kb, "When did the gold giraffe museum open?", search=StaticWebSearch([]), replies=refusal)
    assert first.refused or first.abstained
    hit, _, _ = ask(kb, "When did the gold giraffe museum open?")
    assert hit.cache and hit.cache["hit"] and hit.answer == first.answer
    (docs / "museum.txt").write_text("The gold giraffe museum opened in 1901.", "utf-8")
    kb.ingest([docs])  # a document added since may hold the answer
    _, trace, _ = ask(kb, "When did the gold giraffe museum open?", replies=refusal)
    assert trace["cache"]["miss"] == "knowledge base changed"


def test_a_degraded_answer_is_not_stored(kb: KnowledgeBase) -> None:
    class FailingSearch(StaticWebSearch):
        def search(self, query: str, *, k: int) -> list[WebResult]:
            raise SearchError("provider down", backend_id="static", step="search")

    cfg = settings(kb, search_cache_ttl=0)
    answer, trace, _ = ask(kb, "Do okapis have striped legs?", cfg=cfg, search=FailingSearch([]))
    assert answer.degradations and trace["cache"]["stored"] == "not stored: degraded"
    _, trace, _ = ask(kb, "Do okapis have striped legs?", cfg=cfg, search=FailingSearch([]))
    assert trace["cache"]["miss"] == "new"


def test_a_conversation_is_keyed_by_its_condensed_question(kb: KnowledgeBase) -> None:
    ask(kb, "Do zebras have stripes?")
    history = [{"role": "user", "content": "Where do zebras live?"}, {"role": "assistant", "content": "Africa [1]."}]
    again, trace, llm = ask(kb, "Do they have stripes?", history=history, replies=["Do zebras have stripes?"])
    assert again.cache and again.cache["hit"] and trace["question"] == "Do zebras have stripes?"
    assert len(llm.prompts) == 1  # the condensing call only
    lions = [{"role": "user", "content": "Where do lions live?"}, {"role": "assistant", "content": "Africa."}]
    _, trace, _ = ask(kb, "Do they have stripes?", history=lions, replies=["Do lions have stripes?"] + [REPLY] * 3)
    assert trace["cache"]["hit"] is False


def test_plain_rag_has_its_own_entries(kb: KnowledgeBase) -> None:
    ask(kb, "Do zebras have stripes?")
    rag, trace, llm = ask(kb, "Do zebras have stripes?", mode="rag")
    assert trace["cache"] == trace["cache"] | {"hit": False, "miss": "new"} and llm.prompts and rag.mode == "rag"
    again, _, llm = ask(kb, "Do zebras have stripes?", mode="rag")
    assert again.cache and again.cache["hit"] and again.action is Action.RAG and not llm.prompts
