"""Decomposition rules and LLM fallback; parallel sub-query search against a real local server.

The server is :class:`crag.testing.searxng.LocalSearxng`, a SearXNG-shaped HTTP server on
127.0.0.1 whose behaviour is chosen by the query.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from crag.correct.decompose import decompose, rule_decompose, search_parallel
from crag.deadline import Deadline
from crag.search.searxng import SearxngSearch
from crag.testing.fakes import ScriptedLLM, StaticWebSearch
from crag.testing.searxng import HANG_SECONDS, LocalSearxng
from crag.types import Query, WebResult

pytestmark = pytest.mark.unit


@pytest.fixture
def server() -> Iterator[LocalSearxng]:
    with LocalSearxng(delay=0.2) as s:
        yield s


def provider(url: str, timeout: float = 5.0) -> SearxngSearch:
    # retries=0: a 500 must fail now, not after a backoff the deadline test would wait for.
    return SearxngSearch(base_url=url, timeout=timeout, retries=0, client=httpx.Client())


# ---------------------------------------------------------------- rules


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("TCP和UDP的区别是什么？", ["TCP", "UDP", "TCP UDP 区别"]),
        ("狮子与老虎有什么不同", ["狮子", "老虎", "狮子 老虎 不同"]),
        ("北京、上海和广州的人口是多少？", ["北京的人口是多少？", "上海的人口是多少？", "广州的人口是多少？"]),
        ("气炉以什么为燃料；气炉什么时候商业化？", ["气炉以什么为燃料", "气炉什么时候商业化？"]),
        ("What are the differences between TCP and UDP?", ["TCP", "UDP", "TCP UDP differences"]),
        ("Python vs Java", ["Python", "Java", "Python Java vs"]),
        (
            "What is the population of France, Germany and Italy?",
            [
                "What is the population of France?",
                "What is the population of Germany?",
                "What is the population of Italy?",
            ],
        ),
        ("Who founded Tesla and when was it founded?", ["Who founded Tesla", "Tesla when was it founded?"]),
        ("Compare:\n- apples\n- oranges\n- pears", ["apples", "oranges", "pears"]),
    ],
)
def test_rules_split_compound_questions(question: str, expected: list[str]) -> None:
    assert decompose(Query.of(question)).subqueries == expected


@pytest.mark.parametrize(
    "question", ["Who wrote Hamlet?", "What dynasty came after the Yuan?", "庆大霉素是哪一年被发现的？", ""]
)
def test_simple_questions_stay_whole(question: str) -> None:
    assert decompose(Query.of(question)).subqueries == ([question] if question else [])


def test_max_subqueries_caps_the_list() -> None:
    assert len(rule_decompose(Query.of("Compare:\n- a1\n- b2\n- c3\n- d4\n- e5"), max_subqueries=2)) == 2


def test_llm_decomposition_uses_the_articles_example_prompt() -> None:
    llm = ScriptedLLM(['{"subqueries": ["初创公司股权分配比例", "员工期权池设置", "股权激励法律协议模板"]}'])
    subs, notes = decompose(Query.of("如何为我的初创公司制定股权激励计划？"), llm)
    assert notes == [] and subs == ["初创公司股权分配比例", "员工期权池设置", "股权激励法律协议模板"]
    prompt = llm.prompts[0][0]["content"]
    assert "员工期权池设置" in prompt and "如何为我的初创公司制定股权激励计划？" in prompt
    en = ScriptedLLM(['{"subqueries": ["a"]}'])
    decompose(Query.of("How do I plan equity for my startup?"), en)
    assert "equity incentive" in en.prompts[0][0]["content"]


@pytest.mark.parametrize("reply", ["no json here", '{"subqueries": "oops"}', "{broken", '{"subqueries": []}'])
def test_bad_llm_reply_falls_back_to_rules(reply: str) -> None:
    subs, notes = decompose(Query.of("TCP和UDP的区别是什么？"), ScriptedLLM([reply]))
    assert subs == ["TCP", "UDP", "TCP UDP 区别"]
    if reply != '{"subqueries": []}':  # an empty list is a valid "nothing to split" answer
        assert any("decomposition failed" in d for d in notes)


# ---------------------------------------------------------------- parallel search


def test_parallel_subqueries_cost_about_one(server: LocalSearxng) -> None:
    search = provider(server.url)
    search.search("warm up", k=1)  # connection set-up is not what we measure
    t0 = time.perf_counter()
    one = search_parallel(["alpha"], search, k=3, timeout=5.0).results
    single = time.perf_counter() - t0
    t0 = time.perf_counter()
    four = search_parallel(["alpha", "beta", "gamma", "delta"], search, k=3, timeout=5.0).results
    parallel = time.perf_counter() - t0
    assert len(one) == 3 and len(four) == 12
    assert [q for q, _ in four][::3] == ["alpha", "beta", "gamma", "delta"]  # query order kept
    assert parallel < single * 2.0, (single, parallel)  # 4 sequential calls would be ≥ 4×


def test_provider_failures_degrade_within_the_deadline(server: LocalSearxng) -> None:
    search = provider(server.url, timeout=HANG_SECONDS + 2)  # the deadline, not httpx, must cut the hang
    t0 = time.perf_counter()
    out, degradations = search_parallel(["ok", "boom", "garbage", "empty", "hang"], search, k=3, timeout=1.0)
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.6, elapsed
    assert {q for q, _ in out} == {"ok"}
    notes = " | ".join(degradations)
    assert "'boom' failed" in notes and "HTTP 500" in notes
    assert "'garbage' failed" in notes and "malformed" in notes
    assert "'hang' timed out" in notes
    assert "'empty'" not in notes  # no results is an answer, not a failure


def test_request_deadline_caps_the_round() -> None:

    class Slow:
        name = "slow"

        def search(self, query: str, *, k: int) -> list[WebResult]:
            time.sleep(2.0)
            return []

    t0 = time.perf_counter()
    out, degradations = search_parallel(["a", "b"], Slow(), k=1, timeout=10.0, deadline=Deadline(0.3))
    assert out == [] and time.perf_counter() - t0 < 1.0
    assert len(degradations) == 2


def test_failed_queries_come_back_as_degradations() -> None:
    found = search_parallel(["x", "y"], StaticWebSearch(fail=True), k=1, timeout=2.0)
    assert found.results == [] and found.degradations == [
        "search for 'x' failed: static: simulated outage",
        "search for 'y' failed: static: simulated outage",
    ]


def test_duplicate_results_across_subqueries_are_merged() -> None:
    web = StaticWebSearch([WebResult("t", "https://e.org/a", "same text")])
    assert len(search_parallel(["a", "b", "c"], web, k=1, timeout=2.0).results) == 1
    assert search_parallel([], web, k=1, timeout=2.0) == ([], [])
